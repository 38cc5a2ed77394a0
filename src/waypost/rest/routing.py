"""The REST route table: each route names its handler, models and status.

The same table drives the Starlette routes and the OpenAPI document, so a
route is documented by being added.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import BaseRoute, Match
from starlette.types import Receive, Scope, Send

from waypost.cancelling import CallerGone, caller_gone
from waypost.clock import format_time
from waypost.decoding import (
    convert,
    decode_query,
    is_json_media_type,
    parse_json,
    query_items,
    refuse_nul,
)
from waypost.errors import InvalidRequest, Unavailable, UnsupportedMediaType, WaypostError
from waypost.http.bodies import read_body
from waypost.http.client_gone import disconnect_of
from waypost.http.headers import content_coding_refusal, header
from waypost.pagination import Page
from waypost.resolvers.core.receipts import Idempotency, Outcome, stored_answer
from waypost.rest.pages import bounded_page
from waypost.rest.responses import (
    INTERNAL_ERROR,
    encode_json,
    error_parts,
    json_headers,
    log_internal,
)
from waypost.runtime import Actor, Runtime

BODY_LIMIT = 256 * 1024


@dataclass(frozen=True)
class Call:
    """One authenticated REST call, decoded: what a handler works with."""

    rt: Runtime
    actor: Actor
    params: dict[str, str]
    query: Any
    body: Any
    idem: Idempotency | None
    # a HEAD: its answer's body is never sent, so a handler may skip work
    # done only for the body (the context packet's call to its provider)
    head: bool = False


Result = Outcome | dict[str, Any] | Page[Any]
Handler = Callable[[Call], Awaitable[Result]]


@dataclass(frozen=True)
class RestRoute:
    method: str
    path: str
    handler: Handler
    summary: str
    tag: str
    body: type | None = None
    query: type | None = None
    status: int = 200

    @property
    def is_mutation(self) -> bool:
        return self.method != "GET"


class RouteTable:
    """A domain's routes; `@table.get(...)` / `@table.post(...)` register handlers."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.routes: list[RestRoute] = []

    def _add(self, method: str, path: str, **options: Any) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            summary = options.pop("summary", None) or (handler.__doc__ or "").strip()
            self.routes.append(
                RestRoute(method, path, handler, summary=summary, tag=self.tag, **options)
            )
            return handler

        return register

    def get(self, path: str, **options: Any) -> Callable[[Handler], Handler]:
        return self._add("GET", path, **options)

    def post(self, path: str, **options: Any) -> Callable[[Handler], Handler]:
        return self._add("POST", path, **options)

    def patch(self, path: str, **options: Any) -> Callable[[Handler], Handler]:
        return self._add("PATCH", path, **options)


def query_of(route: RestRoute, items: list[tuple[str, str]]) -> Any:
    """The query parameters decoded by the route's model (none: `_NoQuery`)."""
    return decode_query(items, route.query or _NoQuery)


def refuse_query(items: list[tuple[str, str]]) -> None:
    """For a route served beside the tables that takes no parameters
    (`/api/v1/openapi.json`): refuse any, by name, as the tables' routes do."""
    decode_query(items, _NoQuery)


async def call_for(
    route: RestRoute,
    rt: Runtime,
    actor: Actor,
    params: dict[str, str],
    query: Any,
    value: Any,
    key: str | None,
    operation: str,
) -> Call | Outcome:
    """The handler's Call, its body `value` decoded by the route's model,
    as REST and the MCP tools run in process both run a route; or, when this
    build refuses a body that ran before under the same key (a rule
    tightened by an upgrade), the answer stored for it, as a retry expects."""
    if not route.is_mutation:
        return Call(rt, actor, params, query, None, None)
    try:
        body = decode_body(route, value)
    except InvalidRequest:
        earlier = await _earlier_answer(rt, actor, key, operation, value)
        if earlier is not None:
            return earlier
        raise
    idem = Idempotency.for_request(key, operation=operation, body=value)
    return Call(rt, actor, params, query, body, idem)


def decode_body(route: RestRoute, value: Any) -> Any:
    """A mutation's body `value` decoded by the route's model, or the
    InvalidRequest naming what this build refuses in it."""
    # the model first (types, required fields, bounds), then NUL: GraphQL
    # checks types and required fields first too, but its bounds after NUL
    # (docs/api.md); naming NUL first here broke the first two (review48)
    body: Any = convert(value, route.body or _Empty)
    refuse_nul(value)
    return body


