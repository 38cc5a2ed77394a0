"""A migration that adds an index to a file analyzed before it leaves no index
without statistics (storage/statistics.py).

The file here is migrated up to 0020, holds 300 tasks and 300 tagged
knowledge records, is analyzed, and is then migrated to today, as a file an
operator analyzed would be. Migration 0021 adds `tasks_by_status`; left
without statistics beside analyzed indexes, it looked so selective for
`project_id = ?` that an unfiltered task list sorted the whole project for
one page. Migration 0022 rebuilds `knowledge_tags`, a `WITHOUT ROWID` table
whose key has no index name: without a row of its own, the shared part of a
tag list sorted every row of the tag.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from waypost.resolvers.access.principals import create_principal
from waypost.resolvers.knowledge.models import KnowledgeListQuery
from waypost.resolvers.knowledge.store import list_rows as knowledge_rows
from waypost.resolvers.projects.models import ProjectCreate
from waypost.resolvers.projects.operations import insert_project
from waypost.resolvers.tasks import store as task_store
from waypost.runtime import CONNECTION_HOOKS
from waypost.storage import migrate as migrations
from waypost.storage.db import connect_sync, run_write
from waypost.storage.migrate import available, migrate
from waypost.storage.statistics import unanalyzed_tables

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

    def knowledge(c: sqlite3.Connection) -> None:
        c.executemany(
            "INSERT INTO knowledge (id, project_id, kind, collection, share_across_projects,"
            " title, body, status, scope_task_ids, scope_components, scope_environments,"
            " scope_versions, tags, applicability, provenance_summary, provenance_actor_id,"
            " provenance_recorded_at, revision, created_at, updated_at)"
            " VALUES (?, 'p', 'lesson', ?, ?, ?, '', 'observed', '[]', '[]', '[]', '[]', ?,"
            " '', 'seeded', ?, ?, 1, ?, ?)",
            [
                (f"kn_{i:04d}", "shared" if i % 3 == 0 else "project", int(i % 3 == 0),
                 f"Record {i}", f'["common", "t{i % 7}"]', human["principal_id"], at, at, at)
                for i in range(300)
                for at in [f"2026-11-30T00:01:{i // 10:02d}.{i % 10:03d}Z"]
            ],
        )  # fmt: skip

    run_write(conn, tasks)
    run_write(conn, knowledge)
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
        # the new index, the rebuilt table's key (under the table's name) and its indexes
        assert {"tasks_by_status", "knowledge_tags", "knowledge_tags_by_status"} <= analyzed
        # what is left has no entries to count (no row of stat1 is written for those):
        # an empty table, or a partial index whose condition no row meets
        for table in unanalyzed_tables(conn):
            if conn.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone() is None:
                continue
            for (sql,) in conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ?"
                " AND name NOT IN (SELECT idx FROM sqlite_stat1 WHERE idx IS NOT NULL)",
                (table,),
            ):
                assert sql is not None and " WHERE " in sql, (table, sql)
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
        statements: list[str] = []
        reopened.set_trace_callback(statements.append)
        tagged = KnowledgeListQuery(tag="common", include_shared=True)
        page = knowledge_rows(reopened, "other", tagged, None, None, 51)
        reopened.set_trace_callback(None)
        assert [r[0] for r in page] == [f"kn_{i:04d}" for i in range(297, 146, -3)]
        (sql,) = statements
        plan = [str(row[3]) for row in reopened.execute(f"EXPLAIN QUERY PLAN {sql}")]
        shared = plan[plan.index("RIGHT") :]  # the other projects' shared records
        assert any("knowledge_tags_shared (tag=?)" in p for p in shared), plan
        assert not any("TEMP B-TREE" in p for p in shared[:-1]), plan
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
        assert unanalyzed_tables(conn) == []
        assert _plan(conn) == ["SEARCH t USING INDEX tasks_by_created (project_id=?)"]
    finally:
        conn.close()


def test_a_start_killed_before_the_analysis_leaves_no_index_without_statistics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The analysis ran in a transaction of its own after the migrations: a
    process killed between the two left the new indexes without statistics
    for good (list pages 10-25 times slower), since the next start applied
    no migration and so analyzed nothing. It is now part of the last
    migration's transaction: killed there, the migration is not applied
    either, and the next start does both."""
    from waypost.storage import statistics

    conn = _file_at_0020_with_tasks(tmp_path / "killed.db", monkeypatch)
    try:
        conn.execute("ANALYZE")

        def killed(_: sqlite3.Connection) -> list[str]:
            raise KeyboardInterrupt  # as a signal lands while the statistics are made

        with monkeypatch.context() as patched:
            patched.setattr(statistics, "unanalyzed_tables", killed)
            with pytest.raises(KeyboardInterrupt):
                migrate(conn)
        assert not conn.in_transaction
        migrate(conn)  # the next start
        analyzed = {r[0] for r in conn.execute("SELECT idx FROM sqlite_stat1")}
        assert {"tasks_by_status", "knowledge_tags", "knowledge_tags_by_status"} <= analyzed
        assert {m.name for m in available()} <= {
            r[0] for r in conn.execute("SELECT name FROM schema_migrations")
        }
    finally:
        conn.close()
