"""What the store does when the disk, not the request, is the problem: a full
disk refuses writes with 503 and Retry-After (nothing committed, nothing
lost), a database that cannot be written or opened stops `serve` at start
with a clear message, and the admin tools say what is wrong without a
traceback."""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Caller, Service
from tests.test_cli import run
from waypost.storage.connection import (
    STORAGE_RETRY_AFTER,
    check_writable,
    rollback_if_open,
    storage_refusal,
)
from waypost.storage.db import Database, DatabaseUnusable
from waypost.storage.migrate import migrate


def _max_pages(conn: sqlite3.Connection, pages: int) -> None:
    conn.execute(f"PRAGMA max_page_count = {pages}")


async def fill_the_disk(db: Database) -> None:
    """Room for two more pages: SQLite answers SQLITE_FULL ("database or disk
    is full") past max_page_count, exactly as when the filesystem runs out
    of space."""
    pages = await db.read(lambda c: c.execute("PRAGMA page_count").fetchone()[0])
    await db.write(functools.partial(_max_pages, pages=pages + 2))


async def free_the_disk(db: Database) -> None:
    await db.write(functools.partial(_max_pages, pages=1073741823))


async def test_a_full_disk_refuses_writes_with_503_and_keeps_everything(
    service: Service, human: Caller, project: str
) -> None:
    kept = await human.post(
        "/api/v1/projects/demo/knowledge", {"kind": "fact", "title": "kept", "body": "b"}
    )
    assert kept.status_code == 201
    await fill_the_disk(service.rt.db)
    big = {"kind": "fact", "title": "big", "body": "x" * 60_000}
    r = await human.post("/api/v1/projects/demo/knowledge", big)
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"] == str(STORAGE_RETRY_AFTER)
    assert r.json()["error"]["code"] == "unavailable"
    assert "disk is full" in r.json()["error"]["message"]
    await free_the_disk(service.rt.db)
    # nothing of the refused write, and its key is free: the retry runs afresh
    retried = await human.post(
        "/api/v1/projects/demo/knowledge", big, key=r.request.headers["idempotency-key"]
    )
    assert retried.status_code == 201 and "idempotent-replayed" not in retried.headers
    titles = [
        k["title"] for k in (await human.get("/api/v1/projects/demo/knowledge")).json()["items"]
    ]
    assert sorted(titles) == ["big", "kept"]


async def test_the_log_says_when_writes_are_committed_again_after_a_full_disk(
    service: Service, human: Caller, project: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="waypost.storage")
    await fill_the_disk(service.rt.db)
    big = {"kind": "fact", "title": "big", "body": "x" * 60_000}
    for _ in range(2):
        refused = await human.post("/api/v1/projects/demo/knowledge", big)
        assert refused.status_code == 503, refused.text

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if "committed again" in r.getMessage()]

    assert said() == []  # nothing committed yet: the refusals have not ended
    await free_the_disk(service.rt.db)
    assert said() == []  # room again, but no write committed yet
    kept = await human.post("/api/v1/projects/demo/knowledge", big)
    assert kept.status_code == 201
    # (that write committed: the line counts the two refusals, then is told)
    assert len(said()) == 1
    assert "2 refused" in said()[0] and "disk is full" in said()[0]
    again = await human.post("/api/v1/projects/demo/knowledge", {**big, "title": "again"})
    assert again.status_code == 201
    assert len(said()) == 1  # once: the next commits after it say nothing
    # a disk with room for small writes only: refusals and commits take turns,
    # told of at most once every 10 s (not a line per commit)
    await fill_the_disk(service.rt.db)
    assert (await human.post("/api/v1/projects/demo/knowledge", big)).status_code == 503
    await free_the_disk(service.rt.db)
    assert len(said()) == 1


