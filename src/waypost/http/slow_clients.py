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
- **A bound on the rest of a request** (httptools): its body and a chunked
  body's trailer section, `BODY_MOST` bytes in all, past which the
  connection is closed. No route takes a body near that size (each refuses
  its own limit first), but httptools keeps every trailer field, at the
  same growing cost as a header, even after the app has answered.
- **Trailer fields are not headers** (httptools): uvicorn added each to
  the request's headers, so a token sent after a chunked body authenticated
  the request; they are dropped (RFC 9110 6.5.1).
- **A request head as RFC 9112 has it** (httptools): an HTTP version other
  than 1.1 or 1.0 is answered `505`, an HTTP/1.1 request without a `Host`
  or any request with two is answered `400`, each closing the connection.
  (h11 refuses the Host faults itself, but takes `HTTP/2.0`: `serve`
  runs httptools.)
- **No WebSocket upgrade with a body**: the WebSocket protocol that takes
  over would wait for ever for a handshake behind it; `400` instead. Nor
  one whose head is over the WebSocket library's limits (a request line or
  header line over 8 KiB, more than 128 headers): `431` here, where that
  protocol's own refusal was never sent. Nor one pipelined behind requests
  not yet answered: `400` once they are (its 101 went out first, and their
  answers after it into the WebSocket's stream).
- **A bound on requests waiting to be answered** (httptools): uvicorn
  parses every request of a read at once, and each answer it completes
  lets the next read in, so one connection's pipelined requests were all
  parsed and queued however many it sent (30,000 of them, a megabyte of
  `GET /healthz`, took 30-100 MB). Bytes are parsed a few KiB at a time,
  and once more than `PIPELINE_MOST` requests wait, the rest of what the
  client sent waits unparsed, reading paused, until answers make room.
- **A client must read its answers**: one that takes nothing of what waits
  for it for `seconds` while the server cannot write more, or after its
  answer is complete, is disconnected (it held the connection, and a
  graceful stop of `serve`, for as long as it liked). A slow link is no
  stall: any progress counts.

- **A bound on open connections** (`ConnectionCap`, one per listener):
  past it, a connection is closed as soon as it is accepted. The
  deadlines bound how long each connection lives, not how many there are:
  plain TCP connections that never send a byte took the process to its
  open-file limit in 18 seconds, and then the database, the log and both
  listeners had no descriptor left (`/healthz` failed for 30 seconds after
  each burst). At its cap a listener refuses connections; the other
  listener, the database and the log go on.

Nothing here cuts a response in progress: a bound reached by a request
pipelined behind one stops reading until that response is complete. And
when the client leaves, that response hears it too (uvicorn tells only the
newest request of the connection).
These classes use uvicorn's protocol attributes (`cycle`, `headers`, `url`,
`app`, the parser callbacks), so `pyproject.toml` pins uvicorn's minor
version; tests/test_slow_clients.py runs them on both parsers.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string
from uvicorn.protocols.http.flow_control import FlowControl
from websockets.http11 import MAX_LINE_LENGTH, MAX_NUM_HEADERS

from waypost.http.responses import SECURITY_HEADERS, raw_headers

# The request line and headers of one request, at most (a bearer token, a
# session, an idempotency key and a browser's headers take a few KiB).
HEAD_MOST = 64 * 1024
# A request's body and trailers, at most: past the largest body any route
# takes (272 KiB, MCP) with room for chunk framing.
BODY_MOST = 1024 * 1024
_HEAD_MESSAGE = b"The request line and headers are limited to 64 KiB."
# Requests of one connection parsed and not answered yet, at most, before
# the connection's further bytes wait unparsed (httptools): pipelining
# gains nothing from a deeper queue, since answers go out one at a time.
PIPELINE_MOST = 16
# How much is handed to the parser at once: in a request's head, little, so
# that a slice of tiny pipelined requests adds some hundreds to the queue at
# most; in a body, more (uvicorn appends each piece of a body to what it has
# so far: many small pieces of a large body cost copies).
HEAD_SLICE = 4 * 1024
BODY_SLICE = 64 * 1024


