"""`waypost serve`: one process, one event loop, one Runtime, two listeners.

The public app and the private lifecycle app each get their own uvicorn
server (their own socket, their own HTTP settings), but both run on the same
loop over the same `Runtime`, so there is one writer on the database file.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import resource
import signal
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.lifespan.on import LifespanOn

from waypost.http.expect_continue import CloseUnreadContinue
from waypost.http.slow_clients import ConnectionCap, with_request_deadline
from waypost.http.starting import StartingAnswers, lifecycle_answer, public_answer
from waypost.http.websocket_closing import ClosingWebSocket
from waypost.observe.logs import serving_as
from waypost.runtime import open_runtime
from waypost.settings import Settings
from waypost.storage.db import connections_left_open

log = logging.getLogger("waypost")
# the listeners' names, in the order `serve` binds them (the log names each)
LISTENERS = ("public", "lifecycle")

LIFESPAN_SHUTDOWN_SECONDS = 5
# after a forced quit, how long requests whose connections were closed get to end
FORCED_REQUEST_SECONDS = 1.0
# The young generation's threshold while serving (700 by default in 3.11-3.12).
# A request allocates some thousands of container objects that die young;
# collected every 700 allocations, they were found and walked again and again.
GC_YOUNG_THRESHOLD = 10_000


# Descriptors kept out of the connection caps' default: the database's
# connections (each with its -wal and -shm), the listening sockets, the
# event loop's own, standard streams, outbound HTTP (reranker, webhook,
# TokenReview), and room to spare.
RESERVED_FILES = 128
# The lifecycle listener's own cap: a private adapter's few callers, kept
# apart so that a flood of the public port never locks it out (nor the
# public listener's /healthz out of its own share). Under an open-file limit
# too low for it (below 896) it takes a third of what the reserve leaves.
LIFECYCLE_CONNECTIONS = 256
# Neither listener's cap goes below these, however low the limit: a
# listener that holds no connection serves nobody.
PUBLIC_CONNECTIONS_LEAST = 16
LIFECYCLE_CONNECTIONS_LEAST = 8
# The public listener's default cap at most, whatever the open-file limit
# (a container's hard limit of 1,048,576 would leave memory as the bound:
# event streams and WebSockets are capped at 1,000 anyway).
PUBLIC_CONNECTIONS_MOST = 10_000
# The soft limit asked for where the hard one is unlimited, and the one
# asked for next when that is refused: macOS takes no more than 10,240
# (OPEN_MAX) whatever the hard limit says, as Go's runtime knows.
UNLIMITED_TARGET = 65_536
OPEN_MAX_FALLBACK = 10_240


def open_file_limit() -> int:
    """The process's open-file limit, its soft value first raised to the
    hard one (Go's runtime does the same at start): the usual soft 1,024
    left `serve` some 900 connections on hosts that allow far more."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = UNLIMITED_TARGET if hard == resource.RLIM_INFINITY else hard
    if soft == resource.RLIM_INFINITY:
        return soft
    for wanted in (target, min(target, OPEN_MAX_FALLBACK)):
        if soft >= wanted:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError):  # past what the kernel allows: try less
            continue
        soft = wanted
        break
    return soft


@dataclass(frozen=True)
class Room:
    """What the open-file limit leaves each listener (`limit` None: no limit).

    The lifecycle listener's share comes first: LIFECYCLE_CONNECTIONS, or a
    third of what the reserve leaves under a lower limit. The public
    listener may take the rest, and never less than its least: the most
    `--max-connections` may ask, and the default too up to its cap of
    PUBLIC_CONNECTIONS_MOST, so a default `serve` never starts with a cap
    that the same value, asked for, would be refused (under a hard limit of
    300 the default was 16 while `--max-connections 16` was refused, and the
    lifecycle listener's 256 could take every descriptor)."""

    limit: int | None
    public: int
    lifecycle: int


