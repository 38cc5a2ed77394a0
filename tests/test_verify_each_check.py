"""`waypost admin verify`: each check finds the damage it names (docs/operations.md),
one test each (only one test tampered with a copy, and most checks could
have stopped looking unnoticed: mutantaudit4); and a backup of a damaged file
is refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.conftest import Caller, Service
from tests.decisions_support import new_task, open_decision
from tests.test_backup_verify import populate
from tests.test_cli import run
from waypost.maintenance import backup, verify
from waypost.resolvers.core import sweep
from waypost.storage.migrate import migrate


async def tampered(
    service: Service, human: Caller, tmp_path: Path
) -> tuple[Path, sqlite3.Connection]:
    await populate(service, human)
    copy = tmp_path / "copy.db"
    backup(service.db_path, copy)
    return copy, sqlite3.connect(copy, isolation_level=None)


async def test_verify_finds_a_history_row_missing_below_the_last(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    """checks.py: "Each record's current revision is its last history row,
    with none missing": a deleted revision 1 under a task at revision 2."""
    copy, conn = await tampered(service, human, tmp_path)
    (task_id,) = conn.execute("SELECT id FROM tasks WHERE revision >= 2 LIMIT 1").fetchone()
    conn.execute("DROP TRIGGER task_revisions_no_delete")  # written around the service
    conn.execute("DELETE FROM task_revisions WHERE task_id = ? AND revision = 1", (task_id,))
    conn.close()
    history = verify(copy)["checks"]["history"]
    assert history["ok"] is False
    assert any(task_id in s for s in history["shown"])


@pytest.mark.parametrize("status", [302, 300])
async def test_verify_finds_a_receipt_whose_stored_answer_is_a_redirect(
    service: Service, human: Caller, project: str, tmp_path: Path, status: int
) -> None:
    """checks.py: a stored answer must be "a 2xx (refusals store none)";
    300 is the first status past them (mutantaudit7)."""
    copy, conn = await tampered(service, human, tmp_path)
    (key,) = conn.execute("SELECT key FROM receipts LIMIT 1").fetchone()
    conn.execute("UPDATE receipts SET status = ? WHERE key = ?", (status, key))
    conn.close()
    receipts = verify(copy)["checks"]["receipts"]
    assert receipts["problems"] == 1 and repr(key) in receipts["shown"][0]


