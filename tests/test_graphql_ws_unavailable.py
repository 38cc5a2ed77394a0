"""A GraphQL WebSocket while the service cannot answer for a moment (its
clock file unreadable, as a simulation rewrites it; a busy store answers the
same `Unavailable`): not a bad credential. A `connection_init` then is closed
1013 ("try again later"), never 4401 (which tells a client to get another
token); a `subscribe` on an acknowledged socket gets its own `unavailable`
error and the socket stays open (schema/websocket.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.conftest import Caller, Service
from tests.live_support import graphql_ws, running
from waypost.clock import FileClock

EVENTS = """subscription ($after: Int) {
  projectEvents(projectId: "demo", after: $after) { sequence type } }"""


async def test_a_subscribe_while_the_service_cannot_answer_is_unavailable_and_the_socket_stays(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    own_clock = service.rt.clock
    unreadable = FileClock(tmp_path / "no-clock-yet")
    async with running(service) as base, graphql_ws(base, human.token) as client:
        service.rt.clock = unreadable
        try:
            refused = await client.subscribe(EVENTS, {"after": 0})
            answer = await client.receive()
        finally:
            service.rt.clock = own_clock
        assert (answer["id"], answer["type"]) == (refused, "error"), answer
        [error] = answer["payload"]
        assert error["extensions"]["code"] == "unavailable", error
        # the socket was not closed: the next subscribe runs
        op = await client.subscribe(EVENTS, {"after": 0})
        first = await client.receive()
        assert (first["id"], first["type"]) == (op, "next"), first
        assert first["payload"]["data"]["projectEvents"]["type"] == "project.created"


async def test_a_connection_init_while_the_service_cannot_answer_is_closed_1013(
    service: Service, human: Caller, tmp_path: Path
) -> None:
    own_clock = service.rt.clock
    async with running(service) as base:
        url = base.replace("http://", "ws://") + "/graphql"
        async with connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
            service.rt.clock = FileClock(tmp_path / "no-clock-yet")
            try:
                init = {"type": "connection_init",
                        "payload": {"Authorization": f"Bearer {human.token}"}}  # fmt: skip
                await ws.send(json.dumps(init))
                with pytest.raises(ConnectionClosed) as closed:
                    await asyncio.wait_for(ws.recv(), 10)
            finally:
                service.rt.clock = own_clock
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1013, closed.value.rcvd