log = logging.getLogger("waypost")
# At most one warning a minute while connections are refused at the cap.
CAP_WARNING_SECONDS = 60.0


class ConnectionCap:
    """The connections one listener may hold open at once (plain HTTP,
    streams and WebSockets alike)."""

    def __init__(self, most: int, name: str = "public") -> None:
        self.most = most
        self.name = name  # the listener's, for the warning
        # the listener's uvicorn ServerState, set once it exists: its
        # `connections` is the set of open connections, WebSockets included
        self.server: Any = None
        self._warned_at = -math.inf

    def full(self) -> bool:
        """Past the cap, the connection just accepted counted."""
        return self.server is not None and len(self.server.connections) > self.most

    def refused(self) -> None:
        now = time.monotonic()
        if now - self._warned_at >= CAP_WARNING_SECONDS:
            self._warned_at = now
            log.warning(
                "%d connections are open on the %s listener, the most it holds%s:"
                " new connections are closed until some end",
                self.most,
                self.name,
                " (--max-connections)" if self.name == "public" else "",
            )


class _HoldingFlow(FlowControl):
    """uvicorn's flow control of a connection, which resumes reading after
    every answer, but not while the connection holds bytes it has not
    parsed yet: they are parsed first, as answers make room."""

    def __init__(self, transport: asyncio.Transport, holding: Callable[[], bool]) -> None:
        super().__init__(transport)
        self._holding = holding

    def resume_reading(self) -> None:
        if not self._holding():
            super().resume_reading()


class _Refusal:
    """An ASGI app answering `status` with `message` and closing the
    connection, served in place of the app (as uvicorn's own 503 for
    `limit_concurrency` is); `raw` is the same answer as bytes, for a
    WebSocket upgrade request, which uvicorn hands no app."""

    def __init__(self, status: int, reason: str, message: bytes) -> None:
        self.status, self.message = status, message
        # the security headers too: "every response, errors included"
        self.headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", b"%d" % len(message)),
            (b"connection", b"close"),
            *raw_headers(SECURITY_HEADERS),
        ]
        lines = b"".join(b"%s: %s\r\n" % header for header in self.headers)
        self.raw = b"HTTP/1.1 %d %s\r\n%s\r\n%s" % (status, reason.encode(), lines, message)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": self.headers})
        await send({"type": "http.response.body", "body": self.message})


_head_too_large = _Refusal(431, "Request Header Fields Too Large", _HEAD_MESSAGE)
_version_refused = _Refusal(
    505, "HTTP Version Not Supported", b"This server speaks HTTP/1.1 and HTTP/1.0."
)
_host_refused = _Refusal(
    400, "Bad Request", b"An HTTP/1.1 request carries exactly one Host header."
)
_coding_refused = _Refusal(
    501, "Not Implemented", b"The only transfer coding this server takes is chunked."
)
_upgrade_pipelined = _Refusal(
    400, "Bad Request", b"A WebSocket upgrade is not taken behind requests not yet answered."
)
_upgrade_head_refused = _Refusal(
    431,
    "Request Header Fields Too Large",
    b"A WebSocket upgrade's request line and each header line are limited to %d bytes,"
    b" and its headers to %d." % (MAX_LINE_LENGTH, MAX_NUM_HEADERS),
)
_upgrade_body_refused = _Refusal(
    400, "Bad Request", b"A request asking an upgrade other than to a WebSocket carries no body."
)


