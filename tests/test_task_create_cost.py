"""A task create's dependency check looks ids up by key: its cost does not
grow with the number of tasks the project already holds (counted in SQLite
VM steps, not timed)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.conftest import copy_database
from waypost.resolvers.access import principals
from waypost.resolvers.projects.models import ProjectCreate
from waypost.resolvers.projects.operations import insert_project
from waypost.resolvers.tasks import store
from waypost.storage.db import connect_sync, run_write

AT = "2026-11-30T00:00:00.000Z"


def _add_tasks(conn: sqlite3.Connection, actor: str, count: int, start: int) -> None:
    conn.executemany(
        "INSERT INTO tasks (id, project_id, title, description, acceptance_criteria, kind,"
        " priority, status, revision, judged_revision, created_by, created_at, updated_at)"
        " VALUES (?, 'demo', 't', 'd', '[]', 'feature', 0, 'open', 1, 1, ?, ?, ?)",
        [(f"task_{i:06d}", actor, AT, AT) for i in range(start, start + count)],
    )


def _steps(conn: sqlite3.Connection, ids: list[str]) -> int:
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn.set_progress_handler(count, 1)
    try:
        found = store.existing_task_ids(conn, "demo", ids)
    finally:
        conn.set_progress_handler(None, 1)
    assert found == {i for i in ids if i.startswith("task_0")}
    return steps


def test_the_dependency_check_does_not_walk_the_projects_tasks(
    tmp_path: Path, migrated_template: Path
) -> None:
    conn = connect_sync(copy_database(migrated_template, tmp_path / "cost.db"))
    human = run_write(conn, lambda c: principals.create_principal(c, "human", "seed", AT))
    actor = human["principal_id"]
    run_write(
        conn, lambda c: insert_project(c, ProjectCreate(id="demo", name="D"), actor, "human", AT)
    )
    _add_tasks(conn, actor, 10, 0)
    asked = ["task_000003", "task_000007", "missing"]
    few = _steps(conn, asked)
    _add_tasks(conn, actor, 3000, 10)
    many = _steps(conn, asked)
    assert many <= few * 1.5, (few, many)
    assert _steps(conn, []) == 0
