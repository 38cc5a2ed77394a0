"""The decision gate: may work on a task proceed, as far as decisions go?

`ensure_decisions_resolved` runs inside the writer transaction of every
ownership-dependent task operation; `blocking_decisions` is the same predicate
in batch form, used for readiness in lists, claims and the context packet.

A task is blocked by every decision whose *current* generation affects it and
whose status is anything but `allowed` (pending, denied, deferred, stale or
expired). The status comes from `decision_status`, the one function that
decides; earlier generations never block or unblock anything.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime

from waypost.clock import format_time
from waypost.errors import DecisionRequired
from waypost.resolvers.decision_status import STATUS_SQL, install

MAX_IDS = 20


def blocking_decisions(
    conn: sqlite3.Connection, project_id: str, task_ids: Sequence[str], now: datetime
) -> dict[str, list[str]]:
    """For each task id, the ids of decisions that block it (stable order).

    One statement for any number of tasks. The order is the decisions'
    `created_at`, then id. Each list holds at most MAX_IDS + 1 ids: enough to
    report MAX_IDS of them and whether more exist (`len(ids) > MAX_IDS`).
    """
    result: dict[str, list[str]] = {task_id: [] for task_id in task_ids}
    if not task_ids:
        return result
    install(conn)
    rows = conn.execute(
        "SELECT task_id, decision_id FROM ("
        " SELECT x.task_id, s.decision_id,"
        "  ROW_NUMBER() OVER (PARTITION BY x.task_id ORDER BY s.created_at, s.decision_id) AS n"
        # CROSS JOIN fixes the join order (SQLite keeps it as written): from the
        # tasks asked about through the by-task index, never a scan of every
        # decision of the project.
        " FROM json_each(:tasks) k"
        " CROSS JOIN decision_affected x ON x.task_id = k.value"
        " CROSS JOIN decision_current s ON s.decision_id = x.decision_id"
        "  AND s.generation = x.generation"
        f" WHERE s.project_id = :project AND {STATUS_SQL} <> 'allowed'"
        f") WHERE n <= {MAX_IDS + 1} ORDER BY task_id, n",
        {
            "tasks": json.dumps(list(dict.fromkeys(task_ids))),
            "project": project_id,
            "now": format_time(now),
        },
    ).fetchall()
    for r in rows:
        result[r["task_id"]].append(r["decision_id"])
    return result


def ensure_decisions_resolved(
    conn: sqlite3.Connection, project_id: str, task_id: str, now: datetime
) -> None:
    """Raise `decision_required` when a decision blocks work on `task_id`."""
    ensure_all_resolved(conn, project_id, [task_id], now)


def ensure_all_resolved(
    conn: sqlite3.Connection, project_id: str, task_ids: Sequence[str], now: datetime
) -> None:
    """Raise `decision_required` when a decision blocks any of `task_ids` (an
    activity and its subject); the ids are merged in task order, each once.

    Each per-task list is capped at MAX_IDS + 1, so the merged list is longer
    than MAX_IDS exactly when the full union is: `truncated` stays exact.
    """
    blocking = blocking_decisions(conn, project_id, task_ids, now)
    merged = list(dict.fromkeys(d for task_id in task_ids for d in blocking[task_id]))
    if merged:
        raise DecisionRequired(
            "a decision blocks this work",
            {"decision_ids": merged[:MAX_IDS], "truncated": len(merged) > MAX_IDS},
        )
