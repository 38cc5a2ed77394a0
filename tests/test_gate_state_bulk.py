"""Blocked work ahead does not change which task a claim takes; a drifted stored
state costs a logged fallback, never a wrong claim; and migration 0014 derives
the stored state of rows written before it existed."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import Caller, Service
from tests.decisions_support import edit_task, open_decision, send_answer
from tests.gate_state_support import assert_gate_exact, claim_any
from tests.migration_support import copy_before, migration
from tests.tasks_support import make_task
from waypost.clock import format_time
from waypost.resolvers.decisions import gate
from waypost.resolvers.tasks import ready_store

BATCH = 40


async def blocked_ahead(service: Service, human: Caller) -> tuple[list[list[str]], list[str]]:
    """Three decisions holding 40 priority-5 tasks each, plus an activity of a held
    task at priority 7, all ahead in claim order of three ready tasks at priority
    1, 1 and 0. Returns (task ids per decision, the ready ones in claim order)."""
    batches = []
    for b in range(3):
        batch = [(await make_task(human, f"b{b}-{i}", priority=5))["id"] for i in range(BATCH)]
        await open_decision(human, batch)
        batches.append(batch)
        service.clock.advance(seconds=1)
    await make_task(human, "review", priority=7, subject_task_id=batches[0][0])
    ready = []
    for title, priority in (("r1", 1), ("r2", 1), ("r0", 0)):
        ready.append((await make_task(human, title, priority=priority))["id"])
        service.clock.advance(seconds=1)
    return batches, ready


async def derived_pick(service: Service) -> str | None:
    """The claim's pick with the gate derived from history for every task."""
    now = service.clock.now()

    def pick(conn: sqlite3.Connection) -> str | None:
        row = ready_store.next_ready_row_derived(conn, gate.gate_params("demo", now))
        return None if row is None else str(row["id"])

    return await service.rt.db.read(pick)


async def test_blocked_tasks_ahead_do_not_change_the_claimed_task(
    service: Service, human: Caller, project: str
) -> None:
    batches, ready = await blocked_ahead(service, human)
    agent = await service.agent()
    await assert_gate_exact(service)
    assert await claim_any(agent) == ready[0] == await derived_pick(service)
    # the rest in claim order: each taken task is left claimed
    for expected in ready:
        r = await agent.post("/api/v1/projects/demo/claims", {})
        assert r.status_code == 200 and r.json()["task"]["id"] == expected, r.text
    assert await claim_any(agent) is None and await derived_pick(service) is None
    # one decision allowed: its batch comes first again (one creation time, so
    # the tie goes to the lowest id)
    r = await send_answer(human, (await decision_of(human, batches[1][0])), 1)
    assert r.status_code == 200, r.text
    await assert_gate_exact(service)
    assert await claim_any(agent) == min(batches[1]) == await derived_pick(service)
    # a judged edit makes that allow stale: its batch is held again, by the
    # stored state and by the history alike (the history's form of a stale
    # allow went untested: mutantaudit1)
    await edit_task(human, batches[1][0], title="A different scope")
    await assert_gate_exact(service)
    assert await claim_any(agent) is None and await derived_pick(service) is None


async def decision_of(human: Caller, task_id: str) -> str:
    r = await human.get(f"/api/v1/projects/demo/tasks/{task_id}")
    decision_id: str = r.json()["blocked_by"]["decisions"][0]
    return decision_id


async def test_a_drifted_stored_state_is_caught_by_the_gate_and_logged(
    service: Service, human: Caller, project: str, caplog: pytest.LogCaptureFixture
) -> None:
    batches, ready = await blocked_ahead(service, human)
    agent = await service.agent()
    victim = batches[0][0]

    def drift(conn: sqlite3.Connection) -> None:
        # a row written around the triggers (nothing in the service does this)
        conn.execute("UPDATE tasks SET gate_held = 0 WHERE id = ?", (victim,))

    await service.rt.db.write(drift)
    with caplog.at_level(logging.ERROR, logger="waypost.resolvers.tasks.readiness"):
        assert await claim_any(agent) == ready[0]
    assert any(victim in record.getMessage() for record in caplog.records)


async def test_migration_0014_derives_the_state_of_existing_rows(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    pending = (await make_task(human, "pending"))["id"]
    allowed = (await make_task(human, "allowed"))["id"]
    stale = [(await make_task(human, f"stale {i}"))["id"] for i in range(2)]
    expiring = (await make_task(human, "expiring"))["id"]
    await make_task(human, "free")
    await make_task(human, "review of pending", subject_task_id=pending)
    await make_task(human, "review of allowed", subject_task_id=allowed)
    await open_decision(human, [pending])
    for tasks, extra in (([allowed], {}), (stale, {}),
                         ([expiring], {"expires_at": "2026-11-29T18:30:00Z"})):  # fmt: skip
        decision = await open_decision(human, tasks, **extra)
        assert (await send_answer(human, decision["id"])).status_code == 200
    await edit_task(human, stale[1], title="changed")
    service.clock.advance(hours=1)  # past the expiry
    expected = await assert_gate_exact(service)
    assert list(expected.values()).count(False) == 5  # pending, its review, stale x2, expiring

    conn = copy_before(service.db_path, tmp_path / "upgrade.db", "0014")
    try:
        conn.executescript(migration("0014").sql)
        now = service.clock.now()
        rows = conn.execute(
            "SELECT id, subject_task_id, gate_held = 0"
            " AND (gate_expires IS NULL OR gate_expires > ?) AS open FROM tasks",
            (format_time(now),),
        ).fetchall()
        assert {r["id"]: bool(r["open"]) for r in rows} == expected
    finally:
        conn.close()
