"""A GraphQL subscriber that stops reading, on a link whose socket buffers
are full (slowconsumer): the server must still cut it.

docs/graphql.md ("Bounded resources") says a WebSocket client that stops
reading is cut by the keepalive (uvicorn pings every 20 s and closes with
1011 when no pong comes within 20 s), and docs/operations.md that a client
taking nothing of its answer while the server cannot write more is
disconnected. On loopback the kernel's buffers absorb megabytes and the
keepalive does cut such a client; where they are small (any real link, or
`SO_SNDBUF` here), the events the subscription sends fill the transport's
buffer, and the keepalive's ping waits for that buffer to drain before its
pong deadline starts: the socket, its subscriptions and their places under
the token's caps were held for as long as the client stayed connected.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
import struct
from collections.abc import AsyncIterator
from typing import Any

import uvicorn

from tests.conftest import Caller, Service
from tests.live_support import loopback_socket
from waypost.http.slow_clients import with_request_deadline
from waypost.live import LiveLimits, hub_for
from waypost.serving import _config

# the keepalive, as `serve` has it (20 s and 20 s) but quick
PING = 0.5
SMALL = 4096  # socket buffers of a slow link, both ends


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


@contextlib.asynccontextmanager
async def small_buffered(
    service: Service, ping: float = PING
) -> AsyncIterator[tuple[int, uvicorn.Server]]:
    """The service's app served with `serve`'s uvicorn configuration, a quick
    keepalive, and a listening socket whose small send buffer every accepted
    connection inherits (Linux)."""
    hub_for(service.rt, LiveLimits(poll_seconds=0.1))
    sock = loopback_socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL)
    port = sock.getsockname()[1]
    config = _config(service.app, "127.0.0.1", port, with_request_deadline("httptools", 30.0))
    config.lifespan = "off"
    config.ws_ping_interval = config.ws_ping_timeout = ping
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield port, server
    finally:
        if service.rt.hub is not None:
            service.rt.hub.stop()
        server.should_exit = True
        await asyncio.wait_for(task, 30)
        sock.close()


async def _many_events(human: Caller) -> None:
    """Some 300 KB of events: far more than the small buffers hold."""
    for n in range(150):
        r = await human.post(
            "/api/v1/projects/demo/tasks", {"title": f"task {n}", "description": "d" * 1500}
        )
        assert r.status_code == 201, r.text


def begin_stop(service: Service, server: uvicorn.Server) -> None:
    """Stop as `serve` does: the hub first (its subscriptions end), then the server."""
    assert service.rt.hub is not None
    service.rt.hub.stop()
    server.should_exit = True


async def _buffer_full(server: uvicorn.Server) -> None:
    async with asyncio.timeout(10):
        while not any(
            c.transport.get_write_buffer_size() > 16 * 1024 for c in server.server_state.connections
        ):
            await asyncio.sleep(0.05)


def _frame(payload: dict[str, Any]) -> bytes:
    """A masked text frame, as a client sends it."""
    data = json.dumps(payload).encode()
    mask = os.urandom(4)
    size = len(data)
    length = bytes([0x80 | size]) if size < 126 else b"\xfe" + struct.pack("!H", size)
    return b"\x81" + length + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def _never_reading_subscriber(port: int, token: str) -> socket.socket:
    """A raw graphql-transport-ws client that subscribes to the project's
    whole log and then reads nothing more (not even the keepalive's ping)."""
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL)
    client.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    client.sendall(
        f"GET /graphql HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        "Sec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += client.recv(1)
    assert b" 101 " in head, head
    init = {"type": "connection_init", "payload": {"Authorization": f"Bearer {token}"}}
    client.sendall(_frame(init))
    query = 'subscription { projectEvents(projectId: "demo", after: 0) { sequence type data } }'
    client.sendall(_frame({"type": "subscribe", "id": "1", "payload": {"query": query}}))
    return client


async def test_a_subscriber_that_stops_reading_is_cut_when_its_buffers_are_full(
    service: Service, human: Caller, project: str
) -> None:
    await _many_events(human)
    async with small_buffered(service) as (port, server):
        hub = hub_for(service.rt)
        # blocking socket calls: in a thread, the server runs on this loop
        client = await asyncio.to_thread(_never_reading_subscriber, port, human.token)
        try:
            # the subscription runs, and what it sent fills the server's buffer
            await _buffer_full(server)
            assert hub.open_count() == 1 and hub.socket_count() == 1
            # ping and pong deadline are one second; twenty pass with room
            async with asyncio.timeout(20):
                while server.server_state.connections or hub.open_count() or hub.socket_count():
                    await asyncio.sleep(0.1)
        finally:
            client.close()


async def test_a_stop_ends_a_subscriber_that_stops_reading(
    service: Service, human: Caller, project: str
) -> None:
    """docs/operations.md ("Stopping"): a stop ends open subscriptions. Its
    1012 close waited for ever behind such a subscriber (slowconsumer: the
    stop hung at "Waiting for connections to close", and a forced quit then
    logged an ERROR). The keepalive is far off here: the stop alone ends it."""
    await _many_events(human)
    async with small_buffered(service, ping=3600) as (port, server):
        client = await asyncio.to_thread(_never_reading_subscriber, port, human.token)
        try:
            await _buffer_full(server)
            begin_stop(service, server)
            async with asyncio.timeout(20):  # the drain's 5 s, with room
                while server.server_state.connections:
                    await asyncio.sleep(0.1)
        finally:
            client.close()
