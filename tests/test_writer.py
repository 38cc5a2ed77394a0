"""The writer: group commit with a savepoint per unit, answers only after the
COMMIT, 503 within each write's own budget under a lock held by another
process, files created owner-only."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    Caller,
    MovableClock,
    Service,
    copy_database,
    own_condition_log,
    serving,
)
from waypost import runtime as runtime_module
from waypost.errors import Unavailable
from waypost.resolvers.access import principals
from waypost.resolvers.core import events, receipts, sweep
from waypost.resolvers.core.receipts import PURGE_BATCH, PURGE_CHUNK
from waypost.runtime import CONNECTION_HOOKS
from waypost.settings import Settings
from waypost.storage import writer
from waypost.storage.db import Database, connect_sync
from waypost.storage.writer import Writer

AT = "2026-11-29T18:00:00.000Z"


def recorded(name: str, fail: bool = False) -> Callable[[sqlite3.Connection], str]:
    """A unit that writes a row, its event and a receipt (as every mutation
    does), then fails if told to."""

    def unit(conn: sqlite3.Connection) -> str:
        made = principals.create_principal(conn, "agent", name, AT)
        events.append(
            conn,
            project_id=None,
            type="principal.created",
            subject_type="principal",
            subject_id=made["principal_id"],
            actor_id=None,
            actor_session_id=None,
            at=AT,
            data={"name": name},
        )
        conn.execute(
            "INSERT INTO receipts (principal_id, key, fingerprint, status, body, created_at)"
            " VALUES (?, ?, 'f', 201, '{}', ?)",
            (made["principal_id"], f"key-{name}", AT),
        )
        if fail:
            raise RuntimeError(f"{name} fails after its row, event and receipt")
        return name

    return unit


def left_behind(conn: sqlite3.Connection) -> dict[str, set[str]]:
    return {
        "principals": {r[0] for r in conn.execute("SELECT name FROM principals")},
        "events": {r[0] for r in conn.execute("SELECT json_extract(data, '$.name') FROM events")},
        "receipts": {r[0] for r in conn.execute("SELECT key FROM receipts")},
    }


class Held:
    """A unit that keeps the writer busy until released, so that the units
    submitted meanwhile wait in the queue and then run as one batch."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, conn: sqlite3.Connection) -> None:
        self.entered.set()
        self.release.wait(10)


async def queue_behind(db: Database, units: list[Callable[[sqlite3.Connection], Any]]) -> list[Any]:
    held = Held()
    holder = asyncio.create_task(db.write(held))
    await asyncio.to_thread(held.entered.wait, 10)
    tasks = [asyncio.create_task(db.write(u)) for u in units]
    await asyncio.sleep(0)  # every write is queued now
    held.release.set()
    await holder
    return await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture
async def patient(tmp_path: Path, migrated_template: Path) -> AsyncIterator[Database]:
    """A store whose batches are bounded by count only (not by 10 ms of work),
    so that what a test queues together commits together however loaded the
    machine is."""
    path = copy_database(migrated_template, tmp_path / "patient.db")
    db = Database(path, hooks=CONNECTION_HOOKS, batch_seconds=60)
    await db.open()
    try:
        yield db
    finally:
        await db.close()


async def test_a_failing_unit_inside_a_batch_leaves_the_rest_committed_and_itself_nothing(
    patient: Database,
) -> None:
    commits: list[int] = []
    patient.add_commit_listener(lambda: commits.append(1))
    names = ["a", "b", "ghost", "c", "d"]
    results = await queue_behind(patient, [recorded(n, n == "ghost") for n in names])
    assert results[:2] == ["a", "b"] and results[3:] == ["c", "d"]
    assert isinstance(results[2], RuntimeError) and "ghost fails" in str(results[2])
    assert commits == [1]  # one batch, one COMMIT
    seen = await patient.read(left_behind)
    for kind in ("principals", "events"):
        assert {"a", "b", "c", "d"} <= seen[kind] and "ghost" not in seen[kind]
    assert {"key-a", "key-d"} <= seen["receipts"] and "key-ghost" not in seen["receipts"]


async def test_a_batch_commits_once_for_all_its_units(patient: Database) -> None:
    statements: list[str] = []
    await patient.set_trace(statements.append)
    try:
        await queue_behind(patient, [recorded(f"u{i}") for i in range(10)])
    finally:
        await patient.set_trace(None)
    assert statements.count(writer._COMMIT) == 1
    assert statements.count(writer._SAVEPOINT) == 11  # the holder and ten units


async def test_a_write_queued_during_a_long_unit_commits_before_the_next(
    patient: Database,
) -> None:
    """The sweep's batches (~50 ms each) were batched with the writes queued
    meanwhile: a write arriving during one committed only with the next, so
    it waited two of them (~120 ms; sweepbacklogaudit). A `solo` unit now
    commits apart: the write queued between two of them is committed, seen
    from another connection, before the second starts."""
    held = Held()
    first = asyncio.create_task(patient.write(held, solo=True))
    await asyncio.to_thread(held.entered.wait, 10)
    seen: list[bool] = []

    def second(conn: sqlite3.Connection) -> None:
        other = sqlite3.connect(patient.path)
        try:
            rows = other.execute("SELECT 1 FROM principals WHERE name = 'between'").fetchall()
            seen.append(bool(rows))
        finally:
            other.close()

    between = asyncio.create_task(patient.write(recorded("between")))
    await asyncio.sleep(0)  # queued behind the first
    after = asyncio.create_task(patient.write(second, solo=True))
    await asyncio.sleep(0)
    held.release.set()
    await asyncio.wait_for(asyncio.gather(first, between, after), 10)
    assert seen == [True]


def fills_the_disk(swallow: bool) -> Callable[[sqlite3.Connection], str]:
    """A unit under which SQLite itself rolls the whole transaction back, as
    on a full disk (here: past `max_page_count`), raising or swallowing it."""

    def unit(conn: sqlite3.Connection) -> str:
        principals.create_principal(conn, "agent", "lost", AT)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 1}")
        try:
            conn.execute("CREATE TABLE filler (x)")
            conn.execute("INSERT INTO filler VALUES (?)", ("x" * 200_000,))
        except sqlite3.OperationalError:
            if not swallow:
                raise
        finally:
            conn.execute("PRAGMA max_page_count = 1073741823")
        return "lost"

    return unit


async def queue_all(db: Database, units: list[Callable[[sqlite3.Connection], Any]]) -> list[Any]:
    """`queue_behind`, with the holder's own outcome first."""
    held = Held()
    holder = asyncio.create_task(db.write(held))
    await asyncio.to_thread(held.entered.wait, 10)
    tasks = [asyncio.create_task(db.write(u)) for u in units]
    await asyncio.sleep(0)  # every write is queued behind the holder
    held.release.set()
    return await asyncio.wait_for(asyncio.gather(holder, *tasks, return_exceptions=True), 10)


async def names_of(db: Database, name: str) -> list[str]:
    return await db.read(
        lambda c: [r[0] for r in c.execute("SELECT name FROM principals WHERE name = ?", (name,))]
    )


