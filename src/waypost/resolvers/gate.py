"""The decision gate: may work on a task proceed, as far as decisions go?

`ensure_decisions_resolved` runs inside the writer transaction of every
ownership-dependent task operation; `blocking_decisions` is the same predicate
in batch form, used for readiness in lists, claims and the context packet.

The decisions issue completes both over the decisions tables; until then no
decision exists and nothing is blocked.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from waypost.errors import DecisionRequired

MAX_IDS = 20


def blocking_decisions(
    conn: sqlite3.Connection, project_id: str, task_ids: Sequence[str], now: datetime
) -> dict[str, list[str]]:
    """For each task id, the ids of decisions that block it (stable order)."""
    return {task_id: [] for task_id in task_ids}


def ensure_decisions_resolved(
    conn: sqlite3.Connection, project_id: str, task_id: str, now: datetime
) -> None:
    """Raise `decision_required` when a decision blocks work on `task_id`."""
    blocking = blocking_decisions(conn, project_id, [task_id], now)[task_id]
    if blocking:
        raise DecisionRequired(
            "a decision blocks this work",
            {"decision_ids": blocking[:MAX_IDS], "truncated": len(blocking) > MAX_IDS},
        )