def connections_room() -> Room:
    limit = open_file_limit()
    if limit == resource.RLIM_INFINITY:
        return Room(None, PUBLIC_CONNECTIONS_MOST, LIFECYCLE_CONNECTIONS)
    left = limit - RESERVED_FILES
    lifecycle = min(LIFECYCLE_CONNECTIONS, max(LIFECYCLE_CONNECTIONS_LEAST, left // 3))
    return Room(limit, max(PUBLIC_CONNECTIONS_LEAST, left - lifecycle), lifecycle)


def max_connections_refusal(wanted: int) -> str | None:
    """Why `--max-connections wanted` cannot be kept, if it cannot: past the
    room the open-file limit leaves, a flood of the public port took every
    descriptor, and `/healthz` and the lifecycle listener failed with it."""
    room = connections_room()
    if room.limit is None or wanted <= room.public:
        return None
    return (
        f"--max-connections {wanted}: the open-file limit of {room.limit:,} (`ulimit -Hn`)"
        f" leaves room for at most {room.public:,} public connections beside"
        f" {RESERVED_FILES} descriptors for the database, the log and outbound HTTP and the"
        f" lifecycle listener's {room.lifecycle}; lower --max-connections or raise the limit"
    )


def connection_caps(settings: Settings) -> tuple[ConnectionCap, ConnectionCap]:
    """(public, lifecycle): each listener holds its own connections."""
    room = connections_room()
    public = min(PUBLIC_CONNECTIONS_MOST, room.public)
    if settings.max_connections is not None:
        public = settings.max_connections  # checked against the room by `serve`
    return ConnectionCap(public, "public"), ConnectionCap(room.lifecycle, "lifecycle")


@contextlib.contextmanager
def settled_heap() -> Iterator[None]:
    """The garbage collector set for a long-running server, restored after.

    Everything alive once both apps are built (modules, the GraphQL schema,
    the MCP server, the runtime) lives as long as the process: frozen, no
    collection walks it again (a full one walked all of it, a pause of tens
    of milliseconds in some request). Measured side by side under the store
    bench's 16 clients (docs/architecture.md): the same creates per second,
    the same memory, and a p99.9 of 28 ms where it was 87-95 ms.
    """
    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signals to `serve_forever`.

    uvicorn's own handling installs one handler per server (the second would
    replace the first) and re-raises the signal once it has stopped; with two
    servers in one process, one handler stops both instead.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _finish_lifespan(server: _Server) -> None:
    """The lifespan's shutdown, when a forced quit made uvicorn skip it: the
    lifespan task was then cancelled at exit and logged a traceback as an
    ERROR, for no fault. Not again when uvicorn had already begun it (the
    second signal came during it), and never holding the exit for long."""
    lifespan = server.lifespan
    if not (server.force_exit and server.started) or not isinstance(lifespan, LifespanOn):
        return
    if lifespan.shutdown_event.is_set():
        return
    try:
        async with asyncio.timeout(LIFESPAN_SHUTDOWN_SECONDS):  # (cancelling.wait_at_most)
            await lifespan.shutdown()
    except TimeoutError:
        log.warning("the application's shutdown took over %d s; exiting without it",
                    LIFESPAN_SHUTDOWN_SECONDS)  # fmt: skip


async def _end_forced_requests(server: _Server) -> None:
    """After a forced quit uvicorn leaves requests running (one whose body is
    still arriving, say), and asyncio cancels them when the loop closes:
    uvicorn logged each cancellation as an ERROR with a traceback and
    answered 500. Their connections are closed instead, so that a request
    reading its body hears that the client has gone (a quiet end), and they
    get a moment to end. Called once the store has closed: the writes queued
    for it were answered (503) over connections still open."""
    if not server.force_exit:
        return
    for connection in list(server.server_state.connections):
        transport = getattr(connection, "transport", None)
        if transport is not None:
            transport.close()
    running = list(server.server_state.tasks)
    if running:
        await asyncio.wait(running, timeout=FORCED_REQUEST_SECONDS)


def _config(app: Any, host: str, port: int, http: type[asyncio.Protocol]) -> uvicorn.Config:
    # log_config=None: uvicorn's loggers propagate to the root handler that
    # `serve` set up (text or JSON); its own access log stays off, the
    # request lines come from waypost.observe
    # ws_max_size: a WebSocket frame of 1 MiB at most (uvicorn's default is
    # 16 MiB); a subscribe frame over the 64 KiB of a GraphQL body is refused
    # for its operation (schema/websocket.py), a larger one closes the socket.
    # ws_per_message_deflate off: compression is per socket, so each
    # subscriber's copy of each event was deflated on its own (about 6 µs a
    # message, an eighth of a delivery's cost), on the core the writers need
    # ws: uvicorn's default WebSocket protocol, whose close cannot wait for
    # ever behind a client that reads nothing (http/websocket_closing.py)
    # reset_contextvars: each request starts in a context of its own; on
    # asyncio's loop a request could start in the context of the one before
    # it on the connection (CPython issue 140947), with its pinned clock
    # CloseUnreadContinue: an answer given before an `Expect: 100-continue`
    # body was asked for closes the connection (http/expect_continue.py)
    return uvicorn.Config(
        CloseUnreadContinue(app), host=host, port=port, http=http, log_level="info",
        access_log=False,
        log_config=None, ws=ClosingWebSocket, ws_max_size=1024 * 1024,
        ws_per_message_deflate=False,
        reset_contextvars=True,
    )  # fmt: skip


def loop_factory(loop: str = "auto") -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop `serve` runs on: uvloop when installed ("auto"), else asyncio's."""
    if loop in ("auto", "uvloop"):
        try:
            import uvloop
        except ImportError:
            if loop == "uvloop":
                raise
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


# How long what a connection sent may stay unacknowledged before the kernel
# drops it (TCP_USER_TIMEOUT). A client gone without a word (a laptop shut, a
# link down: no FIN, no RST) from a quiet event stream was noticed only when
# TCP gave up retransmitting its keep-alive comments, 15.5 minutes on, and
# held its place under the token's 16 streams meanwhile (slowconsumer: the
# token could open no stream). A client that is there acknowledges within
# milliseconds; one whose receive window stays shut that long (reading
# nothing) is dropped too, which is why the bound is never below the
# request-read timeout (`--request-read-timeout`: how long a client that
# stops reading is given; review76).
UNACKED_MS = 60_000


class CannotListen(Exception):
    """A listener's address cannot be bound (busy, not local, not resolvable)."""


def bind(host: str, port: int, read_timeout: float = 0.0) -> list[socket.socket]:
    """Listening sockets for every address `host` resolves to, as asyncio's
    `create_server` (uvicorn's own binding) would make them; a connection's
    unacknowledged data is bounded at `UNACKED_MS` or `read_timeout`
    (seconds), the longer."""
    try:
        # "" is every interface, as for asyncio's create_server (None here)
        found = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, UnicodeError) as error:
        raise CannotListen(f"{host}:{port}: {error}") from error
    addresses = list(dict.fromkeys(found))
    # port 0 on several addresses (a blank --host: 0.0.0.0 and ::) is one
    # port for all, the one the first was given (each had its own, and the
    # `listening on` lines named two); taken on another address, try again
    tries = 10 if port == 0 and len(addresses) > 1 else 1
    for attempt in range(tries):
        try:
            return _listen_on(addresses, max(UNACKED_MS, round(read_timeout * 1000)))
        except OSError as error:
            if error.errno == errno.EADDRINUSE and attempt < tries - 1:
                continue
            raise CannotListen(f"{host}:{port}: {error.strerror or error}") from error
    raise AssertionError("unreachable")  # the last try returns or raises


