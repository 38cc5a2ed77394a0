"""A migration that adds an index to a file analyzed before it leaves no index
without statistics (storage/statistics.py).

The file here is migrated up to 0020, holds 300 tasks, is analyzed, and is
then migrated to today, as a file an operator analyzed would be. Migration
0021 adds `tasks_by_status`; left without statistics beside analyzed
indexes, it looked so selective for `project_id = ?` that an unfiltered task
list sorted the whole project for one page.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from waypost.resolvers.access.principals import create_principal
from waypost.resolvers.projects.models import ProjectCreate
from waypost.resolvers.projects.operations import insert_project
from waypost.resolvers.tasks import store as task_store
from waypost.runtime import CONNECTION_HOOKS
from waypost.storage import migrate as migrations
from waypost.storage.db import connect_sync, run_write
from waypost.storage.migrate import available, migrate
from waypost.storage.statistics import unanalyzed_indexes

AT = "2026-11-30T00:00:00.000Z"


def _file_at_0020_with_tasks(path: Path, monkeypatch: pytest.MonkeyPatch) -> sqlite3.Connection:
    conn = connect_sync(path, hooks=CONNECTION_HOOKS)
    with monkeypatch.context() as patched:
        patched.setattr(
            migrations, "available", lambda: [m for m in available() if m.name < "0021"]
        )
        migrate(conn)
    human = run_write(conn, lambda c: create_principal(c, "human", "ops", AT))
    run_write(
        conn,
        lambda c: insert_project(
            c, ProjectCreate(id="p", name="P"), human["principal_id"], "human", AT
        ),
    )

    def tasks(c: sqlite3.Connection) -> None:
        c.executemany(
            "INSERT INTO tasks (id, project_id, title, description, acceptance_criteria, kind,"
            " priority, status, revision, judged_revision, created_by, created_at, updated_at)"
            " VALUES (?, 'p', ?, '', '[]', 'feature', 0, ?, 1, 1, ?, ?, ?)",
            [
                (f"task_{i:04d}", f"Task {i}", "done" if i % 50 == 0 else "open",
                 human["principal_id"], f"2026-11-30T00:00:{i // 10:02d}.{i % 10:03d}Z", AT)
                for i in range(300)
            ],
        )  # fmt: skip

    run_write(conn, tasks)
    return conn


def _plan(conn: sqlite3.Connection, **filters: str) -> list[str]:
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        task_store.list_rows(conn, "p", None, 51, **filters)  # type: ignore[arg-type]
    finally:
        conn.set_trace_callback(None)
    (sql,) = statements
    return [str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]


def test_a_file_analyzed_before_a_new_index_gets_its_statistics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = _file_at_0020_with_tasks(tmp_path / "analyzed.db", monkeypatch)
    try:
        conn.execute("ANALYZE")
        assert "tasks_by_status" not in {r[0] for r in conn.execute("SELECT idx FROM sqlite_stat1")}
        applied = migrate(conn)
        assert "0021_task_status_index.sql" in applied
        analyzed = {r[0] for r in conn.execute("SELECT idx FROM sqlite_stat1")}
        assert "tasks_by_status" in analyzed
        # what is left has no entries to count (no row of stat1 is written for those)
        for name in unanalyzed_indexes(conn):
            table = conn.execute(
                "SELECT tbl_name FROM sqlite_master WHERE name = ?", (name,)
            ).fetchone()[0]
            if conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None:
                assert "WHERE" in (
                    conn.execute(
                        "SELECT sql FROM sqlite_master WHERE name = ?", (name,)
                    ).fetchone()[0]
                    or ""
                ), name  # a partial index whose condition no row meets
    finally:
        conn.close()
    reopened = sqlite3.connect(tmp_path / "analyzed.db")  # plans with the stored statistics
    try:
        everything = _plan(reopened)
        assert everything == ["SEARCH t USING INDEX tasks_by_created (project_id=?)"], everything
        done = _plan(reopened, status="done")
        assert done == ["SEARCH t USING INDEX tasks_by_status (project_id=? AND status=?)"], done
        rows = task_store.list_rows(reopened, "p", None, 51, status="done")
        assert [r[0] for r in rows] == [f"task_{i:04d}" for i in range(0, 300, 50)]
    finally:
        reopened.close()


def test_a_file_without_statistics_is_left_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = _file_at_0020_with_tasks(tmp_path / "plain.db", monkeypatch)
    try:
        assert migrate(conn)  # 0021 and later applied
        assert (
            conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'").fetchone()
            is None
        )
        assert unanalyzed_indexes(conn) == []
        assert _plan(conn) == ["SEARCH t USING INDEX tasks_by_created (project_id=?)"]
    finally:
        conn.close()
