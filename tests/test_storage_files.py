"""The database's files stay the ones the service opened (storage/files.py).

Deleting the `-shm` file under a running service and then writing from an
`admin` command destroyed the database; a renamed database left its latest
acknowledged writes in a `-wal` file that the next start reset. The service
now stops answering from files that are no longer the ones at its path (503,
/healthz too), and refuses to start beside an orphaned `-wal`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import MovableClock, own_condition_log, serving
from tests.serve_support import START, auth, start
from waypost.errors import Unavailable
from waypost.live import hub as hub_module
from waypost.live.hub import Hub, LiveLimits
from waypost.settings import Settings
from waypost.storage import db as db_module
from waypost.storage import files
from waypost.storage.connection import STORAGE_RETRY_AFTER
from waypost.storage.db import Database, DatabaseUnusable

KNOWLEDGE = "/api/v1/projects/demo/knowledge"

# another process's write through its own -shm, as an `admin` command makes
_FOREIGN_WRITE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA busy_timeout = 5000")
conn.execute("CREATE TABLE IF NOT EXISTS foreign_note (x TEXT)")
conn.execute("INSERT INTO foreign_note VALUES ('from another process')")
conn.close()
"""


def _integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def _fresh_look(path: Path) -> tuple[str, int, int]:
    """(integrity, knowledge records, foreign notes) as a new process sees the file."""
    script = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]);"
        " t = [r[0] for r in c.execute('SELECT name FROM sqlite_master')];"
        " print(c.execute('PRAGMA integrity_check').fetchone()[0],"
        " c.execute('SELECT count(*) FROM knowledge').fetchone()[0] if 'knowledge' in t else 0,"
        " c.execute('SELECT count(*) FROM foreign_note').fetchone()[0]"
        " if 'foreign_note' in t else 0)"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(path)], check=True, capture_output=True, text=True
    ).stdout.split()
    return out[0], int(out[1]), int(out[2])


def test_a_deleted_shm_stops_serve_before_the_file_is_damaged(tmp_path: Path) -> None:
    """The helper's reproduction: writes under load, `rm w.db-shm`, one write
    from another process. Before, the service went on writing through its
    old index beside the other process's new one (the file was destroyed in
    2 of 3 runs, acknowledged writes lost in the third), and its shutdown
    checkpointed through the old index, dropping the other process's write."""
    clock = tmp_path / "clock"
    clock.write_text(START)
    srv = start(tmp_path / "waypost.db", clock)
    try:
        token = srv.wait_for(r"^\s+(wp_\S+)$").group(1)
        srv.wait_for(r"listening on http://")
        with httpx.Client(base_url=srv.url, headers=auth(token)) as client:
            made = client.post(
                "/api/v1/projects",
                json={"id": "demo", "name": "Demo"},
                headers={"Idempotency-Key": "p"},
            )
            assert made.status_code == 201
            for i in range(20):
                r = client.post(
                    KNOWLEDGE,
                    json={"kind": "fact", "title": f"k{i}", "body": "b"},
                    headers={"Idempotency-Key": f"k{i}"},
                )
                assert r.status_code == 201
            os.unlink(f"{srv.db}-shm")
            subprocess.run([sys.executable, "-c", _FOREIGN_WRITE, str(srv.db)], check=True)
            for i in range(3):
                r = client.post(
                    KNOWLEDGE,
                    json={"kind": "fact", "title": "late", "body": "b"},
                    headers={"Idempotency-Key": f"late{i}"},
                )
                assert r.status_code == 503, r.text
                assert r.json()["error"]["code"] == "unavailable"
                assert r.headers["retry-after"] == str(STORAGE_RETRY_AFTER)
                assert str(srv.db) not in r.text  # the path is the log's, not the client's
            assert client.get(KNOWLEDGE).status_code == 503
            health = client.get("/healthz")
            assert health.status_code == 503
            assert health.json() == {"status": "unavailable", "reason": "database_files_changed"}
        # what any other process sees meanwhile: everything, intact
        assert _fresh_look(srv.db) == ("ok", 20, 1)
    finally:
        status = srv.stop()
    assert status == 1  # exits without closing the database (no checkpoint)
    logged = srv.logged()
    assert sum("-shm was replaced by another file while the service" in x for x in logged) == 1
    assert any("exiting without closing the database" in line for line in logged)
    # nor does it say first that it closed it, the clean stop's line (operatorjourney)
    assert not any("stopped: the database is closed" in line for line in logged), logged
    assert _fresh_look(srv.db) == ("ok", 20, 1)