async def test_a_unit_that_loses_the_transaction_fails_alone_and_the_others_still_commit(
    patient: Database, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When SQLite rolls the whole transaction back under a unit (a full
    disk, an I/O error), the units before it in the batch run again: they
    were never acknowledged, so nothing is lost or doubled. (A full disk is
    a condition: its lines are WARNINGs, at most one every 10 s each.)"""
    own_condition_log(monkeypatch, writer)
    with caplog.at_level(logging.WARNING, "waypost"):
        outcomes = await queue_all(patient, [recorded("before"), fills_the_disk(False),
                                             recorded("after")])  # fmt: skip
    held, before, lost, after = outcomes
    assert held is None and before == "before" and after == "after", outcomes
    # a full disk is the storage's condition: 503 to its caller (contract 14)
    assert isinstance(lost, Unavailable) and "disk is full" in str(lost), lost
    assert "full" in caplog.text  # the cause, not "no transaction is active"
    assert "no transaction is active" not in caplog.text
    assert await names_of(patient, "before") == ["before"]  # ran again once, committed once
    assert await names_of(patient, "lost") == []


async def test_a_unit_that_swallows_a_lost_transaction_never_doubles_a_write(
    patient: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """A unit that returns although SQLite ended the transaction under it:
    the writer's own RELEASE failed outside any handler, and no caller of the
    batch was ever answered. Whether the units before it are committed is
    then unknown to the writer, so none runs again: they are answered 503 (a
    retry with the same idempotency key replays or runs anew), and the units
    after it run in a fresh transaction."""
    with caplog.at_level(logging.ERROR, "waypost"):
        outcomes = await queue_all(patient, [recorded("first"), fills_the_disk(True),
                                             recorded("last")])  # fmt: skip
    held, first, lost, last = outcomes
    assert isinstance(held, Unavailable) and isinstance(first, Unavailable), outcomes
    assert isinstance(lost, RuntimeError) and "ended" in str(lost), lost
    assert last == "last"
    assert await names_of(patient, "first") == []  # rolled back by SQLite, never run twice
    assert await asyncio.wait_for(patient.write(recorded("next")), 10) == "next"


@pytest.mark.parametrize(
    "statement", ["COMMIT", "ROLLBACK", "BEGIN", "RELEASE unit", "ROLLBACK TO unit", "END"]
)
async def test_a_unit_cannot_end_or_release_the_writers_transaction(
    patient: Database, statement: str
) -> None:
    """A unit's COMMIT committed what ran before it in the batch (which could
    then run twice); now the writer refuses it, and the unit fails alone."""

    def ends(conn: sqlite3.Connection) -> str:
        principals.create_principal(conn, "agent", "ender", AT)
        conn.execute(statement)
        return "ender"

    outcomes = await queue_all(patient, [recorded("first"), ends, recorded("last")])
    held, first, ender, last = outcomes
    assert held is None and first == "first" and last == "last", outcomes
    assert isinstance(ender, sqlite3.DatabaseError) and "not authorized" in str(ender), ender
    assert await names_of(patient, "first") == ["first"]
    assert await names_of(patient, "ender") == []


async def test_a_unit_keeps_savepoints_of_its_own(patient: Database) -> None:
    def nested(conn: sqlite3.Connection) -> str:
        conn.execute("SAVEPOINT mine")
        principals.create_principal(conn, "agent", "undone", AT)
        conn.execute("ROLLBACK TO mine")
        conn.execute("RELEASE mine")
        principals.create_principal(conn, "agent", "kept", AT)
        return "ok"

    assert await patient.write(nested) == "ok"
    assert await names_of(patient, "kept") == ["kept"]
    assert await names_of(patient, "undone") == []


async def test_nobody_is_answered_before_the_commit(service: Service) -> None:
    """A caller resumes only once its unit is visible to another connection."""
    path = service.db_path

    async def write_then_look(name: str) -> bool:
        await service.rt.db.write(recorded(name))
        other = sqlite3.connect(path)
        try:
            return other.execute("SELECT 1 FROM principals WHERE name = ?", (name,)).fetchone()
        finally:
            other.close()

    seen = await asyncio.gather(*(write_then_look(f"v{i}") for i in range(16)))
    assert all(seen)


async def fill_old_receipts(service: Service, count: int) -> None:
    old = "2026-11-01T00:00:00.000Z"

    def fill(conn: sqlite3.Connection) -> None:
        conn.executemany(
            "INSERT INTO receipts (principal_id, key, fingerprint, status, body, created_at)"
            " VALUES ('p', ?, 'f', 200, '{}', ?)",
            [(f"old-{i}", old) for i in range(count)],
        )

    await service.rt.db.write(fill)


async def purge_units(service: Service, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Run one sweep pass; the receipts each of the purge's units deleted."""
    units: list[int] = []
    write = service.rt.db.write

    async def counted(unit: Any, **options: Any) -> Any:
        done = await write(unit, **options)
        units.append(done)
        return done

    with monkeypatch.context() as patched:
        patched.setattr(service.rt.db, "write", counted)
        report = await sweep.run_once(service.rt)
    units.pop()  # the decision timeouts' one unit, which finds none due
    assert report["receipts_purged"] == sum(units)
    left = await service.rt.db.read(lambda c: c.execute("SELECT count(*) FROM receipts").fetchone())
    assert left[0] == 0
    return units


