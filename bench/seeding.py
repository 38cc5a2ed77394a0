"""Bulk seeding for the workflow suite: tasks and decisions written with plain SQL.

Seeding bypasses the API on purpose. Ten thousand `POST .../tasks` would take
most of the time budget and measure nothing we report. The rows written here
are the rows the resolvers write (same tables, same columns, revision 1 of
each task in `task_revisions`, two generations per decision with an answer on
the first), so every measured request reads exactly the state it would read
after the same history through the API. Receipts and events are not seeded:
no measured read path looks at them, and the measured mutations (claim,
release) write their own as usual.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from waypost.clock import format_time

BLOCKED_PRIORITY = 10  # blocked tasks come first in claim order (priority DESC)


@dataclass(frozen=True)
class Gating:
    """`decisions` pending decisions (current generation 2, generation 1 denied)
    that block the first `blocked` tasks in both claim order and creation order.

    Each decision affects `per_decision` consecutive tasks plus, when there is
    one, the first task of the next decision's range, so neighbouring decisions
    share a task (as real ones do) and a dashboard sees tasks shared across
    decisions; every blocked task is blocked by one or two decisions.
    """

    decisions: int
    per_decision: int

    @property
    def blocked(self) -> int:
        return self.decisions * self.per_decision


def seed_project(
    conn: sqlite3.Connection,
    project_id: str,
    tasks: int,
    creator_id: str,
    now: datetime,
    gating: Gating | None = None,
) -> list[str]:
    """Open tasks (oldest first) and, with `gating`, the decisions blocking the
    oldest ones; returns the task ids in creation order. One transaction's work."""
    project = conn.execute("SELECT * FROM projects WHERE id = ?", (project_id,)).fetchone()
    start = now - timedelta(days=1)
    blocked = gating.blocked if gating else 0
    ids = [f"task_{project_id}_{i:06d}" for i in range(tasks)]
    at = [format_time(start + timedelta(milliseconds=i)) for i in range(tasks)]
    conn.executemany(
        "INSERT INTO tasks (id, project_id, title, description, acceptance_criteria, kind,"
        " priority, status, revision, judged_revision, created_by, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, '[]', 'feature', ?, 'open', 1, 1, ?, ?, ?)",
        [
            (ids[i], project_id, f"Task {i}", f"Seeded task number {i} of {project_id}",
             BLOCKED_PRIORITY if i < blocked else 0, creator_id, at[i], at[i])
            for i in range(tasks)
        ],
    )  # fmt: skip
    conn.execute(
        "INSERT INTO task_revisions (task_id, revision, title, description, acceptance_criteria,"
        " kind, priority, depends_on, changed_fields, judged_change, actor_id, at)"
        " SELECT id, 1, title, description, acceptance_criteria, kind, priority, '[]', ?, 1,"
        " created_by, created_at FROM tasks WHERE project_id = ?",
        (json.dumps(["title", "description", "acceptance_criteria", "kind", "priority",
                     "depends_on"]), project_id),
    )  # fmt: skip
    if gating is not None:
        _seed_decisions(conn, project, ids, gating, creator_id, start)
    return ids


def _seed_decisions(
    conn: sqlite3.Connection,
    project: sqlite3.Row,
    task_ids: list[str],
    gating: Gating,
    creator_id: str,
    start: datetime,
) -> None:
    project_id = project["id"]
    decisions: list[tuple[Any, ...]] = []
    generations: list[tuple[Any, ...]] = []
    affected: list[tuple[Any, ...]] = []
    answers: list[tuple[Any, ...]] = []
    for d in range(gating.decisions):
        decision_id = f"dec_{project_id}_{d:05d}"
        first = d * gating.per_decision
        chosen = task_ids[first : first + gating.per_decision]
        if d + 1 < gating.decisions and gating.per_decision < 100:
            chosen.append(task_ids[first + gating.per_decision])  # shared with the next one
        created = format_time(start + timedelta(hours=1, milliseconds=10 * d))
        reopened = format_time(start + timedelta(hours=2, milliseconds=10 * d))
        decisions.append(
            (decision_id, project_id, f"May we proceed with batch {d}?", '["yes","no"]',
             "Seeded for the benchmark.", "human", None, 0, 2, created, creator_id, "human")
        )  # fmt: skip
        for generation, at in ((1, created), (2, reopened)):
            generations.append(
                (decision_id, generation, project["policy_revision"], "bench", "[]", None,
                 None if generation == 1 else "asked again", creator_id, "human", None, at)
            )  # fmt: skip
            affected.extend(
                (decision_id, generation, position, task_id, 1)
                for position, task_id in enumerate(chosen)
            )
        answers.append(
            (decision_id, 1, "deny", "no", "Not yet.", 0, creator_id, None, 0, None, None,
             None, None, 0, reopened)
        )  # fmt: skip
    conn.executemany(
        "INSERT INTO decisions (id, project_id, question, options, rationale, required_actor,"
        " recommendation, reversible, generation, created_at, created_by, created_by_kind)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        decisions,
    )
    conn.executemany(
        "INSERT INTO decision_generations (decision_id, generation, policy_revision,"
        " environment, conditions, expires_at, reopen_rationale, actor_id, actor_kind,"
        " actor_session_id, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        generations,
    )
    conn.executemany(
        "INSERT INTO decision_affected (decision_id, generation, position, task_id,"
        " task_revision) VALUES (?, ?, ?, ?, ?)",
        affected,
    )
    conn.executemany(
        "INSERT INTO decision_answers (decision_id, generation, disposition, answer, rationale,"
        " conditions_confirmed, actor_id, actor_session_id, relayed, relay_prompt,"
        " relay_response, authorized_by, relay_policy_revision, timed_out, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        answers,
    )
