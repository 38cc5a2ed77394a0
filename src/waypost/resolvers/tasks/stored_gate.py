"""Task JSON with `ready` from the stored gate state (the GraphQL fast path's tasks).

`views.present_tasks` derives each task's decision gate from the decisions'
history (`gate.blocking_decisions`: the status of every generation affecting
the task, computed per pair) because the task JSON lists the blocking
decisions. A reader that asks only whether a task is ready, as a dashboard
does for every task it shows, needs one bit, and migration 0014 stores it:
a task passes the gate at `now` exactly when `gate_held = 0` and
`gate_expires` is null or later than `now` (docs/tasks.md, "How claims and
ready lists skip blocked work"; the triggers keep it exact in the writing
transaction, and the ready lists and claims already read it).

So `tasks_by_ids` reads the task columns and that bit in one indexed
statement, and leaves `blocked_by` out of a task the stored state says is
blocked. The list of blocking decisions is then derived from the history,
the authority, only when a caller asks for it (`fill_blocked_by`); a task
the stored state says is open is blocked by no decision, so its `blocked_by`
is complete at once. The JSON is `views.shape`'s, key for key, each
key read only when asked for (each column read costs;
tests/test_tasks_stored_gate.py holds the two to each other across every
kind of gate transition, and a fast path field reading a key left out would
meet a KeyError, which hands the query to graphql-core).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, Final

from waypost.clock import format_time
from waypost.resolvers.decisions import gate
from waypost.resolvers.tasks.readiness import Readiness, unready_reason
from waypost.resolvers.tasks.store import GATE_OPEN, dependency_map, shown_rows_by_ids
from waypost.resolvers.tasks.views import lease_json, publication_json

__all__ = ["KEYS", "GateStateDrift", "fill_blocked_by", "tasks_by_ids"]

log = logging.getLogger(__name__)

# private keys of a task whose `blocked_by` is still to be derived (the fast
# path serves only the schema's fields, never these)
_UNDONE: Final = "_undone_dependencies"


class GateStateDrift(Exception):
    """The stored gate state said blocked and the history says otherwise: a row
    written around the triggers. The caller answers from the history instead."""


def _json_list(text: str) -> Any:
    # nearly every task has no acceptance criteria: skip the parser for those
    return [] if text == "[]" else json.loads(text)


# Every key tasks_by_ids can show; `id`, `project_id` and `subject_task_id`
# are always shown (a task is placed and its gate derived by them).
KEYS: Final = frozenset({
    "id", "project_id", "title", "description", "acceptance_criteria", "kind", "priority",
    "depends_on", "subject_task_id", "status", "revision", "ready", "blocked_by",
    "lease", "publication", "created_at", "updated_at",
})  # fmt: skip
_ALWAYS: Final = ("id", "project_id", "subject_task_id")
# keys that are a column of their own, under the same name
_PLAIN: Final = ("title", "description", "kind", "priority", "status", "revision",
                 "created_at", "updated_at")  # fmt: skip
# the columns behind the two objects (views.lease_json, views.publication_json)
_LEASE: Final = ("lease_owner_id", "lease_session_id", "lease_expires_at", "lease_workflow")
_PUBLICATION: Final = ("publication_holder_id", "publication_holder_session_id",
                       "publication_prepared_at", "publication_result")  # fmt: skip


def tasks_by_ids(
    conn: sqlite3.Connection,
    task_ids: Sequence[str],
    now: datetime,
    keys: Collection[str] = KEYS,
) -> dict[str, dict[str, Any]]:
    """Task JSON by id for each id that names a task (any project), with the
    `keys` asked for (and `id`, `project_id`, `subject_task_id`): each column
    read costs about as much as looking the row up, so a reader showing a
    few fields reads a few columns. `blocked_by` is left out of tasks the
    stored gate state holds (see `fill_blocked_by`)."""
    if not task_ids:
        return {}
    gate_part = "ready" in keys or "blocked_by" in keys
    columns = [*_ALWAYS, *(k for k in _PLAIN if k in keys)]
    if "acceptance_criteria" in keys:
        columns.append("acceptance_criteria")
    if gate_part:
        columns += ["status", "lease_owner_id", GATE_OPEN]
    if "lease" in keys:
        columns += _LEASE
    if "publication" in keys:
        columns += _PUBLICATION
    columns = list(dict.fromkeys(columns))
    # the columns read for the gate or an object, not keys of the JSON
    raw = [c for c in columns if c in _LEASE or c in _PUBLICATION]
    rows = shown_rows_by_ids(conn, task_ids, format_time(now), columns)
    if "depends_on" in keys or "blocked_by" in keys:
        deps = dependency_map(conn, [r[0] for r in rows])
    elif gate_part:
        # `ready` alone: dependencies decide only for an open, unleased task
        # the stored gate lets through (on a dashboard of pending decisions,
        # none: the statement is skipped)
        at = {c: i for i, c in enumerate(columns)}
        status, lease, gate = at["status"], at["lease_owner_id"], at[GATE_OPEN]
        candidates = [r[0] for r in rows if r[gate] and r[status] == "open" and r[lease] is None]
        deps = dependency_map(conn, candidates) if candidates else {}
    else:
        deps = {}
    found: dict[str, dict[str, Any]] = {}
    for row in rows:
        task = dict(zip(columns, row, strict=True))
        if "lease" in keys:
            task["lease"] = lease_json(task)
        if "publication" in keys:
            task["publication"] = publication_json(task)
        if "acceptance_criteria" in task:
            task["acceptance_criteria"] = _json_list(task["acceptance_criteria"])
        own = deps.get(task["id"], [])
        if "depends_on" in keys:
            task["depends_on"] = [dep_id for dep_id, _ in own]
        if gate_part:
            gate_open = task.pop(GATE_OPEN)
            lease_owner = task["lease_owner_id"]
            undone = [dep_id for dep_id, dep_status in own if dep_status != "done"]
            # the predicate, its decision part stored
            reason = unready_reason(task["status"], lease_owner, undone, not gate_open)
            task["ready"] = reason is None
            # (without `blocked_by`, `undone` may not be the whole list: see `deps`)
            if "blocked_by" in keys and gate_open:
                # open by the stored state: no decision blocks it or its subject
                task["blocked_by"] = Readiness(False, None, [], undone).blocked_by()
            elif "blocked_by" in keys:
                task[_UNDONE] = undone
        for column in raw:
            del task[column]
        found[task["id"]] = task
    return found


def fill_blocked_by(
    conn: sqlite3.Connection, tasks: Sequence[dict[str, Any]], now: datetime
) -> None:
    """Complete `blocked_by` of tasks from `tasks_by_ids`, from the gate derived
    from the history, as `readiness.readiness` does (a constant number of
    statements: one per project) for those read with `ready` or `blocked_by`
    that the stored state holds. Raises GateStateDrift when such a task has no
    blocking decision."""
    # each task once: a task shown in many places is one shared dict
    todo = list({t["id"]: t for t in tasks if _UNDONE in t}.values())
    by_project: dict[str, list[dict[str, Any]]] = {}
    for task in todo:
        by_project.setdefault(task["project_id"], []).append(task)
    for project_id, group in by_project.items():
        ids = [t["id"] for t in group]
        subjects = sorted({t["subject_task_id"] for t in group if t["subject_task_id"]})
        blocking = gate.named_blockers(
            conn, project_id, list(dict.fromkeys([*ids, *subjects])), now
        )
        for task in group:
            subject = task["subject_task_id"]
            decisions = list(blocking[task["id"]])
            if subject:
                decisions = list(dict.fromkeys([*decisions, *blocking[subject]]))
            if not decisions:
                log.error("stored gate state of task %s disagrees with its decisions", task["id"])
                raise GateStateDrift(task["id"])
            task["blocked_by"] = Readiness(False, None, decisions, task.pop(_UNDONE)).blocked_by()