def _listen_on(addresses: list[tuple[Any, ...]], unacked_ms: int) -> list[socket.socket]:
    sockets: list[socket.socket] = []
    chosen = 0
    try:
        for family, kind, proto, _, address in addresses:
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if hasattr(socket, "TCP_USER_TIMEOUT"):  # Linux; each accepted socket inherits it
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, unacked_ms)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address[0], chosen, *address[2:]) if chosen else address)
            chosen = chosen or sock.getsockname()[1]
            sock.listen(2048)  # uvicorn's default backlog
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _announce(name: str, sockets: list[socket.socket]) -> None:
    for sock in sockets:
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        log.info("listening on http://%s:%d (%s)", shown, port, name)


def run(settings: Settings, loop: str = "auto", http: str = "auto") -> None:
    """Serve until SIGINT/SIGTERM. `loop`: auto|uvloop|asyncio; `http`:
    auto|httptools|h11 (auto takes httptools when installed, as uvicorn does)."""
    with asyncio.Runner(loop_factory=loop_factory(loop)) as runner:
        runner.run(serve_forever(settings, http))


async def serve_forever(settings: Settings, http: str = "auto") -> None:
    # Both addresses are bound before the database opens: a busy or foreign
    # address is one clear refusal (CannotListen), not a traceback printed
    # after the admin token.
    listeners = [bind(settings.host, settings.port, settings.request_read_timeout)]
    try:
        if settings.lifecycle_port:
            listeners.append(
                bind(
                    settings.lifecycle_host, settings.lifecycle_port, settings.request_read_timeout
                )
            )
        await _serve(settings, http, listeners)
    finally:
        for sockets in listeners:
            for sock in sockets:
                sock.close()


