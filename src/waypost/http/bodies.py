"""Reading a request body from ASGI `receive`, within a limit, on every listener.

One reading of `Content-Length` and one loop over `receive`; each transport
still renders a refusal in its own shape (the lifecycle listener answers
`{"error": "code"}` and holds a body to its declared length exactly).
"""

from __future__ import annotations

from starlette.requests import ClientDisconnect
from starlette.types import Message, Receive, Scope

from waypost.decoding import INT64_MAX, decimal_integer
from waypost.errors import InvalidRequest, PayloadTooLarge
from waypost.http.headers import header

# What a length of more digits than 64 bits hold stands for: it is past every
# limit, and is refused as too large, not as malformed (nor ever int()-ed whole)
PAST_EVERY_LIMIT = INT64_MAX + 1


def content_length(value: str) -> int | None:
    """The length a `Content-Length` value declares, None when it is not one.

    Decimal ASCII digits only (RFC 9110, 8.6), leading zeros allowed:
    `str.isdigit()` also takes "²", which int() refuses, so `decimal_integer`
    reads it (unsigned: no `-`). A number past 64 bits is `PAST_EVERY_LIMIT`.
    """
    length = decimal_integer(value, signed=False)
    if length is None and value.isascii() and value.isdigit():
        return PAST_EVERY_LIMIT  # digits, just too many for decimal_integer
    return length


def declared_length(scope: Scope) -> int | None:
    """The request's `Content-Length`, None when it declares none; one that is
    not a length is refused `400 invalid_request` naming the header (the HTTP
    parsers refuse it first; an app behind another server must too)."""
    declared = header(scope, b"content-length")
    if declared is None:
        return None
    length = content_length(declared)
    if length is None:
        raise InvalidRequest.field("Content-Length", "Content-Length must be decimal digits")
    return length


async def receive_body(receive: Receive, most: int) -> bytes | None:
    """The whole body from `receive`, or None as soon as it passes `most`
    bytes (the rest is never read or buffered). A client that goes away
    mid-body raises ClientDisconnect."""
    chunks: list[bytes] = []
    seen = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        seen += len(chunk)
        if seen > most:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def read_body(
    scope: Scope, receive: Receive, limit: int, what: str = "request bodies"
) -> bytes:
    """The request body, refusing more than `limit` bytes (of `what`, for the
    message): a larger declared length before reading, a chunked body as soon
    as it passes the limit, without buffering it."""
    declared = declared_length(scope)
    if declared is not None and declared > limit:
        raise PayloadTooLarge(f"{what} are limited to {limit} bytes")
    body = await receive_body(receive, limit)
    if body is None:
        raise PayloadTooLarge(f"{what} are limited to {limit} bytes")
    return body


async def buffer_body(
    scope: Scope, receive: Receive, limit: int, what: str
) -> tuple[bytes, Receive]:
    """Read the whole (small) body first, as `read_body` does: the body, and a
    `receive` that hands it on to the app as if unread."""
    body = await read_body(scope, receive, limit, what)
    return body, replaying(body, receive)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` whose first message is the whole `body`, then `receive`'s
    own (a disconnect, once the client leaves)."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if delivered:
            return await receive()
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
