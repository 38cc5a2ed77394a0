"""Task readiness: the one predicate behind lists, claims, the digest and context.

A task is ready when it is `open`, carries no lease, every dependency is
`done`, and the decision gate passes for it and, when it is an activity, for
its subject. A task whose lease expired is still `claimed`: it must be taken
over with `recover` (which lets the new owner inspect the stale work) before
it can be released back to `open`, so it is never ready for ordinary claims.

Everything here works in batch (a constant number of statements for any
number of tasks), so a list or a GraphQL page never costs one query per task.

The predicate has two forms that must never drift: `unready_reason` (Python
over rows, with the reasons the task JSON reports; `readiness` gives it the
gate itself, derived from the decisions' history by gate.py, and
stored_gate.py the gate state stored on each task) and `READY_SQL` (WHERE
terms, so claims, ready lists and the digest skip blocked work inside SQL
instead of fetching it to test it; it lives in ready_store.py with the queries
that walk it).
`READY_SQL` reads the decision part from the gate state that migration 0014's
triggers keep on each task, exact at any service time; docs/tasks.md says why.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from waypost.clock import format_time
from waypost.resolvers.decisions import gate
from waypost.resolvers.tasks import ready_store
from waypost.resolvers.tasks.ready_store import gate_held
from waypost.resolvers.tasks.store import dependency_map

__all__ = [
    "MAX_DECISION_IDS",
    "Readiness",
    "next_ready",
    "readiness",
    "readiness_apart_from_gate",
    "ready_params",
]

MAX_DECISION_IDS = gate.MAX_IDS
log = logging.getLogger(__name__)


def ready_params(project_id: str, now: datetime) -> dict[str, str]:
    """The named parameters (`:project`, `:now`) READY_SQL and its kin bind."""
    return gate.gate_params(project_id, now)


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
    blocking = _gate_of(conn, project_id, task_rows, now)
    result: dict[str, Readiness] = {}
    for row in task_rows:
        own = list(blocking.get(row["id"], []))
        subject = row["subject_task_id"]
        decisions = _merge(own, list(blocking.get(subject, []))) if subject else own
        undone = [dep_id for dep_id, status in deps.get(row["id"], []) if status != "done"]
        reason = unready_reason(row["status"], row["lease_owner_id"], undone, bool(decisions))
        result[row["id"]] = Readiness(reason is None, reason, decisions, undone)
    return result


def _gate_of(
    conn: sqlite3.Connection, project_id: str, task_rows: Sequence[sqlite3.Row], now: datetime
) -> dict[str, list[str]]:
    """The decisions blocking each task and each activity's subject, from the
    history either way. For a task its stored gate state holds (an activity's
    covers its subject), that state names the first decisions (a walk that
    stops there) and the history confirms them: deriving every decision of
    every task cost 223 ms for a page of 100 tasks under 900 decisions each
    (gatescaleaudit). A task the stored state lets through is derived whole,
    as only the history may let work through; a stale row only chooses the
    slower way (each way reads the state as it is now)."""
    now_at = format_time(now)
    held: dict[str, None] = {}
    passing: dict[str, None] = {}
    for row in task_rows:
        side = held if gate_held(row, now_at) else passing
        side[row["id"]] = None
        if row["subject_task_id"]:
            side[row["subject_task_id"]] = None
    blocking: dict[str, list[str]] = {}
    if held:
        blocking.update(gate.named_blockers(conn, project_id, list(held), now))
    derived = [task_id for task_id in passing if task_id not in held]
    if derived:
        blocking.update(gate.blocking_decisions(conn, project_id, derived, now))
    return blocking


def unready_reason(
    status: str, lease_owner_id: str | None, undone: Sequence[str], gate_closed: bool
) -> str | None:
    """Why a task is not ready, or None when it is: the predicate in Python,
    whichever way its decision part (`gate_closed`) was found."""
    if status != "open":
        return "not_open"
    if lease_owner_id is not None:
        return "leased"
    if undone:
        return "dependencies_not_done"
    if gate_closed:
        return "decision_required"
    return None


def readiness_apart_from_gate(conn: sqlite3.Connection, row: sqlite3.Row) -> Readiness:
    """One task's readiness with the decision gate left out: a named claim puts
    the gate to the task next (tasks/operations.ensure_work_allowed), after
    these reasons, and deriving it here as well cost each claim a second
    derivation of every decision on the task."""
    own = dependency_map(conn, [row["id"]])[row["id"]]
    undone = [dep_id for dep_id, status in own if status != "done"]
    reason = unready_reason(row["status"], row["lease_owner_id"], undone, gate_closed=False)
    return Readiness(reason is None, reason, [], undone)


def next_ready(conn: sqlite3.Connection, project_id: str, now: datetime) -> sqlite3.Row | None:
    """The task an ordinary claim takes: highest priority ready task, ties oldest.

    One indexed statement whatever lies ahead in claim order: blocked work is
    not in the index it walks (ready_store.next_ready_row). The pick is then put to
    the gate itself (the decisions' history, for the task and its subject),
    in the caller's transaction. The stored state is exact, so that check
    passes; should it ever fail (a row written around the triggers), the
    claim logs it and falls back to deriving the gate for every task, which
    is slower but right: a drift can cost time, never a wrong claim.
    """
    params = ready_params(project_id, now)
    row = ready_store.next_ready_row(conn, params)
    if row is None:
        return None
    ids = [row["id"]] if row["subject_task_id"] is None else [row["id"], row["subject_task_id"]]
    blocking = gate.blocking_decisions(conn, project_id, ids, now)
    if not any(blocking.values()):
        return row
    log.error(
        "stored gate state of task %s disagrees with its decisions %s;"
        " claiming with the gate derived from history",
        row["id"],
        sorted({d for found in blocking.values() for d in found}),
    )
    return ready_store.next_ready_row_derived(conn, params)
