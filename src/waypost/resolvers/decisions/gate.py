"""The decision gate: may work on a task proceed, as far as decisions go?

`ensure_decisions_resolved` runs inside the writer transaction of every
ownership-dependent task operation; `blocking_decisions` is the same predicate
in batch form, used for readiness in the task JSON and the context packet;
`BLOCKED_CTE` is the same predicate again as a set of task ids, used by the
SQL that must skip blocked work without looking at it (claims, ready lists,
the digest; see readiness.py).

A task is blocked by every decision whose *current* generation affects it and
whose status is anything but `allowed` (pending, denied, deferred, stale or
expired). The status comes from `decision_status`, the one function that
decides; earlier generations never block or unblock anything.

Cost: the `decision_current` view's `stale` column is a correlated subquery
over every task a decision affects. Joined straight to `decision_affected`,
SQLite evaluates it once per (task, decision) row, so a decision over 100
tasks pays 100 times for the same answer. Both statements here therefore
decide each decision's status once, in a MATERIALIZED CTE, and only then fan
out to the tasks it affects.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Final

from waypost.clock import format_time
from waypost.errors import DecisionRequired
from waypost.resolvers.decisions.status import STATUS_SQL

MAX_IDS = 20

# The ids of the tasks the gate holds back in one project, as the CTE `blocked`
# (with its helper `holding`), for `WITH {BLOCKED_CTE} SELECT ...`. It binds
# `:project` and `:now`: take them from `gate_params`, which also registers the
# status function. MATERIALIZED makes SQLite compute the set once per statement
# (and the statuses once per decision) instead of re-deriving it per task.
BLOCKED_CTE: Final = (
    "holding(decision_id, generation) AS MATERIALIZED ("
    " SELECT s.decision_id, s.generation FROM decision_current s"
    f" WHERE s.project_id = :project AND {STATUS_SQL} <> 'allowed'),"
    " blocked(id) AS MATERIALIZED ("
    " SELECT x.task_id FROM holding CROSS JOIN decision_affected x"
    "  ON x.decision_id = holding.decision_id AND x.generation = holding.generation)"
)


def gate_params(conn: sqlite3.Connection, project_id: str, now: datetime) -> dict[str, str]:
    """The parameters `BLOCKED_CTE` binds (the status function is installed on every
    connection when it opens: see `waypost.runtime.CONNECTION_HOOKS`)."""
    return {"project": project_id, "now": format_time(now)}


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
    rows = conn.execute(
        # `pairs`: every generation affecting an asked task, found from the tasks
        # through the by-task index (CROSS JOIN keeps that order), never a scan
        # of the project's decisions. `holding`: the status of each distinct
        # generation among them, once; only current generations survive the join
        # with `decision_current`.
        "WITH pairs(task_id, decision_id, generation) AS MATERIALIZED ("
        "  SELECT x.task_id, x.decision_id, x.generation FROM json_each(:tasks) k"
        "  CROSS JOIN decision_affected x ON x.task_id = k.value),"
        " holding(decision_id) AS MATERIALIZED ("
        "  SELECT s.decision_id FROM (SELECT DISTINCT decision_id, generation FROM pairs) asked"
        "  CROSS JOIN decision_current s ON s.decision_id = asked.decision_id"
        "   AND s.generation = asked.generation"
        f"  WHERE s.project_id = :project AND {STATUS_SQL} <> 'allowed')"
        # Back to the tasks: `d.generation` keeps current generations only, and
        # `IN holding` is a lookup in an index SQLite builds once (a join of the
        # two CTEs would compare every pair with every decision).
        " SELECT task_id, decision_id FROM ("
        "  SELECT pairs.task_id, d.id AS decision_id, ROW_NUMBER() OVER"
        "   (PARTITION BY pairs.task_id ORDER BY d.created_at, d.id) AS n"
        "  FROM pairs CROSS JOIN decisions d"
        "   ON d.id = pairs.decision_id AND d.generation = pairs.generation"
        "  WHERE pairs.decision_id IN holding)"
        f" WHERE n <= {MAX_IDS + 1} ORDER BY task_id, n",
        {"tasks": json.dumps(list(dict.fromkeys(task_ids))), **gate_params(conn, project_id, now)},
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
