"""How a tool reaches Waypost: in process (Streamable HTTP at /mcp) or over
HTTP (`waypost mcp` over stdio).

Both backends take a REST route (method and path template) and its
arguments and answer the route's JSON. The in-process backend runs the REST
route's own handler, which is one call of the resolver operation that GraphQL
calls too, after the same strict decoding; the HTTP backend sends the request
to a running Waypost. A tool therefore behaves identically on both transports.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol
from urllib.parse import quote

import httpx
import msgspec

from waypost import rest
from waypost.clock import format_time
from waypost.errors import PayloadTooLarge, WaypostError
from waypost.mcp_server.calls import ApiError, Reply
from waypost.mcp_server.waiting import ServiceTime, Waker, hub_waker, stream_waker
from waypost.resolvers.access import sessions
from waypost.resolvers.core.receipts import Outcome
from waypost.rest.routing import BODY_LIMIT, RestRoute, call_for, query_of, rendered
from waypost.runtime import Actor, Runtime


class Backend(Protocol):
    # whether the REST routes it calls decode with this process's models
    decodes_here: bool

    async def call(
        self,
        method: str,
        path: str,
        params: dict[str, str],
        *,
        query: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        session_id: str | None = None,
    ) -> Reply: ...

    async def principal_kind(self) -> str: ...

    def changes(self, project: str) -> contextlib.AbstractAsyncContextManager[Waker]:
        """Wakes a waiter when something in `project` may have changed."""
        ...


ROUTES: dict[tuple[str, str], RestRoute] = {
    (route.method, route.path): route for table in rest.TABLES for route in table.routes
}


def has_route(method: str, path: str) -> bool:
    return (method, path) in ROUTES


class LocalBackend:
    """Runs the REST route's handler in this process, as the authenticated actor."""

    decodes_here = True

    def __init__(self, rt: Runtime, actor: Actor) -> None:
        self.rt = rt
        self.actor = actor

    async def principal_kind(self) -> str:
        return self.actor.kind

    def changes(self, project: str) -> contextlib.AbstractAsyncContextManager[Waker]:
        return hub_waker(self.rt, project, self.actor.token_id)

    async def call(
        self,
        method: str,
        path: str,
        params: dict[str, str],
        *,
        query: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        session_id: str | None = None,
    ) -> Reply:
        route = ROUTES[(method, path)]
        try:
            actor = await self._enter(session_id)
            decoded_query = query_of(route, list((query or {}).items()))
            value: Any = None
            if route.is_mutation:
                value = body if body is not None else {}
                # the REST body limit, measured on the body REST would get (over
                # stdio the HTTP request itself meets it)
                if len(msgspec.json.encode(value)) > BODY_LIMIT:
                    raise PayloadTooLarge(f"request bodies are limited to {BODY_LIMIT} bytes")
            # the same operation text as REST: a key means the same request on both
            operation = f"{method} {path.format(**params)}"
            prepared = await call_for(
                route, self.rt, actor, dict(params), decoded_query, value, idempotency_key,
                operation,
            )  # fmt: skip
            result = prepared if isinstance(prepared, Outcome) else await route.handler(prepared)
        except WaypostError as error:
            raise ApiError.of(error) from None
        return Reply(*rendered(result, encoded=False))

    async def _enter(self, session_id: str | None) -> Actor:
        if session_id is None:
            return self.actor
        at = format_time(self.rt.now())
        actor = self.actor
        return await self.rt.db.read(
            lambda conn: sessions.enter_session(conn, actor, session_id, at)
        )


class HttpBackend:
    """Calls the REST API of a running Waypost with a bearer token."""

    decodes_here = False  # the service may run another build

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self._kind: str | None = None
        self.service_time = ServiceTime()

    async def principal_kind(self) -> str:
        if self._kind is None:
            reply = await self.call("GET", "/api/v1/me", {})
            self._kind = str(reply.body["principal"]["kind"])
        return self._kind

    def changes(self, project: str) -> contextlib.AbstractAsyncContextManager[Waker]:
        return stream_waker(self.client, project, self.service_time.now)

    async def call(
        self,
        method: str,
        path: str,
        params: dict[str, str],
        *,
        query: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        session_id: str | None = None,
    ) -> Reply:
        url = path.format(**{k: _segment(v) for k, v in params.items()})
        headers: dict[str, str] = {}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        if session_id is not None:
            headers["Waypost-Session"] = session_id
        mutating = method != "GET"
        try:
            response = await self.client.request(
                method,
                url,
                params=query or None,
                json=(body if body is not None else {}) if mutating else None,
                headers=headers,
            )
        except httpx.InvalidURL:
            # not an HTTPError: a query argument too long for any URL (REST
            # refuses it by name; here it never left, and answered `internal`)
            raise _too_long_for_a_url(query) from None
        except httpx.HTTPError as exc:
            raise ApiError(
                "unavailable",
                f"cannot reach Waypost at {self.client.base_url}: {type(exc).__name__}",
                {},
                503,
            ) from None
        self.service_time.saw(response.headers.get("waypost-now"))
        try:
            data = response.json()
        except ValueError:
            if response.status_code in (414, 431):
                # the HTTP layer refused the request line or head as too
                # long: the call's fault, which no retry mends
                raise _too_long_for_a_url(query) from None
            raise ApiError(
                "unavailable", f"Waypost answered HTTP {response.status_code} without JSON", {}, 503
            ) from None
        if response.status_code >= 400:
            error = data.get("error", {}) if isinstance(data, dict) else {}
            raise ApiError(
                str(error.get("code", "internal")),
                str(error.get("message", f"HTTP {response.status_code}")),
                dict(error.get("details") or {}),
                response.status_code,
                _seconds(response.headers.get("retry-after")),
            )
        replayed = response.headers.get("idempotent-replayed") == "true"
        return Reply(response.status_code, data, replayed)


def _seconds(retry_after: str | None) -> int | None:
    """A `Retry-After` of delay seconds (the only form the service sends)."""
    return int(retry_after) if retry_after is not None and retry_after.isdigit() else None


def _segment(value: str) -> str:
    """`value` as one path segment: percent-encoded, and `.` or `..` with
    their dots encoded too, which a URL's path otherwise drops or climbs
    (`/projects/./knowledge/policy` is `/projects/knowledge/policy`, another
    route); REST decodes them back and answers for the value as sent."""
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def _too_long_for_a_url(query: dict[str, str] | None) -> ApiError:
    """The refusal of a call whose query arguments no request line holds,
    naming the longest of them."""
    longest = max((query or {}).items(), key=lambda item: len(item[1]), default=("", ""))[0]
    return ApiError(
        "invalid_request",
        f"{longest or 'an argument'} is too long to send: shorten it",
        {"field": longest} if longest else {},
        400,
    )