async def test_verify_finds_an_event_of_a_missing_project(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    """docs/operations.md, `events`: "every event's project exists"."""
    copy, conn = await tampered(service, human, tmp_path)
    conn.execute(
        "INSERT INTO events (project_id, type, subject_type, subject_id, actor_id, at, data)"
        " VALUES ('prj_ghost', 'task.created', 'task', 'tsk_x', NULL,"
        " '2026-01-01T00:00:00.000Z', '{}')"
    )
    conn.close()
    events = verify(copy)["checks"]["events"]
    assert any("names a missing project prj_ghost" in s for s in events["shown"]), events


async def test_verify_finds_a_tag_row_with_another_updated_at(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    """docs/operations.md, `tag_rows`: the rows are each record's current tags
    "with its project, status, `updated_at` and sharing"."""
    copy, conn = await tampered(service, human, tmp_path)
    conn.execute("UPDATE knowledge_tags SET updated_at = '2000-01-01T00:00:00.000Z'"
                 " WHERE tag = 'ops'")  # fmt: skip
    conn.close()
    tags = verify(copy)["checks"]["tag_rows"]
    assert tags["problems"] == 1 and tags["shown"][0].endswith("tag row 'ops' stale"), tags


async def test_verify_finds_an_owner_count_that_is_not_the_rows(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    """docs/operations.md, `owner_rows`: each project's (and the whole
    table's) count of a searched table's rows is the rows': one count off
    by one, one missing, one of a project that holds none."""
    copy, conn = await tampered(service, human, tmp_path)
    conn.execute(
        "UPDATE search_owner_rows SET row_count = row_count + 1"
        " WHERE content = 'tasks' AND owner = 'demo'"
    )
    conn.execute("DELETE FROM search_owner_rows WHERE content = 'knowledge' AND owner = '*'")
    conn.execute("INSERT INTO search_owner_rows VALUES ('tasks', 'ghost', 2)")
    tasks = conn.execute("SELECT count(*) FROM tasks").fetchone()[0]
    knowledge = conn.execute("SELECT count(*) FROM knowledge").fetchone()[0]
    conn.close()
    found = verify(copy)["checks"]["owner_rows"]
    assert found["shown"] == [
        f"knowledge of *: 0 counted by the triggers, {knowledge} rows",
        f"tasks of demo: {tasks + 1} counted by the triggers, {tasks} rows",
        "tasks of ghost: 2 counted by the triggers, 0 rows",
    ], found


async def test_verify_finds_a_row_that_breaks_a_foreign_key(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    """docs/operations.md, `foreign_keys`: `PRAGMA foreign_key_check` finds nothing."""
    copy, conn = await tampered(service, human, tmp_path)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute(
        "UPDATE tokens SET principal_id = 'prn_ghost' WHERE rowid = (SELECT MIN(rowid) FROM tokens)"
    )
    conn.close()
    report = verify(copy)
    fks = report["checks"]["foreign_keys"]
    assert report["ok"] is False and fks["problems"] == 1, fks
    assert fks["shown"][0].startswith("tokens rowid ")


async def test_verify_shows_at_most_20_problems_and_counts_them_all(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    """docs/operations.md: "At most 20 problems are shown per check; `problems` counts them all"."""
    copy, conn = await tampered(service, human, tmp_path)
    for n in range(25):
        conn.execute("INSERT INTO receipts VALUES ('prn_x', ?, 'f', 200, '{}', ?)",
                     (f"k{n}", f"2026-01-01T00:00:{n:02d}.000Z"))  # fmt: skip
    conn.close()
    receipts = verify(copy)["checks"]["receipts"]
    assert receipts["problems"] == 25 and len(receipts["shown"]) == 20


async def test_verify_finds_a_task_decision_row_at_another_time(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    """docs/operations.md, `task_decisions`: the list names the pinning
    decisions "at their creation time": the row at the wrong time is both
    missing (at the right one) and stray."""
    copy, conn = await tampered(service, human, tmp_path)
    conn.execute("DROP TRIGGER task_decisions_no_update")  # written around the service
    conn.execute("UPDATE task_decisions SET created_at = '2000-01-01T00:00:00.000Z'")
    conn.close()
    listed = verify(copy)["checks"]["task_decisions"]
    assert listed["problems"] == 2, listed
    assert any("which does not pin it" in s for s in listed["shown"]), listed


def a_database_whose_index_disagrees_with_its_table(tmp_path: Path) -> Path:
    """A migrated database that `PRAGMA integrity_check` finds damaged: the
    index `probe_a` says it indexes a column it does not."""
    db = tmp_path / "waypost.db"
    conn = sqlite3.connect(db, isolation_level=None)
    migrate(conn)
    conn.execute("CREATE TABLE probe (a TEXT, b TEXT)")
    conn.execute("CREATE INDEX probe_a ON probe (a)")
    conn.executemany("INSERT INTO probe VALUES (?, ?)", [(f"a{i}", f"b{i}") for i in range(50)])
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute(
        "UPDATE sqlite_master SET sql = 'CREATE INDEX probe_a ON probe (b)' WHERE name = 'probe_a'"
    )
    conn.close()
    return db


def test_a_backup_whose_copy_fails_integrity_check_is_refused_corrupt(tmp_path: Path) -> None:
    # the pages copy, integrity_check fails
    db = a_database_whose_index_disagrees_with_its_table(tmp_path)
    target = tmp_path / "b.db"
    result = run("admin", "backup", "--db", str(db), "--to", str(target))
    assert result.exit_code == 1, result.output
    assert "corrupt" in result.stderr
    assert target.exists()  # kept for inspection


async def test_verify_finds_a_timed_out_event_filed_under_another_project(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    """docs/operations.md, `events`: every `decision.timed_out` event is a
    timed-out answer of its decision at its time, in that project: a copy of
    the sweep's event filed under another project is found (mutantaudit7)."""
    task = await new_task(human)
    decision = await open_decision(
        human, [task], required_actor="either", recommendation="Proceed", reversible=True
    )
    r = await human.post("/api/v1/projects", {"id": "other", "name": "Other"})
    assert r.status_code == 201, r.text
    service.clock.advance(hours=24)
    assert (await sweep.run_once(service.rt))["decisions_timed_out"] == 1
    copy = tmp_path / "copy.db"
    backup(service.db_path, copy)
    conn = sqlite3.connect(copy, isolation_level=None)
    (sequence,) = conn.execute(
        "INSERT INTO events (project_id, type, subject_type, subject_id, actor_id, at, data)"
        " SELECT 'other', type, subject_type, subject_id, actor_id, at, data FROM events"
        " WHERE type = 'decision.timed_out' RETURNING sequence"
    ).fetchone()
    conn.close()
    shown = verify(copy)["checks"]["events"]["shown"]
    said = f"event {sequence}: decision.timed_out of decision {decision['id']}"
    assert any(line.startswith(said) for line in shown), shown


@pytest.mark.parametrize("table", ["tasks_fts", "knowledge_fts"])
async def test_verify_reports_a_dropped_search_index(
    service: Service, human: Caller, project: str, tmp_path: Path, table: str
) -> None:
    """A file whose search index was dropped (with its triggers) ended verify
    with `verify_failed: no such table`, and no report (mutantaudit7)."""
    copy, conn = await tampered(service, human, tmp_path)
    triggers = conn.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'trigger' AND sql LIKE ?", (f"%{table}%",)
    ).fetchall()
    for (trigger,) in triggers:
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute(f"DROP TABLE {table}")
    conn.close()
    report = verify(copy)
    assert report["ok"] is False
    assert report["checks"]["full_text"]["shown"] == [f"{table}: missing"]


def test_verify_reports_what_integrity_check_finds(tmp_path: Path) -> None:
    """docs/operations.md, `integrity`: `PRAGMA integrity_check` says ok.
    Only `backup` was shown refusing such a file; verify's own check could
    drop every line it read and call the file sound."""
    db = a_database_whose_index_disagrees_with_its_table(tmp_path)
    report = verify(db)
    integrity = report["checks"]["integrity"]
    assert report["ok"] is False and integrity["ok"] is False, integrity
    assert integrity["problems"] >= 1
    assert any("probe_a" in line for line in integrity["shown"]), integrity


async def test_verify_finds_history_rows_of_a_record_that_is_gone(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    """checks.py `_histories`: history rows whose record is missing are
    named (a record deleted around the service leaves its revisions behind)."""
    copy, conn = await tampered(service, human, tmp_path)
    conn.execute("PRAGMA foreign_keys = OFF")
    (knowledge_id,) = conn.execute("SELECT id FROM knowledge LIMIT 1").fetchone()
    for (trigger,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'knowledge'"
    ).fetchall():
        conn.execute(f"DROP TRIGGER {trigger}")  # written around the service
    conn.execute("DELETE FROM knowledge WHERE id = ?", (knowledge_id,))
    conn.close()
    history = verify(copy)["checks"]["history"]
    assert history["ok"] is False, history
    assert (
        f"knowledge_revisions rows for a missing knowledge row {knowledge_id}" in history["shown"]
    ), history


def test_verify_of_a_database_that_is_not_there_is_not_found_and_makes_none(
    tmp_path: Path,
) -> None:
    """`admin verify` "changes nothing": a mistyped `--db` is `not_found`, as
    for the other commands that need a database (test_cli: only writes and
    backup were shown so), and no file is left at the path."""
    missing = tmp_path / "typo.db"
    result = run("admin", "verify", "--db", str(missing))
    assert result.exit_code == 1, result.output
    assert result.stderr == f"Error: not_found: no database at {missing}\n"
    assert list(tmp_path.iterdir()) == []