@pytest.mark.parametrize("removed", [("-shm",), ("-wal", "-shm")])
async def test_a_stop_before_anything_looked_keeps_another_process_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, removed: tuple[str, ...]
) -> None:
    """`rm w.db-shm`, an admin write, then a stop with no read or write in
    between (an idle service): the close looked only at what an earlier
    read or write had found, checkpointed through the old index and dropped
    the other process's write. So did a close after `rm` of the -wal and the
    -shm, where the -wal was the change found first."""
    monkeypatch.setattr(db_module, "_LEFT_OPEN", [])
    path = tmp_path / "w.db"
    db = Database(path)
    await db.open()
    await db.write(lambda c: c.execute("CREATE TABLE note (x)"))
    for i in range(20):
        await db.write(lambda c, i=i: c.execute("INSERT INTO note VALUES (?)", (i,)))
    for suffix in removed:
        os.unlink(f"{path}{suffix}")
    if "-wal" in removed:
        # the metric's gauge reads a missing -wal as empty, not as a fault
        # that fails the whole /metrics scrape
        assert db.wal_bytes() == 0
    subprocess.run([sys.executable, "-c", _FOREIGN_WRITE, str(path)], check=True)
    await db.close()
    assert db_module.connections_left_open()
    # (with the -wal deleted too, what this process wrote is gone with it
    # whatever it does: that file held it)
    integrity, _, foreign = _fresh_look(path)
    assert (integrity, foreign) == ("ok", 1)


async def test_a_moved_database_is_noticed_by_reads_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "_READ_CHECK_SECONDS", 0.0)
    path = tmp_path / "w.db"
    db = Database(path)
    await db.open()
    try:
        assert await db.read(lambda c: c.execute("SELECT 1").fetchone()[0]) == 1
        assert db.files_changed() is None
        path.rename(tmp_path / "moved.db")
        with pytest.raises(Unavailable):
            await db.read(lambda c: c.execute("SELECT 1").fetchone()[0])
        with pytest.raises(Unavailable):
            await db.read_point(lambda c: c.execute("SELECT 1").fetchone()[0])
        with pytest.raises(Unavailable):
            await db.write(lambda c: c.execute("CREATE TABLE t (x)"))
        assert db.files_changed() == f"{path} was deleted or moved"
    finally:
        await db.close()