def stop_signals() -> tuple[signal.Signals, ...]:
    """What stops `serve` with its drain. SIGHUP too: the terminal or SSH
    session that ran `serve` closing sent it, and Python's default killed the
    process (exit 129) with its requests unanswered and nothing logged
    (logaudit); but not when it is ignored as `serve` starts, as `nohup` and
    some process managers leave it so that a closing terminal changes
    nothing (a handler of ours took that back: review62)."""
    hang_up = () if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN else (signal.SIGHUP,)
    return (signal.SIGINT, signal.SIGTERM, *hang_up)


async def _serve(settings: Settings, http: str, listeners: list[list[socket.socket]]) -> None:
    servers: list[_Server] = []
    # a signal while the store opens (a migration may take seconds) is
    # honoured once it is open: Python's own handlers killed the process
    # there (-15) or printed "Aborted!" (exit 1), a migration cut short
    early: list[signal.Signals] = []
    loop = asyncio.get_running_loop()
    signals = stop_signals()
    for sig in signals:
        loop.add_signal_handler(sig, _stop_once_open, sig, early)
    # while the store opens, the listeners answer 503 "starting" (http/starting.py)
    starting = StartingAnswers()
    try:
        answers = (public_answer, lifecycle_answer)
        for sockets, answer, cap in zip(
            listeners, answers, connection_caps(settings), strict=False
        ):
            starting.start(sockets, answer, cap.most, settings.request_read_timeout)
        await _serve_runtime(settings, http, listeners, servers, early, starting, signals)
        if not connections_left_open():  # else cli.py says it exits without closing it
            log.info("stopped: the database is closed")
    finally:
        starting.close()
        # once the store has closed (answering what was queued for it, 503)
        for server in servers:
            await _end_forced_requests(server)
        # only now: a signal while the store closed (the writer finishing its
        # batch, up to the busy timeout after a forced quit) met Python's own
        # handlers, which killed the process (-15) or raised through the
        # queued write's request (a 500 and a traceback)
        loop = asyncio.get_running_loop()
        for sig in signals:
            loop.remove_signal_handler(sig)


def _stop_once_open(sig: signal.Signals, early: list[signal.Signals]) -> None:
    log.info("%s: stopping once the database is open", sig.name)
    early.append(sig)


def _already_stopping(sig: signal.Signals) -> None:
    log.info("%s: already stopping (the database is closing)", sig.name)


def _import_apps() -> None:
    import waypost.app
    import waypost.lifecycle_http.app
    import waypost.lifecycle_http.compose  # noqa: F401


