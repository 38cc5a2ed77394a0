"""JSON responses and the one error envelope."""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from starlette.responses import Response

from waypost.errors import Unavailable, WaypostError

log = logging.getLogger("waypost.rest")
_encoder = msgspec.json.Encoder()
HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        _encoder.encode(body),
        status_code=status,
        media_type="application/json",
        headers={**HEADERS, **(headers or {})},
    )


def error_response(error: WaypostError) -> Response:
    headers = {}
    if isinstance(error, Unavailable):
        headers["Retry-After"] = str(error.retry_after)
    if error.status == 401:
        # also when the writer's re-check finds the token revoked meanwhile
        headers["WWW-Authenticate"] = "Bearer"
    return json_response(error.to_json(), error.status, headers)


def internal_error(exc: BaseException) -> Response:
    # Raw exception text never reaches a client; it goes to the log only.
    log.error("unhandled error", exc_info=exc)
    body = {"error": {"code": "internal", "message": "internal error", "details": {}}}
    return json_response(body, 500)
