"""The lifecycle search takes its place in the search lane in turn by
principal, as docs/operations.md says of "a lifecycle search" among the
full-text searches (turnsjourney).

The lane's `who` defaults to `storage/turns.CALLER`, which only the public
listener's authentication (http/auth.py) and the GraphQL socket set: the
lifecycle listener's `Authenticate` never does, so every lifecycle search
ran as `None`, one caller for every principal of every tenant, first come,
first served among them: one tenant's queue of searches kept another
tenant's search behind all of it. Checked without timing, as
tests/test_search_lane_turns.py is."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import Any

from tests.lifecycle.support import Lifecycle, memo
from waypost.resolvers.lifecycle import store


async def test_one_tenants_queue_of_searches_does_not_keep_another_tenants_search_last(
    lifecycle: Lifecycle, monkeypatch: Any
) -> None:
    crowd = await lifecycle.member("author", tenant="crowd")
    other = await lifecycle.member("author", tenant="quiet")
    assert (await crowd.register(memo("adr.crowd"))).status_code == 200
    assert (await other.register(memo("adr.quiet"))).status_code == 200
    permits = threading.Semaphore(0)
    entered: list[str] = []
    real = store.search

    def held(conn: sqlite3.Connection, tenant: str, *args: Any) -> Any:
        entered.append(tenant)
        if tenant == "crowd":
            permits.acquire(timeout=10)  # the crowd's searches, held while the queue forms
        return real(conn, tenant, *args)

    monkeypatch.setattr(store, "search", held)
    lane = lifecycle.service.rt.db._searches

    async def until(check: Any) -> None:
        async with asyncio.timeout(10):
            while not check():
                await asyncio.sleep(0.005)

    crowds = [asyncio.create_task(crowd.get("/v1/decisions", q="retry")) for _ in range(4)]
    try:
        await until(lambda: len(entered) == 2 and lane.waiting() == 2)
        mine = asyncio.create_task(other.get("/v1/decisions", q="retry"))
        await until(lambda: lane.waiting() == 3)
        permits.release()  # one of the crowd's searches ends: its place is given on
        await until(lambda: len(entered) >= 3)
        # as one caller (None), first come, first served gave it to the crowd's third
        assert entered[:3] == ["crowd", "crowd", "quiet"], entered
        answer = await asyncio.wait_for(mine, 10)
        assert answer.status_code == 200, answer.text
    finally:
        for _ in range(4):
            permits.release()
        answers = await asyncio.gather(*crowds)
    assert [a.status_code for a in answers] == [200] * 4