async def _serve_runtime(
    settings: Settings,
    http: str,
    listeners: list[list[socket.socket]],
    servers: list[_Server],
    early: list[signal.Signals],
    starting: StartingAnswers,
    signals: tuple[signal.Signals, ...],
) -> None:
    """Open the runtime and serve its apps; `servers` is filled with the
    uvicorn servers as they are made (the caller ends their requests after a
    forced quit, once the runtime has closed). A signal in `early` came
    while it opened: it closes again, serving nothing. `starting` answers
    until the runtime is open. `signals` stop it (`stop_signals`)."""
    # Imported on a thread: importing the apps (the GraphQL schema's build
    # among them) takes 1.7 s, and on the event loop it held the starting
    # answers back, a probe right after the listeners bound waiting that long
    # for its 503 (memojourney)
    await asyncio.to_thread(_import_apps)
    from waypost.app import create_app
    from waypost.lifecycle_http.app import create_lifecycle_app
    from waypost.lifecycle_http.compose import lifecycle_verifier, start_delivery

    async with open_runtime(settings) as rt:
        starting.stop()
        if early:
            return
        await start_delivery(rt, settings.lifecycle, bool(settings.lifecycle_port))
        caps = connection_caps(settings)
        deadline = settings.request_read_timeout
        public = with_request_deadline(http, deadline, caps[0])
        servers.append(_Server(_config(create_app(rt), settings.host, settings.port, public)))
        if settings.lifecycle_port:
            lifecycle = create_lifecycle_app(rt, await lifecycle_verifier(rt, settings.lifecycle))
            private = with_request_deadline(http, deadline, caps[1])
            port = settings.lifecycle_port
            servers.append(_Server(_config(lifecycle, settings.lifecycle_host, port, private)))
        for cap, server in zip(caps, servers, strict=False):
            cap.server = server.server_state
        loop = asyncio.get_running_loop()

        received: set[signal.Signals] = set()

        def stop(sig: signal.Signals) -> None:
            if not any(server.should_exit for server in servers):
                log.info("%s: stopping (no new connections; the requests under way finish)",
                         sig.name)  # fmt: skip
            elif sig == signal.SIGINT and not all(server.force_exit for server in servers):
                # "again" only when it is: a first SIGINT after a SIGTERM
                # forces too, and was logged "SIGINT again" (operatorjourney)
                log.info("%s%s: a forced quit (open connections are not waited for)",
                         sig.name, " again" if sig in received else "")  # fmt: skip
            received.add(sig)
            rt.begin_stop()  # ends open streams and MCP sessions, which would hold up the exit
            for server in servers:
                # a second SIGINT while stopping: stop waiting for open
                # connections; a later SIGTERM does not take that back
                server.force_exit |= server.should_exit and sig == signal.SIGINT
                server.should_exit = True

        for sig in signals:
            loop.add_signal_handler(sig, stop, sig)
        for sig in early:  # came while the apps were made: they stop as they start
            stop(sig)
        for name, sockets in zip(LISTENERS, listeners, strict=False):
            _announce(name, sockets)
        if not settings.lifecycle_port:
            log.info("no lifecycle listener (--lifecycle-port 0)")
        with settled_heap():
            tasks = [
                asyncio.create_task(serving_as(name, server.serve(sockets=sockets)))
                for name, (server, sockets) in zip(
                    LISTENERS, zip(servers, listeners, strict=True), strict=False
                )
            ]
            try:
                # one listener ending (stopped, or failed to bind) ends the other
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                # as a signal stops them: open streams, subscriptions and MCP
                # sessions end rather than hold the other listener's exit
                rt.begin_stop()
                for server in servers:
                    server.should_exit = True
                await asyncio.gather(*tasks, return_exceptions=True)
                for server in servers:
                    await _finish_lifespan(server)
                for task in done:
                    task.result()  # a startup failure exits non-zero
            finally:
                # the listeners are done; the store closes next (`_serve`
                # removes these once it has)
                for sig in signals:
                    loop.add_signal_handler(sig, _already_stopping, sig)