async def _earlier_answer(
    rt: Runtime, actor: Actor, key: str | None, operation: str, value: Any
) -> Outcome | None:
    if key is None:
        return None
    try:
        idem = Idempotency.for_request(key, operation=operation, body=value)
    except InvalidRequest:
        return None  # the key itself is refused: the body's refusal stands
    return await stored_answer(rt, actor, idem)


def rendered(result: Result, *, encoded: bool = True) -> tuple[int, Any, bool]:
    """(status, JSON body, replayed) of what a handler returned; a page's
    items `encoded` as text for the answer (pages.bounded_page)."""
    if isinstance(result, Outcome):
        return result.status, result.body, result.replayed
    if isinstance(result, Page):
        return 200, bounded_page(result, encoded=encoded), False
    return 200, result, False


async def _body_value(scope: Scope, receive: Receive) -> Any:
    """A mutation's JSON body (`{}` when there is none), read within BODY_LIMIT."""
    raw = b""
    chunked = header(scope, b"transfer-encoding") is not None
    if header(scope, b"content-length") not in (None, "0") or chunked:
        json_body = is_json_media_type(header(scope, b"content-type"))
        if not (json_body or chunked):  # a declared length: a body is coming
            raise UnsupportedMediaType("Content-Type must be application/json")
        coded = content_coding_refusal(scope)
        if coded is not None:
            raise UnsupportedMediaType(coded)
        raw = await read_body(scope, receive, BODY_LIMIT)
        if raw and not json_body:  # chunks may add up to no body, which needs no type
            raise UnsupportedMediaType("Content-Type must be application/json")
    # JSON's whitespace only (RFC 8259): bytes.strip() took VT and FF too
    return parse_json(raw) if raw.strip(b" \t\r\n") else {}


def now_header(scope: Scope) -> dict[str, str]:
    """`Waypost-Now`: the service's clock as the answer was made (as every
    GraphQL answer says it), so that a client judges an `expires_at` by the
    service's time, not its own (`waypost mcp`'s decision_wait does). None
    when the clock file holds no instant (one being rewritten as the answer
    is sent: the answer goes without it)."""
    try:
        return {"Waypost-Now": format_time(scope["app"].state.runtime.now())}
    except Unavailable:
        return {}


async def _answer(
    scope: Scope,
    send: Send,
    status: int,
    body: Any,
    headers: dict[str, str] | None = None,
    at: datetime | None = None,
) -> None:
    """Send the answer; `Waypost-Now` is `at` when given (the instant a read
    was judged at), else the clock as it is sent."""
    payload = encode_json(body)
    now = {"Waypost-Now": format_time(at)} if at is not None else now_header(scope)
    raw = json_headers(len(payload), {**now, **(headers or {})})
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})


async def _result(route: RestRoute, scope: Scope, receive: Receive) -> Result:
    # the query first: its refusal comes before the body is read
    query = query_of(route, query_items(scope["query_string"]))
    value = await _body_value(scope, receive) if route.is_mutation else None
    prepared = await call_for(
        route, scope["app"].state.runtime, scope["state"]["actor"], scope["path_params"],
        query, value, header(scope, b"idempotency-key"), f"{route.method} {scope['path']}",
    )  # fmt: skip
    if isinstance(prepared, Outcome):
        return prepared
    if scope["method"] == "HEAD":
        prepared = replace(prepared, head=True)
    return await route.handler(prepared)


async def _serve(route: RestRoute, scope: Scope, receive: Receive, send: Send) -> None:
    """One REST call: decode, run the handler, answer JSON (errors as the
    envelope). A read is judged at one instant of the service's clock, which
    its `Waypost-Now` says; a write reads its own time as it commits, and its
    header is read after it. The answer is sent outside the pin: uvicorn
    starts a pipelined request's task inside `send`, which would inherit it."""
    if route.is_mutation:
        await _answer(scope, send, *await _outcome(route, scope, receive))
        return
    rt = scope["app"].state.runtime
    at: datetime | None = None
    try:
        with rt.pinned_now():
            # a read whose client has gone while it waited for a place of
            # the search lane ends there, unrun and unanswered
            gone = caller_gone.set(disconnect_of(receive))
            try:
                parts = await _outcome(route, scope, receive)
            except CallerGone:
                return
            finally:
                caller_gone.reset(gone)
            at = rt.now()  # the instant it was judged at (a digest's is its snapshot's)
    except Unavailable as error:  # the pin's own read of the clock: nothing ran
        parts = error_parts(error)
    await _answer(scope, send, *parts, at=at)


