"""What a long-running process holds open for its clients, in its metrics:
event-hub listeners, GraphQL WebSockets and MCP sessions (a soak could only
count socket descriptors to see them come and go)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tests.conftest import Caller, Service
from tests.live_support import graphql_ws, running
from tests.mcp_support import MCP_HEADERS, open_session


def gauge(service: Service, name: str) -> float:
    value = service.rt.metrics.registry.get_sample_value(name)
    assert value is not None, name
    return value


async def settles(read: Callable[[], float], expected: float) -> None:
    """Waits until `read()` is `expected` (a socket is counted out once the
    server has seen it close)."""
    for _ in range(200):
        if read() == expected:
            return
        await asyncio.sleep(0.02)
    assert read() == expected


async def test_listeners_and_websockets_are_gauged_while_open(
    service: Service, human: Caller, project: str
) -> None:
    assert gauge(service, "waypost_live_listeners") == 0
    assert gauge(service, "waypost_graphql_websockets") == 0
    async with running(service) as base, graphql_ws(base, human.token) as client:
        await settles(lambda: gauge(service, "waypost_graphql_websockets"), 1)
        await client.subscribe('subscription { projectEvents(projectId: "demo") { sequence } }')
        await settles(lambda: gauge(service, "waypost_live_listeners"), 1)
    await settles(lambda: gauge(service, "waypost_live_listeners"), 0)
    await settles(lambda: gauge(service, "waypost_graphql_websockets"), 0)


async def test_mcp_sessions_are_gauged_until_deleted(service: Service, human: Caller) -> None:
    assert gauge(service, "waypost_mcp_sessions") == 0
    session_id = await open_session(human)
    assert gauge(service, "waypost_mcp_sessions") == 1
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    r = await human.client.delete("/mcp", headers=headers)
    assert r.status_code == 200, r.text
    assert gauge(service, "waypost_mcp_sessions") == 0
