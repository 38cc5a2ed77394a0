"""uvicorn's WebSocket protocol, whose closing cannot wait for ever on a
client that reads nothing.

uvicorn ends a WebSocket by closing its transport gracefully: the transport
sends what it still holds, then drops the connection. Behind a client that
stopped reading, on a link whose buffers are full, what it holds never
goes, so nothing ended: the keepalive's cut (1011 when no pong came) left
the socket, its subscriptions and their places under the token's caps held
for as long as the client stayed connected, and a stop's 1012 held the
graceful stop for good (slowconsumer). Here a transport that is closed with
bytes still unsent gives them `CLOSE_DRAIN_SECONDS` to go, then is aborted:
what was unsent is dropped, as the client was not taking it anyway.

And a stop gives the app a moment to end its sockets itself: uvicorn sends
`1012` on every WebSocket at its stop's first tick, and under load a
GraphQL subscription had not yet sent its `complete` by then, so the
client heard the close without it (shutdownjourney). The app closes a
socket `1012` itself once its operations have ended (schema/websocket.py);
one it has not closed within `STOP_GRACE_SECONDS` is closed here as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

# how long a closed WebSocket's unsent bytes get to go: a client that reads
# at all takes a closing frame well within it
CLOSE_DRAIN_SECONDS = 5.0
# how long a stop lets the app close an open socket itself (after each of its
# subscriptions' `complete`) before uvicorn's own 1012
STOP_GRACE_SECONDS = 1.0


class _DrainBounded:
    """The connection's transport, whose `close()` aborts it once its unsent
    bytes have had `CLOSE_DRAIN_SECONDS` (everything else is the transport's)."""

    def __init__(self, transport: Any) -> None:
        # asyncio's, or uvloop's (not an `asyncio.Transport` subclass)
        self._transport = transport

    def close(self) -> None:
        self._transport.close()
        if self._transport.get_write_buffer_size():
            loop = asyncio.get_running_loop()
            loop.call_later(CLOSE_DRAIN_SECONDS, self._transport.abort)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class ClosingWebSocket(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O WebSocket protocol (its default) over `_DrainBounded`."""

    _stop_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(_DrainBounded(transport))  # type: ignore[arg-type]

    def shutdown(self) -> None:
        """The server stops: the app's 1012 within STOP_GRACE_SECONDS, else uvicorn's."""
        if self.handshake_complete and not self.close_sent and self._stop_timer is None:
            loop = asyncio.get_running_loop()
            self._stop_timer = loop.call_later(STOP_GRACE_SECONDS, self._shutdown_if_open)
            return
        super().shutdown()

    def _shutdown_if_open(self) -> None:
        # a connection lost meanwhile has left the server's set, and has
        # nothing more to close
        if self in self.connections:
            super().shutdown()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._stop_timer is not None:
            self._stop_timer.cancel()
        super().connection_lost(exc)
