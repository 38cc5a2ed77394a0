"""What the listeners answer while the store opens.

`serve` binds both listeners before it opens the database, so that a taken
address is refused at once; opening may then take a while (a migration that
rebuilds an index: 53 s on a million records). Until now a connection made
meanwhile was accepted by the kernel and answered nothing, `/healthz`
included, until the store was open: a probe or an agent saw a hang, not a
state. Meanwhile these answers go out instead, each on a connection of its
own that closes after it: `GET /healthz` is `503 {"status": "starting"}`,
`/graphql` a GraphQL error, the console's page a page that loads again by
itself, every other public request `503 unavailable` with `details.reason`
`starting`, the lifecycle listener's `503 {"error": "unavailable"}`, all
with `Retry-After: 1`. Once the store is open the
responders stop accepting, and uvicorn serves the same sockets (a
connection still waiting in the backlog is uvicorn's).

Each listener's responder accepts on a duplicate of its listening socket
(closing it never closes the socket uvicorn is handed) and gives each
connection a transport of its own, with no asyncio `Server` behind it:
closing a `Server` failed the connections it had accepted and not yet set
up, on asyncio's loop (startaudit). It holds at most the listener's own
connection cap; past it, it stops accepting until a connection ends, and
the rest wait in the backlog as they did before.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import json
import socket
from collections.abc import Callable
from typing import Any, cast

from waypost.errors import Unavailable
from waypost.http.responses import SECURITY_HEADERS, graphql_refusal_body

# a request head larger than this is not read on: the connection is closed
HEAD_LIMIT = 64 * 1024
# how long an answered connection may take to close before it is cut
LINGER_SECONDS = 5.0
# how long accepting waits when the process is out of descriptors (asyncio's own wait)
OUT_OF_FILES_PAUSE = 1.0

STARTING_MESSAGE = (
    "the service is starting (opening its database, which may migrate it); retry shortly"
)

Answer = Callable[[bytes], bytes]


def _response(body: dict[str, Any] | str, separators: tuple[str, str] = (",", ":")) -> bytes:
    """A whole 503 answer: JSON (written as the listener's app writes it:
    `separators`), or (a str) an HTML page."""
    if isinstance(body, str):
        payload, kind = body.encode(), ["Content-Type: text/html; charset=utf-8", *_PAGE_HEADERS]
    else:
        payload, kind = json.dumps(body, separators=separators).encode(), _JSON
    head = [
        "HTTP/1.1 503 Service Unavailable",
        *kind,
        f"Content-Length: {len(payload)}",
        "Retry-After: 1",
        "Connection: close",
        *(f"{name}: {value}" for name, value in SECURITY_HEADERS.items()),
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + payload


_JSON = ["Content-Type: application/json"]
# the page runs nothing and loads nothing; it may not be framed
# (and, as every console answer, no framing, no referrer, no opener:
# console/__init__.py `security_headers`; the page lacked the last three,
# securityjourney)
_PAGE_HEADERS = [
    "Content-Security-Policy: default-src 'none'; frame-ancestors 'none'",
    "X-Frame-Options: DENY",
    "Referrer-Policy: no-referrer",
    "Cross-Origin-Opener-Policy: same-origin",
]
# The console's page, asked for again (a reload) while the service starts:
# the app that retries by itself is not loaded, so the page reloads itself
# (consolerestart: the reload showed the JSON answer, for good)
_CONSOLE_PAGE = (
    '<!doctype html><html lang="en"><meta charset="utf-8">'
    '<meta http-equiv="refresh" content="2"><title>Waypost is starting</title>'
    "<p>Waypost is starting (opening its database, which may migrate it). This page"
    " loads again by itself.</p></html>"
)
_CONSOLE_PAGES = (b"/", b"/console", b"/console/")


# the refusal every other answer spells, in each transport's words
_STARTING = Unavailable(STARTING_MESSAGE, {"reason": "starting"}, retry_after=1)
_PUBLIC_HEALTH = _response({"status": "starting"})
_PUBLIC_GRAPHQL = _response(graphql_refusal_body(_STARTING))
_PUBLIC_OTHER = _response(_STARTING.to_json())
_PUBLIC_CONSOLE = _response(_CONSOLE_PAGE)
# json.dumps' own spacing, as every other answer of the lifecycle listener
# (lifecycle_http/envelope.py): its starting answer alone was compact (memojourney)
_LIFECYCLE = _response({"error": "unavailable"}, separators=(", ", ": "))


def _path(target: bytes) -> bytes:
    """The path of a request target, also in absolute form (`http://h/p?q`)."""
    if target[:8].lower().startswith((b"http://", b"https://")):  # schemes ignore case
        target = b"/" + target.split(b"/", 3)[3] if target.count(b"/") >= 3 else b"/"
    return target.split(b"?", 1)[0]


def public_answer(target: bytes) -> bytes:
    path = _path(target)
    if path == b"/healthz":
        return _PUBLIC_HEALTH
    if path in _CONSOLE_PAGES:
        return _PUBLIC_CONSOLE
    return _PUBLIC_GRAPHQL if path == b"/graphql" else _PUBLIC_OTHER


def lifecycle_answer(target: bytes) -> bytes:
    return _LIFECYCLE


def _same(protocol: _Answering) -> _Answering:
    return protocol


def _head_end(head: bytes | bytearray) -> int:
    """Where the request head ends (after its empty line), or -1."""
    ends = [i + len(m) for m in (b"\r\n\r\n", b"\n\n") if (i := head.find(m)) >= 0]
    return min(ends, default=-1)


class _Answering(asyncio.Protocol):
    """One connection: read its request head, send the answer, close."""

    def __init__(self, responder: _Responder) -> None:
        self._responder = responder
        self._head = bytearray()
        self._answered = False
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses
        self._transport = cast(asyncio.Transport, transport)
        self._cut_after(self._responder.head_seconds)

    def _cut_after(self, seconds: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        assert self._transport is not None
        self._timer = asyncio.get_running_loop().call_later(seconds, self._transport.abort)

    def data_received(self, data: bytes) -> None:
        if self._answered or self._transport is None:
            return  # what follows the head (a body) is read and dropped
        # empty lines before the request line are ignored (RFC 9112, 2.2)
        self._head += data
        head = bytes(self._head).lstrip(b"\r\n")
        end = _head_end(head)
        if end < 0:
            if len(head) > HEAD_LIMIT:
                self._transport.abort()
            return
        request_line = head[:end].split(b"\n", 1)[0].rstrip(b"\r")
        parts = request_line.split(b" ")
        self._answered = True
        self._head.clear()
        answer = self._responder.answer(parts[1] if len(parts) == 3 else b"")
        if parts[0] == b"HEAD":
            answer = answer[: answer.index(b"\r\n\r\n") + 4]
        self._transport.write(answer)
        self._cut_after(LINGER_SECONDS)
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
        if self._timer is not None:
            self._timer.cancel()
        self._responder.ended(self)


class _Responder:
    """One listener's answers, on a duplicate of each of its sockets."""

    def __init__(
        self, sockets: list[socket.socket], answer: Answer, most: int, head_seconds: float
    ) -> None:
        self.answer = answer
        self.head_seconds = head_seconds
        self._most = most
        self._loop = asyncio.get_running_loop()
        self._duplicates = [sock.dup() for sock in sockets]
        self._open_now: set[_Answering] = set()
        self._accepting = False
        self._stopped = False
        self._resume_later: asyncio.TimerHandle | None = None
        self._resume()

    def _resume(self) -> None:
        if not self._accepting and not self._stopped:
            self._accepting = True
            for dup in self._duplicates:
                self._loop.add_reader(dup.fileno(), self._accept, dup)

    def _resume_after_pause(self) -> None:
        self._resume_later = None
        self._resume()

    def _pause(self) -> None:
        if self._accepting:
            self._accepting = False
            for dup in self._duplicates:
                self._loop.remove_reader(dup.fileno())

    def _accept(self, dup: socket.socket) -> None:
        while len(self._open_now) < self._most:
            try:
                conn, _ = dup.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # out of descriptors: wait, as asyncio's own accept does
                    self._pause()
                    self._resume_later = self._loop.call_later(
                        OUT_OF_FILES_PAUSE, self._resume_after_pause
                    )
                return
            conn.setblocking(False)
            protocol = _Answering(self)
            self._open_now.add(protocol)  # counted from the accept on
            made = self._loop.create_task(
                self._loop.connect_accepted_socket(functools.partial(_same, protocol), conn)
            )
            made.add_done_callback(functools.partial(self._made, protocol, conn))
        # at the cap: the rest wait in the backlog until a connection ends
        self._pause()

    def _made(self, protocol: _Answering, conn: socket.socket, done: asyncio.Task[Any]) -> None:
        """A connection whose transport could not be made is closed and not counted."""
        if done.cancelled() or done.exception() is not None:
            conn.close()
            self.ended(protocol)

    def ended(self, protocol: _Answering) -> None:
        self._open_now.discard(protocol)
        if len(self._open_now) < self._most and self._resume_later is None:
            self._resume()

    def stop(self) -> None:
        """Stop accepting (the connections already made finish their answers)."""
        self._stopped = True
        self._pause()
        if self._resume_later is not None:
            self._resume_later.cancel()
        for dup in self._duplicates:
            dup.close()
        self._duplicates = []

    def close(self) -> None:
        self.stop()
        for protocol in list(self._open_now):
            protocol.abort()


class StartingAnswers:
    """The listeners' responders while the store opens, until `stop()`."""

    def __init__(self) -> None:
        self._responders: list[_Responder] = []

    def start(
        self, sockets: list[socket.socket], answer: Answer, most: int, head_seconds: float
    ) -> None:
        """Answer on `sockets` (one listener's), holding at most `most`
        connections, each given `head_seconds` to send its request head."""
        self._responders.append(_Responder(sockets, answer, most, head_seconds))

    def stop(self) -> None:
        """Stop accepting (the connections already made finish their answers)."""
        for responder in self._responders:
            responder.stop()

    def close(self) -> None:
        """Stop accepting, and end the connections still open (serve is ending)."""
        for responder in self._responders:
            responder.close()