async def test_no_refusal_is_logged_after_the_line_that_says_writes_are_committed_again(
    service: Service,
    human: Caller,
    project: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The refusals' WARNINGs held back in their window were logged by the
    window's timer after the INFO line that told of their end: the last line
    of the log said the disk was full, of a disk freed (and written) since,
    which is what the INFO line is for (diskfulljourney). Here the window is
    2 s (the service's is 10 s)."""
    import asyncio

    from tests.conftest import own_condition_log
    from waypost.storage import writer

    own_condition_log(monkeypatch, writer).seconds = 2.0
    caplog.set_level(logging.INFO, logger="waypost.storage")
    await fill_the_disk(service.rt.db)
    big = {"kind": "fact", "title": "big", "body": "x" * 60_000}
    for _ in range(3):  # the first told at once, the others held in the window
        refused = await human.post("/api/v1/projects/demo/knowledge", big)
        assert refused.status_code == 503, refused.text
    await free_the_disk(service.rt.db)
    small = {"kind": "fact", "title": "small", "body": ""}
    assert (await human.post("/api/v1/projects/demo/knowledge", small)).status_code == 201
    await asyncio.sleep(2.5)  # the window ends: what it held is logged by now
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    (ended,) = [i for i, (_, said) in enumerate(lines) if "committed again" in said]
    assert "3 refused" in lines[ended][1]
    # observed: ("WARNING", "a write was refused with 503, nothing committed: database
    # or disk is full (and 1 more like it since the last such line)") after it
    assert [said for level, said in lines[ended + 1 :] if level == "WARNING"] == []


async def test_writes_committed_again_within_the_window_are_told_of_when_it_ends(
    service: Service,
    human: Caller,
    project: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A second outage that ended within 10 s of the first one's INFO line was
    told of only at a later commit, which on a quiet service may never come:
    the log ended with the second outage's WARNING, of a disk that had room
    again (ConditionLog's own held lines are logged by a timer for this very
    reason: observe/conditions.py). Here both windows are 1 s."""
    import asyncio

    from tests.conftest import own_condition_log
    from waypost.storage import outage, writer

    own_condition_log(monkeypatch, writer).seconds = 1.0
    monkeypatch.setattr(outage, "CONDITION_LOG_SECONDS", 1.0)
    caplog.set_level(logging.INFO, logger="waypost.storage")
    big = {"kind": "fact", "title": "big", "body": "x" * 60_000}
    for _ in range(2):  # full, freed; full again at once, freed again
        await fill_the_disk(service.rt.db)
        refused = await human.post("/api/v1/projects/demo/knowledge", big)
        assert refused.status_code == 503, refused.text
        await free_the_disk(service.rt.db)
        small = {"kind": "fact", "title": "small", "body": ""}
        assert (await human.post("/api/v1/projects/demo/knowledge", small)).status_code == 201
    await asyncio.sleep(2.5)  # nothing more is written
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert lines[-1][0] == "INFO" and "committed again" in lines[-1][1], lines


def test_a_database_that_cannot_be_written_is_named_read_only(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "w.db", isolation_level=None)
    migrate(conn)
    check_writable(conn)  # writable: nothing raised, nothing written
    conn.execute("PRAGMA query_only = ON")  # what SQLite does with a read-only file
    with pytest.raises(sqlite3.OperationalError) as raised:
        check_writable(conn)
    assert storage_refusal(raised.value) == "the database is read-only"
    assert not conn.in_transaction
    conn.close()


async def test_the_store_refuses_to_open_a_database_it_cannot_write(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn)
    conn.close()
    db = Database(path, hooks=[lambda c: c.execute("PRAGMA query_only = ON")])
    with pytest.raises(DatabaseUnusable, match="readonly"):
        await db.open()


@pytest.mark.parametrize("contents", [b"not a database, just text " * 100, None, "foreign"])
def test_serve_refuses_to_start_with_a_message_not_a_traceback(
    tmp_path: Path, contents: bytes | str | None
) -> None:
    path = tmp_path / "w.db"
    if contents is None:
        path = tmp_path / "missing" / "w.db"  # its directory does not exist
    elif contents == "foreign":  # another application's database: a migration refusal
        other = sqlite3.connect(path)
        other.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY)")
        other.close()
    else:
        assert isinstance(contents, bytes)
        path.write_bytes(contents)
    # a process of its own: `serve` configures the process's logging
    result = subprocess.run(
        [sys.executable, "-m", "waypost.cli", "serve", "--db", str(path), "--port", "0",
         "--lifecycle-port", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: database_unusable: {path}: "), result.stderr
    assert "Traceback" not in result.stderr


def test_admin_commands_name_an_unusable_database(tmp_path: Path) -> None:
    garbage = tmp_path / "g.db"
    garbage.write_bytes(b"not a database, just text " * 100)
    for args in (["admin", "migrate"], ["admin", "principal", "list"]):
        result = run(*args, "--db", str(garbage))
        assert result.exit_code == 1, args
        assert result.stderr.startswith("Error: database_unusable:"), result.stderr
    result = run("admin", "backup", "--db", str(garbage), "--to", str(tmp_path / "no" / "b.db"))
    assert result.exit_code == 1 and result.stderr.startswith("Error: cannot_create:")


def test_a_backup_of_a_damaged_database_exits_1_and_keeps_the_copy(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("CREATE TABLE schema_migrations (x)")  # a Waypost file, as far as backup asks
    conn.execute("CREATE TABLE filler (x TEXT)")
    conn.execute("CREATE INDEX filler_x ON filler (x)")
    conn.executemany(
        "INSERT INTO filler VALUES (?)", [(f"{i:05d}" + "y" * 200,) for i in range(500)]
    )
    conn.commit()
    conn.close()
    # one byte of one row changed on disk: the index no longer matches the table;
    # everything still reads, so the copy is made and integrity_check finds it
    data = bytearray(db.read_bytes())
    data[data.find(b"00042yyyy")] = ord("9")
    db.write_bytes(bytes(data))
    target = tmp_path / "b.db"
    result = run("admin", "backup", "--db", str(db), "--to", str(target))
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: corrupt:"), result.stderr
    assert target.exists()


def test_a_database_too_damaged_to_read_through_is_reported_not_failed(tmp_path: Path) -> None:
    """A broken b-tree page made verify stop with `verify_failed` (no report)
    and backup with `backup_failed`; now the report says what broke, and the
    backup is `corrupt`, both exit 1."""
    db = tmp_path / "w.db"
    assert run("admin", "migrate", "--db", str(db)).exit_code == 0
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = DELETE")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    found = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'principals'")
    root = found.fetchone()[0]
    conn.close()
    data = bytearray(db.read_bytes())
    start = (root - 1) * page_size
    data[start : start + 64] = b"\xff" * 64  # the page header: not a b-tree page any more
    db.write_bytes(bytes(data))

    result = run("admin", "verify", "--db", str(db))
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["checks"]["integrity"]["ok"] is False
    assert "could not run" in report["checks"]["integrity"]["shown"][0]
    target = tmp_path / "b.db"
    result = run("admin", "backup", "--db", str(db), "--to", str(target))
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: corrupt:"), result.stderr
    assert not target.exists()


async def test_verify_checks_a_read_only_database_through_a_copy(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FTS5's integrity-check is a write statement: on read-only media it
    failed, and verify reported damage that was not there."""
    from waypost.maintenance import verification

    await human.post("/api/v1/projects/demo/knowledge", {"kind": "fact", "title": "t", "body": "b"})
    monkeypatch.setattr(verification, "_writable", lambda path: False)  # as on read-only media
    report = verification.verify(service.db_path)
    assert report["ok"] is True, report
    assert report["checked_a_copy"] == "the database is read-only"
    assert report["checks"]["full_text"]["ok"]


def test_a_transaction_sqlite_already_ended_is_not_rolled_back_again(tmp_path: Path) -> None:
    """A full disk ends the transaction inside SQLite: a ROLLBACK after it
    raised "cannot rollback - no transaction is active" over the real cause."""
    conn = sqlite3.connect(tmp_path / "full.db", isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 1}")
    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("INSERT INTO t VALUES (?)", ("x" * 100_000,))
        finally:
            rollback_if_open(conn)
    assert not conn.in_transaction
    conn.execute("BEGIN IMMEDIATE")  # a transaction still open is rolled back
    conn.execute("INSERT INTO t VALUES (1)")
    rollback_if_open(conn)
    assert not conn.in_transaction and conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    conn.close()


def test_a_damaged_file_of_an_earlier_build_gets_a_report(tmp_path: Path) -> None:
    """Verify applies an earlier build's pending migrations to a copy; one
    that met a broken page ended in `verify_failed` with no report."""
    from tests.conftest import earlier_builds_file
    from waypost.storage.migrate import available

    db = tmp_path / "old.db"
    early = earlier_builds_file(db)
    conn = sqlite3.connect(db)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'tokens'").fetchone()[0]
    conn.close()
    data = bytearray(db.read_bytes())
    start = (root - 1) * page_size
    data[start : start + 64] = b"\xff" * 64  # migration 0013 rebuilds `tokens`: it meets this
    db.write_bytes(bytes(data))

    result = run("admin", "verify", "--db", str(db))
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    checks = report["checks"]
    assert "could not be applied to a copy" in checks["migrations"]["shown"][0], report
    assert checks["integrity"]["ok"] is False
    assert checks["history"]["shown"][0].startswith("not run: the migrations could not"), report
    pending = len(available()) - len(early)
    assert report["checked_a_copy"].startswith(f"{pending} migrations are not applied yet"), report
