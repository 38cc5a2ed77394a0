"""A WebSocket closed with bytes still unsent (http/websocket_closing.py):
a client that does read gets all of them, its close frame last; only one
that reads nothing is dropped once they have had their 5 seconds."""

from __future__ import annotations

import asyncio
import json
import socket
import struct

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.conftest import Caller, Service
from tests.test_slow_subscriber import (
    _buffer_full,
    _many_events,
    _never_reading_subscriber,
    begin_stop,
    small_buffered,
)


def _close_code(client: socket.socket) -> int | None:
    """Reads the server's frames to the end of the connection: the close
    frame's code, or None when the connection ended without one."""
    client.settimeout(20)
    data = b""
    try:
        while chunk := client.recv(65536):
            data += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    at = 0
    while at + 2 <= len(data):
        opcode, size = data[at] & 0x0F, data[at + 1] & 0x7F
        at += 2
        if size == 126:
            (size,) = struct.unpack("!H", data[at : at + 2])
            at += 2
        elif size == 127:
            (size,) = struct.unpack("!Q", data[at : at + 8])
            at += 8
        payload = data[at : at + size]
        if len(payload) < size:
            return None  # cut short
        at += size
        if opcode == 0x8:
            return int(struct.unpack("!H", payload[:2])[0])
    return None


async def test_a_client_that_reads_gets_its_close_frame_behind_a_full_buffer(
    service: Service, human: Caller, project: str
) -> None:
    """docs/operations.md ("Stopping"): a stop closes WebSockets with 1012.
    Bytes held for the client when the stop closes the socket still go, the
    close frame after them, to a client that reads them."""
    await _many_events(human)
    async with small_buffered(service, ping=3600) as (port, server):
        client = await asyncio.to_thread(_never_reading_subscriber, port, human.token)
        try:
            await _buffer_full(server)
            begin_stop(service, server)
            # the stop has closed the socket with its buffer still full
            async with asyncio.timeout(10):
                while not all(c.transport.is_closing() for c in server.server_state.connections):
                    await asyncio.sleep(0.01)
            assert any(c.transport.get_write_buffer_size() for c in server.server_state.connections)
            # and now the client reads
            assert await asyncio.to_thread(_close_code, client) == 1012
        finally:
            client.close()


async def test_a_stop_sends_a_subscriptions_complete_before_the_sockets_1012(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/operations.md ("Stopping"): a subscription's socket gets its
    `complete` and then close code 1012. uvicorn sends 1012 on every socket
    at its stop's first tick (0.1 s); under load a subscription had not yet
    ended by then, and its client heard the close without the `complete`
    (shutdownjourney, 4 of 6 subscriptions). Here the hub ends the streams
    0.4 s after the stop begins, as a busy event loop would."""
    async with small_buffered(service, ping=3600) as (port, server):
        url = f"ws://127.0.0.1:{port}/graphql"
        async with connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
            token = {"Authorization": f"Bearer {human.token}"}
            await ws.send(json.dumps({"type": "connection_init", "payload": token}))
            assert json.loads(await ws.recv())["type"] == "connection_ack"
            query = 'subscription { projectEvents(projectId: "demo", after: 0) { type } }'
            await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}))
            assert json.loads(await ws.recv())["type"] == "next"
            hub = service.rt.hub
            assert hub is not None
            stop_streams = hub.stop
            loop = asyncio.get_running_loop()
            monkeypatch.setattr(hub, "stop", lambda: loop.call_later(0.4, stop_streams))
            service.rt.begin_stop()  # as `serve` stops: the runtime, then the server
            server.should_exit = True
            heard: list[str] = []
            with pytest.raises(ConnectionClosed):
                while True:
                    heard.append(json.loads(await asyncio.wait_for(ws.recv(), 10))["type"])
            assert heard == ["complete"]
            assert ws.close_code == 1012, (ws.close_code, ws.close_reason)


@pytest.mark.parametrize("acknowledged", [True, False])
async def test_a_stop_closes_a_socket_with_no_subscription_at_once(
    service: Service, human: Caller, project: str, acknowledged: bool
) -> None:
    """The app closes a socket 1012 itself at a stop (schema/websocket.py
    `_close_at_stop`): with no operation to wait for, at once, not after
    uvicorn's STOP_GRACE_SECONDS; one that has sent no connection_init yet
    too, which waited out the grace (review85)."""
    async with small_buffered(service, ping=3600) as (port, server):
        url = f"ws://127.0.0.1:{port}/graphql"
        async with connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
            if acknowledged:
                token = {"Authorization": f"Bearer {human.token}"}
                await ws.send(json.dumps({"type": "connection_init", "payload": token}))
                assert json.loads(await ws.recv())["type"] == "connection_ack"
            loop = asyncio.get_running_loop()
            began = loop.time()
            service.rt.begin_stop()
            server.should_exit = True
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            assert ws.close_code == 1012, (ws.close_code, ws.close_reason)
            assert loop.time() - began < 0.5
