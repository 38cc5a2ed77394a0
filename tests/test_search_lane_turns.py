"""The search lane (storage/db.py `search`: context packets, lists with `q`)
takes callers in turn, as the digest's lane does (test_digest_fairness.py).

First come, first served, one principal's queue of context packets kept
every other principal's packet waiting behind all of them: the lane holds
all readers but one (two places), and each search may run up to the search
time limit (1 s). The principal comes from the request's authentication
(`storage/turns.CALLER`), so no route names it. Checked without timing:
once the principal holding both places has more queued, the next place
goes to a principal with none running."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import Any

from tests.conftest import Caller, Service
from waypost.resolvers.context import packet


async def _new_project(human: Caller, project_id: str) -> None:
    r = await human.post("/api/v1/projects", {"id": project_id, "name": project_id})
    assert r.status_code == 201, r.text


async def test_a_principal_queuing_packets_does_not_keep_another_principals_packet_last(
    service: Service, human: Caller, monkeypatch: Any
) -> None:
    await _new_project(human, "big")
    await _new_project(human, "small")
    crowd = await service.agent("crowd")
    other = await service.agent("other")
    permits = threading.Semaphore(0)
    entered: list[str] = []
    real = packet.read_sync

    def held(conn: sqlite3.Connection, project_id: str, *args: Any) -> Any:
        entered.append(project_id)
        if project_id == "big":
            permits.acquire(timeout=10)  # the crowd's searches, held while the queue forms
        return real(conn, project_id, *args)

    monkeypatch.setattr(packet, "read_sync", held)
    lane = service.rt.db._searches

    async def until(check: Any) -> None:
        async with asyncio.timeout(10):
            while not check():
                await asyncio.sleep(0.005)

    def ask(caller: Caller, project: str) -> asyncio.Task[Any]:
        path = f"/api/v1/projects/{project}/context"
        return asyncio.create_task(caller.get(path, q="anything"))

    crowds = [ask(crowd, "big") for _ in range(4)]
    try:
        await until(lambda: len(entered) == 2 and lane.waiting() == 2)
        mine = ask(other, "small")
        await until(lambda: lane.waiting() == 3)
        permits.release()  # one of the crowd's searches ends: its place is given on
        answer = await asyncio.wait_for(mine, 10)
        assert answer.status_code == 200, answer.text
        # first come, first served gave it to the crowd's third, which held it
        assert entered[:3] == ["big", "big", "small"], entered
    finally:
        for _ in range(4):
            permits.release()
        answers = await asyncio.gather(*crowds)
    assert [a.status_code for a in answers] == [200] * 4
