"""A REST read whose client has gone while it waited for a place of the
search lane ends there, unrun (cancelling.caller_gone, http/client_gone.py)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.live_support import running
from waypost.resolvers.context import packet


async def _hold_the_search_lane(service: Service, release: threading.Event) -> list[Any]:
    """Both places of the search lane taken by searches that wait for `release`."""
    entered = threading.Semaphore(0)

    def held(conn: Any) -> None:
        entered.release()
        release.wait(30)

    holders = [asyncio.ensure_future(service.rt.db.search(held)) for _ in range(2)]
    for _ in holders:
        assert await asyncio.to_thread(entered.acquire, True, 10)
    return holders


async def _send_context_get(url: str, token: str) -> tuple[Any, Any]:
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"GET /api/v1/projects/demo/context?q=runner HTTP/1.1\r\nHost: x\r\n"
        + f"Authorization: Bearer {token}\r\n\r\n".encode()
    )
    await writer.drain()
    return reader, writer


async def test_a_queued_search_whose_client_left_never_runs(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clients that gave up and asked again queued searches no one would
    read, each holding a place of the lane up to the time limit once its
    turn came, ahead of the searches still wanted."""
    searched: list[str] = []
    real = packet.read_sync

    def spied(conn: Any, project_id: str, query: Any, *rest: Any) -> Any:
        searched.append(query.q)
        return real(conn, project_id, query, *rest)

    monkeypatch.setattr(packet, "read_sync", spied)
    release = threading.Event()
    async with running(service) as url:
        holders = await _hold_the_search_lane(service, release)
        try:
            _, left = await _send_context_get(url, human.token)
            stays, stays_writer = await _send_context_get(url, human.token)
            await asyncio.sleep(0.5)  # both requests are in, waiting for a place
            left.close()
            await left.wait_closed()
            await asyncio.sleep(0.3)
        finally:
            release.set()
            await asyncio.gather(*holders)
        # the client that stayed gets its packet: only its search ran
        head = await asyncio.wait_for(stays.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 200"), head
        stays_writer.close()
        await asyncio.sleep(0.2)  # a search let through would have run by now
    assert searched == ["runner"]
