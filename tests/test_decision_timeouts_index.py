"""Migrations 0029 and 0030: the decisions that can still time out, stored
and indexed, and the digest's recent timeouts read from the sweep's events.

The sweep and the digest's `timing_out_soon` walked every unanswered
decision (stale and expired ones stay unanswered until reopened) to find the
few that may time out. `decision_holds.timeout_opened_at` says when the
current generation's timeout clock started, or NULL when it never times
out; these tests hold it to the history (the migration's own trigger bakes
in the 24 hours of `timeouts.TIMEOUT`), check its backfill of an existing
file, and check that neither list pays for decisions that cannot time out.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from tests.conftest import Caller, Service
from tests.cost_support import unit_steps
from tests.decisions_support import (
    BASE,
    decision_body,
    edit_task,
    new_task,
    open_decision,
    reopen,
)
from tests.migration_support import copy_before, migration
from tests.test_decisions_sweep import insert_agent_asked_human_decision, run_sweep
from waypost.clock import format_time
from waypost.resolvers.decisions import lists_store
from waypost.resolvers.decisions.digest import SOON_WINDOW
from waypost.resolvers.decisions.store import due_for_timeout
from waypost.resolvers.decisions.timeouts import TIMEOUT

REVERSIBLE = {"required_actor": "either", "recommendation": "Proceed", "reversible": True}
OPENED = "2026-11-29T18:00:00.000Z"  # the test clock's start
A_DAY_LATER = "2026-11-30T18:00:00.000Z"


async def _stored(service: Service) -> dict[str, tuple[Any, Any]]:
    """decision -> (stored `timeout_opened_at`, what the history derives)."""

    def read(conn: sqlite3.Connection) -> dict[str, tuple[Any, Any]]:
        rows = conn.execute(
            "SELECT h.decision_id, h.timeout_opened_at,"
            f" {lists_store.TIMEOUT_OPENED_AT_SQL} AS derived"
            " FROM decision_holds h JOIN decision_current s ON s.decision_id = h.decision_id"
        ).fetchall()
        return {r[0]: (r[1], r[2]) for r in rows}

    return await service.rt.db.read(read)


async def _timing_out_soon(human: Caller) -> list[str]:
    r = await human.get(f"{BASE}/digest")
    assert r.status_code == 200, r.text
    return [d["id"] for d in r.json()["timing_out_soon"]]


async def test_an_expiry_at_the_timeout_never_times_out_one_a_millisecond_later_does(
    service: Service, human: Caller, project: str
) -> None:
    """The boundary the migration computes in SQL (24 hours after opening)
    is the sweep's: a generation expiring exactly then is expired when the
    sweep could answer it; one expiring a millisecond later is answered."""
    task = await new_task(human)
    at_timeout = await open_decision(human, [task], **REVERSIBLE, expires_at=A_DAY_LATER)
    later = await open_decision(human, [task], **REVERSIBLE, expires_at="2026-11-30T18:00:00.001Z")
    stored = await _stored(service)
    assert stored[at_timeout["id"]] == (None, None)
    assert stored[later["id"]] == (OPENED, OPENED)
    service.clock.advance(hours=18)
    assert await _timing_out_soon(human) == [later["id"]]
    service.clock.advance(hours=6)
    assert await run_sweep(service) == 1
    statuses = {
        d: (await human.get(f"{BASE}/decisions/{d}")).json()["status"]
        for d in (at_timeout["id"], later["id"])
    }
    assert statuses == {at_timeout["id"]: "expired", later["id"]: "allowed"}


async def test_the_stored_column_follows_every_kind_of_generation(
    service: Service, human: Caller, project: str
) -> None:
    """Set where a decision's row is placed and where a reopening moves it,
    for each reason a generation can or cannot time out; an answer keeps it
    (the index leaves answered ones out)."""
    task = await new_task(human)
    agent = await service.agent()
    made = {
        "reversible": await open_decision(human, [task], **REVERSIBLE),
        "not reversible": await open_decision(human, [task], recommendation="Proceed"),
        "expires first": await open_decision(
            human, [task], **REVERSIBLE, expires_at="2026-11-30T06:00:00Z"
        ),
        "human-required": await open_decision(
            human, [task], recommendation="Proceed", reversible=True
        ),
    }
    ids = {name: d["id"] for name, d in made.items()}
    ids["agent-asked"] = insert_agent_asked_human_decision(
        service.db_path, task, agent.principal_id, OPENED
    )
    stored = await _stored(service)
    assert {name: stored[i][0] for name, i in ids.items()} == {
        "reversible": OPENED, "not reversible": None, "expires first": None,
        "human-required": OPENED, "agent-asked": None,
    }  # fmt: skip
    service.clock.advance(hours=2)
    reopened_at = service.clock.iso()
    for name, extra in (("expires first", {"expires_at": None}), ("agent-asked", {})):
        r = await reopen(human, ids[name], 1, **extra)
        assert r.status_code == 200, r.text
    r = await reopen(human, ids["reversible"], 1, expires_at="2026-11-30T16:00:00Z")
    assert r.status_code == 200, r.text
    stored = await _stored(service)
    assert all(found == derived for found, derived in stored.values()), stored
    assert stored[ids["expires first"]][0] == reopened_at  # its expiry removed
    assert stored[ids["agent-asked"]][0] == reopened_at  # a human opened this cycle
    assert stored[ids["reversible"]][0] is None  # expires 4 hours before its timeout


async def test_neither_list_pays_for_decisions_that_cannot_time_out(
    service: Service, human: Caller, project: str
) -> None:
    """The sweep's walk and the digest's timing-out list cost the same with 4
    unanswered decisions that cannot time out as with 304: not reversible,
    stale (reversible, on a task edited since), expiring before their
    timeout. (They walked every unanswered decision: 9.5 ms a pass at 50,000.)"""
    task = await new_task(human)
    scope = await new_task(human, "Scope")
    await open_decision(human, [task], **REVERSIBLE)  # due by the time they are counted
    service.clock.advance(hours=25)
    expiry = "2026-11-30T20:00:00.000Z"  # an hour after the others open

    async def cannot_time_out(count: int) -> None:
        for n in range(count):
            kind = n % 3
            if kind == 0:
                await open_decision(human, [task], recommendation="Proceed")
            elif kind == 1:
                await open_decision(human, [scope], **REVERSIBLE)
            else:
                await open_decision(human, [task], **REVERSIBLE, expires_at=expiry)
        await edit_task(human, scope, title=f"Scope, {count} later")  # stale now

    now = service.clock.now()

    def walks(conn: sqlite3.Connection) -> None:
        # the arguments the sweep and the digest pass (timeouts.py, digest.py)
        due = due_for_timeout(conn, format_time(now - TIMEOUT), format_time(now), 500)
        soon = lists_store.timing_out_ids(
            conn, project, format_time(now), format_time(now + SOON_WINDOW - TIMEOUT), 201
        )
        assert len(due) == len(soon) == 1, (due, soon)

    await cannot_time_out(4)
    few = await unit_steps(service.rt.db, walks)
    await cannot_time_out(300)
    many = await unit_steps(service.rt.db, walks)
    assert many <= few + few // 100, (few, many)


async def test_the_migration_fills_the_column_for_existing_decisions(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    task = await new_task(human)
    agent = await service.agent()
    await open_decision(human, [task], **REVERSIBLE)
    await open_decision(human, [task], recommendation="Proceed")
    await open_decision(human, [task], **REVERSIBLE, expires_at="2026-11-30T06:00:00Z")
    await open_decision(human, [task], **REVERSIBLE, expires_at="2026-12-02T00:00:00Z")
    reopened = await open_decision(human, [task], **REVERSIBLE)
    service.clock.advance(hours=3)
    assert (await reopen(human, reopened["id"], 1)).status_code == 200
    insert_agent_asked_human_decision(service.db_path, task, agent.principal_id, OPENED)
    expected = {d: found for d, (found, _) in (await _stored(service)).items()}
    assert sorted(v is None for v in expected.values()) == [False, False, False, True, True, True]

    conn = copy_before(service.db_path, tmp_path / "upgrade.db", "0029")
    try:
        conn.executescript(migration("0029").sql)
        rows = conn.execute("SELECT decision_id, timeout_opened_at FROM decision_holds")
        assert {r[0]: r[1] for r in rows} == expected
    finally:
        conn.close()


# The statement `proceeded_by_timeout` ran before migration 0030: the answers.
_FROM_ANSWERS = (
    "SELECT d.id, MAX(a.at) AS last FROM decision_answers a"
    " JOIN decisions d ON d.id = a.decision_id"
    " WHERE d.project_id = :project AND a.timed_out = 1 AND a.at >= :since"
    " GROUP BY d.id ORDER BY last DESC, d.id LIMIT :n"
)


async def test_recent_timeouts_from_the_events_are_those_of_the_answers(
    service: Service, human: Caller, project: str
) -> None:
    """Per project, for every window start: the same decisions in the same
    order (latest timeout first) as the answers say, a decision timed out
    twice (reopened in between) once, at its latest, and nothing from
    another project's timeouts; its plan is a range of 0030's index."""
    from tests.knowledge_support import make_project, make_task

    other = await make_project(human, "other")
    task, elsewhere = await new_task(human), await make_task(human, other, "Elsewhere")
    twice = await open_decision(human, [task], **REVERSIBLE)
    for _ in range(3):
        await open_decision(human, [task], **REVERSIBLE)
        r = await human.post(
            f"/api/v1/projects/{other}/decisions",
            {**decision_body([elsewhere]), **REVERSIBLE},
        )
        assert r.status_code == 201, r.text
        service.clock.advance(hours=9)
    service.clock.advance(hours=24)
    assert await run_sweep(service) == 7
    assert (await reopen(human, twice["id"], 1)).status_code == 200
    await open_decision(human, [task], recommendation="Proceed")  # never times out
    service.clock.advance(hours=25)
    assert await run_sweep(service) == 1

    def differences(conn: sqlite3.Connection) -> list[tuple[str, str, int]]:
        times = [r[0] for r in conn.execute("SELECT DISTINCT at FROM decision_answers")]
        found = []
        for project_id in (project, other):
            for since in ["2026-01-01T00:00:00.000Z", *times, "2027-01-01T00:00:00.000Z"]:
                for n in (1, 2, 201):
                    args = {"project": project_id, "since": since, "n": n}
                    old = [r[0] for r in conn.execute(_FROM_ANSWERS, args)]
                    if lists_store.timed_out_since_ids(conn, project_id, since, n) != old:
                        found.append((project_id, since, n))
        return found

    assert await service.rt.db.read(differences) == []
    newest = await service.rt.db.read(
        lambda c: lists_store.timed_out_since_ids(c, project, "2026-01-01T00:00:00.000Z", 201)
    )
    assert newest[0] == twice["id"] and len(newest) == 4

    def plan(conn: sqlite3.Connection) -> list[str]:
        sql: list[str] = []
        conn.set_trace_callback(sql.append)
        try:
            lists_store.timed_out_since_ids(conn, project, "2026-01-01T00:00:00.000Z", 201)
        finally:
            conn.set_trace_callback(None)
        return [str(r[3]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql[0]}")]

    plans = await service.rt.db.read(plan)
    assert any("INDEX events_timed_out (project_id=? AND at>?)" in p for p in plans), plans
    assert not any("decision_answers" in p for p in plans), plans