def _over_websocket_limits(method: bytes, target: bytes, headers: Any) -> bool:
    """The head uvicorn hands the WebSocket protocol (request line, then each
    header, as it rebuilds them) is over the `websockets` library's limits.
    That protocol refuses such a head, but its 414 or 431 was never written:
    the connection stayed open without an answer past every deadline (which
    no longer watch it), held a place under the connection cap, and made a
    graceful stop exit 1 with a traceback (uvicorn's shutdown then sent a
    500 on a stream already closed)."""
    if len(method) + len(target) + len(b"  HTTP/1.1\r\n") > MAX_LINE_LENGTH:
        return True
    if len(headers) > MAX_NUM_HEADERS:
        return True
    return any(len(name) + len(value) + 4 > MAX_LINE_LENGTH for name, value in headers)


def _framing_refusal(version: str, headers: Any) -> _Refusal | None:
    """The refusal of a request head RFC 9112 says a server must refuse, or
    None. httptools takes `HTTP/2.0` (or any major version 2) in a request
    line, an HTTP/1.1 request without a Host and one with two: a front proxy
    that routes by the first Host while another reads the second is how one
    request turns into another's."""
    if version not in ("1.1", "1.0"):
        return _version_refused
    # httptools takes `gzip, chunked` and hands the app the gzip undecoded
    # (a body that was no gzip at all was stored); RFC 9112 says 501
    codings = [value for name, value in headers if name == b"transfer-encoding"]
    if any(value.strip(b" \t").lower() != b"chunked" for value in codings):
        return _coding_refused
    hosts = sum(1 for name, _ in headers if name == b"host")
    if hosts > 1 or (hosts == 0 and version == "1.1"):
        return _host_refused
    return None


def _declared_past_bound(headers: Any) -> bool:
    """A `Content-Length` past `BODY_MOST`: a body that will be cut."""
    for name, value in headers:
        if name == b"content-length" and value.strip().isdigit():
            return int(value.strip()) > BODY_MOST
    return False


def _has_body(headers: Any) -> bool:
    for name, value in headers:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


