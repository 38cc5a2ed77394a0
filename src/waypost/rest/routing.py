"""The REST route table: each route names its handler, models and status.

The same table drives the Starlette routes and the OpenAPI document, so a
route is documented by being added.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from waypost.errors import PayloadTooLarge, UnsupportedMediaType, WaypostError
from waypost.http.decoding import convert, decode_query, is_json_media_type, parse_json
from waypost.pagination import Page
from waypost.resolvers.core.receipts import Idempotency, Outcome
from waypost.rest.responses import error_response, internal_error, json_response
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


def _check_media_type(request: Request) -> None:
    if not is_json_media_type(request.headers.get("content-type")):
        raise UnsupportedMediaType("Content-Type must be application/json")


async def read_body(request: Request, limit: int = BODY_LIMIT) -> bytes:
    """The request body, refusing more than `limit` bytes without buffering them."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"request bodies are limited to {limit} bytes")
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise PayloadTooLarge(f"request bodies are limited to {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _decode(route: RestRoute, request: Request) -> tuple[Any, Any, Idempotency | None]:
    query = (
        decode_query(request.query_params.multi_items(), route.query)
        if route.query
        else decode_query(request.query_params.multi_items(), _NoQuery)
    )
    if not route.is_mutation:
        return query, None, None
    raw = b""
    if request.headers.get("content-length") not in (None, "0") or request.headers.get(
        "transfer-encoding"
    ):
        _check_media_type(request)
        raw = await read_body(request)
    value = parse_json(raw) if raw.strip() else {}
    body = convert(value, route.body) if route.body else convert(value, _Empty)
    idem = Idempotency.for_request(
        request.headers.get("idempotency-key"),
        operation=f"{route.method} {request.url.path}",
        body=value,
    )
    return query, body, idem


def endpoint(route: RestRoute) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        try:
            query, body, idem = await _decode(route, request)
            call = Call(
                rt=request.app.state.runtime,
                actor=request.state.actor,
                params=dict(request.path_params),
                query=query,
                body=body,
                idem=idem,
            )
            result = await route.handler(call)
        except WaypostError as error:
            return error_response(error)
        except ClientDisconnect:
            raise  # the gate ends the request quietly: the client is gone
        except Exception as exc:
            return internal_error(exc)
        if isinstance(result, Outcome):
            headers = {"Idempotent-Replayed": "true"} if result.replayed else {}
            return json_response(result.body, result.status, headers)
        if isinstance(result, Page):
            return json_response(result.to_json())
        return json_response(result)

    handle.__name__ = route.handler.__name__
    return handle


def starlette_routes(tables: list[RouteTable]) -> list[Route]:
    by_path: dict[str, list[RestRoute]] = {}
    for table in tables:
        for route in table.routes:
            by_path.setdefault(route.path, []).append(route)
    result: list[Route] = []
    for path, routes in by_path.items():
        handlers = {r.method: endpoint(r) for r in routes}

        async def dispatch(request: Request, handlers: Any = handlers) -> Response:
            # Starlette answers HEAD on every GET route; HEAD runs the GET handler
            # (the server sends no body) instead of failing the lookup.
            method = "GET" if request.method == "HEAD" else request.method
            response: Response = await handlers[method](request)
            return response

        result.append(Route(path, dispatch, methods=list(handlers)))
    return result


class _NoQuery(msgspec.Struct, forbid_unknown_fields=True):
    """Routes without query parameters refuse any."""


class _Empty(msgspec.Struct, forbid_unknown_fields=True):
    """Action bodies without fields accept `{}` or nothing."""