async def _outcome(
    route: RestRoute, scope: Scope, receive: Receive
) -> tuple[int, Any, dict[str, str] | None]:
    """Status, body and headers of the call."""
    try:
        status, body, replayed = rendered(await _result(route, scope, receive))
    except WaypostError as error:
        return error_parts(error)
    except (ClientDisconnect, CallerGone):
        raise  # the client is gone: the request ends quietly
    except Exception as exc:
        log_internal(exc)
        return 500, INTERNAL_ERROR, None
    return status, body, {"Idempotent-Replayed": "true"} if replayed else None


@dataclass(frozen=True)
class _Template:
    """One path template: its segments (None where a parameter goes)."""

    path: str
    segments: tuple[str | None, ...]
    names: tuple[str, ...]
    by_method: dict[str, RestRoute]

    @classmethod
    def of(cls, path: str, routes: list[RestRoute]) -> _Template:
        parts = path[1:].split("/")
        segments = tuple(None if p.startswith("{") else p for p in parts)
        names = tuple(p[1:-1] for p in parts if p.startswith("{"))
        return cls(path, segments, names, {r.method: r for r in routes})

    def match(self, parts: list[str]) -> dict[str, str] | None:
        params: dict[str, str] = {}
        names = iter(self.names)
        for want, got in zip(self.segments, parts, strict=True):
            if want is None:
                if not got:
                    return None
                params[next(names)] = got
            elif want != got:
                return None
        return params


class RestRoutes(BaseRoute):
    """Every REST route as one Starlette route, matched by path segments.

    Starlette's per-route machinery (a `Request`, a `Response`, an exception
    wrapper per call) cost a fifth of a create's time on the event loop; the
    REST shim needs none of it: handlers take a `Call`, answers are JSON.
    The scope still gets `route` (its `path` is the template, for the access
    log and metrics) and `path_params`.
    """

    def __init__(self, tables: list[RouteTable]) -> None:
        by_path: dict[str, list[RestRoute]] = {}
        for table in tables:
            for route in table.routes:
                by_path.setdefault(route.path, []).append(route)
        self._by_length: dict[int, list[_Template]] = {}
        for path, routes in by_path.items():
            template = _Template.of(path, routes)
            self._by_length.setdefault(len(template.segments), []).append(template)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http":
            return Match.NONE, {}
        path: str = scope["path"]  # never with an encoded slash (http/encoded_slash.py)
        # an empty segment (a trailing or doubled slash) matches nothing, as
        # in Starlette's own routes (which then redirect a trailing slash)
        parts = path[1:].split("/")
        for template in self._by_length.get(len(parts), ()):
            params = template.match(parts)
            if params is None:
                continue
            # Starlette answers HEAD on every GET route; HEAD runs the GET
            # handler (the server sends no body)
            method = "GET" if scope["method"] == "HEAD" else scope["method"]
            found = template.by_method.get(method)
            child = {"route": template, "path_params": params, _ROUTE: found}
            return (Match.FULL if found else Match.PARTIAL), child
        return Match.NONE, {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        route: RestRoute | None = scope.get(_ROUTE)
        if route is None:
            # the app's own handler renders it, as for Starlette's routes
            methods = {*scope["route"].by_method}
            if "GET" in methods:
                methods.add("HEAD")
            raise HTTPException(405, headers={"Allow": ", ".join(sorted(methods))})
        await _serve(route, scope, receive, send)


_ROUTE = "waypost.rest_route"


class _NoQuery(msgspec.Struct, forbid_unknown_fields=True):
    """Routes without query parameters refuse any."""


class _Empty(msgspec.Struct, forbid_unknown_fields=True):
    """Action bodies without fields accept `{}` or nothing."""
