"""Claims under contention: one writer transaction per claim, no task with two owners."""

from __future__ import annotations

import asyncio
import sqlite3

from tests.conftest import Caller, Service
from tests.tasks_support import BASE, make_task


async def test_twenty_agents_claiming_ten_ready_tasks_get_exactly_ten(
    service: Service, human: Caller, project: str
) -> None:
    for i in range(10):
        await make_task(human, f"task {i}", priority=i % 3)
    agents = [await service.agent(f"agent-{i}") for i in range(20)]

    results = await asyncio.gather(*(a.post(f"{BASE}/claims", {}) for a in agents))

    won = [r for r in results if r.status_code == 200]
    lost = [r for r in results if r.status_code != 200]
    assert len(won) == 10
    assert all(r.status_code == 404 for r in lost)
    assert all(r.json()["error"]["details"] == {"reason": "nothing_ready"} for r in lost)
    claimed = [r.json()["task"]["id"] for r in won]
    assert len(set(claimed)) == 10
    owners = {r.json()["lease"]["owner_id"] for r in won}
    assert len(owners) == 10

    def leases(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
        rows = conn.execute("SELECT id, status, lease_owner_id FROM tasks").fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    stored = await service.rt.db.read(leases)
    assert all(status == "claimed" for _, status, _ in stored)
    assert {owner for _, _, owner in stored} == owners
    events = (await human.get(f"{BASE}/events", limit="200")).json()["items"]
    assert sum(e["type"] == "task.claimed" for e in events) == 10
