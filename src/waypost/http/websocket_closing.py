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
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

# how long a closed WebSocket's unsent bytes get to go: a client that reads
# at all takes a closing frame well within it
CLOSE_DRAIN_SECONDS = 5.0


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

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(_DrainBounded(transport))  # type: ignore[arg-type]
