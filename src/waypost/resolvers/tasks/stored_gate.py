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
is complete at once. The JSON is `views.shape`'s, key for key, except
`lease` and `publication`, which no field of the fast path shows (each
column read costs; tests/test_tasks_stored_gate.py holds the two to each
other across every kind of gate transition, and a fast path field reading
a key left out would meet a KeyError, which hands the query to graphql-core).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from waypost.clock import format_time
from waypost.resolvers.decisions import gate
from waypost.resolvers.tasks.readiness import Readiness
from waypost.resolvers.tasks.store import dependency_map, shown_rows_by_ids

__all__ = ["NOT_SHOWN", "GateStateDrift", "fill_blocked_by", "tasks_by_ids"]

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


# the task JSON's keys this module leaves out (see the module docstring)
NOT_SHOWN: Final = frozenset({"lease", "publication"})


def tasks_by_ids(
    conn: sqlite3.Connection, task_ids: Sequence[str], now: datetime
) -> dict[str, dict[str, Any]]:
    """Task JSON by id for each id that names a task (any project), but for
    NOT_SHOWN; `blocked_by` is left out of tasks the stored gate state holds
    (see `fill_blocked_by`)."""
    if not task_ids:
        return {}
    # only the columns the JSON shows, as tuples (see the store function)
    rows = shown_rows_by_ids(conn, task_ids, format_time(now))
    deps = dependency_map(conn, [r[0] for r in rows])
    found: dict[str, dict[str, Any]] = {}
    for row in rows:
        (id_, project_id, title, description, criteria, kind, priority, subject, status,
         revision, lease_owner, created_at, updated_at, gate_open) = row  # fmt: skip
        own = deps[id_]
        undone = [dep_id for dep_id, dep_status in own if dep_status != "done"]
        task: dict[str, Any] = {
            "id": id_,
            "project_id": project_id,
            "title": title,
            "description": description,
            "acceptance_criteria": _json_list(criteria),
            "kind": kind,
            "priority": priority,
            "depends_on": [dep_id for dep_id, _ in own],
            "subject_task_id": subject,
            "status": status,
            "revision": revision,
            # readiness.readiness's predicate, its decision part stored
            "ready": bool(gate_open) and status == "open" and lease_owner is None and not undone,
            "created_at": created_at,
            "updated_at": updated_at,
        }  # fmt: skip
        if gate_open:
            # open by the stored state: no decision blocks it or its subject
            task["blocked_by"] = Readiness(False, None, [], undone).blocked_by()
        else:
            task[_UNDONE] = undone
        found[id_] = task
    return found


def fill_blocked_by(
    conn: sqlite3.Connection, tasks: Sequence[dict[str, Any]], now: datetime
) -> None:
    """Complete `blocked_by` of tasks from `tasks_by_ids`, from the gate derived
    from the history, as `readiness.readiness` does (a constant number of
    statements: one per project). Raises GateStateDrift when a task the stored
    state holds has no blocking decision."""
    # each task once: a task shown in many places is one shared dict
    todo = list({t["id"]: t for t in tasks if "blocked_by" not in t}.values())
    by_project: dict[str, list[dict[str, Any]]] = {}
    for task in todo:
        by_project.setdefault(task["project_id"], []).append(task)
    for project_id, group in by_project.items():
        ids = [t["id"] for t in group]
        subjects = sorted({t["subject_task_id"] for t in group if t["subject_task_id"]})
        blocking = gate.blocking_decisions(
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