async def test_a_replaced_wal_is_named(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    db = Database(path)
    await db.open()
    try:
        wal = Path(f"{path}-wal")
        wal.rename(tmp_path / "old-wal")
        wal.write_bytes(b"")
        with pytest.raises(Unavailable):
            await db.write(lambda c: c.execute("CREATE TABLE t (x)"))
        assert db.files_changed() == f"{wal} was replaced by another file"
    finally:
        await db.close()


async def test_files_left_alone_keep_the_service_answering(tmp_path: Path) -> None:
    """A checkpoint truncates the -wal in place; an admin backup reads: neither
    changes the files' identities."""
    path = tmp_path / "w.db"
    db = Database(path)
    await db.open()
    try:
        await db.write(lambda c: c.execute("CREATE TABLE t (x)"))
        other = sqlite3.connect(path)
        other.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        other.close()
        await db.write(lambda c: c.execute("INSERT INTO t VALUES (1)"))
        assert db.files_changed() is None
    finally:
        await db.close()


async def test_a_database_behind_a_symbolic_link_opens_and_stays_unchanged(
    tmp_path: Path,
) -> None:
    """SQLite puts the -wal and -shm beside the file the link points to: the
    first version of the watch looked beside the link and refused to start."""
    (tmp_path / "real").mkdir()
    link = tmp_path / "link.db"
    link.symlink_to(tmp_path / "real" / "w.db")
    db = Database(link)
    await db.open()
    try:
        await db.write(lambda c: c.execute("CREATE TABLE t (x)"))
        assert await db.read(lambda c: c.execute("SELECT count(*) FROM t").fetchone()[0]) == 0
        assert db.files_changed() is None
        assert db.wal_bytes() == os.stat(tmp_path / "real" / "w.db-wal").st_size > 0
        link.unlink()
        link.symlink_to(tmp_path / "real" / "other.db")
        (tmp_path / "real" / "other.db").write_bytes(b"")
        # the size watched (metrics, the WAL restart) stays the one of the
        # file the connections write, not of whatever the link names now
        (tmp_path / "real" / "other.db-wal").write_bytes(b"x" * 10)
        assert db.wal_bytes() == os.stat(tmp_path / "real" / "w.db-wal").st_size > 10
        with pytest.raises(Unavailable):
            await db.write(lambda c: c.execute("INSERT INTO t VALUES (1)"))
    finally:
        await db.close()


async def test_start_refuses_to_create_a_database_beside_its_orphaned_wal(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.db"
    db = Database(path)
    await db.open()
    await db.write(lambda c: c.execute("CREATE TABLE t (x)"))
    wal_copy = Path(f"{path}-wal").read_bytes()
    await db.close()
    assert wal_copy  # the last writes, not yet checkpointed into the file
    path.rename(tmp_path / "moved.db")
    Path(f"{path}-wal").write_bytes(wal_copy)
    with pytest.raises(DatabaseUnusable, match=r"w\.db-wal beside it holds"):
        await Database(path).open()
    assert not path.exists() and Path(f"{path}-wal").read_bytes() == wal_copy
    # an empty -wal holds nothing: a new database starts
    Path(f"{path}-wal").write_bytes(b"")
    fresh = Database(path)
    await fresh.open()
    await fresh.close()
    assert path.exists()


def test_a_wal_whose_database_appeared_meanwhile_is_no_orphan(tmp_path: Path) -> None:
    """Another process made the new file, and filled its -wal, between this
    one finding no file and looking at the -wal: that -wal was taken for an
    orphan and the start refused (three connections opening one new file at
    once, in a full run of the suite)."""
    from waypost.storage.connection import _refuse_orphaned_wal
    from waypost.storage.db import connect_sync

    path = tmp_path / "w.db"
    other = connect_sync(path)  # the other process, its writes still in the -wal
    other.execute("CREATE TABLE t (x)")
    try:
        assert Path(f"{path}-wal").stat().st_size > 0
        _refuse_orphaned_wal(path)  # its database is there now: nothing to refuse
    finally:
        other.close()


async def test_a_missing_directory_is_named(tmp_path: Path) -> None:
    named = re.escape(f"the directory {tmp_path / 'nope'} does not exist")
    with pytest.raises(DatabaseUnusable, match=named):
        await Database(tmp_path / "nope" / "w.db").open()


async def test_a_damaged_file_answers_503_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every request that read a damaged page answered 500 with a traceback
    in the log ("authentication failed unexpectedly", 542 of them in a
    probe), and /healthz said ok."""
    settings = Settings(db_path=tmp_path / "w.db", sweep_interval=3600)
    async with serving(settings, MovableClock()) as service:
        human = await service.principal("human")
        assert (await human.post("/api/v1/projects", {"id": "demo", "name": "D"})).is_success
        for i in range(60):
            made = await human.post(
                KNOWLEDGE, {"kind": "fact", "title": f"k{i}", "body": "b" * 400}
            )
            assert made.status_code == 201
    conn = sqlite3.connect(settings.db_path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    leaves = [
        row[0]
        for row in conn.execute(
            "SELECT pageno FROM dbstat WHERE name IN ('knowledge', 'projects')"
            " AND pagetype = 'leaf'"
        )
    ]
    conn.close()
    assert len(leaves) > 2
    with settings.db_path.open("r+b") as f:
        for page in leaves:
            f.seek((page - 1) * page_size)
            f.write(bytes(range(256)) * (page_size // 256))
    with caplog.at_level(logging.WARNING, logger="waypost"):
        async with serving(settings, MovableClock()) as service:
            human = await service.principal("human", "again")
            for _ in range(3):
                r = await human.get(KNOWLEDGE)
                assert r.status_code == 503, r.text
                assert r.json()["error"]["message"].startswith("the database file is damaged")
                assert r.headers["retry-after"] == str(STORAGE_RETRY_AFTER)
            health = await service.client.get("/healthz")
            assert health.status_code == 503
            assert health.json() == {"status": "unavailable", "reason": "database_damaged"}
            query = '{ project(id: "demo") { name } }'
            for _ in range(3):
                r = await service.client.post(
                    "/graphql", json={"query": query}, headers=human.headers()
                )
                (error,) = r.json()["errors"]
                assert error["extensions"] == {
                    "code": "unavailable",
                    "reason": "database_damaged",
                    "retryAfter": 30,
                }, r.text
    # the GraphQL fast path took the store's error for a fault of its own
    # and logged a WARNING with a traceback per query
    assert not [r for r in caplog.records if "fast path" in r.getMessage()]
    damaged = [
        r for r in caplog.records if "found" in r.getMessage() and "damaged" in r.getMessage()
    ]
    assert len(damaged) == 1, [r.getMessage() for r in caplog.records]


async def test_the_live_hub_logs_a_refusing_store_once_not_every_second(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hub reads the event log's end every poll: once the files changed,
    each read logged an ERROR with a traceback (one a second, for ever)."""
    own = own_condition_log(monkeypatch, hub_module)
    monkeypatch.setattr(files, "_READ_CHECK_SECONDS", 0.0)
    path = tmp_path / "w.db"
    db = Database(path)
    await db.open()
    hub = Hub(db, LiveLimits(poll_seconds=0.05))
    try:
        await hub.start()
        path.rename(tmp_path / "moved.db")
        with caplog.at_level(logging.WARNING, logger="waypost"):
            await asyncio.sleep(0.6)  # a dozen polls
        # once, as the condition it is; no ERROR (with a traceback) for each poll
        told = [r for r in caplog.records if r.name == own.log.name]
        assert [r.levelno for r in told] == [logging.WARNING], [r.getMessage() for r in told]
        assert "files were changed" in told[0].getMessage()
        faults = [
            r for r in caplog.records if r.name == "waypost.live" and r.levelno > logging.WARNING
        ]
        assert faults == []
    finally:
        hub.stop()
        await db.close()


async def test_a_stop_after_the_shm_was_deleted_and_not_made_again_closes_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rm w.db-shm` and nothing else: no other process indexed the WAL, so
    the close checkpoints through this process's index as usual; nothing is
    left open for the process's exit, and every write is in the file."""
    monkeypatch.setattr(db_module, "_LEFT_OPEN", [])
    path = tmp_path / "w.db"
    db = Database(path)
    await db.open()
    await db.write(lambda c: c.execute("CREATE TABLE note (x)"))
    rows = [(i,) for i in range(20)]
    await db.write(lambda c: c.executemany("INSERT INTO note VALUES (?)", rows))
    os.unlink(f"{path}-shm")
    await db.close()
    assert not db_module.connections_left_open()
    assert not os.path.exists(f"{path}-wal")  # the last close checkpointed it
    check = sqlite3.connect(path)
    try:
        assert check.execute("SELECT count(*) FROM note").fetchone() == (20,)
    finally:
        check.close()


async def test_a_database_file_with_a_second_name_is_refused(tmp_path: Path) -> None:
    """SQLite names the -wal and -shm after the name a process opened: a
    `serve` on a hard link to the live file wrote another WAL through
    another index, each process's checkpoint wrote its pages over the
    other's, and one process's 80 acknowledged writes were gone after both
    stopped, `admin verify` clean (filemistakes). A second name is refused
    by `serve` and the admin commands; a symbolic link is not one (above)."""
    from tests.test_cli import run

    path = tmp_path / "w.db"
    db = Database(path)
    await db.open()
    try:
        await db.write(lambda c: c.execute("CREATE TABLE t (x)"))
        other = tmp_path / "other.db"
        os.link(path, other)
        with pytest.raises(DatabaseUnusable, match=r"other\.db: the file has 2 names"):
            await Database(other).open()
        result = run("admin", "principal", "create", "--kind", "human", "--name", "x",
                     "--db", str(other))  # fmt: skip
        assert result.exit_code == 1, result.output
        assert result.stderr.startswith("Error: database_unusable:"), result.stderr
        assert "2 names (hard links)" in result.stderr
        assert not Path(f"{other}-wal").exists() and not Path(f"{other}-shm").exists()
        # the process that had it open goes on
        await db.write(lambda c: c.execute("INSERT INTO t VALUES (1)"))
        other.unlink()
    finally:
        await db.close()
    again = Database(path)
    await again.open()
    try:
        assert await again.read(lambda c: c.execute("SELECT count(*) FROM t").fetchone()[0]) == 1
    finally:
        await again.close()


async def test_a_backup_copied_over_the_live_file_in_place_is_noticed_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cp backup waypost.db` while `serve` ran writes into the file it has
    open (same inode: no identity changed). The service read the backup's
    pages under its WAL's newer ones, acknowledged 40 more writes, found the
    file malformed at the next reads, and its stop checkpointed the WAL over
    the backup (filemistakes). The header says so at once: a backup's is in
    rollback-journal mode, and no file open in WAL mode can leave it. Every
    unit is then refused, and the stop leaves the file as copied, with the
    -wal beside it, which the next start refuses (test_storage_foreign_wal)."""
    monkeypatch.setattr(db_module, "_LEFT_OPEN", [])
    path = tmp_path / "w.db"
    db = Database(path)
    await db.open()
    rows = "INSERT INTO t VALUES (?)"
    await db.write(lambda c: c.execute("CREATE TABLE t (x)"))
    await db.write(lambda c: c.executemany(rows, [("a" * 150,)] * 300))
    live = sqlite3.connect(path)
    backup = tmp_path / "backup.db"
    copy = sqlite3.connect(backup)
    live.backup(copy)
    copy.execute("PRAGMA journal_mode = DELETE")  # as `admin backup` writes it
    copy.close()
    await db.write(lambda c: c.executemany(rows, [("c" * 150,)] * 300))
    live.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    live.close()
    await db.write(lambda c: c.execute("DELETE FROM t WHERE x LIKE 'a%'"))
    await db.write(lambda c: c.executemany(rows, [("b" * 150,)] * 300))
    restored = backup.read_bytes()
    subprocess.run(["cp", str(backup), str(path)], check=True)  # the operator's restore
    with pytest.raises(Unavailable):
        await db.write(lambda c: c.executemany(rows, [("d" * 150,)] * 10))
    assert db.files_changed() == f"{path} was overwritten in place (another file copied over it)"
    await db.close()
    assert db_module.connections_left_open()
    assert path.read_bytes() == restored  # no checkpoint wrote the WAL over it
    with pytest.raises(DatabaseUnusable, match=r"w\.db-wal beside it holds"):
        await Database(path).open()


def _locks_held_here(path: Path) -> list[str]:
    """This process's POSIX locks on the file at `path` (Linux's /proc/locks)."""
    inode = os.stat(path).st_ino
    held = []
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields:  # a waiter, not a holder
            continue
        mine = fields[1] == "POSIX" and int(fields[4]) == os.getpid()
        if mine and int(fields[5].rsplit(":", 1)[1]) == inode:
            held.append(line)
    return held


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="reads Linux's /proc/locks")
async def test_the_header_descriptor_is_let_go_only_after_every_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing any descriptor of the file drops every POSIX lock this process
    holds on it, SQLite's too (its SHARED lock on the file tells another
    process's last connection not to checkpoint and delete the -wal): so the
    descriptor the writer reads the header through is closed after every
    connection, and closed (review72: closing it first, or never, passed
    every other test)."""
    path = tmp_path / "w.db"
    seen: list[list[str]] = []
    real = files.FileWatch.close

    def close(self: files.FileWatch) -> None:
        seen.append(_locks_held_here(path))
        real(self)

    monkeypatch.setattr(files.FileWatch, "close", close)
    db = Database(path)
    await db.open()
    await db.write(lambda c: c.execute("CREATE TABLE t (x)"))
    assert _locks_held_here(path), "a WAL connection holds a lock on the file (the probe reads)"
    await db.close()
    assert seen == [[]]
    fds = Path("/proc/self/fd")
    assert not [f for f in fds.iterdir() if os.path.realpath(f) == str(path.resolve())]


async def test_a_stop_that_leaves_writes_in_the_wal_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process holding the database open keeps the last close from
    checkpointing: the stopped service's `.db` alone then lacks its latest
    acknowledged writes, which an operator copying it must hear."""
    path = tmp_path / "w.db"
    db = Database(path)
    await db.open()
    await db.write(lambda c: c.execute("CREATE TABLE t (x)"))
    await db.write(lambda c: c.execute("INSERT INTO t VALUES (1)"))
    other = sqlite3.connect(path)
    try:
        other.execute("SELECT count(*) FROM t").fetchone()
        with caplog.at_level(logging.INFO, logger="waypost.storage"):
            await db.close()
        said = [r.getMessage() for r in caplog.records if "still in" in r.getMessage()]
        assert len(said) == 1 and f"{path}-wal" in said[0], said
    finally:
        other.close()


async def test_a_stop_that_checkpointed_says_nothing_of_the_wal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "w.db"
    db = Database(path)
    await db.open()
    await db.write(lambda c: c.execute("CREATE TABLE t (x)"))
    with caplog.at_level(logging.INFO, logger="waypost.storage"):
        await db.close()
    assert not Path(f"{path}-wal").exists()
    assert not [r for r in caplog.records if "still in" in r.getMessage()]
