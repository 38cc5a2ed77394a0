"""Helpers for the tests that count SQLite VM steps instead of timing a
statement: a project `demo` on a fresh file, tasks added in bulk, and a step
counter around one call (on a connection, or in a unit of work of a running
service's database).

Steps are counted one by one: SQLite counts towards the handler's interval
per step call of a statement, so a coarser count varies with the rows
returned. FTS5's own reads of its index count too, and grow with its
segments: a test that adds rows between two counts merges the index first
(`'optimize'`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tests.conftest import copy_database
from waypost.resolvers.access import principals
from waypost.resolvers.projects.models import ProjectCreate
from waypost.resolvers.projects.operations import insert_project
from waypost.storage.db import connect_sync, run_write

AT = "2026-11-30T00:00:00.000Z"
T = TypeVar("T")


def demo_db(path: Path, template: Path) -> tuple[sqlite3.Connection, str]:
    """A migrated file at `path` with project `demo`, and the id of its human."""
    conn = connect_sync(copy_database(template, path))
    human = run_write(conn, lambda c: principals.create_principal(c, "human", "seed", AT))
    actor: str = human["principal_id"]
    run_write(
        conn, lambda c: insert_project(c, ProjectCreate(id="demo", name="D"), actor, "human", AT)
    )
    return conn, actor


def add_tasks(conn: sqlite3.Connection, actor: str, count: int, start: int) -> None:
    """Open tasks `task_{start:06d}` onwards in `demo`, written directly."""
    conn.executemany(
        "INSERT INTO tasks (id, project_id, title, description, acceptance_criteria, kind,"
        " priority, status, revision, judged_revision, created_by, created_at, updated_at)"
        " VALUES (?, 'demo', 't', 'd', '[]', 'feature', 0, 'open', 1, 1, ?, ?, ?)",
        [(f"task_{i:06d}", actor, AT, AT) for i in range(start, start + count)],
    )


def counting_steps(conn: sqlite3.Connection, run: Callable[[], T]) -> tuple[T, int]:
    """What `run()` returns and how many SQLite VM steps it took on `conn`."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn.set_progress_handler(count, 1)
    try:
        result = run()
    finally:
        conn.set_progress_handler(None, 1)
    return result, steps


async def unit_steps(
    db: Any, call: Callable[[sqlite3.Connection], object], write: bool = False
) -> int:
    """The VM steps of `call(conn)` in one read (or write) unit of work of
    `db` (a service's `rt.db`)."""

    def unit(conn: sqlite3.Connection) -> int:
        return counting_steps(conn, lambda: call(conn))[1]

    steps: int = await (db.write(unit) if write else db.read(unit))
    return steps
