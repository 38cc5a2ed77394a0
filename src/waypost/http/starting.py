"""What the listeners answer while the store opens.

`serve` binds both listeners before it opens the database, so that a taken
address is refused at once; opening may then take a while (a migration that
rebuilds an index: 53 s on a million records). Until now a connection made
meanwhile was accepted by the kernel and answered nothing, `/healthz`
included, until the store was open: a probe or an agent saw a hang, not a
state. Meanwhile these answers go out instead, each on a connection of its
own that closes after it: `GET /healthz` is `503 {"status": "starting"}`,
every other public request `503 unavailable` with `details.reason`
`starting`, the lifecycle listener's `503 {"error": "unavailable"}`, all with
`Retry-After: 1`. Once the store is open the responders stop accepting, and
uvicorn serves the same sockets (a connection still waiting in the backlog
is uvicorn's).

Plain asyncio protocols on duplicates of the listening sockets: closing
them closes the duplicates, never the sockets uvicorn is handed.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any, cast

from waypost.http.responses import SECURITY_HEADERS

# a request head larger than this is not read on: the connection is closed
HEAD_LIMIT = 64 * 1024
# how long a connection may take to send its head, and to close after its answer
LINGER_SECONDS = 5.0
# connections answered at once (more are closed as they come: a start is short)
MOST_AT_ONCE = 64

STARTING_MESSAGE = (
    "the service is starting (opening its database, which may migrate it); retry shortly"
)


def _response(status: str, body: dict[str, Any]) -> bytes:
    payload = json.dumps(body, separators=(",", ":")).encode()
    head = [
        f"HTTP/1.1 {status}",
        "Content-Type: application/json",
        f"Content-Length: {len(payload)}",
        "Retry-After: 1",
        "Connection: close",
        *(f"{name}: {value}" for name, value in SECURITY_HEADERS.items()),
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + payload


_UNAVAILABLE = "503 Service Unavailable"
PUBLIC_HEALTH = _response(_UNAVAILABLE, {"status": "starting"})
PUBLIC_OTHER = _response(
    _UNAVAILABLE,
    {
        "error": {
            "code": "unavailable",
            "message": STARTING_MESSAGE,
            "details": {"reason": "starting"},
        }
    },
)
LIFECYCLE = _response(_UNAVAILABLE, {"error": "unavailable"})


def public_answer(target: bytes) -> bytes:
    """The answer to a request for `target` (the request line's path and query)."""
    return PUBLIC_HEALTH if target.split(b"?", 1)[0] == b"/healthz" else PUBLIC_OTHER


def lifecycle_answer(target: bytes) -> bytes:
    return LIFECYCLE


class _Answering(asyncio.Protocol):
    """One connection: read its request head, send the answer, close."""

    def __init__(self, answer: Any, open_now: set[_Answering]) -> None:
        self._answer = answer
        self._open_now = open_now
        self._head = bytearray()
        self._answered = False
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses
        self._transport = cast(asyncio.Transport, transport)
        if len(self._open_now) >= MOST_AT_ONCE:
            self._transport.abort()
            return
        self._open_now.add(self)
        self._timer = asyncio.get_running_loop().call_later(LINGER_SECONDS, self._transport.abort)

    def data_received(self, data: bytes) -> None:
        if self._answered or self._transport is None:
            return  # what follows the head (a body) is read and dropped
        self._head += data
        if b"\r\n\r\n" not in self._head:
            if len(self._head) > HEAD_LIMIT:
                self._transport.abort()
            return
        request_line = bytes(self._head.split(b"\r\n", 1)[0])
        parts = request_line.split(b" ")
        self._answered = True
        self._head.clear()
        self._transport.write(self._answer(parts[1] if len(parts) == 3 else b""))
        # Half-close and read on until the client closes (or the timer ends
        # it): closing with a request body unread would reset the
        # connection, and the client could lose the answer.
        if self._transport.can_write_eof():
            self._transport.write_eof()
        else:
            self._transport.close()

    def eof_received(self) -> bool:
        return False  # the transport closes itself

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._open_now.discard(self)
        if self._timer is not None:
            self._timer.cancel()


class StartingAnswers:
    """Responders on duplicates of the listeners' sockets, until `stop()`."""

    def __init__(self) -> None:
        self._servers: list[asyncio.AbstractServer] = []
        self._open_now: set[_Answering] = set()

    async def start(self, sockets: list[socket.socket], answer: Any) -> None:
        loop = asyncio.get_running_loop()
        for sock in sockets:
            server = await loop.create_server(
                lambda: _Answering(answer, self._open_now), sock=sock.dup()
            )
            self._servers.append(server)

    def stop(self) -> None:
        """Stop accepting (the connections already made finish their answers)."""
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()

    def close(self) -> None:
        """Stop accepting, and end the connections still open (serve is ending)."""
        self.stop()
        for answering in list(self._open_now):
            answering.abort()
