"""The guard names a task's blocking decisions from the stored gate state and
puts only those to the history (gate.named_blockers): a task carrying
thousands of allowed decisions and one pending costs a refusal a status per
named decision, not one per decision on the task (scaleaudit: 20,035
decisions on one task held the writer 161 ms per refused claim). The
refusal names exactly what the history-derived gate names, in its order,
truncation included; the history still decides every way through, and a
stored state written around the triggers is caught in both directions."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.decisions_support import (
    BASE,
    answer,
    edit_task,
    error,
    new_task,
    open_decision,
    send_answer,
)
from waypost.errors import DecisionRequired
from waypost.resolvers.decisions import gate, status
from waypost.resolvers.tasks.readiness import readiness

CLAIMS = f"{BASE}/claims"


async def clone_allowed(service: Service, decision_id: str, count: int) -> None:
    """`count` copies of an answered decision (its generation, pins and answer),
    written in bulk through the triggers like any other rows."""
    tables = (
        ("decisions", "id"),
        ("decision_generations", "decision_id"),
        ("decision_affected", "decision_id"),
        ("decision_answers", "decision_id"),
    )

    def write(conn: sqlite3.Connection) -> None:
        for table, key in tables:
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            picked = ", ".join(":id || '_' || n.value" if c == key else c for c in columns)
            conn.execute(
                f"WITH RECURSIVE n(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM n"
                f" WHERE value < :count) INSERT INTO {table} ({', '.join(columns)})"
                f" SELECT {picked} FROM {table} CROSS JOIN n WHERE {key} = :id",
                {"id": decision_id, "count": count},
            )

    await service.rt.db.write(write)


async def status_calls(service: Service, call: Callable[[sqlite3.Connection], Any]) -> int:
    """How many statuses `call(conn)` derives (calls of the SQL status function),
    in a unit of work of the writer that changes nothing."""

    def unit(conn: sqlite3.Connection) -> int:
        calls = 0

        def counted(*args: Any) -> str:
            nonlocal calls
            calls += 1
            return status.decision_status(*args)

        conn.create_function(status.SQL_FUNCTION, 4, counted, deterministic=True)
        try:
            call(conn)
        finally:
            status.install(conn)
        return calls

    calls: int = await service.rt.db.write(unit)
    return calls


def refused(conn: sqlite3.Connection, task_ids: list[str], now: Any) -> dict[str, Any]:
    with pytest.raises(DecisionRequired) as caught:
        gate.ensure_all_resolved(conn, "demo", task_ids, now)
    details: dict[str, Any] = caught.value.details
    return details


async def test_a_refusal_derives_only_the_decisions_it_names(
    service: Service, human: Caller, project: str
) -> None:
    hot = await new_task(human, "hot")
    first = await open_decision(human, [hot])
    await answer(human, first["id"])
    await clone_allowed(service, first["id"], 2000)
    service.clock.advance(seconds=1)
    pending = await open_decision(human, [hot])  # the newest: named after 2,001 allowed
    now = service.clock.now()

    calls = await status_calls(service, lambda conn: refused(conn, [hot], now))
    derived = await status_calls(
        service, lambda conn: gate.blocking_decisions(conn, "demo", [hot], now)
    )
    assert derived >= 2002  # the history's own derivation: every decision on the task
    assert calls <= 4, calls  # the one named, confirmed (and its reopen check)

    agent = await service.agent()
    status_code, code, details = error(await agent.post(CLAIMS, {"task_id": hot}))
    assert (status_code, code) == (409, "decision_required")
    assert details["decision_ids"] == [pending["id"]]


async def test_the_refusal_names_what_the_history_names(
    service: Service, human: Caller, project: str
) -> None:
    """Allowed, pending, denied, stale and expired decisions interleaved on one
    task, more blocking ones than a refusal lists: the same ids in the same
    order, and the same truncation, as the derived gate."""
    hot, other = await new_task(human, "hot"), await new_task(human, "other")
    staled = await open_decision(human, [hot, other])
    await answer(human, staled["id"])
    expiring = await open_decision(human, [hot], expires_at="2026-11-29T18:30:00Z")
    await answer(human, expiring["id"])
    for i in range(36):
        service.clock.advance(seconds=1)
        decision = await open_decision(human, [hot])
        kind = i % 3
        if kind == 0:
            await answer(human, decision["id"])  # allowed: never named
        elif kind == 1:
            r = await send_answer(human, decision["id"], disposition="deny", answer="Stop")
            assert r.status_code == 200, r.text
    await edit_task(human, other, title="the other task, changed")  # `staled` is stale now
    service.clock.advance(hours=1)  # `expiring` has expired
    now = service.clock.now()

    def both(conn: sqlite3.Connection) -> tuple[dict[str, Any], dict[str, list[str]]]:
        return refused(conn, [hot], now), gate.blocking_decisions(conn, "demo", [hot], now)

    details, derived = await service.rt.db.read(both)
    assert len(derived[hot]) == gate.MAX_IDS + 1  # 26 blocking: more than listed
    assert details["decision_ids"] == derived[hot][: gate.MAX_IDS]
    assert details["decision_ids"][:2] == [staled["id"], expiring["id"]]
    assert details["truncated"] is True
    assert set(details["reopen"]) == {staled["id"], expiring["id"]}

    # an activity of the hot task: its own decision first, then the subject's
    review = await new_task(human, "review", subject_task_id=hot)
    own = await open_decision(human, [review])
    now = service.clock.now()

    def activity(conn: sqlite3.Connection) -> tuple[dict[str, Any], dict[str, list[str]]]:
        return (
            refused(conn, [review, hot], now),
            gate.blocking_decisions(conn, "demo", [review, hot], now),
        )

    details, derived = await service.rt.db.read(activity)
    merged = list(dict.fromkeys([*derived[review], *derived[hot]]))
    assert details["decision_ids"] == merged[: gate.MAX_IDS] and merged[0] == own["id"]


async def test_a_stored_hold_the_history_does_not_confirm_is_dropped_and_logged(
    service: Service, human: Caller, project: str, caplog: pytest.LogCaptureFixture
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    await answer(human, decision["id"])

    def drift(conn: sqlite3.Connection) -> None:
        # rows written around the triggers (nothing in the service does this)
        conn.execute("UPDATE decision_holds SET held = 1 WHERE decision_id = ?", (decision["id"],))
        conn.execute("UPDATE tasks SET gate_held = 1 WHERE id = ?", (task,))

    await service.rt.db.write(drift)
    agent = await service.agent()
    with caplog.at_level(logging.ERROR, logger="waypost.resolvers.decisions.gate"):
        r = await agent.post(CLAIMS, {"task_id": task})
    assert r.status_code == 200, r.text  # the history allows it
    assert any(decision["id"] in record.getMessage() for record in caplog.records)


async def test_a_stored_release_the_history_does_not_confirm_still_refuses(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])

    def drift(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE decision_holds SET held = 0 WHERE decision_id = ?", (decision["id"],))
        conn.execute("UPDATE tasks SET gate_held = 0 WHERE id = ?", (task,))

    await service.rt.db.write(drift)
    agent = await service.agent()
    status_code, code, details = error(await agent.post(CLAIMS, {"task_id": task}))
    assert (status_code, code) == (409, "decision_required")
    assert details["decision_ids"] == [decision["id"]]


async def test_a_page_of_tasks_under_many_decisions_derives_only_those_it_names(
    service: Service, human: Caller, project: str
) -> None:
    """Task JSON (GET, lists, GraphQL `blockedBy`, the packet, the digest)
    derived the status of every decision on every task of the page: 100
    tasks under 900 decisions each took 223 ms (gatescaleaudit). The stored
    state names each held task's first decisions and only those are put to
    the history; the lists are the history's, truncation included."""
    tasks = [await new_task(human, f"t{i}") for i in range(6)]
    ready = await new_task(human, "ready")
    opened = []
    for _ in range(30):
        service.clock.advance(seconds=1)
        opened.append((await open_decision(human, tasks))["id"])
    now = service.clock.now()

    def task_rows(conn: sqlite3.Connection) -> list[sqlite3.Row]:
        conn.row_factory = sqlite3.Row
        ids = json.dumps([*tasks, ready])
        return conn.execute(
            "SELECT * FROM tasks WHERE id IN (SELECT value FROM json_each(?))", (ids,)
        ).fetchall()

    found: dict[str, Any] = {}
    calls = await status_calls(
        service, lambda conn: found.update(readiness(conn, "demo", task_rows(conn), now))
    )
    derived = await status_calls(
        service, lambda conn: gate.blocking_decisions(conn, "demo", tasks, now)
    )
    assert derived >= 30  # the history's own derivation: every decision on the page
    assert calls <= 22, calls  # the 21 named (shared by the six), and the ready task's none
    for task in tasks:
        assert found[task].blocked_by() == {
            "decisions": opened[:20],
            "decisions_truncated": True,
            "dependencies": [],
        }
    assert found[ready].ready
