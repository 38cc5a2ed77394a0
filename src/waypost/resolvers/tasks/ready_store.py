"""The readiness predicate in SQL and the queries that walk it: the next task to
claim, the digest's ready count and its tasks held back by a decision.

The SQL twin of `readiness.readiness` (which adds the reasons the task JSON
reports); the two must never drift (tests/test_gate_state.py holds them to
it). The task lists (store.py) take the same predicate as a filter.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Final

from waypost.resolvers.decisions.store import BLOCKED_CTE

# The state part of the predicate (alias `t` for tasks): open, no lease, every
# dependency done.
STATE_READY_SQL: Final = (
    "t.status = 'open' AND t.lease_owner_id IS NULL AND NOT EXISTS ("
    " SELECT 1 FROM task_dependencies d JOIN tasks dep ON dep.id = d.depends_on_id"
    " WHERE d.task_id = t.id AND dep.status != 'done')"
)
# The decision part, from the gate state migration 0014 keeps on each task
# (`gate_held`: a decision blocks it or its subject whatever the time;
# `gate_expires`: the earliest expiry among them). Binds `:now`. Written as
# plain AND terms so that SQLite can use the partial indexes whose WHERE says
# `gate_held = 0`; both forms are two-valued, so NOT of either is exact.
GATE_OPEN_SQL: Final = "t.gate_held = 0 AND (t.gate_expires IS NULL OR t.gate_expires > :now)"
GATE_BLOCKED_SQL: Final = (
    "(t.gate_held <> 0 OR (t.gate_expires IS NOT NULL AND t.gate_expires <= :now))"
)
# The whole predicate as AND terms of one WHERE clause.
READY_SQL: Final = f"{STATE_READY_SQL} AND {GATE_OPEN_SQL}"


def gate_held(row: sqlite3.Row, now_at: str) -> bool:
    """GATE_BLOCKED_SQL over a task row already read (`now_at` RFC 3339): the
    stored gate state holds the task (or, for an activity, its subject)."""
    expires: str | None = row["gate_expires"]
    return bool(row["gate_held"]) or (expires is not None and expires <= now_at)


def next_ready_row(conn: sqlite3.Connection, ready_params: Mapping[str, str]) -> sqlite3.Row | None:
    """The highest-priority ready task of the project in `ready_params`, ties oldest,
    as the stored gate state says (the claim re-checks it with the gate).

    INDEXED BY pins the walk to `tasks_claimable` (migration 0014), which holds
    no task a decision holds back: the first entries that also pass the expiry
    and dependency terms are the answer, whatever the blocked work ahead of
    them. Without it the planner may prefer `tasks_by_project` (one more
    equality term) and step over every blocked task again; with it, a change
    that made the index unusable fails loudly instead of slowly.
    """
    row: sqlite3.Row | None = conn.execute(
        "SELECT t.* FROM tasks t INDEXED BY tasks_claimable"
        f" WHERE t.project_id = :project AND {READY_SQL}"
        " ORDER BY t.priority DESC, t.created_at, t.id LIMIT 1",
        ready_params,
    ).fetchone()
    return row


def next_ready_row_derived(
    conn: sqlite3.Connection, ready_params: Mapping[str, str]
) -> sqlite3.Row | None:
    """`next_ready_row` with the gate derived from the decisions' history instead
    of the stored state: exact whatever the stored state says, and slower the
    more blocked work there is. Only the claim's safety net (readiness.next_ready)."""
    row: sqlite3.Row | None = conn.execute(
        f"WITH {BLOCKED_CTE} SELECT t.* FROM tasks t"
        f" WHERE t.project_id = :project AND {STATE_READY_SQL} AND NOT (t.id IN blocked"
        "  OR (t.subject_task_id IS NOT NULL AND t.subject_task_id IN blocked))"
        " ORDER BY t.priority DESC, t.created_at, t.id LIMIT 1",
        ready_params,
    ).fetchone()
    return row


def gate_blocked_open_rows(
    conn: sqlite3.Connection, ready_params: Mapping[str, str], count: int
) -> list[sqlite3.Row]:
    """Up to `count` tasks neither done nor cancelled that a decision holds back.

    The first gate term is implied by the second; it is spelled as the
    `tasks_gate_blocked` partial index's condition so that SQLite walks that
    index (the few tasks with a gate state) instead of the whole project.
    """
    return conn.execute(
        "SELECT t.* FROM tasks t WHERE t.project_id = :project"
        " AND (t.gate_held <> 0 OR t.gate_expires IS NOT NULL)"
        f" AND t.status NOT IN ('done', 'cancelled') AND {GATE_BLOCKED_SQL}"
        " ORDER BY t.priority DESC, t.created_at, t.id LIMIT :n",
        {**ready_params, "n": count},
    ).fetchall()


def ready_count(conn: sqlite3.Connection, ready_params: Mapping[str, str]) -> int:
    """How many tasks pass READY_SQL. The count reads only `tasks_claimable`,
    whose entries hold every column the predicate needs (half the time of
    the status index, which reads each task's row too: 26 against 53 ms at
    100k ready tasks). INDEXED BY makes the statement fail, not slow down,
    if READY_SQL ever stops implying the index's condition."""
    row = conn.execute(
        "SELECT COUNT(*) AS n FROM tasks t INDEXED BY tasks_claimable"
        f" WHERE t.project_id = :project AND {READY_SQL}",
        ready_params,
    ).fetchone()
    return int(row["n"])
