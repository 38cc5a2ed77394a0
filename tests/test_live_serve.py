"""A real `waypost serve`: an open event stream and a subscription end when
the server is told to stop, and the process exits promptly (nothing holds
the shutdown up)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.serve_support import START, serve, start

pytestmark = pytest.mark.slow


async def test_streams_end_and_the_server_exits_on_sigterm(tmp_path: Path) -> None:
    clock = tmp_path / "clock"
    clock.write_text(START)
    srv = start(tmp_path / "waypost.db", clock)
    try:
        srv.wait_for(r"created human principal 'admin'; its token \(shown once\)")
        token = srv.wait_for(r"^\s+(wp_\S+)$").group(1)
        srv.wait_for(r"listening on http://")
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=srv.url, timeout=30) as client:
            r = await client.post(
                "/api/v1/projects", json={"id": "demo", "name": "Demo"},
                headers={**headers, "Idempotency-Key": "p1"},
            )  # fmt: skip
            assert r.status_code == 201
            ws_url = srv.url.replace("http://", "ws://") + "/graphql"
            async with (
                client.stream("GET", "/api/v1/projects/demo/events/stream?after=0",
                              headers=headers) as stream,
                connect(ws_url, subprotocols=["graphql-transport-ws"]) as ws,  # type: ignore[list-item]
            ):  # fmt: skip
                lines = stream.aiter_lines()
                assert await anext(lines) == ": stream open"
                # the client offers per-message compression; `serve` declines it:
                # each subscriber's copy of each event would be deflated on its
                # own, on the one core that also serves the writers
                assert ws.request is not None and ws.response is not None
                assert "permessage-deflate" in ws.request.headers["Sec-WebSocket-Extensions"]
                assert "Sec-WebSocket-Extensions" not in ws.response.headers
                await ws.send(
                    json.dumps(
                        {"type": "connection_init", "payload": {"Authorization": f"Bearer {token}"}}
                    )
                )
                assert json.loads(await ws.recv())["type"] == "connection_ack"
                await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {
                    "query": 'subscription { projectEvents(projectId: "demo", after: 0)'
                             " { sequence type } }"}}))  # fmt: skip
                first = json.loads(await ws.recv())
                assert first["payload"]["data"]["projectEvents"]["type"] == "project.created"
                stopped = time.monotonic()
                srv.process.send_signal(15)
                rest = [line async for line in lines]  # the stream ends by itself
                assert json.loads(await asyncio.wait_for(ws.recv(), 20))["type"] == "complete"
                # docs/operations.md, "Stopping": then close code 1012 (service
                # restart), which tells a client to reconnect and resubscribe
                # (no test read the code; opsdocaudit)
                with pytest.raises(ConnectionClosed):
                    await asyncio.wait_for(ws.recv(), 20)
                assert ws.close_code == 1012, (ws.close_code, ws.close_reason)
        assert srv.process.wait(timeout=20) == 0
        assert time.monotonic() - stopped < 15
        # what it had sent before ending: the replay of the one event
        assert [line for line in rest if line.startswith("event:")] == ["event: project.created"]
    finally:
        srv.stop()


async def test_a_handshake_from_another_origin_is_refused_and_said_once(tmp_path: Path) -> None:
    """A browser page's WebSocket handshake carries its Origin: one that is
    not the Host's is refused 403 (Strawberry's rule), which a proxy that
    rewrites the Host meets too (docs/operations.md passes it on). Each
    refusal wrote a WARNING with the Origin as sent, 2 KB a line for anyone
    with no token (proxyaudit): the lines are one per window, the origin
    cut short."""
    clock = tmp_path / "clock"
    clock.write_text(START)
    srv = start(tmp_path / "waypost.db", clock)
    try:
        srv.wait_for(r"listening on http://")
        ws_url = srv.url.replace("http://", "ws://") + "/graphql"
        host = srv.url.removeprefix("http://")
        protocols = ["graphql-transport-ws"]
        async with connect(ws_url, subprotocols=protocols,  # type: ignore[arg-type]
                           origin=f"http://{host}") as same:  # type: ignore[arg-type]  # fmt: skip
            assert same.response is not None and same.response.status_code == 101
        foreign = "https://" + "x" * 3000 + ".example"
        for _ in range(5):
            with pytest.raises(InvalidStatus) as refused:
                async with connect(ws_url, subprotocols=protocols,  # type: ignore[arg-type]
                                   origin=foreign):  # type: ignore[arg-type]  # fmt: skip
                    pass
            assert refused.value.response.status_code == 403
        line = srv.wait_for(r"WebSocket handshake whose Origin is not its Host.*")
        assert f"host '{host}'" in line.group(0) and "characters)" in line.group(0)
        time.sleep(0.5)
        assert not any("Rejected WebSocket connection" in seen for seen in srv.seen)
        assert sum("Origin is not its Host" in seen for seen in srv.seen) == 1
    finally:
        srv.stop()


async def test_a_frame_over_1_mib_closes_the_socket_1009(tmp_path: Path) -> None:
    """docs/graphql.md: a subscribe over the 64 KiB body limit is refused for
    its operation, but WebSocket frames are at most 1 MiB: a larger one
    closes the socket with 1009 (uvicorn's default allowed 16 MiB)."""
    with serve(tmp_path) as srv:
        ws_url = srv.url.replace("http://", "ws://") + "/graphql"
        async with connect(ws_url, subprotocols=["graphql-transport-ws"],  # type: ignore[list-item]
                           max_size=None) as ws:  # fmt: skip
            init = {"type": "connection_init",
                    "payload": {"Authorization": f"Bearer {srv.admin_token}"}}  # fmt: skip
            await ws.send(json.dumps(init))
            assert json.loads(await ws.recv())["type"] == "connection_ack"
            payload = {"query": "{ __typename }", "variables": {"pad": "x" * (1024 * 1024)}}
            await ws.send(json.dumps({"id": "big", "type": "subscribe", "payload": payload}))
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 20)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
