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
from waypost.maintenance import backup, checks, verify
from waypost.resolvers.core import sweep
from waypost.storage.migrate import migrate


async def tampered(
    service: Service, human: Caller, tmp_path: Path
) -> tuple[Path, sqlite3.Connection]:
    await populate(service, human)
    copy = tmp_path / "copy.db"
    return copy, copy_to_tamper(service, copy)


def copy_to_tamper(service: Service, copy: Path) -> sqlite3.Connection:
    """A backup of the service's file at `copy`, and a connection to change it by."""
    backup(service.db_path, copy)
    return sqlite3.connect(copy, isolation_level=None)


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


@pytest.mark.parametrize("status", [302, 300, 199])
async def test_verify_finds_a_receipt_whose_stored_answer_is_a_redirect(
    service: Service, human: Caller, project: str, tmp_path: Path, status: int
) -> None:
    """checks.py: a stored answer must be "a 2xx (refusals store none)";
    300 is the first status past them (mutantaudit7), 199 the last before
    them (mutanttests: a check of `status >= 300` passed every test)."""
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
    by one, one missing, two of projects that hold none."""
    copy, conn = await tampered(service, human, tmp_path)
    conn.execute(
        "UPDATE search_owner_rows SET row_count = row_count + 1"
        " WHERE content = 'tasks' AND owner = 'demo'"
    )
    conn.execute("DELETE FROM search_owner_rows WHERE content = 'knowledge' AND owner = '*'")
    conn.execute("INSERT INTO search_owner_rows VALUES ('tasks', 'ghost', 2)")
    # one row of a project that holds none is a count off too (mutanttests)
    conn.execute("INSERT INTO search_owner_rows VALUES ('tasks', 'phantom', 1)")
    tasks = conn.execute("SELECT count(*) FROM tasks").fetchone()[0]
    knowledge = conn.execute("SELECT count(*) FROM knowledge").fetchone()[0]
    conn.close()
    found = verify(copy)["checks"]["owner_rows"]
    assert found["shown"] == [
        f"knowledge of *: 0 counted by the triggers, {knowledge} rows",
        f"tasks of demo: {tasks + 1} counted by the triggers, {tasks} rows",
        "tasks of ghost: 2 counted by the triggers, 0 rows",
        "tasks of phantom: 1 counted by the triggers, 0 rows",
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
    conn = copy_to_tamper(service, copy)
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


@pytest.mark.parametrize("batch", [checks.GATE_BATCH, 1])
async def test_verify_holds_an_activity_to_the_decision_that_blocks_its_subject(
    service: Service,
    human: Caller,
    project: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    batch: int,
) -> None:
    """docs/operations.md, `gate_state`: a task is "open exactly when no
    decision blocks the task or its subject". An activity of a blocked task
    is blocked, which verify agrees with; one marked open around the
    triggers is found. Verify's own subject rule went untested: reading only
    the activity's own decisions passed every test (mutanttests); and so
    did a look-up of the batch's tasks without their subjects, which fails
    once a subject is in another batch than its activity (batches of 1)."""
    monkeypatch.setattr(checks, "GATE_BATCH", batch)
    subject = await new_task(human, "judged")
    r = await human.post(
        "/api/v1/projects/demo/tasks", {"title": "review it", "subject_task_id": subject}
    )
    assert r.status_code == 201, r.text
    activity = r.json()["id"]
    await open_decision(human, [subject])
    assert verify(service.db_path)["checks"]["gate_state"]["ok"] is True
    copy = tmp_path / "copy.db"
    conn = copy_to_tamper(service, copy)
    conn.execute("UPDATE tasks SET gate_held = 0 WHERE id = ?", (activity,))  # around the triggers
    conn.close()
    assert verify(copy)["checks"]["gate_state"]["shown"] == [
        f"task {activity}: the stored gate state says open, the decisions' history says blocked"
    ]


@pytest.mark.parametrize(
    ("column", "value"), [("project_id", "'elsewhere'"), ("shared", "1 - shared")]
)
async def test_verify_finds_a_tag_row_with_another_project_or_sharing(
    service: Service, human: Caller, project: str, tmp_path: Path, column: str, value: str
) -> None:
    """docs/operations.md, `tag_rows`: each row carries its record's "project,
    status, `updated_at` and sharing"; only a row's status and `updated_at`
    were ever changed in a test, so the check could stop comparing the
    project or the sharing unnoticed (mutanttests)."""
    copy, conn = await tampered(service, human, tmp_path)
    (tagged_id,) = conn.execute(
        "SELECT knowledge_id FROM knowledge_tags WHERE tag = 'ops'"
    ).fetchone()
    conn.execute(f"UPDATE knowledge_tags SET {column} = {value} WHERE tag = 'ops'")
    conn.close()
    tags = verify(copy)["checks"]["tag_rows"]
    assert tags["shown"] == [f"knowledge {tagged_id}: tag row 'ops' stale"], tags


@pytest.mark.parametrize(
    ("column", "value"),
    [("project_id", "'elsewhere'"), ("created_at", "'2026-01-01T00:00:00.000Z'")],
)
async def test_verify_finds_a_decisions_stored_project_or_creation_time_alone(
    service: Service, human: Caller, project: str, tmp_path: Path, column: str, value: str
) -> None:
    """docs/operations.md, `gate_state`: a decision's stored "project, creation
    time" say what its history says. The one test changed both together, so
    the check could stop comparing either one (mutanttests)."""
    copy, conn = await tampered(service, human, tmp_path)
    decision_id, project_id, created_at = conn.execute(
        "SELECT id, project_id, created_at FROM decisions"
    ).fetchone()
    conn.execute(f"UPDATE decision_holds SET {column} = {value}")
    stored = conn.execute("SELECT project_id, created_at FROM decision_holds").fetchone()
    conn.close()
    assert verify(copy)["checks"]["gate_state"]["shown"] == [
        f"decision {decision_id}: the stored state places it in {stored[0]} at {stored[1]},"
        f" the decision is {project_id}'s of {created_at}"
    ]


async def test_verify_names_only_the_receipt_without_its_event_at_a_shared_instant(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    """docs/operations.md, `receipts`: a receipt has the event its
    transaction wrote, "same principal, same instant". A receipt of a
    principal with no event, at an instant when another principal wrote
    with its receipt and event, is the one problem: the other's receipt is
    not (matched back by the instant alone, it was counted too)."""
    copy, conn = await tampered(service, human, tmp_path)
    at, principal = conn.execute(
        "SELECT created_at, principal_id FROM receipts ORDER BY created_at DESC LIMIT 1"
    ).fetchone()
    others = conn.execute("SELECT count(*) FROM receipts WHERE created_at = ?", (at,)).fetchone()[0]
    assert others >= 1 and principal != "prn_ghost"
    conn.execute("INSERT INTO receipts VALUES ('prn_ghost', 'k-ghost', 'f', 200, '{}', ?)", (at,))
    conn.close()
    receipts = verify(copy)["checks"]["receipts"]
    assert receipts["shown"] == [f"receipt 'k-ghost' of prn_ghost at {at} has no event"], receipts


async def test_verify_matches_each_timeout_with_its_own_decisions_event_at_its_instant(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    """docs/operations.md, `events`: every timeout the sweep answered has its
    `decision.timed_out` event, and every such event is a timed-out answer
    "of its decision at its time". One sweep times two decisions out at one
    instant: the event of the other decision is not this one's; and an
    event of a timed-out decision at another instant is stray."""
    task = await new_task(human)
    first, second = [
        await open_decision(
            human, [task], required_actor="either", recommendation="Proceed", reversible=True
        )
        for _ in range(2)
    ]
    service.clock.advance(hours=24)
    assert (await sweep.run_once(service.rt))["decisions_timed_out"] == 2
    assert verify(service.db_path)["checks"]["events"]["ok"]
    copy = tmp_path / "gone.db"
    conn = copy_to_tamper(service, copy)
    conn.execute("DROP TRIGGER events_no_delete")  # written around the service
    (at,) = conn.execute(
        "DELETE FROM events WHERE type = 'decision.timed_out' AND subject_id = ? RETURNING at",
        (first["id"],),
    ).fetchone()
    conn.close()
    assert verify(copy)["checks"]["events"]["shown"] == [
        f"decision {first['id']}: its timeout at {at} has no decision.timed_out event"
    ]
    copy = tmp_path / "stray.db"
    conn = copy_to_tamper(service, copy)
    (sequence,) = conn.execute(
        "INSERT INTO events (project_id, type, subject_type, subject_id, actor_id, at, data)"
        " SELECT project_id, type, subject_type, subject_id, actor_id,"
        " '2026-12-01T00:00:00.000Z', data FROM events"
        " WHERE type = 'decision.timed_out' AND subject_id = ? RETURNING sequence",
        (second["id"],),
    ).fetchone()
    conn.close()
    assert verify(copy)["checks"]["events"]["shown"] == [
        f"event {sequence}: decision.timed_out of decision {second['id']} at"
        " 2026-12-01T00:00:00.000Z, which no timed-out answer of that decision in that"
        " project has"
    ]
