"""`GET /api/v1/projects/{project}/events/stream`: a project's events as
Server-Sent Events.

Each event goes out as `id: <sequence>`, `event: <type>` and `data: <the
event object, compact JSON>`, oldest first, after `Last-Event-ID` (which wins)
or `?after=`, else from the next new event. A `: keep-alive` comment goes out
whenever nothing else did for `keepalive_seconds` (15). The stream ends when
the token stops authenticating (re-checked every 15 seconds), when the
server stops, or after an `event: error` (a consumer too slow to keep up:
resume with `Last-Event-ID`).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from waypost.errors import InvalidRequest, WaypostError
from waypost.live import SlowConsumer, StreamEnded
from waypost.live.streams import KEEPALIVE, OPENED, check_project, project_event_batches
from waypost.rest.responses import HEADERS, error_response

PATH = "/api/v1/projects/{project}/events/stream"


def _position(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        raise InvalidRequest.field(name, f"{name} must be an event sequence (0 or more)")
    return int(value)


# Frames by event sequence: every stream on a project writes the same events,
# and an event never changes once committed, so each is encoded once.
_FRAMES: OrderedDict[int, bytes] = OrderedDict()
_FRAMES_KEPT = 4096


def _frame(event: dict[str, Any]) -> bytes:
    sequence: int = event["sequence"]
    frame = _FRAMES.get(sequence)
    if frame is None:
        data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
        frame = f"id: {sequence}\nevent: {event['type']}\ndata: {data}\n\n".encode()
        _FRAMES[sequence] = frame
        if len(_FRAMES) > _FRAMES_KEPT:
            _FRAMES.popitem(last=False)
    return frame


# Whole writes by (first, last) sequence: the streams of a project that are
# caught up all get the same slice of its events on a wake (a project's
# events between two sequences are always the same), so it is joined once.
_CHUNKS: OrderedDict[tuple[int, int], bytes] = OrderedDict()
_CHUNKS_KEPT = 64


def _chunk(events: list[dict[str, Any]]) -> bytes:
    key = (events[0]["sequence"], events[-1]["sequence"])
    chunk = _CHUNKS.get(key)
    if chunk is None:
        chunk = b"".join(_frame(event) for event in events)
        _CHUNKS[key] = chunk
        if len(_CHUNKS) > _CHUNKS_KEPT:
            _CHUNKS.popitem(last=False)
    return chunk


async def event_stream(request: Request) -> Response:
    rt = request.app.state.runtime
    actor = request.state.actor
    project_id = request.path_params["project"]
    token = request.headers.get("authorization", "").partition(" ")[2].strip()
    stack = AsyncExitStack()
    try:
        after = _position(request.query_params.get("after"), "after")
        resumed = _position(request.headers.get("last-event-id"), "Last-Event-ID")
        await check_project(rt, project_id)
        events = project_event_batches(
            rt, actor, token, project_id, resumed if resumed is not None else after
        )
        stack.push_async_callback(events.aclose)
        # the first item (OPENED) comes once the listener is in place: a refusal
        # (too many streams) is still an ordinary JSON error, before the stream
        first = await anext(events)
    except WaypostError as error:
        await stack.aclose()
        return error_response(error)
    except (StreamEnded, StopAsyncIteration):
        await stack.aclose()
        return Response(status_code=204)

    async def body() -> AsyncIterator[bytes]:
        async with stack:
            item = first
            try:
                while True:
                    if item is OPENED:
                        yield b": stream open\n\n"
                    elif item is KEEPALIVE:
                        yield b": keep-alive\n\n"
                    else:
                        assert isinstance(item, list)
                        yield _chunk(item)
                    item = await anext(events)
            except (StreamEnded, StopAsyncIteration):
                return
            except SlowConsumer as error:
                payload = json.dumps(error.to_json()["error"], separators=(",", ":"))
                yield f"event: error\ndata: {payload}\n\n".encode()

    headers = {**HEADERS, "X-Accel-Buffering": "no"}
    return StreamingResponse(body(), media_type="text/event-stream", headers=headers)
