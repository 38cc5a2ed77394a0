"""Helpers for the gate-state tests: what the stored gate state says about each
task, what the gate derived from the decisions' history says, and what a claim
and a `ready=true` list actually do."""

from __future__ import annotations

import sqlite3
from typing import Any

from tests.conftest import Caller, Service
from tests.decisions_support import send_answer
from tests.tasks_support import BASE
from waypost.clock import format_time
from waypost.resolvers.decisions import gate
from waypost.resolvers.decisions.lists_store import TIMEOUT_OPENED_AT_SQL


async def gate_views(service: Service, project_id: str = "demo") -> dict[str, tuple[bool, bool]]:
    """For every task of the project: (open by the stored state, open by the gate).

    The stored state is read with the exact SQL the claim uses; the gate is
    `gate.blocking_decisions` over the task and its subject, the function the
    claim's writer transaction consults.
    """
    now = service.clock.now()

    def read(conn: sqlite3.Connection) -> dict[str, tuple[bool, bool]]:
        rows = conn.execute(
            "SELECT id, subject_task_id, gate_held = 0"
            " AND (gate_expires IS NULL OR gate_expires > ?) AS open"
            " FROM tasks WHERE project_id = ?",
            (format_time(now), project_id),
        ).fetchall()
        ids = [r["id"] for r in rows]
        subjects = [r["subject_task_id"] for r in rows if r["subject_task_id"]]
        blocking = gate.blocking_decisions(conn, project_id, [*ids, *subjects], now)
        return {
            r["id"]: (
                bool(r["open"]),
                not blocking[r["id"]]
                and not (r["subject_task_id"] and blocking[r["subject_task_id"]]),
            )
            for r in rows
        }

    return await service.rt.db.read(read)


async def stale_differences(service: Service) -> dict[str, tuple[Any, ...]]:
    """Decisions whose stored `stale` (migration 0023, what the status filters
    read), stored generation, or stored `answered`, project and creation time
    (0025, what the digest, the `pending` filter and the sweep read), or
    stored disposition (0027, what the other status filters read), or when
    it can time out (0029, what the sweep and the digest's timing-out list
    read) differ from what the history derives: decision -> (stored stale,
    derived stale, stored generation, current, stored answered, derived
    answered, stored disposition, derived disposition, stored and derived
    timeout start)."""

    def read(conn: sqlite3.Connection) -> dict[str, tuple[Any, ...]]:
        rows = conn.execute(
            "SELECT h.decision_id, h.stale, s.stale AS derived, h.generation, s.generation AS g,"
            " h.answered, s.disposition IS NOT NULL AS answered_derived,"
            " h.disposition, s.disposition AS disposition_derived,"
            f" h.timeout_opened_at, {TIMEOUT_OPENED_AT_SQL} AS timeout_opened_at_derived"
            " FROM decision_holds h JOIN decision_current s ON s.decision_id = h.decision_id"
            " WHERE h.stale IS NOT s.stale OR h.generation IS NOT s.generation"
            " OR h.answered IS NOT (s.disposition IS NOT NULL)"
            " OR h.disposition IS NOT s.disposition"
            " OR h.project_id IS NOT s.project_id OR h.created_at IS NOT s.created_at"
            f" OR h.timeout_opened_at IS NOT ({TIMEOUT_OPENED_AT_SQL})"
        ).fetchall()
        return {r[0]: tuple(r[1:]) for r in rows}

    return await service.rt.db.read(read)


async def assert_gate_exact(service: Service) -> dict[str, bool]:
    """The stored state agrees with the gate on every task, and each decision's
    stored `stale` with its pins; returns task -> open."""
    views = await gate_views(service)
    wrong = {task: view for task, view in views.items() if view[0] != view[1]}
    assert not wrong, f"stored gate state (stored, derived) differs: {wrong}"
    stale = await stale_differences(service)
    assert not stale, f"stored stale (stored, derived, generations) differs: {stale}"
    return {task: view[0] for task, view in views.items()}


async def ready_ids(human: Caller) -> list[str]:
    r = await human.get(f"{BASE}/tasks", ready="true", limit="200")
    assert r.status_code == 200, r.text
    return [t["id"] for t in r.json()["items"]]


async def claim_any(agent: Caller) -> str | None:
    """The task an ordinary claim takes (released again at once), or None."""
    r = await agent.post(f"{BASE}/claims", {})
    if r.status_code == 404:
        assert r.json()["error"]["details"] == {"reason": "nothing_ready"}, r.text
        return None
    assert r.status_code == 200, r.text
    task_id: str = r.json()["task"]["id"]
    released = await agent.post(f"{BASE}/tasks/{task_id}/release")
    assert released.status_code == 200, released.text
    return task_id


async def claimable(service: Service, human: Caller, agent: Caller, task_id: str) -> bool:
    """Is `task_id` claimable, by every account? The stored state must agree with
    the gate on every task; the `ready=true` list and an ordinary claim (which
    the tests arrange to prefer this task) must agree with the task's `ready`
    (the Python predicate over the derived gate); and for an open task with
    no dependencies, `ready` is exactly what the stored state says."""
    stored = await assert_gate_exact(service)
    task: dict[str, Any] = (await human.get(f"{BASE}/tasks/{task_id}")).json()
    ready: bool = task["ready"]
    listed = await ready_ids(human)
    assert (task_id in listed) == ready, task
    # the digest counts over the stored state as the list walks it (at an
    # expiry's very instant it could differ unnoticed: mutantaudit2)
    digest = (await human.get(f"{BASE}/digest")).json()
    assert digest["ready_task_count"] == len(listed), digest
    if task["status"] == "open" and not task["depends_on"]:
        assert stored[task_id] == ready, task
    taken = await claim_any(agent)
    assert (taken == task_id) == ready, (taken, task)
    return ready


async def answer(human: Caller, decision_id: str, disposition: str, generation: int) -> None:
    """Answer `decision_id` (allow confirms its conditions); must succeed."""
    choice = "Proceed" if disposition == "allow" else "Stop"
    r = await send_answer(
        human, decision_id, generation, disposition=disposition, answer=choice,
        conditions_confirmed=disposition == "allow",
    )  # fmt: skip
    assert r.status_code == 200, r.text
