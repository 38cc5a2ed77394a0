"""What every HTTP answer of the service shares, whichever listener sends it.

The security headers (`Cache-Control: no-store`, `X-Content-Type-Options:
nosniff`) written once for REST, GraphQL, MCP, SSE and the lifecycle
listener; the one `send` wrapper that adds them; the headers an error
carries (`Retry-After`, `WWW-Authenticate`); a JSON answer written straight
to ASGI `send`; and GraphQL's body for a refusal made outside execution.
Each transport still renders its own error body.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.types import Message, Send

from waypost.errors import Unavailable, WaypostError

SECURITY_HEADERS: Mapping[str, str] = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}


def raw_headers(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """Headers as ASGI sends them: lower-case names, latin-1 bytes."""
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


_RAW_SECURITY_HEADERS = raw_headers(SECURITY_HEADERS)
_SECURITY_NAMES = frozenset(name for name, _ in _RAW_SECURITY_HEADERS)


def with_security_headers(message: Message, replace: bool = False) -> Message:
    """A response start with the security headers: those it does not set
    itself, or, with `replace`, in place of its own (the MCP SDK's event
    streams said `no-cache, no-transform`)."""
    headers = message.get("headers", [])
    if replace:
        kept = [(k, v) for k, v in headers if k.lower() not in _SECURITY_NAMES]
        return {**message, "headers": [*kept, *_RAW_SECURITY_HEADERS]}
    names = {k.lower() for k, _ in headers}
    extra = [(k, v) for k, v in _RAW_SECURITY_HEADERS if k not in names]
    return {**message, "headers": [*headers, *extra]} if extra else message


def security_headers_send(send: Send, replace: bool = False) -> Send:
    """`send`, with the security headers on the response start (see
    `with_security_headers` for `replace`)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = with_security_headers(message, replace)
        await send(message)

    return sending


def error_headers(error: WaypostError) -> dict[str, str]:
    """The headers a refusal carries beside its body, whatever sends it."""
    headers = {}
    if isinstance(error, Unavailable):
        headers["Retry-After"] = str(error.retry_after)
    if error.status == 401:
        # also when the writer's re-check finds the token revoked meanwhile
        headers["WWW-Authenticate"] = "Bearer"
    return headers


async def send_json(
    send: Send, status: int, body: Any, extra: Mapping[str, str] | None = None
) -> None:
    """A whole JSON answer written straight to ASGI `send` (no app or route yet)."""
    payload = json.dumps(body, separators=(",", ":")).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        *_RAW_SECURITY_HEADERS,
        *raw_headers(extra or {}),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def graphql_error_body(message: str, code: str, details: Mapping[str, Any]) -> dict[str, Any]:
    """GraphQL's shape of a refusal made outside execution (before the view,
    or by the view before Strawberry runs): one error, its code and details
    in `extensions`."""
    return {"errors": [{"message": message, "extensions": {"code": code, **details}}]}


def graphql_extensions(error: WaypostError) -> dict[str, Any]:
    """A refusal's GraphQL `extensions`, wherever it is shaped (the view,
    execution, a WebSocket frame, a subscription): its code and details, and
    for a 503 when to retry (`retryAfter`, docs/graphql.md; a subscription's
    copy of this left it out)."""
    extensions: dict[str, Any] = {"code": error.code, **error.details}
    if isinstance(error, Unavailable):
        extensions["retryAfter"] = error.retry_after
    return extensions


def graphql_refusal_body(error: WaypostError) -> dict[str, Any]:
    """`error` in that shape, made outside execution."""
    return {"errors": [{"message": error.message, "extensions": graphql_extensions(error)}]}
