"""uvicorn's HTTP protocols with the bounds a public listener needs.

uvicorn closes a keep-alive connection left idle after a response, but
nothing bounds a connection that never sends a request, or one that sends
its request line, headers or body a few bytes at a time: each holds a
socket (and, once its head is in, a task) for as long as the client likes,
and a few thousand of them exhaust the process's file descriptors (a
"slowloris"). So `serve`'s listeners use uvicorn's own HTTP protocols with
these additions:

- **A deadline for each request to arrive whole**: from the moment a
  connection opens, or its previous response ends, the next request (line,
  headers and body) must have arrived within `seconds`, else the connection
  is closed. A request that has arrived whole is never cut, nor one being
  answered while the next is pipelined behind it: a waiting decision, an
  SSE stream or a WebSocket lasts as long as it needs to.
- **A bound on the request head** (httptools, the default parser):
  httptools keeps any length of header, and the time it takes grows with the
  square of a header's length (a 64 MiB header line held the event loop,
  both listeners' requests with it, for seconds). A head past `HEAD_MOST`
  bytes is answered `431` and the connection closed: as soon as that much
  has arrived without the head's end, or when a head that came in one read
  is over it. (h11 refuses an incomplete head over 16 KiB itself.)
- **No WebSocket upgrade with a body**: the WebSocket protocol that takes
  over would wait for ever for a handshake behind it; `400` instead.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string

# The request line and headers of one request, at most (a bearer token, a
# session, an idempotency key and a browser's headers take a few KiB).
HEAD_MOST = 64 * 1024
_HEAD_MESSAGE = b"The request line and headers are limited to 64 KiB."
_HEAD_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_HEAD_MESSAGE), _HEAD_MESSAGE)
)


async def _head_too_large(scope: Any, receive: Any, send: Any) -> None:
    """The answer to a whole head over `HEAD_MOST` (in place of the app)."""
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", b"%d" % len(_HEAD_MESSAGE)),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 431, "headers": headers})
    await send({"type": "http.response.body", "body": _HEAD_MESSAGE})


def _has_body(headers: Any) -> bool:
    for name, value in headers:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


def with_request_deadline(http: str, seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol named `http` (auto|httptools|h11), closing a
    connection whose next request has not arrived whole within `seconds`
    (and, under httptools, refusing a head over `HEAD_MOST` bytes)."""
    base = import_from_string(HTTP_PROTOCOLS[http])
    parses_heads_itself = hasattr(base, "on_headers_complete")  # httptools' callbacks

    class RequestDeadline(base):  # type: ignore[misc, valid-type]
        app: Any  # uvicorn's: the ASGI app each new request is served with
        _deadline: asyncio.TimerHandle | None = None
        # a request answered while the next one is pipelined behind it (httptools)
        _earlier: Any = None
        # bytes received since the current request head began, while it is open
        _head_open = True
        _head_bytes = 0

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._watch()

        def data_received(self, data: bytes) -> None:
            if parses_heads_itself and self._head_open:
                self._head_bytes += len(data)
            super().data_received(data)
            if self.transport.get_protocol() is not self:
                self._disarm()  # a WebSocket took over
            elif self._head_bytes > HEAD_MOST:
                self._disarm()
                self.transport.write(_HEAD_TOO_LARGE)
                self.transport.close()
            else:
                self._watch()

        # httptools' parser callbacks (h11 calls neither: it parses one request at a time)
        def on_headers_complete(self) -> None:
            self._head_open, self._head_bytes = False, 0
            earlier = self.cycle
            # a head that arrived whole in one read is measured here
            size = len(self.url) + sum(len(n) + len(v) + 4 for n, v in self.headers)
            if size > HEAD_MOST:
                # uvicorn serves it with `self.app`, as its own 503 for
                # `limit_concurrency` does
                app, self.app = self.app, _head_too_large
                try:
                    super().on_headers_complete()
                finally:
                    self.app = app
            else:
                super().on_headers_complete()
            if earlier is not None and not earlier.response_complete:
                self._earlier = earlier

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._head_open, self._head_bytes = True, 0

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._disarm()  # the next request's time starts now
            self._watch()

        def handle_websocket_upgrade(self, *event: Any) -> None:
            # h11 passes the request event; httptools keeps the headers on self
            if _has_body(event[0].headers if event else self.headers):
                self.send_400_response("A WebSocket upgrade request carries no body.")
                return
            super().handle_websocket_upgrade(*event)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _awaiting_request(self) -> bool:
            if self._earlier is not None and not self._earlier.response_complete:
                return False  # never cut a response in progress
            # uvicorn makes a cycle once a request's head is in; its body is
            # in when `more_body` turns false
            cycle = self.cycle
            return cycle is None or cycle.response_complete or cycle.more_body

        def _watch(self) -> None:
            if self.transport.is_closing() or not self._awaiting_request():
                self._disarm()
            elif self._deadline is None:
                self._deadline = self.loop.call_later(seconds, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            if self.transport.get_protocol() is self and self._awaiting_request():
                self.transport.close()

    RequestDeadline.__name__ = RequestDeadline.__qualname__ = f"RequestDeadline{base.__name__}"
    return RequestDeadline
