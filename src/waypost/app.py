"""The public ASGI application: REST shim, GraphQL and /healthz behind bearer authentication."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute

from waypost import console, rest
from waypost.clock import Clock
from waypost.decoding import query_items
from waypost.errors import InvalidRequest, MethodNotAllowed, NotFound
from waypost.http.auth import BearerAuthentication
from waypost.http.encoded_slash import EncodedSlash
from waypost.live import sse
from waypost.mcp_server.http_endpoint import McpEndpoint
from waypost.observe.requests import RequestObserver
from waypost.rest import openapi
from waypost.rest.responses import error_parts, error_response, json_response
from waypost.rest.routing import now_header, refuse_query
from waypost.runtime import Runtime, open_runtime
from waypost.schema.view import graphql_view
from waypost.settings import Settings
from waypost.storage.connection import STORAGE_RETRY_AFTER


def create_app(runtime: Runtime | Settings, clock: Clock | None = None) -> Starlette:
    """The public app over an open `Runtime` (what `serve` does: the runtime is
    shared with the lifecycle app and outlives both).

    Given `Settings` instead, the app opens its own runtime in its lifespan and
    closes it after: a convenience for embedding one app alone (tests, bench).
    """
    if isinstance(runtime, Runtime):
        rt: Runtime | None = runtime
        settings = runtime.settings or Settings(db_path=runtime.db.path)
    else:
        rt, settings = None, runtime

    # MCP over Streamable HTTP; its session manager runs inside the lifespan
    mcp = McpEndpoint(lambda: app.state.runtime)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if rt is not None:
            async with mcp.run():
                yield
            return
        async with open_runtime(settings, clock) as own:
            app.state.runtime = own
            async with mcp.run():
                yield

    async def healthz(request: Request) -> Response:
        rt: Runtime = request.app.state.runtime
        if rt.stopping.is_set():
            # a request pipelined behind another, or on a keep-alive
            # connection, is still answered while the service stops; it was
            # told `ok` even after the store had closed, where every other
            # request got 503 "the database is not open" (stopaudit)
            return json_response({"status": "stopping"}, 503, {"Retry-After": "1"})
        reason = None
        if rt.db.files_changed() is not None:
            reason = "database_files_changed"
        elif rt.db.damage() is not None:
            reason = "database_damaged"
        elif rt.db.upgraded() is not None:
            reason = "database_upgraded"
        if reason is not None:
            # the store answers 503 until a restart (on a restored file)
            body = {"status": "unavailable", "reason": reason}
            return json_response(body, 503, {"Retry-After": str(STORAGE_RETRY_AFTER)})
        return json_response({"status": "ok"})

    async def openapi_document(request: Request) -> Response:
        # no parameters: refused by name, as on every other /api/v1 route
        # the service's time on its answers, as on every other route's
        now = now_header(request.scope)
        try:
            refuse_query(query_items(request.scope["query_string"]))
        except InvalidRequest as error:
            status, body, headers = error_parts(error)
            return json_response(body, status, {**now, **headers})
        return json_response(openapi.build(rest.TABLES), headers=now)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return error_response(NotFound("no such route"))
        response = error_response(MethodNotAllowed("method not allowed"))
        response.headers.update(exc.headers or {})  # `Allow`
        return response

    async def metrics(request: Request) -> Response:
        rt: Runtime = request.app.state.runtime
        return Response(rt.metrics.render(), media_type=rt.metrics.content_type)

    graphql = graphql_view(settings.graphiql)
    routes: list[Any] = [
        EncodedSlash(),  # first: decoded, such a path reached another route
        Route("/mcp", mcp),
        Route("/healthz", healthz),
        *([Route("/metrics", metrics)] if settings.metrics else []),
        Route("/api/v1/openapi.json", openapi_document),
        Route("/graphql", graphql),  # every method: the view answers 405 itself
        WebSocketRoute("/graphql", graphql),  # subscriptions (graphql-transport-ws)
        Route(sse.PATH, sse.event_stream, methods=["GET"]),
        rest.routing.RestRoutes(rest.TABLES),
        *console.routes(settings.graphiql),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={404: http_error, 405: http_error},
    )
    # a trailing slash is an unknown route (404 in the envelope, as docs/api.md
    # says), never a 307 whose Location comes from the client's Host header
    app.router.redirect_slashes = False
    if rt is not None:
        app.state.runtime = rt
    app.add_middleware(
        BearerAuthentication,
        runtime=lambda: app.state.runtime,
        graphiql=settings.graphiql,
        metrics=settings.metrics,
    )
    # outermost: request id, one log line and the request metrics
    app.add_middleware(
        RequestObserver,
        metrics=lambda: getattr(getattr(app.state, "runtime", None), "metrics", None),
        access_log=settings.access_log,
        router=app.router,
    )
    return app
