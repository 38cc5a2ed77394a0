"""A deadline for each request to arrive: idle and trickling clients are closed.

uvicorn closes a keep-alive connection left idle after a response, but
nothing bounds a connection that never sends a request, or one that sends
its request line, headers or body a few bytes at a time: each holds a
socket (and, once its head is in, a task) for as long as the client likes,
and a few thousand of them exhaust the process's file descriptors (a
"slowloris"). So `serve`'s listeners use uvicorn's own HTTP protocols with
one addition: from the moment a connection opens, or its previous response
ends, the next request (line, headers and body) must have arrived whole
within `seconds`, else the connection is closed. A request that has arrived
whole is never cut: a waiting decision, an SSE stream or a WebSocket lasts
as long as it needs to.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string


def with_request_deadline(http: str, seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol named `http` (auto|httptools|h11), closing a
    connection whose next request has not arrived whole within `seconds`."""
    base = import_from_string(HTTP_PROTOCOLS[http])

    class RequestDeadline(base):  # type: ignore[misc, valid-type]
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._watch()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._watch()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._watch()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _awaiting_request(self) -> bool:
            # uvicorn makes a cycle once a request's head is in; its body is
            # in when `more_body` turns false
            cycle = self.cycle
            return cycle is None or cycle.response_complete or cycle.more_body

        def _watch(self) -> None:
            upgraded = self.transport.get_protocol() is not self  # a WebSocket took over
            if upgraded or self.transport.is_closing() or not self._awaiting_request():
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
