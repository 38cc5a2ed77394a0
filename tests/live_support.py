"""A real server for live-update tests, an SSE reader and a graphql-transport-ws
client: uvicorn on a free loopback port in the test's event loop, serving the
app over the test's runtime (so the clock and the hub's limits are the test's)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from websockets.asyncio.client import ClientConnection, connect

from tests.conftest import Service
from waypost.live import LiveLimits, hub_for

QUICK = LiveLimits(
    per_token=3, total=5, window=20, poll_seconds=0.1, keepalive_seconds=0.5, recheck_seconds=0.3
)


def loopback_socket() -> socket.socket:
    """A socket bound to a free loopback port, handed to uvicorn as it is: a
    port picked, closed and bound again later may be taken in between by
    another worker's server."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


class _Server(uvicorn.Server):
    """Leaves the test process's signals alone (uvicorn would trap SIGTERM/SIGINT)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def running(service: Service, limits: LiveLimits = QUICK) -> AsyncIterator[str]:
    """The service's app on a real socket; yields its base URL."""
    hub_for(service.rt, limits)
    sock = loopback_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        service.app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        if service.rt.hub is not None:
            service.rt.hub.stop()  # as `serve` does on SIGTERM: streams end
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        sock.close()


@dataclass
class SseEvent:
    id: str | None = None
    event: str | None = None
    data: str = ""
    comments: list[str] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.data)


async def sse_events(response: httpx.Response) -> AsyncIterator[SseEvent]:
    """Parse a text/event-stream; comment-only blocks come out as events with
    `comments` and no data."""
    current = SseEvent()
    async for line in response.aiter_lines():
        if line == "":
            yield current
            current = SseEvent()
        elif line.startswith(":"):
            current.comments.append(line[1:].strip())
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                current.data = value if not current.data else current.data + "\n" + value
            elif name in ("id", "event"):
                setattr(current, name, value)


async def next_data_event(events: AsyncIterator[SseEvent], timeout: float = 10) -> SseEvent:
    while True:
        event = await asyncio.wait_for(anext(events), timeout)
        if event.data:
            return event


class GraphQLWS:
    """A minimal graphql-transport-ws client over the `websockets` library."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._ids = 0

    async def subscribe(self, query: str, variables: dict[str, Any] | None = None) -> str:
        self._ids += 1
        op = str(self._ids)
        payload = {"query": query, "variables": variables or {}}
        await self.ws.send(json.dumps({"id": op, "type": "subscribe", "payload": payload}))
        return op

    async def receive(self, timeout: float = 10) -> dict[str, Any]:
        while True:
            message: dict[str, Any] = json.loads(await asyncio.wait_for(self.ws.recv(), timeout))
            if message["type"] == "ping":
                await self.ws.send(json.dumps({"type": "pong"}))
                continue
            return message


@contextlib.asynccontextmanager
async def graphql_ws(base_url: str, token: str) -> AsyncIterator[GraphQLWS]:
    url = base_url.replace("http://", "ws://") + "/graphql"
    async with connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
        await ws.send(
            json.dumps({"type": "connection_init", "payload": {"Authorization": f"Bearer {token}"}})
        )
        ack = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert ack["type"] == "connection_ack", ack
        yield GraphQLWS(ws)
