"""`GET /api/v1/projects/{project}/events/stream`: a project's events as
Server-Sent Events.

Each event goes out as `id: <sequence>`, `event: <type>` and `data: <the
event object, compact JSON>`, oldest first, after `Last-Event-ID` (which wins)
or `?after=`, else from the next new event. A `: keep-alive` comment goes out
every `keepalive_seconds` (14, so that none is more than 15 apart). The stream ends when
the token stops authenticating or the session it was opened in ends
(re-checked every 15 seconds), when the
server stops, or after an `event: error` (a consumer too slow to keep up:
resume with `Last-Event-ID`).
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any
from weakref import WeakKeyDictionary

import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from waypost.decoding import decimal_integer, decode_query, query_items
from waypost.errors import InvalidRequest, WaypostError
from waypost.http.headers import bearer_token, header
from waypost.http.responses import SECURITY_HEADERS
from waypost.json_text import compact, line_breaks_escaped
from waypost.live import Hub, StreamEnded, hub_for
from waypost.live.streams import KEEPALIVE, OPENED, check_project, project_event_batches
from waypost.rest.responses import error_response

PATH = "/api/v1/projects/{project}/events/stream"
log = logging.getLogger("waypost.live")


class _StreamQuery(msgspec.Struct, forbid_unknown_fields=True):
    # text: `_position` reads it
    after: str | None = None


def _position(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    # read as the REST list reads `?after=`: decimal digits up to SQLite's
    # (and the sequence's) largest integer, leading zeros allowed ("-0" too)
    position = decimal_integer(value)
    if position is None or position < 0:
        raise InvalidRequest.field(name, f"{name} must be an event sequence (0 or more)")
    return position


class _Encoded:
    """The SSE bytes of one hub's events, each encoded once for all streams.

    Frames by event sequence: every stream on a project writes the same
    events, and an event never changes once committed. Whole writes by
    (first, last) sequence: the caught-up streams of a project all get the
    same slice of its events on a wake (a project's events between two
    sequences are always the same), so it is joined once. Kept per hub, as
    sequences are only unique within one database.
    """

    FRAMES_KEPT = 4096
    CHUNKS_KEPT = 64

    def __init__(self) -> None:
        self._frames: OrderedDict[int, bytes] = OrderedDict()
        self._chunks: OrderedDict[tuple[int, int], bytes] = OrderedDict()

    def frame(self, event: dict[str, Any]) -> bytes:
        sequence: int = event["sequence"]
        frame = self._frames.get(sequence)
        if frame is None:
            # one line whatever its texts hold (a task titled "a\u2028b"
            # gave a client reading by lines half a JSON object)
            data = line_breaks_escaped(compact(event).encode())
            frame = b"id: %d\nevent: %s\ndata: %s\n\n" % (sequence, event["type"].encode(), data)
            self._frames[sequence] = frame
            if len(self._frames) > self.FRAMES_KEPT:
                self._frames.popitem(last=False)
        return frame

    def chunk(self, events: list[dict[str, Any]]) -> bytes:
        key = (events[0]["sequence"], events[-1]["sequence"])
        chunk = self._chunks.get(key)
        if chunk is None:
            chunk = b"".join(self.frame(event) for event in events)
            self._chunks[key] = chunk
            if len(self._chunks) > self.CHUNKS_KEPT:
                self._chunks.popitem(last=False)
        return chunk


_ENCODED: WeakKeyDictionary[Hub, _Encoded] = WeakKeyDictionary()


def _encoded_for(hub: Hub) -> _Encoded:
    encoded = _ENCODED.get(hub)
    if encoded is None:
        encoded = _ENCODED[hub] = _Encoded()
    return encoded


# `no-transform` and `X-Accel-Buffering: no`: a compressing or buffering
# proxy between the service and its subscriber would hold events back until
# its buffer fills (nginx honours the second; RFC 9111 asks every proxy to
# honour the first)
_STREAM_HEADERS = {
    **SECURITY_HEADERS,
    "Cache-Control": f"{SECURITY_HEADERS['Cache-Control']}, no-transform",
    "X-Accel-Buffering": "no",
}


async def event_stream(request: Request) -> Response:
    rt = request.app.state.runtime
    actor = request.state.actor
    project_id = request.path_params["project"]
    # authentication took it: a request gets here with a bearer token
    token = bearer_token(request.headers.get("authorization")) or ""
    stack = AsyncExitStack()
    try:
        # unknown or repeated parameters are refused, as on every REST route
        query = decode_query(query_items(request.scope["query_string"]), _StreamQuery)
        after = _position(query.after, "after")
        # Spaces and tabs around a header's value are not part of it (RFC 9110,
        # 5.5); an empty one is no position: an SSE client may send back an id
        # the server reset. Sent twice it is refused, naming it: which one was
        # meant decides whether events are skipped or repeated (the first won)
        last_id = header(request.scope, b"last-event-id", "Last-Event-ID") or ""
        resumed = _position(last_id or None, "Last-Event-ID")
        await check_project(rt, project_id)
        # Last-Event-ID wins; a refusal of the position names the one used
        position, name = (after, "after") if resumed is None else (resumed, "Last-Event-ID")
        events = project_event_batches(rt, actor, token, project_id, position, name)
        stack.push_async_callback(events.aclose)
        # the first item (OPENED) comes once the listener is in place: a refusal
        # (a position past the end, too many streams) is still an ordinary JSON
        # error, before the stream
        first = await anext(events)
        if request.method == "HEAD":
            # the head of the answer a GET would get, after the same checks, and
            # done: the stream's slot is given back at once
            await stack.aclose()
            head = Response(media_type="text/event-stream", headers=_STREAM_HEADERS)
            # a GET's body has no length (RFC 9110 section 8.6: a HEAD sends
            # Content-Length only with the length the GET would have)
            del head.headers["content-length"]
            return head
        encoded = _encoded_for(hub_for(rt))
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
                        yield encoded.chunk(item)
                    item = await anext(events)
            except (StreamEnded, StopAsyncIteration):
                return
            except WaypostError as error:
                # a slow consumer, or a store that refuses reads (503): the
                # stream ends with its error in an event (the response has
                # started: it escaped as a traceback and a cut body)
                payload = json.dumps(error.to_json()["error"], separators=(",", ":"))
                yield f"event: error\ndata: {payload}\n\n".encode()
            except Exception:
                log.exception("event stream failed")
                payload = '{"code":"internal","message":"internal error","details":{}}'
                yield f"event: error\ndata: {payload}\n\n".encode()

    return StreamingResponse(body(), media_type="text/event-stream", headers=_STREAM_HEADERS)
