"""The digest's `blocked_tasks` walks only the tasks that carry a gate state
(the `tasks_gate_blocked` partial index): its cost does not grow with the
project's open, unblocked tasks (counted in SQLite VM steps, not timed), and
it still finds every blocked task, held or expired, in claim order."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from tests.cost_support import add_tasks, counting_steps, demo_db
from waypost.resolvers.tasks import ready_store
from waypost.resolvers.tasks.readiness import ready_params

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _blocked(conn: sqlite3.Connection) -> tuple[list[str], int]:
    params = ready_params("demo", NOW)
    rows, steps = counting_steps(
        conn, lambda: ready_store.gate_blocked_open_rows(conn, params, 201)
    )
    return [r["id"] for r in rows], steps


def test_blocked_tasks_do_not_walk_the_projects_open_tasks(
    tmp_path: Path, migrated_template: Path
) -> None:
    conn, actor = demo_db(tmp_path / "blocked.db", migrated_template)
    add_tasks(conn, actor, 10, 0)
    # The gate columns as the triggers write them: one task held by a decision,
    # one whose decision expired before NOW, one whose expiry is still ahead
    # (open now, so not listed), and one held but done (not listed).
    gates = [
        ("task_000002", 1, None, "open"),
        ("task_000005", 0, "2026-11-30T12:00:00.000Z", "open"),
        ("task_000007", 0, "2026-12-02T00:00:00.000Z", "open"),
        ("task_000008", 1, None, "done"),
    ]
    conn.executemany(
        "UPDATE tasks SET gate_held = ?, gate_expires = ?, status = ? WHERE id = ?",
        [(held, expires, status, task) for task, held, expires, status in gates],
    )
    found, few = _blocked(conn)
    assert found == ["task_000002", "task_000005"]
    add_tasks(conn, actor, 3000, 10)
    found, many = _blocked(conn)
    assert found == ["task_000002", "task_000005"]
    assert many <= few * 1.5, (few, many)
