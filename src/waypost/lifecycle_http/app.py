"""Placeholder for the lifecycle listener's app until the lifecycle adapter lands.

`serve` already runs it on `--lifecycle-host`/`--lifecycle-port` over the
process's one `Runtime`; until the adapter's routes exist, every request is
`404 {"error": "not_found"}` (the lifecycle error shape), never cached.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from waypost.runtime import Runtime

HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


def create_lifecycle_app(rt: Runtime, verifier: Any = None) -> Starlette:
    async def not_found(request: Request) -> Response:
        return JSONResponse({"error": "not_found"}, status_code=404, headers=HEADERS)

    methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    app = Starlette(routes=[Route("/{path:path}", not_found, methods=methods)])
    app.state.runtime = rt
    return app