def with_request_deadline(
    http: str, seconds: float, cap: ConnectionCap | None = None
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol named `http` (auto|httptools|h11) with the
    bounds above: `seconds` for a request to arrive and for a client to
    take its answer; under httptools, `HEAD_MOST` and `BODY_MOST`; `cap`
    for the connections open at once."""
    base = import_from_string(HTTP_PROTOCOLS[http])
    counts_bytes = hasattr(base, "on_headers_complete")  # httptools' parser callbacks

    class RequestDeadline(base):  # type: ignore[misc, valid-type]
        app: Any  # uvicorn's: the ASGI app each new request is served with
        pipeline: deque[Any]  # uvicorn's (httptools): requests waiting their turn
        _deadline: asyncio.TimerHandle | None = None  # for the next request to arrive
        _stalled: asyncio.TimerHandle | None = None  # for the client to read again
        # the requests of this connection not answered whole yet, oldest
        # first: the one answered, then those pipelined behind it (httptools).
        # Answers end in request order, so the answered ones leave from the
        # left (`_pending`) and every look at it stops at its first entry: a
        # list filtered whole on each request head and each answer made a
        # megabyte of pipelined requests cost 40 s of CPU (hostileaudit)
        _unanswered: deque[Any]
        # bytes of the current request so far: of its head while `_in_head`,
        # else of its body and trailers
        _in_head = True
        _bytes = 0
        _refuse_after_response = False
        _head_refusal: _Refusal | None = None  # of the request whose head is in (httptools)
        # bytes the client sent that wait unparsed while PIPELINE_MOST
        # requests wait for their answers (httptools)
        _held = b""
        # the answer to a request refused behind requests still to be
        # answered (a WebSocket upgrade, a request the parser refused): sent
        # once they are, nothing more read meanwhile (httptools)
        _refused_behind: bytes | None = None
        # the request whose body the parser's refusal cut: never answered
        _cut: Any = None

        def connection_made(self, transport: Any) -> None:
            self._unanswered = deque()
            super().connection_made(transport)
            if counts_bytes:  # before any request (each cycle is handed `flow`)
                self.flow = _HoldingFlow(
                    transport, lambda: bool(self._held) or self._refused_behind is not None
                )
            if cap is not None and cap.full():
                cap.refused()
                transport.abort()  # its descriptor is free at once; nothing was read
                return
            self._watch()

        def data_received(self, data: bytes) -> None:
            if self._refused_behind is not None:
                return  # the connection closes once the answers before it are out
            if not counts_bytes:
                self._parse(data)
            elif self._held:
                self._held += data  # in flight when reading paused
            else:
                self._feed(data)

        def _feed(self, data: bytes) -> None:
            """Parse `data` a slice at a time while fewer than PIPELINE_MOST
            requests wait for answers; hold the rest unparsed, reading paused."""
            start = 0
            while start < len(data):
                taker = self.transport.get_protocol()
                if taker is not self:  # a WebSocket took over: the rest is its
                    taker.data_received(data[start:])
                    return
                if self.transport.is_closing() or self._refuse_after_response:
                    return  # closed, or to be once its answer is out: the rest is never read
                if self._refused_behind is not None:
                    return
                if len(self._pending()) > PIPELINE_MOST:
                    self._held = data[start:]
                    self.flow.pause_reading()
                    return
                end = start + (HEAD_SLICE if self._in_head else BODY_SLICE)
                self._parse(data[start:end])
                start = end

        def _parse(self, data: bytes) -> None:
            if counts_bytes:
                self._bytes += len(data)
            super().data_received(data)
            if self.transport.get_protocol() is not self:
                self._disarm()  # a WebSocket took over
            elif self._bytes > (HEAD_MOST if self._in_head else BODY_MOST):
                self._refuse()
            else:
                self._watch()

        # httptools' parser callbacks (h11 calls none: it parses one request at a time)
        def on_header(self, name: bytes, value: bytes) -> None:
            if self._in_head:
                super().on_header(name, value)
            # else a trailer field, after a chunked body: uvicorn added it to
            # the request's headers (`Authorization` sent after the body was
            # taken for the token), which RFC 9110 (6.5.1) forbids. It is
            # dropped; its bytes count towards BODY_MOST.

        def on_headers_complete(self) -> None:
            self._in_head, self._bytes = False, 0
            # a head that arrived whole in one read is measured here, as sent:
            # the request line ("GET /path HTTP/1.1\r\n"), each header line
            # ("Name: value\r\n") and the blank line; the line's method,
            # version and blank line were left out, 17 bytes (boundsaudit)
            line = len(self.parser.get_method()) + 1 + len(self.url) + len(" HTTP/1.1\r\n")
            size = line + sum(len(n) + len(v) + 4 for n, v in self.headers) + 2
            refusal = (
                _head_too_large
                if size > HEAD_MOST
                else _framing_refusal(self.parser.get_http_version(), self.headers)
            )
            # an upgrade uvicorn does not take (`Upgrade: h2c`): httptools ends
            # its message with its head and hands the rest back as the other
            # protocol, which uvicorn drops; the next read is parsed as HTTP
            # again, so a body in a later read ran as a request of its own
            # (protocoljourney). Refused with a body; without, closed after
            # its answer (what followed it in the same read was dropped)
            upgrade_elsewhere = self.parser.should_upgrade() and not self._should_upgrade()
            if refusal is None and upgrade_elsewhere and _has_body(self.headers):
                refusal = _upgrade_body_refused
            self._head_refusal = refusal
            previous = self.cycle  # still the one before, if this head makes none (an upgrade)
            if self.parser.get_http_version() == "1.0":
                # RFC 9110 10.1.1 and 15.2: an HTTP/1.0 request's 100-continue
                # is ignored, and no 1xx goes to an HTTP/1.0 client (uvicorn's
                # httptools protocol sent its 100 whatever the version; h11 not)
                self.expect_100_continue = False
            if refusal is not None:
                # uvicorn serves it with `self.app`, as its own 503 for
                # `limit_concurrency` does (not for an upgrade request: see
                # handle_websocket_upgrade)
                app, self.app = self.app, refusal
                try:
                    super().on_headers_complete()
                finally:
                    self.app = app
            else:
                super().on_headers_complete()
            pending = self._pending()
            cycle = self.cycle
            if cycle is not None and cycle is not previous and _declared_past_bound(self.headers):
                # its body will pass BODY_MOST and the connection be cut: the
                # answer says so (`Connection: close`), or a keep-alive client
                # sends its next request down the cut connection (fuzzjourney).
                # Only this request's own cycle: an upgrade makes none, and
                # closing the answer before it dropped the upgrade's 400 (review80)
                cycle.keep_alive = False
            if cycle is not None and cycle is not previous and upgrade_elsewhere:
                cycle.keep_alive = False
            # (an upgrade request makes no cycle: the WebSocket takes over, and
            # `cycle` is still the previous request's, already counted)
            counted = bool(pending) and pending[-1] is cycle
            if cycle is not None and not cycle.response_complete and not counted:
                pending.append(cycle)

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head, self._bytes = True, 0

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._refuse_after_response:
                self._close_refused()
                return
            if self._refused_behind is not None:
                waiting = any(cycle is not self._cut for cycle in self._pending())
                if not waiting and not self.transport.is_closing():
                    self.transport.write(self._refused_behind)
                    self.transport.close()
                    # a close waits for the unsent rest: the client must take it
                    # (review31: a client that never read held it for ever)
                    unsent = self.transport.get_write_buffer_size()
                    if unsent and self._stalled is None:
                        self._check_reading(unsent)
                return
            self._disarm()  # the next request's time starts now
            self._watch()
            # an answer whose unread tail stays below the mark that pauses
            # writing (64 KiB) never started the check below: closed at the
            # keep-alive or request deadline, the connection waited for ever
            # for the client to take it (and a graceful stop with it)
            unsent = self.transport.get_write_buffer_size()
            if unsent and self._stalled is None:
                self._check_reading(unsent)
            if self._held:
                # after this answer's send has returned, as a read would come
                self.loop.call_soon(self._release)

        def _release(self) -> None:
            """Parse held bytes once fewer requests wait; read again once
            none is held."""
            if not self._held or len(self._pending()) > PIPELINE_MOST:
                return
            held, self._held = self._held, b""
            self._feed(held)
            if not self._held and not self.transport.is_closing():
                self.flow.resume_reading()

        def handle_websocket_upgrade(self, *event: Any) -> None:
            if self._pending():
                # requests before it still wait for their answers: its 101
                # went out first, and their answers after it, into the
                # WebSocket's stream (review30). It is refused after them.
                self._refuse_behind(_upgrade_pipelined.raw)
                return
            refusal = self._head_refusal
            if refusal is not None:
                # uvicorn upgrades without serving `self.app`: a head over
                # 64 KiB, without a Host or with two, or of HTTP/2.0 was
                # switched to a WebSocket (101) where any other is refused
                self.transport.write(refusal.raw)
                self.transport.close()
                return
            # h11 passes the request event; httptools keeps the headers on self
            if _has_body(event[0].headers if event else self.headers):
                self.send_400_response("A WebSocket upgrade request carries no body.")
                return
            method = event[0].method if event else self.scope["method"].encode()
            target = event[0].target if event else self.url
            headers = self.headers if event else self.scope["headers"]
            if _over_websocket_limits(method, target, headers):
                self.transport.write(_upgrade_head_refused.raw)
                self.transport.close()
                return
            super().handle_websocket_upgrade(*event)

        def send_400_response(self, msg: str) -> None:
            """uvicorn (httptools) answers a request its parser refuses at
            once, and closes: behind a request still being answered, that
            answer was lost while its write committed, and its client read
            the 400 as the write's answer (httpsemaudit). The 400 waits for
            the answers before it, as a refused upgrade does, and carries
            the security headers, as every answer does."""
            if not counts_bytes:
                super().send_400_response(msg)  # h11's, one request at a time
                return
            answer = _Refusal(400, "Bad Request", msg.encode()).raw
            if self._answering():
                self._disarm()
                # a refusal in a body cuts its request, which will never be
                # whole: it waits in uvicorn's pipeline, and ran after the
                # answer before it, its own answer written after the 400
                # (review46); it is never started
                cut = self._cut = None if self._in_head else self.cycle
                self.pipeline = deque(p for p in self.pipeline if p[0] is not cut)
                self._refuse_behind(answer)
            else:
                self.transport.write(answer)
                self.transport.close()

        def _refuse_behind(self, answer: bytes) -> None:
            self._refused_behind = answer
            # through the flow control, which holds off uvicorn's resuming
            # after each answer (review31: 200 MB read and dropped)
            self.flow.pause_reading()

        def pause_writing(self) -> None:
            super().pause_writing()
            if self._stalled is None:
                self._check_reading(self.transport.get_write_buffer_size())

        def resume_writing(self) -> None:
            super().resume_writing()
            self._unstall()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            self._unstall()
            # uvicorn tells only the newest request that its client left; the
            # one answered with others pipelined behind it (an event stream,
            # any answer still being made) went on until its next write
            # failed with an ERROR
            for cycle in self._unanswered:
                if not cycle.response_complete:
                    cycle.disconnected = True
                    cycle.message_event.set()
            super().connection_lost(exc)

        def _pending(self) -> deque[Any]:
            """`_unanswered`, its answered requests at the left let go."""
            pending = self._unanswered
            while pending and pending[0].response_complete:
                pending.popleft()
            return pending

        def _earlier_unanswered(self) -> bool:
            """A request before the newest is still being answered."""
            # the first entry is unanswered (or there is none): the newest is last
            pending = self._pending()
            return bool(pending) and pending[0] is not self.cycle

        def _answering(self) -> bool:
            """A response to an earlier request is in progress. While a head
            arrives, `cycle` is still the previous request's; once it is in,
            `cycle` is the request over the bound, whose own answer is not
            one to wait for (the app may be waiting for its body)."""
            if self._in_head:
                return bool(self._pending())
            return self._earlier_unanswered()

        def _refuse(self) -> None:
            """A bound is passed: close, with a 431 for a head; after the
            response in progress, if any, reading nothing more meanwhile."""
            self._disarm()
            if self._answering():
                self._refuse_after_response = True
                self.transport.pause_reading()
            else:
                self._close_refused()

        def _close_refused(self) -> None:
            if not self.transport.is_closing():
                if self._in_head:
                    self.transport.write(_head_too_large.raw)
                self.transport.close()

        def _awaiting_request(self) -> bool:
            if self._earlier_unanswered():
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

        def _check_reading(self, unsent: int) -> None:
            """While writing is paused: every `seconds`, the client must have
            taken some of what waits for it (a slow link still does)."""

            def check() -> None:
                now_unsent = self.transport.get_write_buffer_size()
                if not now_unsent:
                    self._stalled = None  # all taken
                elif now_unsent >= unsent:
                    # abort: a close would wait for the buffer to drain,
                    # which is what the client does not let happen
                    self._stalled = None
                    self.transport.abort()
                else:
                    self._check_reading(now_unsent)

            self._stalled = self.loop.call_later(seconds, check)

        def _unstall(self) -> None:
            if self._stalled is not None:
                self._stalled.cancel()
                self._stalled = None

        def _expire(self) -> None:
            self._deadline = None
            if self.transport.get_protocol() is self and self._awaiting_request():
                self.transport.close()

    RequestDeadline.__name__ = RequestDeadline.__qualname__ = f"RequestDeadline{base.__name__}"
    return RequestDeadline
