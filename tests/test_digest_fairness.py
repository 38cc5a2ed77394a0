"""One misbehaving principal must not starve another (abusejourney).

The digest reads in the long reads' lane, one digest at a time
(storage/db.py `search(unbounded=True)`). The lane's queue is first come,
first served across every principal, so one agent token that keeps N
digests of its own large project queued makes another principal's digest of
a small project wait behind all N. Measured on a real `waypost serve`
(1,000 pending decisions naming 100 tasks each, about 100 ms a digest):
another principal's digest of an empty project went from 3 ms at the median
to 1,648 ms with 16 such requests in flight and 4,910 ms with 48, growing
with the first principal's concurrency, which nothing bounds.

The rule checked here needs no timing: once the principal holding the lane
has more digests queued, the next place goes to a principal that has none
running, not to the first principal's next one."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import Any

from tests.conftest import Caller, Service
from waypost.resolvers.decisions import digest as digest_module


async def _new_project(human: Caller, project_id: str) -> None:
    r = await human.post("/api/v1/projects", {"id": project_id, "name": project_id})
    assert r.status_code == 201, r.text


async def test_a_principal_queuing_digests_does_not_keep_another_principals_digest_last(
    service: Service, human: Caller, monkeypatch: Any
) -> None:
    await _new_project(human, "big")
    await _new_project(human, "small")
    abuser = await service.agent("abuser")
    victim = await service.agent("victim")

    release = threading.Event()
    entered: list[str] = []
    real = digest_module._digest_at_snapshot

    def held_digest(conn: sqlite3.Connection, *args: Any, **kw: Any) -> Any:
        entered.append(kw["project_id"])
        if kw["project_id"] == "big":
            release.wait(10)  # the abuser's large digest, held while the queue forms
        return real(conn, *args, **kw)

    monkeypatch.setattr(digest_module, "_digest_at_snapshot", held_digest)
    lane = service.rt.db._unbounded

    async def queued(n: int) -> None:
        for _ in range(1000):
            if lane.waiting() >= n:
                return
            await asyncio.sleep(0.005)
        raise AssertionError(f"{n} digests never queued")

    try:
        first = asyncio.create_task(abuser.get("/api/v1/projects/big/digest"))
        for _ in range(1000):
            if entered:
                break
            await asyncio.sleep(0.005)
        assert entered == ["big"]
        more = [asyncio.create_task(abuser.get("/api/v1/projects/big/digest")) for _ in range(3)]
        await queued(3)
        small = asyncio.create_task(victim.get("/api/v1/projects/small/digest"))
        await queued(4)
        release.set()
        answers = await asyncio.wait_for(asyncio.gather(first, *more, small), 20)
        assert [a.status_code for a in answers] == [200] * 5
    finally:
        release.set()
    # first come, first served put the victim's digest after all three of
    # the abuser's queued ones: ['big', 'big', 'big', 'big', 'small']
    assert entered == ["big", "small", "big", "big", "big"], entered