async def test_the_sweep_purges_receipts_in_bounded_batches(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    await fill_old_receipts(service, PURGE_BATCH * 2 + 7)
    monkeypatch.setattr(receipts, "PURGE_UNIT_SECONDS", 3600.0)  # no unit runs out of time
    # 500 + 500 + 7, each its own unit of work, and one that finds none left
    assert await purge_units(service, monkeypatch) == [PURGE_BATCH, PURGE_BATCH, 7, 0]


async def test_a_purge_unit_stops_when_its_time_is_up_and_the_pass_goes_on(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receipt holds its answer: 500 of 250 KB each (a task create at the
    body limit) held the writer 1-2.5 s in one unit (clockjourney), where
    the decision timeouts stop at 50 ms. A unit now stops once its time is
    up (here at once: one chunk a unit), and the pass runs units until one
    deletes none, so the backlog is still gone within the pass."""
    await fill_old_receipts(service, PURGE_CHUNK * 2 + 3)
    monkeypatch.setattr(receipts, "PURGE_UNIT_SECONDS", 0.0)
    assert await purge_units(service, monkeypatch) == [PURGE_CHUNK, PURGE_CHUNK, 3, 0]


async def test_a_connection_hook_runs_once_per_connection_not_per_call(tmp_path: Path) -> None:
    opened: list[int] = []
    db = Database(tmp_path / "h.db", readers=2, hooks=[lambda c: opened.append(id(c))])
    await db.open()
    try:
        for _ in range(5):
            await db.write(lambda c: c.execute("SELECT 1"))
            await db.read(lambda c: c.execute("SELECT 1"))
            await db.read_point(lambda c: c.execute("SELECT 1"))
            async with db.pinned():
                await db.read(lambda c: c.execute("SELECT 1"))
    finally:
        await db.close()
    # the writer, two readers, two for pinned reads and the loop's point reader
    assert len(opened) == 6


# -- a lock held by another process ---------------------------------------------


@pytest.fixture
def locked_by_another_process(tmp_path: Path) -> Iterator[Callable[[Path], None]]:
    holders: list[subprocess.Popen[str]] = []

    def hold(path: Path) -> None:
        script = (
            "import sqlite3, sys\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "c.execute('BEGIN IMMEDIATE')\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n"
        )
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        holders.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"

    yield hold
    for proc in holders:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        proc.wait(timeout=10)
        proc.stdout.close()


@pytest.fixture
async def impatient(tmp_path: Path) -> AsyncIterator[Service]:
    settings = Settings(db_path=tmp_path / "busy.db", sweep_interval=3600, busy_timeout_ms=400)
    async with serving(settings, MovableClock()) as made:
        yield made


async def test_every_queued_write_answers_503_within_its_own_busy_timeout(
    impatient: Service, locked_by_another_process: Callable[[Path], None]
) -> None:
    human: Caller = await impatient.principal("human")
    assert (await human.post("/api/v1/projects", {"id": "demo", "name": "D"})).status_code == 201
    locked_by_another_process(impatient.db_path)
    budget = 0.4 + 1.0

    async def one(i: int) -> tuple[float, int, str | None]:
        await asyncio.sleep(i * 0.05)  # arrivals spread over the lock
        sent = time.monotonic()
        r = await human.post("/api/v1/projects", {"id": f"p{i}", "name": "P"})
        return time.monotonic() - sent, r.status_code, r.headers.get("retry-after")

    answers = await asyncio.gather(*(one(i) for i in range(20)))
    assert {(status, retry) for _, status, retry in answers} == {(503, "1")}
    slowest = max(elapsed for elapsed, _, _ in answers)
    assert slowest < budget, sorted(round(e, 2) for e, _, _ in answers)


async def test_a_write_queued_behind_another_keeps_its_own_busy_budget(
    tmp_path: Path, locked_by_another_process: Callable[[Path], None]
) -> None:
    """With a busy timeout longer than the contract's one second of grace, a
    write queued behind one still waiting must not wait a whole timeout of
    its own after the first's ends (the 400 ms test above cannot tell)."""
    settings = Settings(db_path=tmp_path / "slow.db", sweep_interval=3600, busy_timeout_ms=2000)
    async with serving(settings, MovableClock()) as patient:
        human: Caller = await patient.principal("human")
        r = await human.post("/api/v1/projects", {"id": "demo", "name": "D"})
        assert r.status_code == 201
        locked_by_another_process(patient.db_path)

        async def one(delay: float, i: int) -> tuple[float, int]:
            await asyncio.sleep(delay)
            sent = time.monotonic()
            r = await human.post("/api/v1/projects", {"id": f"p{i}", "name": "P"})
            return time.monotonic() - sent, r.status_code

        answers = await asyncio.gather(one(0.0, 1), one(0.5, 2))
    assert [status for _, status in answers] == [503, 503]
    assert max(elapsed for elapsed, _ in answers) < 2.0 + 1.0, answers


async def test_a_lock_held_elsewhere_is_named_in_the_log_once_for_many_refusals(
    impatient: Service,
    locked_by_another_process: Callable[[Path], None],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only the access log showed the 503s: nothing said another process
    held the lock. Now one WARNING says so, not one per refused write."""
    own = own_condition_log(monkeypatch, writer)
    human: Caller = await impatient.principal("human")
    locked_by_another_process(impatient.db_path)
    with caplog.at_level(logging.WARNING, "waypost.storage"):
        for wave in range(3):
            answers = await asyncio.gather(
                *(human.post("/api/v1/projects", {"id": f"p{wave}-{i}", "name": "P"})
                  for i in range(4))
            )  # fmt: skip
            assert {r.status_code for r in answers} == {503}
    lines = [r.getMessage() for r in caplog.records if r.name == own.log.name]
    lines = [line for line in lines if "write lock" in line]
    assert len(lines) == 1 and "held the database's write lock" in lines[0], lines
    # and the lines count the writes refused, not the batches that refused
    # them (one line a batch of many stood for one: overloadjourney)
    with caplog.at_level(logging.WARNING, own.log.name):
        own.flush()
    lines = [r.getMessage() for r in caplog.records if r.name == own.log.name]
    told = [re.search(r": (\d+) writes answered 503.*?(?:and (\d+) more like it|$)", line)
            for line in lines if "write lock" in line]  # fmt: skip
    assert sum(int(m[1]) + int(m[2] or 0) for m in told if m) == 12, lines


async def test_queued_writes_go_on_once_a_short_lock_is_let_go(impatient: Service) -> None:
    other = sqlite3.connect(impatient.db_path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.1, lambda: other.execute("ROLLBACK"))
    release.start()
    try:
        results = await asyncio.gather(
            *(impatient.rt.db.write(recorded(f"w{i}")) for i in range(8)),
            return_exceptions=True,
        )
    finally:
        release.join()
        other.close()
    assert results == [f"w{i}" for i in range(8)]


async def test_a_closed_database_refuses_writes_and_reads(tmp_path: Path) -> None:
    db = Database(tmp_path / "c.db")
    await db.open()
    await db.close()
    with pytest.raises(Unavailable):
        await db.write(lambda c: None)
    with pytest.raises(Unavailable):
        await db.read(lambda c: None)
    # and every other way in: a point read, a search, a pinned block's
    # reads, the metrics' batch observer, a statement trace
    with pytest.raises(Unavailable):
        await db.read_point(lambda c: None)
    with pytest.raises(Unavailable):
        await db.search(lambda c: None)
    with pytest.raises(Unavailable):
        async with db.pinned():
            await db.read(lambda c: None)
    with pytest.raises(Unavailable):
        db.observe_batches(lambda units, seconds: None)
    with pytest.raises(Unavailable):
        await db.set_trace(None)


# -- file modes --------------------------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A permissive umask, as a careless shell may have: the files must still be 0600."""
    previous = os.umask(0o002)
    try:
        yield
    finally:
        os.umask(previous)


async def test_the_service_creates_its_database_files_owner_only(
    tmp_path: Path, open_umask: None
) -> None:
    settings = Settings(db_path=tmp_path / "private.db", sweep_interval=3600)
    async with serving(settings, MovableClock()) as made:
        await made.principal("human")
        files = [settings.db_path, tmp_path / "private.db-wal", tmp_path / "private.db-shm"]
        assert all(f.exists() for f in files)
        assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}


async def test_serve_makes_an_older_builds_file_owner_only_before_sqlite_copies_its_mode(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Section 14: the `-wal` and `-shm` are created 0600. SQLite gives those
    it creates the database file's mode, so beside a file an older build
    made 0644 they were made 0644 (with a warning, until 2026-12-07)."""
    settings = Settings(db_path=tmp_path / "old.db", sweep_interval=3600)
    async with serving(settings, MovableClock()):
        pass
    assert "open to other users" not in caplog.text  # made by this build: 0600
    settings.db_path.chmod(0o644)
    assert not list(tmp_path.glob("old.db-*"))  # a clean stop removed them
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="waypost"):
        async with serving(settings, MovableClock()) as made:
            await made.principal("human")  # a write: the -wal and -shm are there
            files = [settings.db_path, tmp_path / "old.db-wal", tmp_path / "old.db-shm"]
            assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
    warned = [r.getMessage() for r in caplog.records if "open to other users" in r.getMessage()]
    assert len(warned) == 1 and str(settings.db_path) in warned[0], warned
    assert "(mode 0644): made it 0600" in warned[0]
    caplog.clear()
    async with serving(settings, MovableClock()):
        pass
    assert "open to other users" not in caplog.text


async def test_serve_names_a_file_open_to_others_that_it_may_not_change(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file this user does not own (root made it) keeps its mode, and the
    operator is told how to close it."""
    settings = Settings(db_path=tmp_path / "theirs.db", sweep_interval=3600)
    async with serving(settings, MovableClock()):
        pass
    settings.db_path.chmod(0o640)

    def refused(name: object, mode: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(runtime_module.os, "chmod", refused)
    with caplog.at_level(logging.WARNING, logger="waypost"):
        async with serving(settings, MovableClock()):
            pass
    warned = [r.getMessage() for r in caplog.records if "open to other users" in r.getMessage()]
    assert any(
        "(mode 0640) and could not be made owner-only (Operation not permitted)" in line
        and "chmod 600" in line
        for line in warned
    ), warned
    assert mode(settings.db_path) == 0o640


def test_admin_commands_create_the_database_owner_only(tmp_path: Path, open_umask: None) -> None:
    path = tmp_path / "admin.db"
    conn = connect_sync(path)
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    try:
        for name in ("admin.db", "admin.db-wal", "admin.db-shm"):
            assert mode(tmp_path / name) == 0o600, name
    finally:
        conn.close()


async def test_a_database_made_in_an_empty_file_is_owner_only(
    tmp_path: Path, open_umask: None, caplog: pytest.LogCaptureFixture
) -> None:
    """`touch waypost.db` first (mode 0664 here): SQLite wrote the new
    database into the empty file and made its -wal and -shm 0664 too."""
    settings = Settings(db_path=tmp_path / "touched.db", sweep_interval=3600)
    settings.db_path.touch()
    assert mode(settings.db_path) & 0o077
    async with serving(settings, MovableClock()) as made:
        await made.principal("human")
        files = [settings.db_path, tmp_path / "touched.db-wal", tmp_path / "touched.db-shm"]
        assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
    assert "open to other users" not in caplog.text


def test_a_database_named_by_a_link_to_a_new_file_is_owner_only(
    tmp_path: Path, open_umask: None
) -> None:
    """A --db that is a symbolic link to a file not made yet: the 0600 file
    was never created (O_EXCL refuses to follow the link), and SQLite made
    the database, -wal and -shm with the umask's mode."""
    link = tmp_path / "link.db"
    link.symlink_to(tmp_path / "target.db")
    conn = connect_sync(link)
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    try:
        assert link.is_symlink()
        for name in ("target.db", "target.db-wal", "target.db-shm"):
            assert mode(tmp_path / name) == 0o600, name
    finally:
        conn.close()


async def test_batches_are_observable_for_metrics(patient: Database) -> None:
    batches: list[tuple[int, float]] = []
    patient.observe_batches(lambda units, seconds: batches.append((units, seconds)))
    held = Held()
    holder = asyncio.create_task(patient.write(held))
    await asyncio.to_thread(held.entered.wait, 10)
    tasks = [asyncio.create_task(patient.write(recorded(f"m{i}"))) for i in range(5)]
    await asyncio.sleep(0)
    assert patient.queue_depth() == 5
    held.release.set()
    await asyncio.gather(holder, *tasks)
    patient.observe_batches(None)
    assert [units for units, _ in batches] == [6]
    assert 0 < batches[0][1] < 5
    assert patient.queue_depth() == 0


async def test_writes_waiting_for_another_process_lock_show_in_the_metrics(
    tmp_path: Path,
) -> None:
    """The only gauge of the writer counted its queue: a batch the writer had
    taken and that waited to begin under another process's lock was not in
    it, so a service with 64 writes stuck read 0 writes waiting."""
    settings = Settings(db_path=tmp_path / "gauge.db", sweep_interval=3600, busy_timeout_ms=20000)
    async with serving(settings, MovableClock()) as service:
        db = service.rt.db

        def gauges() -> dict[str, float]:
            text = service.rt.metrics.render().decode()
            names = ("waypost_writer_queue_depth", "waypost_writes_unanswered")
            return {
                name: float(value)
                for name, value in (
                    line.split() for line in text.splitlines() if not line.startswith("#")
                )
                if name in names
            }

        lock = sqlite3.connect(service.db_path, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # another process's write, as an operator's shell
        try:
            writes = [asyncio.create_task(db.write(recorded(f"u{i}"))) for i in range(3)]
            deadline = time.monotonic() + 10
            while db.unanswered_writes() < 3 or db.queue_depth() == 3:
                assert time.monotonic() < deadline, (db.unanswered_writes(), db.queue_depth())
                await asyncio.sleep(0.01)  # until the writer has taken some and waits
            seen = gauges()
            assert seen["waypost_writes_unanswered"] == 3
            assert seen["waypost_writer_queue_depth"] < 3
            writes[0].cancel()  # a caller that leaves is no longer waiting
            with pytest.raises(asyncio.CancelledError):
                await writes[0]
            assert gauges()["waypost_writes_unanswered"] == 2
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        assert len(await asyncio.wait_for(asyncio.gather(*writes[1:]), 30)) == 2
        assert gauges() == {"waypost_writer_queue_depth": 0, "waypost_writes_unanswered": 0}


async def test_a_batch_stops_taking_units_at_its_bound(tmp_path: Path) -> None:
    db = Database(tmp_path / "bounded.db", hooks=CONNECTION_HOOKS, batch_units=4, batch_seconds=60)
    await db.open()
    try:
        batches: list[int] = []
        db.observe_batches(lambda units, seconds: batches.append(units))
        await queue_behind(db, [recorded(f"b{i}") for i in range(10)])
    finally:
        await db.close()
    assert batches == [4, 4, 3]  # the holder and three, then four, then three


def slow(name: str, seconds: float) -> Callable[[sqlite3.Connection], str]:
    """A unit that works `seconds` before its insert."""
    inner = recorded(name)

    def unit(conn: sqlite3.Connection) -> str:
        time.sleep(seconds)
        return inner(conn)

    return unit


async def test_a_batch_stops_taking_units_once_it_has_run_its_time(
    tmp_path: Path, migrated_template: Path
) -> None:
    """ "No more once the batch has run for `max_seconds`": 30 ms units under a
    50 ms bound commit a few at a time, never all in one batch that holds
    every caller's answer (a slower machine only makes batches smaller)
    (mutantaudit7)."""
    path = copy_database(migrated_template, tmp_path / "timed.db")
    db = Database(path, hooks=CONNECTION_HOOKS, batch_seconds=0.05)
    await db.open()
    try:
        batches: list[int] = []
        db.observe_batches(lambda units, seconds: batches.append(units))
        results = await queue_behind(db, [slow(f"t{i}", 0.03) for i in range(6)])
    finally:
        await db.close()
    assert results == [f"t{i}" for i in range(6)]
    assert len(batches) >= 3 and max(batches) <= 3, batches


async def test_the_writes_queued_behind_a_solo_unit_commit_apart_from_it(
    patient: Database,
) -> None:
    """A `solo` unit commits in a transaction of its own: the writes queued
    behind it do not join its batch either (mutantaudit7)."""
    batches: list[int] = []
    patient.observe_batches(lambda units, seconds: batches.append(units))
    held = Held()
    first = asyncio.create_task(patient.write(held, solo=True))
    await asyncio.to_thread(held.entered.wait, 10)
    behind = [asyncio.create_task(patient.write(recorded(f"b{i}"))) for i in range(3)]
    await asyncio.sleep(0)
    held.release.set()
    await asyncio.gather(first, *behind)
    assert batches == [1, 3], batches


async def test_a_write_that_waited_within_its_grace_for_the_writer_still_runs(
    tmp_path: Path, migrated_template: Path
) -> None:
    """Only a write that waited its whole busy budget and half a second more
    for the writer itself is shed as overloaded (`_LATE_GRACE`, within the
    contract's second of grace): one that waited 0.45 s of a 0.3 s budget
    runs (mutantaudit7)."""
    path = copy_database(migrated_template, tmp_path / "grace.db")
    db = Database(path, busy_timeout_ms=300, hooks=CONNECTION_HOOKS, batch_seconds=60)
    await db.open()
    try:
        held = Held()
        holder = asyncio.create_task(db.write(held))
        await asyncio.to_thread(held.entered.wait, 10)
        waiting = asyncio.create_task(db.write(recorded("patient")))
        await asyncio.sleep(0.45)  # past its 300 ms, well within 300 + 500
        held.release.set()
        await holder
        assert await waiting == "patient"
        assert "patient" in (await db.read(left_behind))["principals"]
    finally:
        await db.close()


async def test_under_a_lock_a_write_with_budget_left_waits_on_after_older_ones_are_refused(
    tmp_path: Path, migrated_template: Path
) -> None:
    """When BEGIN gives up for the oldest write, only the writes whose own
    budget is spent are answered 503; a younger one waits out what is left
    of its own and commits once the lock goes. 2 s budgets: A at 0 s, B at
    0.5 s, C at 1.5 s, the lock let go at 3 s (half a second from every
    edge) (mutantaudit7)."""
    path = copy_database(migrated_template, tmp_path / "budget.db")
    db = Database(path, busy_timeout_ms=2000, hooks=CONNECTION_HOOKS, batch_seconds=60)
    await db.open()
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")

        async def let_go() -> None:  # timed from the same start as the writes
            await asyncio.sleep(3.0)
            other.execute("ROLLBACK")

        async def at(delay: float, name: str) -> object:
            await asyncio.sleep(delay)
            try:
                return await db.write(recorded(name))
            except Unavailable as refused:
                return refused

        a, b, c, _ = await asyncio.gather(at(0.0, "a"), at(0.5, "b"), at(1.5, "c"), let_go())
    finally:
        other.close()
        await db.close()
    assert isinstance(a, Unavailable) and isinstance(b, Unavailable), (a, b)
    assert c == "c", c


async def test_a_lock_met_inside_a_unit_is_a_503_not_a_fault(
    tmp_path: Path, migrated_template: Path
) -> None:
    """SQLite's busy met by a unit itself (a second connection refused the
    write lock the writer holds) is the busy database it is: 503 with
    Retry-After 1, never a raw sqlite3 error, a 500 (mutantaudit7)."""
    path = copy_database(migrated_template, tmp_path / "inner.db")
    db = Database(path, hooks=CONNECTION_HOOKS)
    await db.open()

    def locked(conn: sqlite3.Connection) -> None:
        second = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            second.execute("BEGIN IMMEDIATE")
        finally:
            second.close()

    try:
        with pytest.raises(Unavailable) as refused:
            await db.write(locked)
        assert refused.value.retry_after == 1
    finally:
        await db.close()


async def test_the_units_of_a_lost_transaction_run_again_once_not_twice(
    patient: Database,
) -> None:
    """ "The others run again in a fresh transaction (once)": a unit whose
    transaction SQLite rolled back twice is answered 503, not run a third
    time (mutantaudit7)."""
    _held, first, lost1, lost2 = await queue_all(
        patient, [recorded("first"), fills_the_disk(False), fills_the_disk(False)]
    )
    assert isinstance(lost1, Unavailable) and isinstance(lost2, Unavailable)
    assert isinstance(first, Unavailable), first  # ran twice, lost twice
    assert await names_of(patient, "first") == []


async def test_a_failing_commit_listener_does_not_silence_the_others(patient: Database) -> None:
    """Each listener hears each committed batch; one that raises is logged,
    and the next still hears of the commit (the live hub and the lifecycle
    delivery share the list) (mutantaudit7)."""
    heard: list[str] = []

    def broken() -> None:
        raise RuntimeError("a listener fails")

    patient.add_commit_listener(broken)
    patient.add_commit_listener(lambda: heard.append("second"))
    assert await patient.write(recorded("one")) == "one"
    for _ in range(100):  # bounded: 1 s
        if heard:
            break
        await asyncio.sleep(0.01)
    assert heard == ["second"], heard


async def test_the_runtime_reports_group_commits_in_its_metrics(service: Service) -> None:
    def units_committed() -> float:
        text = service.rt.metrics.render().decode()
        return next(
            float(line.split()[-1])
            for line in text.splitlines()
            if line.startswith("waypost_commit_batch_size_sum")
        )

    before = units_committed()
    await queue_behind(service.rt.db, [recorded(f"g{i}") for i in range(3)])
    assert units_committed() - before == 4  # the holder and three units
    text = service.rt.metrics.render().decode()
    assert "waypost_commit_seconds_count" in text
    assert "waypost_writer_queue_depth 0.0" in text


async def test_a_stop_that_arrives_while_a_batch_runs_ends_the_writer(tmp_path: Path) -> None:
    """The batch takes the queued units when it runs dry, and took the stop
    marker with them: the thread then waited for a unit for ever, and
    `stop()` (the server's shutdown) for the thread."""
    conn = sqlite3.connect(tmp_path / "s.db", isolation_level=None, check_same_thread=False)
    conn.execute("CREATE TABLE t (x)")
    writer = Writer(conn, 5000)
    running = threading.Event()

    def slow(c: sqlite3.Connection) -> str:
        c.execute("INSERT INTO t VALUES (1)")
        running.set()
        time.sleep(0.3)
        return "done"

    unit = asyncio.ensure_future(writer.submit(slow, transaction=True))
    await asyncio.to_thread(running.wait, 5)
    stopper = threading.Thread(target=writer.stop, daemon=True)
    stopper.start()  # while the unit runs: the marker waits in the queue
    assert await unit == "done"
    await asyncio.to_thread(stopper.join, 5)
    assert not stopper.is_alive(), "stop() never returned"


def test_a_storage_refusal_is_a_warning_and_a_fault_an_error(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/operations.md: a full disk answers each write 503 with a warning
    at most every 10 s (a line per refused write was 11,500
    lines in 35 s, on the full disk); ERROR lines are faults, every one. A
    full disk's failed COMMITs were ERRORs."""
    from waypost.storage.writer import _log_failure

    own = own_condition_log(monkeypatch, writer)
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
    # (a damaged file is a condition too: Database logs its ERROR once)
    corrupt = sqlite3.InterfaceError("bad parameter or other API misuse")
    corrupt.sqlite_errorcode = sqlite3.SQLITE_MISUSE  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING, "waypost"):
        for _ in range(5):
            _log_failure("COMMIT failed: %s", full)
            _log_failure("COMMIT failed: %s", corrupt)
        writer._conditions.seconds = 0.0
        _log_failure("COMMIT failed: %s", full)
    mine = [r for r in caplog.records if r.name == own.log.name or r.levelno >= logging.ERROR]
    assert [(r.levelname, "full" in r.getMessage()) for r in mine] == [
        ("WARNING", True),
        *[("ERROR", False)] * 5,
        ("WARNING", True),
    ]
    assert mine[-1].getMessage().endswith("(and 4 more like it since the last such line)")
    assert mine[0].getMessage() == (
        "COMMIT failed: the database's disk is full (SQLite: database or disk is full)"
    )
    assert mine[1].getMessage() == (
        "COMMIT failed: InterfaceError('bad parameter or other API misuse')"
    )


def _wal_store(path: Path) -> tuple[sqlite3.Connection, Callable[[], int]]:
    """A WAL database of one table, as the service's store sets it up."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA journal_size_limit = {8 * 1024 * 1024}")
    conn.execute("CREATE TABLE t (x BLOB)")
    wal = Path(f"{path}-wal")
    return conn, lambda: wal.stat().st_size if wal.exists() else 0


class OverlappingReads:
    """Two connections taking turns, so that a read transaction is open at
    every instant (as two packet searches back to back are)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        a, b = (sqlite3.connect(self.path, isolation_level=None) for _ in range(2))
        a.execute("BEGIN")
        a.execute("SELECT count(*) FROM t").fetchone()
        while not self.stop.is_set():
            b.execute("BEGIN")
            b.execute("SELECT count(*) FROM t").fetchone()  # b's snapshot, before a ends
            a.execute("COMMIT")
            time.sleep(0.02)
            a, b = b, a
        a.execute("COMMIT")


async def test_overlapping_reads_do_not_let_the_wal_grow_without_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """resaudit: with a read open at every instant, SQLite's passive
    checkpoint never reached the end of the log, and the -wal file grew
    11 MiB a second (1.3 GiB in two minutes) with nothing held elsewhere."""
    monkeypatch.setattr(writer, "WAL_RESTART_BYTES", 4 * 1024 * 1024)
    path = tmp_path / "w.db"
    conn, wal_bytes = _wal_store(path)
    store = Writer(conn, 5000, wal_bytes=wal_bytes)
    reads = OverlappingReads(path)
    reads.thread.start()
    largest = 0
    try:
        for _ in range(40):  # 20 MiB of commits
            await store.submit(
                lambda c: c.execute("INSERT INTO t VALUES (zeroblob(524288))"), transaction=True
            )
            largest = max(largest, wal_bytes())
    finally:
        reads.stop.set()
        await asyncio.to_thread(reads.thread.join, 5)
        await asyncio.to_thread(store.stop)
    assert largest < 8 * 1024 * 1024, f"the WAL reached {largest / 2**20:.0f} MiB"


async def test_a_read_held_elsewhere_delays_the_restart_rarely_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A read that never ends (an sqlite3 shell inside BEGIN) lets no restart
    finish: the next try comes only after the back-off or once the file has
    doubled, so that the writes behind it are not each held up."""
    monkeypatch.setattr(writer, "WAL_RESTART_BYTES", 1024 * 1024)
    monkeypatch.setattr(writer, "WAL_RESTART_WAIT", 0.3)
    own = own_condition_log(monkeypatch, writer)
    path = tmp_path / "w.db"
    conn, wal_bytes = _wal_store(path)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    store = Writer(conn, 5000, wal_bytes=wal_bytes)
    shell = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    shell.execute("BEGIN")
    shell.execute("SELECT count(*) FROM t").fetchone()
    try:
        with caplog.at_level(logging.WARNING, "waypost.storage"):
            for _ in range(10):
                await store.submit(
                    lambda c: c.execute("INSERT INTO t VALUES (zeroblob(524288))"),
                    transaction=True,
                )
    finally:
        shell.execute("COMMIT")
        await asyncio.to_thread(store.stop)
    said = [r.getMessage() for r in caplog.records if r.name == own.log.name]
    said = [line for line in said if "could not be restarted" in line]
    assert len(said) == 1, said  # the condition is told once
    # tries past 1, 2 and 4 MiB at most, of the ten commits past 1 MiB or near
    tries = sum("wal_checkpoint(RESTART)" in s for s in statements)
    assert 1 <= tries <= 3, statements
    assert wal_bytes() > 4 * 1024 * 1024  # the held read kept the log, as it must


async def _owed_restart(
    path: Path, store: Writer, monkeypatch: pytest.MonkeyPatch
) -> sqlite3.Connection:
    """A WAL past a 1 MiB bound whose restart a read held elsewhere refused
    (the back-off 0.4 s): returns that reader's connection, still inside BEGIN."""
    monkeypatch.setattr(writer, "WAL_RESTART_BYTES", 1024 * 1024)
    monkeypatch.setattr(writer, "WAL_RESTART_WAIT", 0.2)
    monkeypatch.setattr(writer, "WAL_RESTART_BACKOFF", 0.4)
    shell = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    shell.execute("BEGIN")
    shell.execute("SELECT count(*) FROM t").fetchone()
    for _ in range(4):
        await store.submit(
            lambda c: c.execute("INSERT INTO t VALUES (zeroblob(524288))"), transaction=True
        )
    return shell


async def test_an_owed_restart_is_tried_again_by_an_idle_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The restart came only after a commit: with the read that held it
    gone, the file stayed past the bound on an idle service until some
    client wrote (233 MiB, walaudit). Once the back-off ends, an idle writer
    tries it again, and cuts the file."""
    path = tmp_path / "w.db"
    conn, wal_bytes = _wal_store(path)
    store = Writer(conn, 5000, wal_bytes=wal_bytes)
    shell = await _owed_restart(path, store, monkeypatch)
    try:
        assert wal_bytes() > 1024 * 1024  # held: the restart is owed
        shell.execute("COMMIT")  # the read ends; nobody writes again
        for _ in range(50):
            if wal_bytes() <= 1024 * 1024:
                break
            await asyncio.sleep(0.1)
        assert wal_bytes() == 0, wal_bytes()  # truncated, without a commit
        # and the writer still writes
        await store.submit(lambda c: c.execute("INSERT INTO t VALUES (1)"), transaction=True)
    finally:
        shell.close()
        await asyncio.to_thread(store.stop)


async def test_no_owed_restart_is_tried_once_the_files_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the database's files changed under the service, the idle
    writer's TRUNCATE dropped from the WAL a row another process had
    committed through its own index (review46): as a close's checkpoint
    would, which the service skips then too (docs/operations.md)."""
    path = tmp_path / "w.db"
    conn, wal_bytes = _wal_store(path)
    changed: list[str] = []
    store = Writer(conn, 5000, wal_bytes=wal_bytes, files_changed=lambda: next(iter(changed), None))
    shell = await _owed_restart(path, store, monkeypatch)
    try:
        changed.append("the -shm was replaced by another file")
        shell.execute("COMMIT")
        held = wal_bytes()
        await asyncio.sleep(1.2)  # the back-off ends, more than once
        assert wal_bytes() == held  # no checkpoint touched the log
    finally:
        shell.close()
        await asyncio.to_thread(store.stop)


@pytest.fixture
async def short_budget(tmp_path: Path, migrated_template: Path) -> AsyncIterator[Database]:
    """A store whose writes have 300 ms of budget, and whose batches are
    bounded by count only (what a test queues together runs together)."""
    path = copy_database(migrated_template, tmp_path / "late.db")
    db = Database(path, busy_timeout_ms=300, hooks=CONNECTION_HOOKS, batch_seconds=60)
    await db.open()
    try:
        yield db
    finally:
        await db.close()


async def holding(db: Database) -> tuple[Held, asyncio.Task[Any]]:
    """A unit that keeps the writer busy until released, once it runs."""
    held = Held()
    holder = asyncio.create_task(db.write(held))
    await asyncio.to_thread(held.entered.wait, 10)
    return held, holder


async def test_a_write_that_waited_its_budget_for_the_writer_is_answered_503_unrun(
    short_budget: Database,
) -> None:
    """More writes than the writer commits (over a hundred operations a
    GraphQL socket: 5,000 queued) waited any time at all: one plain REST
    write took 6.9 s and got 201, past "a write waits at most the busy
    timeout plus a second" (overloadaudit). One that waited its whole budget
    for its turn is answered 503 and not run; one still within it runs."""
    db = short_budget
    held, holder = await holding(db)
    late = [asyncio.create_task(db.write(recorded(f"late{i}"))) for i in range(3)]
    await asyncio.sleep(1.0)  # past their 300 ms and the half second of grace
    fresh = asyncio.create_task(db.write(recorded("fresh")))
    await asyncio.sleep(0)
    held.release.set()
    await holder
    answers = await asyncio.gather(*late, return_exceptions=True)
    assert await fresh == "fresh"
    left = await db.read(left_behind)
    assert all(isinstance(a, Unavailable) and a.retry_after == 1 for a in answers), answers
    assert "overloaded" in str(answers[0])
    assert left["principals"] == {"fresh"} and left["receipts"] == {"key-fresh"}


@pytest.mark.parametrize("swallow", [False, True])
async def test_late_writes_are_answered_whatever_ends_the_batch_behind_them(
    short_budget: Database, swallow: bool
) -> None:
    """Writes shed as late were answered only when their batch reached its
    commit: one that ended early (a unit losing the transaction, or ending
    it itself) left them unanswered for ever, their callers waiting
    (review38). And the unit run once, requeued after a lost transaction,
    runs again, however long it ran: it is not "not run"."""
    db = short_budget
    held, holder = await holding(db)
    late = [asyncio.create_task(db.write(recorded(f"late{i}"))) for i in range(2)]
    await asyncio.sleep(1.0)  # past their 300 ms and the half second of grace
    breaker = asyncio.create_task(db.write(fills_the_disk(swallow)))
    after = asyncio.create_task(db.write(recorded("after")))
    await asyncio.sleep(0)
    held.release.set()
    _, unanswered = await asyncio.wait([holder, *late, breaker, after], timeout=10)
    assert not unanswered
    late_answers = [t.exception() for t in late]
    after_answer = after.exception() or after.result()
    left = await db.read(left_behind)
    assert all("overloaded" in str(a) for a in late_answers), late_answers
    assert not {"late0", "late1"} & left["principals"]
    assert breaker.exception() is not None  # the disk's 503, or its own fault
    # the holder ran and was never "overloaded" (it ran again, or got the
    # writer's own 503 for a unit it cannot vouch for)
    assert holder.exception() is None or "overloaded" not in str(holder.exception())
    assert after_answer == "after" or isinstance(after_answer, Unavailable)


async def test_a_write_that_goes_late_behind_a_slow_unit_in_its_batch_is_shed(
    short_budget: Database,
) -> None:
    """A write already in the batch's queue when it began, which went past
    its budget while a slow unit ahead of it ran and failed, was run and
    answered as a success (review39): the batch's time bound counts only
    after a success."""
    db = short_budget

    def slow_failure(conn: sqlite3.Connection) -> None:
        time.sleep(1.0)  # past the 300 ms and the half second of grace
        raise ValueError("the slow unit fails")

    held, holder = await holding(db)
    slow = asyncio.create_task(db.write(slow_failure))
    behind = asyncio.create_task(db.write(recorded("behind")))
    await asyncio.sleep(0)
    held.release.set()  # both taken into the next batch at once
    await asyncio.wait([holder, slow, behind], timeout=10)
    left = await db.read(left_behind)
    assert isinstance(slow.exception(), ValueError)
    assert "overloaded" in str(behind.exception()), behind
    assert "behind" not in left["principals"]


# -- a failure's cleanup: no write lock, no caller left behind ------------------------


def write_lock_free(path: Path) -> bool:
    """Whether another connection can take the database's write lock at once
    (no wait: a lock the service still holds answers busy here)."""
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError as exc:
        assert "locked" in str(exc) or "busy" in str(exc), exc
        return False
    finally:
        other.close()


def breaks_a_deferred_reference(conn: sqlite3.Connection) -> str:
    """A unit that runs to its end, whose batch's COMMIT then fails with the
    transaction still open (SQLite checks a deferred foreign key at COMMIT
    and leaves the transaction as it was when that check fails)."""
    conn.execute("PRAGMA defer_foreign_keys = ON")
    conn.execute(
        "INSERT INTO sessions (id, principal_id, started_at, expires_at)"
        " VALUES ('s-orphan', 'no-such-principal', ?, ?)",
        (AT, AT),
    )
    return "ran"


async def test_a_commit_that_fails_with_the_transaction_open_leaves_no_write_lock_held(
    patient: Database,
) -> None:
    """A COMMIT that fails without SQLite ending the transaction is rolled
    back at once: left open, it kept the write lock until the next write came
    (on an idle service, for good), and every other process's write (an
    admin command, a backup's restore) waited and failed busy meanwhile."""
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        await asyncio.wait_for(patient.write(breaks_a_deferred_reference), 10)
    assert write_lock_free(patient.path)
    sessions = await patient.read(
        lambda c: c.execute("SELECT count(*) FROM sessions WHERE id = 's-orphan'").fetchone()[0]
    )
    assert sessions == 0
    assert await asyncio.wait_for(patient.write(recorded("after")), 10) == "after"


async def test_a_schema_check_that_fails_leaves_no_write_lock_held(patient: Database) -> None:
    """The check for another build's migrations runs inside the batch's
    transaction (storage/upgrades.py); when it fails (here the table it reads
    was renamed by another process) the batch's units are answered with the
    error and the transaction is ended, not left holding the write lock."""
    other = connect_sync(patient.path)
    try:
        other.execute("ALTER TABLE schema_migrations RENAME TO schema_migrations_aside")
        with pytest.raises(sqlite3.OperationalError, match="schema_migrations"):
            await asyncio.wait_for(patient.write(recorded("refused")), 10)
        assert write_lock_free(patient.path)
        other.execute("ALTER TABLE schema_migrations_aside RENAME TO schema_migrations")
    finally:
        other.close()
    assert await names_of(patient, "refused") == []
    assert await asyncio.wait_for(patient.write(recorded("after")), 10) == "after"


async def test_a_failing_batch_observer_still_answers_the_batch(patient: Database) -> None:
    """The metrics' observer runs on the writer thread after the COMMIT; one
    that raises is logged: escaping, it left the committed batch's callers
    waiting for ever."""

    def broken(units: int, seconds: float) -> None:
        raise RuntimeError("an observer fails")

    patient.observe_batches(broken)
    assert await asyncio.wait_for(patient.write(recorded("observed")), 10) == "observed"
    assert await asyncio.wait_for(patient.write(recorded("next")), 10) == "next"
    patient.observe_batches(None)
    assert await names_of(patient, "observed") == ["observed"]


class _NotAnException(BaseException):
    """What a unit may raise that is no `Exception` (as KeyboardInterrupt)."""


async def test_a_unit_raising_a_base_exception_is_answered_a_runtime_error(
    patient: Database,
) -> None:
    """A unit's BaseException reaches its caller wrapped in a RuntimeError:
    set on the caller's future as it is, a KeyboardInterrupt or SystemExit
    from a unit ran out of the event loop (the server), not the request."""

    def unit(conn: sqlite3.Connection) -> None:
        principals.create_principal(conn, "agent", "interrupted", AT)
        raise _NotAnException("stop")

    with pytest.raises(RuntimeError, match="_NotAnException") as raised:
        await asyncio.wait_for(patient.write(unit), 10)
    assert isinstance(raised.value.__cause__, _NotAnException)
    assert await names_of(patient, "interrupted") == []
    assert await asyncio.wait_for(patient.write(recorded("after")), 10) == "after"


async def test_the_sweep_is_not_shed_as_overloaded_while_clients_keep_the_writer_busy(
    short_budget: Database,
) -> None:
    """The sweep (receipt purge, decision timeouts) waits its turn at the
    writer, however long: it was answered 503 "overloaded" unrun past a
    client's budget, and one agent keeping the writer saturated (72
    concurrent decision opens on a real `waypost serve`, `--sweep-interval
    5`, clock moved 49 h on) had every pass skipped for the whole of its 40 s
    of load: no receipt purged, no reversible decision timed out
    (abusejourney). Here one long unit holds the writer past the sweep's
    budget."""
    from types import SimpleNamespace

    db = short_budget

    def fill(conn: sqlite3.Connection) -> None:
        conn.executemany(
            "INSERT INTO receipts (principal_id, key, fingerprint, status, body, created_at)"
            " VALUES ('p', ?, 'f', 200, '{}', '2026-11-01T00:00:00.000Z')",
            [(f"old-{i}",) for i in range(7)],
        )

    await db.write(fill)
    rt = SimpleNamespace(db=db, now=lambda: datetime(2026, 11, 29, 18, tzinfo=UTC))
    held, holder = await holding(db)
    passing = asyncio.create_task(sweep.run_once(rt))  # type: ignore[arg-type]
    await asyncio.sleep(1.0)  # past its 300 ms budget and the half second of grace
    held.release.set()
    await holder
    report = await passing
    assert report["receipts_purged"] == 7


async def test_a_second_callers_write_is_taken_before_the_first_callers_backlog(
    patient: Database,
) -> None:
    """First come, first served, one agent's backlog of heavy writes held
    every batch, and another principal's write waited behind all of it
    (72 at once: 1.2-1.7 s, past the budget 503; writerfair). The writer
    takes units in turn by caller: with the writer held busy, a's backlog
    of five and then b's one write queued, b's runs second, not sixth."""
    ran: list[str] = []

    def named(name: str) -> Callable[[sqlite3.Connection], str]:
        def unit(conn: sqlite3.Connection) -> str:
            ran.append(name)
            return name

        return unit

    held = Held()
    holder = asyncio.create_task(patient.write(held, who="a"))
    await asyncio.to_thread(held.entered.wait, 10)
    backlog = [asyncio.create_task(patient.write(named(f"a{i}"), who="a")) for i in range(5)]
    await asyncio.sleep(0)  # a's five are queued, then b's one
    other = asyncio.create_task(patient.write(named("b0"), who="b"))
    await asyncio.sleep(0)
    assert patient.queue_depth() == 6
    held.release.set()
    await asyncio.wait_for(asyncio.gather(holder, *backlog, other), 10)
    assert ran == ["a0", "b0", "a1", "a2", "a3", "a4"]


async def test_one_callers_writes_keep_their_order_and_their_batch(patient: Database) -> None:
    """In turn by caller changes nothing for one caller alone: its writes
    run in the order they came, all in one batch (one COMMIT)."""
    ran: list[str] = []
    commits: list[int] = []
    patient.add_commit_listener(lambda: commits.append(1))

    def named(name: str) -> Callable[[sqlite3.Connection], None]:
        return lambda conn: ran.append(name)

    held = Held()
    holder = asyncio.create_task(patient.write(held, who="a"))
    await asyncio.to_thread(held.entered.wait, 10)
    tasks = [asyncio.create_task(patient.write(named(f"a{i}"), who="a")) for i in range(10)]
    await asyncio.sleep(0)
    held.release.set()
    await asyncio.wait_for(asyncio.gather(holder, *tasks), 10)
    assert ran == [f"a{i}" for i in range(10)]
    assert commits == [1]


@pytest.fixture
async def one_unit_batches(tmp_path: Path, migrated_template: Path) -> AsyncIterator[Database]:
    """A store whose every batch ends after its first unit (as 10 ms of heavy
    writes end one), so what a batch took and did not run is put back into
    the callers' lines before the next is filled; budgets no test reaches."""
    path = copy_database(migrated_template, tmp_path / "short.db")
    db = Database(path, busy_timeout_ms=30_000, hooks=CONNECTION_HOOKS, batch_seconds=0)
    await db.open()
    try:
        yield db
    finally:
        await db.close()


async def test_a_caller_with_two_writes_waiting_is_not_starved_by_callers_writing_one_at_a_time(
    one_unit_batches: Database,
) -> None:
    """Taken in turn by caller, a batch that ends early (10 ms of heavy
    writes) puts back what it took and did not run. A caller with nothing
    else waiting went back to the front, a caller with more waiting stayed
    behind every other: with b, c and d writing one at a time, a's two
    writes, queued before all of theirs, ran only after all sixty of theirs,
    when they stopped (under load, both answered 503 unrun while theirs
    were committed; fairreview). In turn, a's first runs in the first round."""
    db = one_unit_batches
    ran: list[str] = []

    def named(name: str) -> Callable[[sqlite3.Connection], None]:
        def unit(conn: sqlite3.Connection) -> None:
            ran.append(name)
            time.sleep(0.005)  # time for the callers answered to send their next

        return unit

    async def one_at_a_time(who: str, rounds: int) -> None:
        for i in range(rounds):
            await db.write(named(f"{who}{i}"), who=who)

    held = Held()
    holder = asyncio.create_task(db.write(held, who="h"))
    await asyncio.to_thread(held.entered.wait, 10)
    backlog = [asyncio.create_task(db.write(named(f"a{i}"), who="a")) for i in range(2)]
    await asyncio.sleep(0)  # a's two are queued, then b's, c's and d's first
    others = [asyncio.create_task(one_at_a_time(who, 20)) for who in "bcd"]
    await asyncio.sleep(0)
    held.release.set()
    await asyncio.wait_for(asyncio.gather(holder, *backlog, *others), 30)
    # one of each caller in turn: a's first among the first four, its
    # second among the first eight (not the 61st and 62nd)
    assert ran.index("a0") < 4, ran
    assert ran.index("a1") < 8, ran


async def test_a_backlog_taken_while_its_caller_wrote_alone_waits_in_turn_after_the_batch(
    one_unit_batches: Database,
) -> None:
    """A batch filled while one caller alone wrote holds its whole backlog;
    ended early, what it did not run goes back to that caller's line, so a
    write another caller sends meanwhile runs next in turn, not behind
    every unit of the backlog the batch had taken (the reason for
    `Writer._put_back`)."""
    db = one_unit_batches
    ran: list[str] = []

    def named(name: str) -> Callable[[sqlite3.Connection], None]:
        return lambda conn: ran.append(name)

    first = Held()
    holder = asyncio.create_task(db.write(first, who="a"))
    await asyncio.to_thread(first.entered.wait, 10)
    second = Held()
    backlog = [asyncio.create_task(db.write(second, who="a"))]
    backlog += [asyncio.create_task(db.write(named(f"a{i}"), who="a")) for i in range(1, 10)]
    await asyncio.sleep(0)
    first.release.set()  # the next batch takes a's whole backlog, a alone
    await asyncio.to_thread(second.entered.wait, 10)
    other = asyncio.create_task(db.write(named("b0"), who="b"))
    await asyncio.sleep(0.05)  # b's write is queued while a's backlog runs
    second.release.set()
    await asyncio.wait_for(asyncio.gather(holder, *backlog, other), 30)
    assert ran.index("b0") <= 1, ran


async def test_under_a_lock_an_older_write_left_out_of_the_batch_is_answered_within_its_budget(
    tmp_path: Path, migrated_template: Path
) -> None:
    """Taken in turn, a batch may hold only younger writes than one waiting
    in its caller's line: a's first two fill a batch (a1 straight off the
    queue, a2 its caller's next), a1's budget ends under the lock, and the
    next batch is b's and c's while a's third (0.3 s) waits behind them.
    BEGIN must wait no longer than the oldest of both (`Writer._begin`'s
    line heads): waiting out b's budget answered a3 1.6 s past its own. 2 s
    budgets, another process's lock all along: z at 0 s, a's three at 0.1,
    0.2, 0.3 s, b and c at 1.9, 1.95 s; two units a batch."""
    path = copy_database(migrated_template, tmp_path / "heads.db")
    db = Database(
        path, busy_timeout_ms=2000, hooks=CONNECTION_HOOKS, batch_units=2, batch_seconds=60
    )
    await db.open()
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")

        async def at(delay: float, name: str, who: str) -> tuple[str, float]:
            await asyncio.sleep(delay)
            arrived = time.monotonic()
            with pytest.raises(Unavailable):
                await db.write(recorded(name), who=who)
            return name, time.monotonic() - arrived

        waited = await asyncio.gather(
            at(0.0, "z", "Z"), at(0.1, "a1", "A"), at(0.2, "a2", "A"),
            at(0.3, "a3", "A"), at(1.9, "b", "B"), at(1.95, "c", "C"),
        )  # fmt: skip
    finally:
        other.close()
        await db.close()
    # each refused within its own 2 s budget and the contract's second of
    # grace (section 14), as the test of two REST writes above; the flaw
    # this guards against answered a3 at 3.6 s. It said 2.5 s, which a
    # loaded machine's late wake-ups passed (2.55 s, 1 run in 25: flakehunt;
    # `_BUSY_SLICE` now keeps BEGIN's wait by the clock)
    assert all(w < 2.0 + 1.0 for _, w in waited), waited


def test_a_begin_under_a_lock_keeps_to_its_budget_by_the_clock(
    tmp_path: Path, migrated_template: Path
) -> None:
    """SQLite's busy handler counts the sleeps it asks for, not the time
    that passes: a writer stopped for 1.5 s while it waited for another
    process's lock (SIGSTOP here; a loaded machine's late wake-ups, a
    suspended VM) waited its 2 s budget plus the stop, 3.5 s, past the
    contract's second of grace. It waits in slices sized from the clock."""
    import signal

    path = copy_database(migrated_template, tmp_path / "stopped.db")
    script = (
        "import asyncio, sys, time\n"
        "from pathlib import Path\n"
        "from waypost.errors import Unavailable\n"
        "from waypost.runtime import CONNECTION_HOOKS\n"
        "from waypost.storage.db import Database\n"
        "async def main():\n"
        "    db = Database(Path(sys.argv[1]), busy_timeout_ms=2000, hooks=CONNECTION_HOOKS)\n"
        "    await db.open()\n"
        "    print('ready', flush=True)\n"
        "    sys.stdin.readline()  # the lock is held\n"
        "    began = time.monotonic()\n"
        "    try:\n"
        "        await db.write(lambda conn: conn.execute('SELECT 1'))\n"
        "    except Unavailable:\n"
        "        print(f'refused {time.monotonic() - began:.3f}', flush=True)\n"
        "    await db.close()\n"
        "asyncio.run(main())\n"
    )
    holder = sqlite3.connect(path, isolation_level=None)
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline() == "ready\n"
        holder.execute("BEGIN IMMEDIATE")
        proc.stdin.write("go\n")
        proc.stdin.flush()
        time.sleep(0.3)  # its BEGIN waits
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(1.5)
        os.kill(proc.pid, signal.SIGCONT)
        said, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.communicate()
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
    assert said.startswith("refused "), said
    waited = float(said.split()[1])
    assert waited < 2.0 + 1.0, f"refused after {waited:.1f} s of a 2 s budget"


async def test_a_close_answers_every_write_still_waiting_in_its_callers_line(
    tmp_path: Path, migrated_template: Path
) -> None:
    """The stop marker can come out of the queue while units wait in their
    callers' lines (more than a batch takes): the writer runs on until the
    lines are empty too, so every write queued before the close is committed
    and answered. Stopping with the lines full left their callers (and a
    server's shutdown behind them) waiting for ever."""
    path = copy_database(migrated_template, tmp_path / "closing.db")
    db = Database(path, hooks=CONNECTION_HOOKS, batch_units=2, batch_seconds=60)
    await db.open()
    held = Held()
    holder = asyncio.create_task(db.write(held, who="a"))
    await asyncio.to_thread(held.entered.wait, 10)
    names = [f"{who}{i}" for i in range(3) for who in "abc"]
    writes = [asyncio.create_task(db.write(recorded(n), who=n[0])) for n in names]
    await asyncio.sleep(0)  # all nine queued, then the stop marker behind them
    closing = asyncio.create_task(db.close())
    await asyncio.sleep(0.1)
    held.release.set()
    answered = await asyncio.wait_for(asyncio.gather(holder, *writes), 10)
    await asyncio.wait_for(closing, 10)
    assert answered[1:] == names
    check = sqlite3.connect(path)
    try:
        assert left_behind(check)["principals"] >= set(names)
    finally:
        check.close()


async def test_a_write_behind_others_of_its_caller_is_shed_at_its_budget_while_others_write(
    tmp_path: Path, migrated_template: Path
) -> None:
    """A write that waited its budget and `_LATE_GRACE` more for the writer
    is answered 503 unrun, also while it waits in its caller's line: taken
    in turn, a's twenty writes sent at once reach a batch one a round, and
    those behind were answered only when their turn came, seconds past
    their budget (0.3 s budget: 1.5-2.6 s; first come, first served it was
    0.6 s; fairreview), beyond the second of grace the writer keeps to. Four
    other callers write one at a time all along, 30 ms a write, one write a
    batch, two units at most a batch."""
    path = copy_database(migrated_template, tmp_path / "late_lines.db")
    db = Database(path, busy_timeout_ms=300, hooks=CONNECTION_HOOKS, batch_units=2, batch_seconds=0)
    await db.open()
    waits: dict[str, list[float]] = {}

    def slow(conn: sqlite3.Connection) -> None:
        time.sleep(0.03)

    async def timed(who: str) -> None:
        sent = time.monotonic()
        with contextlib.suppress(Unavailable):
            await db.write(slow, who=who)
        waits.setdefault(who, []).append(time.monotonic() - sent)

    async def one_at_a_time(who: str, until: float) -> None:
        while time.monotonic() < until:
            await timed(who)

    try:
        until = time.monotonic() + 2.5
        others = [asyncio.create_task(one_at_a_time(who, until)) for who in "bcde"]
        await asyncio.sleep(0.1)
        await asyncio.wait_for(asyncio.gather(*(timed("a") for _ in range(20))), 30)
        await asyncio.wait_for(asyncio.gather(*others), 30)
    finally:
        await db.close()
    worst = {who: round(max(w), 2) for who, w in waits.items()}
    assert worst.pop("a") < 1.3  # a's budget and a second of grace
    assert all(w < 1.3 for w in worst.values()), worst


async def test_writes_answered_503_from_their_callers_lines_leave_the_queue_depth(
    tmp_path: Path, migrated_template: Path
) -> None:
    """Under another process's lock, writes waiting in their callers' lines
    (more callers than a batch takes) are answered 503 at their budgets and
    leave the queue: once every write is answered, `queue_depth` (the
    `waypost_db_write_queue_depth` gauge) is 0 again, not the number that
    were refused from the lines, for good."""
    path = copy_database(migrated_template, tmp_path / "depth.db")
    db = Database(
        path, busy_timeout_ms=300, hooks=CONNECTION_HOOKS, batch_units=1, batch_seconds=60
    )
    await db.open()
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")
        writes = [db.write(recorded(f"w{i}"), who=f"caller{i}") for i in range(6)]
        answers = await asyncio.wait_for(asyncio.gather(*writes, return_exceptions=True), 10)
        assert all(isinstance(a, Unavailable) for a in answers), answers
        assert db.unanswered_writes() == 0
        assert db.queue_depth() == 0
    finally:
        other.close()
        await db.close()


async def test_a_principals_rest_write_is_taken_in_turn_with_another_principals_backlog(
    service: Service,
) -> None:
    """The writer's turns are by principal for what clients send
    (`run_mutation` passes the caller's principal as `who`): alice's five
    project creates queued first, then bob's one; bob's is committed first or
    second, not sixth, and alice's keep their order."""
    alice = await service.principal("human", "alice")
    bob = await service.principal("human", "bob")
    held = Held()
    holder = asyncio.create_task(service.rt.db.write(held))
    await asyncio.to_thread(held.entered.wait, 10)
    try:
        mine = [
            asyncio.create_task(alice.post("/api/v1/projects", {"id": f"a{i}", "name": "A"}))
            for i in range(5)
        ]
        await asyncio.sleep(0.3)  # alice's five wait for the writer, then bob's
        theirs = asyncio.create_task(bob.post("/api/v1/projects", {"id": "b0", "name": "B"}))
        await asyncio.sleep(0.3)
    finally:
        held.release.set()
    await asyncio.wait_for(holder, 10)
    answers = await asyncio.wait_for(asyncio.gather(*mine, theirs), 10)
    assert [r.status_code for r in answers] == [201] * 6
    check = sqlite3.connect(service.db_path)
    try:
        order = [
            r[0]
            for r in check.execute(
                "SELECT project_id FROM events WHERE type = 'project.created' ORDER BY sequence"
            )
        ]
    finally:
        check.close()
    assert order.index("b0") <= 1, order
    assert [p for p in order if p != "b0"] == [f"a{i}" for i in range(5)]  # alice's in order
