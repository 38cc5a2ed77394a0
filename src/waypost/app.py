"""The public ASGI application: REST shim, GraphQL and /healthz behind the gate."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from waypost import rest
from waypost.clock import Clock, FileClock, SystemClock, format_time
from waypost.errors import WaypostError
from waypost.http.auth import Gate
from waypost.mcp_server.http_endpoint import McpEndpoint
from waypost.resolvers.access import principals
from waypost.resolvers.core import sweep
from waypost.rest import openapi
from waypost.rest.responses import json_response
from waypost.runtime import Runtime
from waypost.schema.view import graphql_view
from waypost.settings import Settings
from waypost.storage.db import Database

log = logging.getLogger("waypost")


def make_clock(settings: Settings) -> Clock:
    return FileClock(settings.clock_file) if settings.clock_file else SystemClock()


async def _sweep_forever(rt: Runtime, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            report = await sweep.run_once(rt)
            log.info("sweep: %s", report)
        except WaypostError as error:
            log.warning("sweep skipped: %s", error.message)
        except Exception:
            log.exception("sweep failed")


async def _bootstrap(rt: Runtime) -> None:
    at = format_time(rt.now())
    created = await rt.db.write(lambda conn: principals.bootstrap_admin(conn, at))
    if created:
        print(
            "waypost: created human principal 'admin'; its token (shown once):\n"
            f"  {created['token']}",
            file=sys.stderr,
            flush=True,
        )


def create_app(settings: Settings, clock: Clock | None = None) -> Starlette:
    runtime_holder: dict[str, Runtime] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        db = Database(settings.db_path, settings.readers, settings.busy_timeout_ms)
        await db.open()
        rt = Runtime(db=db, clock=clock or make_clock(settings))
        runtime_holder["rt"] = rt
        app.state.runtime = rt
        await _bootstrap(rt)
        sweeper = asyncio.create_task(_sweep_forever(rt, settings.sweep_interval))
        try:
            async with mcp.run():
                yield
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            await db.close()

    async def healthz(request: Request) -> Response:
        return json_response({"status": "ok"})

    async def openapi_document(request: Request) -> Response:
        return json_response(openapi.build(rest.TABLES))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = "not_found" if exc.status_code == 404 else "method_not_allowed"
        message = "no such route" if exc.status_code == 404 else "method not allowed"
        body = {"error": {"code": code, "message": message, "details": {}}}
        return json_response(body, exc.status_code, dict(exc.headers or {}))

    mcp = McpEndpoint(lambda: runtime_holder["rt"])
    routes: list[Any] = [
        Route("/mcp", mcp),
        Route("/healthz", healthz),
        Route("/api/v1/openapi.json", openapi_document),
        Route("/graphql", graphql_view(settings.graphiql), methods=["GET", "POST"]),
        *rest.routing.starlette_routes(rest.TABLES),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={404: http_error, 405: http_error},
    )
    app.add_middleware(Gate, runtime=lambda: runtime_holder["rt"], graphiql=settings.graphiql)
    return app
