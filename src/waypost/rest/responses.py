"""JSON responses and the one error envelope."""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from starlette.responses import Response

from waypost.errors import WaypostError
from waypost.http.responses import SECURITY_HEADERS, error_headers, raw_headers

log = logging.getLogger("waypost.rest")
_encoder = msgspec.json.Encoder()


def json_headers(length: int, extra: dict[str, str] | None = None) -> list[tuple[bytes, bytes]]:
    """The raw headers of a JSON answer of `length` bytes (the lean REST path):
    those `json_response` sends, without building a Starlette `Response`."""
    return [
        *raw_headers({**SECURITY_HEADERS, **(extra or {})}),
        (b"content-length", str(length).encode()),
        (b"content-type", b"application/json"),
    ]


def encode_json(body: Any) -> bytes:
    return _encoder.encode(body)


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        _encoder.encode(body),
        status_code=status,
        media_type="application/json",
        headers={**SECURITY_HEADERS, **(headers or {})},
    )


def error_parts(error: WaypostError) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Status, envelope and headers of a business error, whatever sends it."""
    return error.status, error.to_json(), error_headers(error)


def error_response(error: WaypostError) -> Response:
    status, body, headers = error_parts(error)
    return json_response(body, status, headers)


INTERNAL_ERROR = {"error": {"code": "internal", "message": "internal error", "details": {}}}


def log_internal(exc: BaseException) -> None:
    # Raw exception text never reaches a client; it goes to the log only.
    log.error("unhandled error", exc_info=exc)
