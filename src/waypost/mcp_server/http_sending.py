"""The ASGI `send` and `receive` wrappers /mcp puts around the SDK: they
note what it answered, end what it leaves open, and mend what it says (a
null id in its own errors), one concern each.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable

from starlette.types import Message, Receive, Send

from waypost.json_text import line_breaks_escaped

log = logging.getLogger("waypost.mcp")


async def accepted(send: Send) -> None:
    """202 with no body, as the SDK answers a notification or a response."""
    await send({"type": "http.response.start", "status": 202,
                "headers": [(b"content-length", b"0")]})  # fmt: skip
    await send({"type": "http.response.body", "body": b""})


# what the SDK puts in the id of the errors it answers itself (a missing or
# unknown session, a bad Accept, a method it does not serve): JSON-RPC's null
_SDK_ERROR_ID = "server-error"


def null_sdk_error_ids(send: Send) -> Send:
    """`send` for the SDK's answers only: JSON-RPC's `"id": null` in the
    errors it answers itself, whose id is otherwise the string "server-error"
    (a client's own id of that name, in the endpoint's refusals, stands)."""
    held: list[Message] = []

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] >= 400:
            held.append(message)  # until its body says whose error it is
            return
        if message["type"] == "http.response.body" and held:
            held.append(message)
            if message.get("more_body", False):
                return
            start, *parts = held
            held.clear()
            for part in _with_null_error_id(start, parts):
                await send(part)
            return
        await send(message)

    return sending


def _with_null_error_id(start: Message, parts: list[Message]) -> list[Message]:
    """An error answer's messages, its `"id": "server-error"` made `null`."""
    body = b"".join(part.get("body", b"") for part in parts)
    try:
        data = json.loads(body)
    except ValueError:
        return [start, *parts]
    if not isinstance(data, dict) or data.get("id") != _SDK_ERROR_ID:
        return [start, *parts]
    data["id"] = None
    rewritten = json.dumps(data, separators=(",", ":")).encode()
    headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(rewritten)).encode()))
    return [{**start, "headers": headers}, {"type": "http.response.body", "body": rewritten}]


class OneResponse:
    """`send` for one response: what the SDK sends after its last part is
    dropped, and `ended` tells whether the response is out. A notification
    racing its session's DELETE was answered 202; the SDK's write into the
    closed session then failed, and it started a 500 as well and raised
    ClosedResourceError: uvicorn refused the second start, logged an ERROR
    with its traceback and dropped the keep-alive connection (boundsaudit)."""

    def __init__(self, send: Send) -> None:
        self.ended = False
        self.status = 0  # of the response sent (0: none yet)
        self._send = send

    async def send(self, message: Message) -> None:
        if self.ended:
            log.debug("MCP: dropped %s sent after the response had ended", message["type"])
            return
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.ended = True
        await self._send(message)


def event_lines_kept(send: Send) -> Send:
    """`send`, with NEL, U+2028 and U+2029 written as JSON escapes in an
    event-stream answer (json_text.line_breaks_escaped): the SDK leaves them
    raw, and a tool's answer holding a text with one broke into lines for
    readers such as `str.splitlines` (unicodeaudit), as the public event
    stream's did. The SDK sends each event whole in one part, so no
    character is split between parts; a JSON answer is left as it is (it is
    one document, read whole, and its length is counted)."""
    streaming = False

    async def sending(message: Message) -> None:
        nonlocal streaming
        if message["type"] == "http.response.start":
            streaming = any(
                name.lower() == b"content-type" and value.startswith(b"text/event-stream")
                for name, value in message.get("headers", [])
            )
        elif streaming and message["type"] == "http.response.body":
            message = {**message, "body": line_breaks_escaped(message.get("body", b""))}
        await send(message)

    return sending


def on_last_part(send: Send, ended: Callable[[], None]) -> Send:
    """`send`, calling `ended` just before the last part of the response goes
    out: a client that has read its answer whole may send its id again at
    once, before the SDK's handler has returned (it was refused 409)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            ended()
        await send(message)

    return sending


def noting_disconnect(receive: Receive, gone: asyncio.Event) -> Receive:
    """`receive`, setting `gone` when it tells that the client has gone (the
    SDK's event-stream response listens for that while a call runs)."""

    async def noting() -> Message:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
        return message

    return noting


def gone_once(receive: Receive, revoked: asyncio.Event) -> Receive:
    """`receive`, telling the SDK its client has gone once `revoked` is set:
    its event-stream response ends on that, as on a real disconnect."""

    async def receiving() -> Message:
        if revoked.is_set():
            return {"type": "http.disconnect"}
        message = asyncio.ensure_future(receive())
        ended = asyncio.ensure_future(revoked.wait())
        try:
            await asyncio.wait((message, ended), return_when=asyncio.FIRST_COMPLETED)
        finally:  # cancelled itself (the server stopping), it leaves neither behind
            ended.cancel()
            received = message.done()
            if not received:
                message.cancel()
        return message.result() if received else {"type": "http.disconnect"}

    return receiving


def finishing(send: Send) -> tuple[Send, Callable[[], Awaitable[None]]]:
    """`send`, and what ends a response the SDK left open: its event stream
    stops sending at a disconnect, which `gone_once` reports for a revoked
    token while the client still reads (uvicorn then cut the connection
    mid-chunk and logged an ERROR). After a real disconnect the last part is
    dropped by the server."""
    state = {"started": False, "ended": False}

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            state["started"] = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            state["ended"] = True
        await send(message)

    async def finish() -> None:
        if state["started"] and not state["ended"]:
            with contextlib.suppress(OSError):
                await sending({"type": "http.response.body", "body": b"", "more_body": False})

    return sending, finish


class Once:
    """`fn`, run by the first call only."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self._fn: Callable[[], None] | None = fn

    def __call__(self) -> None:
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()


class StatusNoted:
    """`send` noting the status of the response it starts (0: none yet)."""

    def __init__(self, send: Send) -> None:
        self.status = 0
        self._send = send

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        await self._send(message)
