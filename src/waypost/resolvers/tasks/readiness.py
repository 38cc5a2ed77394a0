"""Task readiness: the one predicate behind lists, claims, the digest and context.

A task is ready when it is `open`, carries no lease, every dependency is
`done`, and the decision gate passes for it and, when it is an activity, for
its subject. A task whose lease expired is still `claimed`: it must be taken
over with `recover` (which lets the new owner inspect the stale work) before
it can be released back to `open`, so it is never ready for ordinary claims.

Everything here works in batch (a constant number of statements for any
number of tasks), so a list or a GraphQL page never costs one query per task.

The predicate has two forms that must never drift: `readiness` (Python over
rows, with the reasons the task JSON reports) and `READY_SQL` (a WHERE term,
so claims, ready lists and the digest skip blocked work inside SQL instead of
fetching it to test it). Both take the decision part from gate.py, which
evaluates the same registered status function either way.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from waypost.resolvers.decisions import gate

MAX_DECISION_IDS = gate.MAX_IDS

# The state part of the predicate (alias `t` for tasks): open, no lease, every
# dependency done.
STATE_READY_SQL: Final = (
    "t.status = 'open' AND t.lease_owner_id IS NULL AND NOT EXISTS ("
    " SELECT 1 FROM task_dependencies d JOIN tasks dep ON dep.id = d.depends_on_id"
    " WHERE d.task_id = t.id AND dep.status != 'done')"
)
# The decision part: a decision blocks the task itself or, for an activity, its
# subject. Needs `WITH {READY_WITH}` and the `ready_params` of the project. The
# IS NOT NULL keeps the term two-valued, so `NOT (...)` of it is exact.
GATE_BLOCKED_SQL: Final = (
    "(t.id IN blocked OR (t.subject_task_id IS NOT NULL AND t.subject_task_id IN blocked))"
)
READY_WITH: Final = gate.BLOCKED_CTE
# The whole predicate as one WHERE term.
READY_SQL: Final = f"{STATE_READY_SQL} AND NOT {GATE_BLOCKED_SQL}"


def ready_params(conn: sqlite3.Connection, project_id: str, now: datetime) -> dict[str, str]:
    """The named parameters (`:project`, `:now`) READY_WITH binds."""
    return gate.gate_params(conn, project_id, now)


@dataclass(frozen=True)
class Readiness:
    """Whether a task is ready and, when it is not, what holds it back.

    `reason` is the first failing part of the predicate, in the order the
    claim route reports them: not_open, leased, dependencies_not_done,
    decision_required; None when the task is ready.
    """

    ready: bool
    reason: str | None
    decisions: list[str] = field(default_factory=list)
    dependencies: list[str] = field(default_factory=list)

    def blocked_by(self) -> dict[str, Any]:
        return {
            "decisions": self.decisions[:MAX_DECISION_IDS],
            "decisions_truncated": len(self.decisions) > MAX_DECISION_IDS,
            "dependencies": list(self.dependencies),
        }


def ids_param(ids: Iterable[str]) -> str:
    """A list of ids as one JSON parameter (`IN (SELECT value FROM json_each(?))`)."""
    return json.dumps(list(ids))


def dependency_map(
    conn: sqlite3.Connection, task_ids: Sequence[str]
) -> dict[str, list[tuple[str, str]]]:
    """For each task, its dependencies in the client's order as (id, status)."""
    result: dict[str, list[tuple[str, str]]] = {task_id: [] for task_id in task_ids}
    if not task_ids:
        return result
    rows = conn.execute(
        "SELECT d.task_id, d.depends_on_id, dep.status FROM task_dependencies d"
        " JOIN tasks dep ON dep.id = d.depends_on_id"
        " WHERE d.task_id IN (SELECT value FROM json_each(?))"
        " ORDER BY d.task_id, d.position",
        (ids_param(task_ids),),
    ).fetchall()
    for row in rows:
        result[row["task_id"]].append((row["depends_on_id"], row["status"]))
    return result


def _merge(first: list[str], second: list[str]) -> list[str]:
    """The task's own blocking decisions, then its subject's, each id once."""
    return list(dict.fromkeys([*first, *second]))


def readiness(
    conn: sqlite3.Connection,
    project_id: str,
    task_rows: Sequence[sqlite3.Row],
    now: datetime,
    deps: dict[str, list[tuple[str, str]]] | None = None,
) -> dict[str, Readiness]:
    """Readiness of every task in `task_rows` (rows of `tasks`), in batch.

    `deps` may pass a `dependency_map` the caller already loaded.
    """
    if not task_rows:
        return {}
    ids = [row["id"] for row in task_rows]
    if deps is None:
        deps = dependency_map(conn, ids)
    subjects = {row["subject_task_id"] for row in task_rows if row["subject_task_id"]}
    gate_ids = list(dict.fromkeys([*ids, *sorted(subjects)]))
    blocking = gate.blocking_decisions(conn, project_id, gate_ids, now)
    result: dict[str, Readiness] = {}
    for row in task_rows:
        own = list(blocking.get(row["id"], []))
        subject = row["subject_task_id"]
        decisions = _merge(own, list(blocking.get(subject, []))) if subject else own
        undone = [dep_id for dep_id, status in deps.get(row["id"], []) if status != "done"]
        if row["status"] != "open":
            reason: str | None = "not_open"
        elif row["lease_owner_id"] is not None:
            reason = "leased"
        elif undone:
            reason = "dependencies_not_done"
        elif decisions:
            reason = "decision_required"
        else:
            reason = None
        result[row["id"]] = Readiness(reason is None, reason, decisions, undone)
    return result


def readiness_of(
    conn: sqlite3.Connection, project_id: str, row: sqlite3.Row, now: datetime
) -> Readiness:
    return readiness(conn, project_id, [row], now)[row["id"]]


def next_ready(conn: sqlite3.Connection, project_id: str, now: datetime) -> sqlite3.Row | None:
    """The task an ordinary claim takes: highest priority ready task, ties oldest.

    One statement whatever lies ahead in claim order: blocked work is skipped
    inside SQL. The claim still runs the gate on the chosen row in its writer
    transaction (`ensure_work_allowed`), which stays the authority.
    """
    row: sqlite3.Row | None = conn.execute(
        f"WITH {READY_WITH} SELECT t.* FROM tasks t"
        f" WHERE t.project_id = :project AND {READY_SQL}"
        " ORDER BY t.priority DESC, t.created_at, t.id LIMIT 1",
        ready_params(conn, project_id, now),
    ).fetchone()
    return row
