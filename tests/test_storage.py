"""The async SQLite store: durability settings, units of work, contention that
answers 503 (never a 500), and migrations applied once with checksums."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Caller, MovableClock, Service
from tests.context_support import EndlessSearch
from waypost.app import create_app
from waypost.errors import Unavailable
from waypost.resolvers.access import principals
from waypost.settings import Settings
from waypost.storage import db as db_module
from waypost.storage import migrate as migrations
from waypost.storage import writer
from waypost.storage.connection import connect
from waypost.storage.db import Database, DatabaseUnusable, connect_sync, run_write
from waypost.storage.migrate import Migration, MigrationError, available, migrate

POLICY = "/api/v1/projects/demo/policy"


# -- connection settings ------------------------------------------------------


async def test_every_connection_is_wal_synchronous_full_with_foreign_keys(
    service: Service,
) -> None:
    def pragmas(conn: sqlite3.Connection) -> tuple[str, int, int, int]:
        return (
            conn.execute("PRAGMA journal_mode").fetchone()[0],
            conn.execute("PRAGMA synchronous").fetchone()[0],
            conn.execute("PRAGMA foreign_keys").fetchone()[0],
            conn.execute("PRAGMA busy_timeout").fetchone()[0],
        )

    # the writer keeps its 5 s budget itself, by the clock, waiting in slices
    # of `_BUSY_SLICE` (storage/writer.py): its connection's own timeout is one
    slice = int(writer._BUSY_SLICE * 1000)
    assert await service.rt.db.write(pragmas) == ("wal", 2, 1, slice)
    readers = await asyncio.gather(*(service.rt.db.read(pragmas) for _ in range(6)))
    assert set(readers) == {("wal", 2, 1, 5000)}


class _Measured(Exception):
    """Carries a unit's observation out while rolling the unit back."""


def _open_files() -> list[str]:
    """What this process's open descriptors name now."""
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            found.append(os.readlink(fd))
        except OSError:  # closed meanwhile (the listing's own descriptor)
            continue
    return found


def _open_temporary_files() -> list[str]:
    return [name for name in _open_files() if "etilqs_" in name]  # SQLite's temporary files


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
async def test_the_writers_savepoint_journals_stay_in_memory(service: Service) -> None:
    """Every unit runs in a savepoint; a page dirtied before it and changed again
    in it is copied to the savepoint's journal, which SQLite spills past 64 KiB
    to a temporary file (open, unlink, write, close per batch: half the
    writer's system time under load) unless `temp_store = MEMORY`."""

    def spill(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE scratch (x TEXT)")
        conn.executemany("INSERT INTO scratch VALUES (?)", [("x" * 200,)] * 2000)
        conn.execute("SAVEPOINT inner_changes")
        conn.execute("UPDATE scratch SET x = x || 'y'")
        opened = _open_temporary_files()
        conn.execute("RELEASE inner_changes")
        raise _Measured(opened)

    with pytest.raises(_Measured) as measured:
        await service.rt.db.write(spill)
    assert measured.value.args[0] == []
    tables = await service.rt.db.read(
        lambda c: c.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'scratch'").fetchone()
    )
    assert tables[0] == 0  # the unit's error rolled it back


async def test_readers_are_read_only(service: Service) -> None:
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        await service.rt.db.read(lambda c: c.execute("DELETE FROM receipts"))


async def test_a_failing_unit_of_work_leaves_nothing_behind(service: Service) -> None:
    at = service.clock.iso()

    def half(conn: sqlite3.Connection) -> None:
        principals.create_principal(conn, "human", "ghost", at)
        raise RuntimeError("fails after its first insert")

    with pytest.raises(RuntimeError):
        await service.rt.db.write(half)
    names = await service.rt.db.read(
        lambda c: [r["name"] for r in c.execute("SELECT name FROM principals")]
    )
    assert "ghost" not in names


async def test_a_unit_of_work_runs_in_one_transaction(service: Service) -> None:
    def inside(conn: sqlite3.Connection) -> bool:
        return conn.in_transaction

    assert await service.rt.db.write(inside) is True
    assert await service.rt.db.read(inside) is True


# -- contention ------------------------------------------------------------------


@pytest.fixture
async def impatient(tmp_path: Path) -> AsyncIterator[Service]:
    """The service with a 50 ms busy timeout, so contention shows quickly."""
    clock = MovableClock()
    settings = Settings(db_path=tmp_path / "busy.db", sweep_interval=3600, busy_timeout_ms=50)
    app = create_app(settings, clock=clock)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield Service(app, client, app.state.runtime, clock, settings.db_path)


def hold_write_lock(path: Path) -> sqlite3.Connection:
    """A second connection (as another process would) holding SQLite's write lock."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("UPDATE projects SET name = name")
    return other


async def test_write_lock_held_past_the_busy_timeout_is_503_with_retry_after(
    impatient: Service,
) -> None:
    human = await impatient.principal("human")
    await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
    other = hold_write_lock(impatient.db_path)
    try:
        r = await human.patch(POLICY, {"expected_revision": 1, "rules": "x"}, key="busy")
        assert r.status_code == 503
        assert r.json() == {
            "error": {
                "code": "unavailable",
                "message": "the database is busy; retry shortly",
                "details": {},
            }
        }
        assert r.headers["retry-after"] == "1"
        assert r.headers["cache-control"] == "no-store"
        # reads go on: WAL readers do not wait for the writer
        assert (await human.get(POLICY)).status_code == 200
    finally:
        other.execute("ROLLBACK")
        other.close()
    # the refused write left no receipt: the same key now runs
    r = await human.patch(POLICY, {"expected_revision": 1, "rules": "x"}, key="busy")
    assert r.status_code == 200 and "idempotent-replayed" not in r.headers


async def test_write_lock_held_past_the_busy_timeout_is_unavailable_over_graphql(
    impatient: Service,
) -> None:
    human = await impatient.principal("human")
    await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
    other = hold_write_lock(impatient.db_path)
    try:
        data = await human.gql(
            'mutation { policyUpdate(input: {idempotencyKey: "g", projectId: "demo",'
            ' expectedRevision: 1, rules: "x"}) { policy { revision } } }'
        )
    finally:
        other.execute("ROLLBACK")
        other.close()
    [error] = data["errors"]
    assert error["extensions"] == {"code": "unavailable", "retryAfter": 1}


async def test_an_unavailable_graphql_answer_carries_retry_after_as_rest_does(
    impatient: Service,
) -> None:
    """The answer stays 200 (a GraphQL result); the header lets an HTTP
    client's retry logic wait as it does for REST's 503 (it had none). Both
    carry the security headers, as every response does (docs/api.md)."""
    human = await impatient.principal("human")
    await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
    mutation = (
        'mutation { policyUpdate(input: {idempotencyKey: "h", projectId: "demo",'
        ' expectedRevision: 1, rules: "x"}) { policy { revision } } }'
    )
    other = hold_write_lock(impatient.db_path)
    try:
        rest = await human.patch(POLICY, {"expected_revision": 1, "rules": "x"}, key="busy")
        busy = await human.client.post(
            "/graphql", json={"query": mutation}, headers=human.headers()
        )
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert rest.status_code == 503 and rest.headers["retry-after"] == "1"
    assert rest.json()["error"]["code"] == "unavailable"
    assert busy.status_code == 200 and busy.headers["retry-after"] == "1"
    assert busy.json()["errors"][0]["extensions"]["code"] == "unavailable"
    for r in (rest, busy):
        assert r.headers["cache-control"] == "no-store", r.request.url
        assert r.headers["x-content-type-options"] == "nosniff", r.request.url
    done = await human.client.post("/graphql", json={"query": mutation}, headers=human.headers())
    assert done.json()["data"]["policyUpdate"]["policy"] == {"revision": 2}
    assert "retry-after" not in done.headers


async def test_a_short_lock_is_waited_out_within_the_busy_timeout(
    service: Service, human: Caller, project: str
) -> None:
    other = hold_write_lock(service.db_path)
    release = threading.Timer(0.05, lambda: other.execute("ROLLBACK"))
    release.start()
    try:
        r = await human.patch(POLICY, {"expected_revision": 1, "rules": "x"})
    finally:
        release.join()
        other.close()
    assert r.status_code == 200


async def test_busy_read_is_unavailable_not_a_crash(service: Service) -> None:
    def locked(conn: sqlite3.Connection) -> None:
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(Unavailable):
        await service.rt.db.read(locked)


async def test_write_on_a_closed_database_is_unavailable(tmp_path: Path) -> None:
    db = Database(tmp_path / "closed.db")
    with pytest.raises(Unavailable):
        await db.write(lambda c: None)


# -- migrations ---------------------------------------------------------------------


def test_migrations_are_applied_once_with_their_checksums(tmp_path: Path) -> None:
    conn = connect_sync(tmp_path / "m.db")
    names = [m.name for m in available()]
    assert names == sorted(names) and names[0] == "0001_core.sql"
    assert migrate(conn) == names
    assert migrate(conn) == []
    rows = conn.execute("SELECT name, checksum FROM schema_migrations ORDER BY name").fetchall()
    assert [tuple(r) for r in rows] == [(m.name, m.checksum) for m in available()]
    conn.close()


def test_a_changed_migration_is_refused(tmp_path: Path) -> None:
    conn = connect_sync(tmp_path / "m.db")
    migrate(conn)
    conn.execute("UPDATE schema_migrations SET checksum = 'edited' WHERE name = '0001_core.sql'")
    with pytest.raises(MigrationError, match=r"0001_core\.sql changed"):
        migrate(conn)
    conn.close()


async def test_the_service_refuses_to_start_on_a_changed_migration(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    conn = connect_sync(path)
    migrate(conn)
    conn.execute("UPDATE schema_migrations SET checksum = 'edited' WHERE name = '0001_core.sql'")
    conn.close()
    db = Database(path)
    with pytest.raises(MigrationError):
        await db.open()
    await db.close()


def test_a_failing_migration_rolls_back_entirely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = connect_sync(tmp_path / "m.db")
    migrate(conn)
    bad = Migration("9999_bad.sql", "CREATE TABLE half (x);\nINSERT INTO nowhere VALUES (1);\n")
    monkeypatch.setattr(migrations, "available", lambda: [*available(), bad])
    with pytest.raises(sqlite3.OperationalError, match="nowhere"):
        migrate(conn)
    assert not conn.in_transaction
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "half" not in tables
    recorded = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
    assert "9999_bad.sql" not in recorded
    conn.close()


def test_a_start_that_fails_midway_says_how_far_it_got(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Each migration is applied whole, so a failure midway leaves the ones
    before it applied: the log says which failed, after how many, and how
    many wait for the next start (it said only the error; diskfulljourney)."""
    conn = connect_sync(tmp_path / "m.db")
    migrate(conn)
    good = [Migration(f"999{n}_good.sql", f"CREATE TABLE good{n} (x);\n") for n in range(2)]
    bad = Migration("9997_bad.sql", "INSERT INTO nowhere VALUES (1);\n")
    after = Migration("9998_after.sql", "CREATE TABLE after (x);\n")
    monkeypatch.setattr(migrations, "available", lambda: [*available(), *good, bad, after])
    caplog.set_level(logging.INFO, logger="waypost.storage")
    with pytest.raises(sqlite3.OperationalError, match="nowhere"):
        migrate(conn)
    failed = [r for r in caplog.records if r.name == "waypost.storage" and r.levelname == "ERROR"]
    assert [r.getMessage() for r in failed] == [
        "migration 9997_bad.sql failed after applying 2 migrations, 9990_good.sql to"
        " 9991_good.sql; 2 not applied"
    ]
    recorded = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
    assert {"9990_good.sql", "9991_good.sql"} <= recorded
    assert not {"9997_bad.sql", "9998_after.sql"} & recorded
    caplog.clear()  # the next start resumes at the one that failed
    with pytest.raises(sqlite3.OperationalError, match="nowhere"):
        migrate(conn)
    said = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert said == ["migration 9997_bad.sql failed before applying any; 2 not applied"]
    conn.close()


def test_a_failure_after_one_applied_meanwhile_counts_what_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process applied one of those announced before this start's
    failure: the ones not applied are those from the failed one on, not all
    announced less this process's own (review82)."""
    path = tmp_path / "race.db"
    first = connect_sync(path)
    migrate(first)
    own = Migration("9990_own.sql", "CREATE TABLE own (x);\n")
    theirs = Migration("9991_theirs.sql", "CREATE TABLE theirs (x);\n")
    bad = Migration("9992_bad.sql", "INSERT INTO nowhere VALUES (1);\n")
    after = Migration("9993_after.sql", "CREATE TABLE after (x);\n")
    monkeypatch.setattr(migrations, "available", lambda: [*available(), own, theirs, bad, after])
    real_execute_script = sqlite3.Connection.executescript

    class Racing(sqlite3.Connection):
        def executescript(self, script: str) -> sqlite3.Cursor:
            if theirs.name in script:  # the other process commits it first
                real_execute_script(
                    first,
                    "BEGIN IMMEDIATE; INSERT INTO schema_migrations VALUES"
                    f" ('{theirs.name}', '{theirs.checksum}', 'then'); {theirs.sql} COMMIT;",
                )
            return real_execute_script(self, script)

    racing = sqlite3.connect(path, isolation_level=None, factory=Racing)
    caplog.set_level(logging.INFO, logger="waypost.storage")
    with pytest.raises(sqlite3.OperationalError, match="nowhere"):
        migrate(racing)
    failed = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert failed == ["migration 9992_bad.sql failed after applying 9990_own.sql; 2 not applied"]
    for conn in (first, racing):
        conn.close()


def test_a_start_that_fails_midway_other_than_in_sqlite_says_how_far_it_got(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A fault that is no SQLite error (here in the statistics run with the
    last migration) is said as one in SQLite is (review82)."""
    conn = connect_sync(tmp_path / "m.db")
    migrate(conn)
    good = Migration("9990_good.sql", "CREATE TABLE good (x);\n")
    last = Migration("9991_last.sql", "CREATE TABLE last (x);\n")
    monkeypatch.setattr(migrations, "available", lambda: [*available(), good, last])

    def broken(_: sqlite3.Connection) -> None:
        raise RuntimeError("a fault of ours")

    monkeypatch.setattr(migrations, "analyze_unanalyzed", broken)
    caplog.set_level(logging.INFO, logger="waypost.storage")
    with pytest.raises(RuntimeError, match="a fault of ours"):
        migrate(conn)
    failed = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert failed == ["migration 9991_last.sql failed after applying 9990_good.sql; 1 not applied"]
    recorded = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
    assert "9990_good.sql" in recorded and "9991_last.sql" not in recorded
    conn.close()


def test_migration_applied_meanwhile_by_another_process_is_not_applied_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "race.db"
    first = connect_sync(path)
    migrate(first)
    extra = Migration("9999_extra.sql", "CREATE TABLE extra (x);\n")
    monkeypatch.setattr(migrations, "available", lambda: [*available(), extra])
    second = connect_sync(path)
    # `second` reads the record table, then `first` applies the migration before
    # `second` takes the lock: `second` must see it applied and not fail.
    real_execute_script = sqlite3.Connection.executescript
    migrate_first = threading.Event()

    class Racing(sqlite3.Connection):
        def executescript(self, script: str) -> sqlite3.Cursor:
            if not migrate_first.is_set():
                migrate_first.set()
                migrate(first)
            return real_execute_script(self, script)

    racing = sqlite3.connect(path, isolation_level=None, factory=Racing)
    caplog.set_level(logging.INFO, logger="waypost.storage")
    assert migrate(racing) == []
    # it said it was applying it: it says what became of it (upgradeaudit3)
    said = [r.getMessage() for r in caplog.records if r.name == "waypost.storage"]
    assert "9999_extra.sql was applied meanwhile by another process" in said, said
    assert [r[0] for r in first.execute("SELECT name FROM schema_migrations")][-1] == (
        "9999_extra.sql"
    )
    for conn in (first, second, racing):
        conn.close()


def test_the_summary_counts_the_migrations_another_process_applied_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """It said "applied 2 migrations, A to C" when another process had
    applied B between them (review58)."""
    path = tmp_path / "race.db"
    first = connect_sync(path)
    migrate(first)
    extras = [Migration(f"999{n}_extra.sql", f"CREATE TABLE extra{n} (x);\n") for n in range(3)]
    monkeypatch.setattr(migrations, "available", lambda: [*available(), *extras])
    real_execute_script = sqlite3.Connection.executescript
    calls = []

    class Racing(sqlite3.Connection):
        def executescript(self, script: str) -> sqlite3.Cursor:
            calls.append(script)
            if len(calls) == 2:  # the second's turn: another process applies it first
                first.executescript(script + "\nCOMMIT;")
            return real_execute_script(self, script)

    racing = sqlite3.connect(path, isolation_level=None, factory=Racing)
    caplog.set_level(logging.INFO, logger="waypost.storage")
    caplog.clear()  # the first migration's lines, where INFO was on already
    assert migrate(racing) == ["9990_extra.sql", "9992_extra.sql"]
    said = [r.getMessage() for r in caplog.records if r.name == "waypost.storage"]
    summary = next(line for line in said if line.startswith("applied "))
    assert summary.startswith("applied 2 migrations, 9990_extra.sql to 9992_extra.sql in ")
    assert summary.endswith("; 1 other(s) applied meanwhile by another process"), summary
    for conn in (first, racing):
        conn.close()


@pytest.mark.parametrize("round_", range(5))
def test_processes_opening_a_new_database_together_each_apply_migrations_once(
    tmp_path: Path, round_: int
) -> None:
    """Three connections open a fresh file at the same instant (as `serve` and
    admin commands may): entering WAL and migrating must both wait, not fail."""
    path = tmp_path / "both.db"
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait(timeout=10)
            conn = connect_sync(path)
            try:
                migrate(conn)
            finally:
                conn.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    conn = connect_sync(path)
    rows = [r[0] for r in conn.execute("SELECT name FROM schema_migrations")]
    assert sorted(rows) == [m.name for m in available()]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_run_write_commits_or_rolls_back_as_one(tmp_path: Path) -> None:
    conn = connect_sync(tmp_path / "w.db")
    migrate(conn)
    at = "2026-01-01T00:00:00.000Z"
    run_write(conn, lambda c: principals.create_principal(c, "human", "kept", at))

    def fail(c: sqlite3.Connection) -> None:
        principals.create_principal(c, "human", "dropped", at)
        raise ValueError("no")

    with pytest.raises(ValueError):
        run_write(conn, fail)
    assert [r[0] for r in conn.execute("SELECT name FROM principals")] == ["kept"]
    conn.close()


def test_run_write_refuses_a_transaction_it_could_not_begin(tmp_path: Path) -> None:
    """A BEGIN IMMEDIATE that fails for another reason than a lock held
    elsewhere (here: a transaction already open) is the caller's error, and
    the unit does not run: outside its own transaction its writes would not
    commit or roll back as one."""
    conn = connect_sync(tmp_path / "w.db")
    migrate(conn)
    ran: list[int] = []
    conn.execute("BEGIN")
    with pytest.raises(sqlite3.OperationalError, match="within a transaction"):
        run_write(conn, lambda c: ran.append(1))
    assert ran == []
    conn.execute("ROLLBACK")
    conn.close()


# -- commit listeners ---------------------------------------------------------------


async def test_commit_listeners_run_on_the_loop_after_each_committed_write(
    service: Service,
) -> None:
    loop = asyncio.get_running_loop()
    seen: list[int] = []

    def listener() -> None:
        assert asyncio.get_running_loop() is loop
        # the write is committed: a reader (another connection) already sees it
        seen.append(1)

    service.rt.db.add_commit_listener(listener)
    at = service.clock.iso()
    await service.rt.db.write(lambda c: principals.create_principal(c, "human", "one", at))
    await asyncio.sleep(0)
    assert seen == [1]
    with pytest.raises(RuntimeError):
        await service.rt.db.write(lambda c: (_ for _ in ()).throw(RuntimeError("no")))
    await asyncio.sleep(0)
    assert seen == [1]  # nothing committed, nobody woken
    service.rt.db.remove_commit_listener(listener)
    await service.rt.db.write(lambda c: principals.create_principal(c, "human", "two", at))
    await asyncio.sleep(0)
    assert seen == [1]


def searching_until(
    release: threading.Event, running: list[int]
) -> Callable[[sqlite3.Connection], int]:
    """A search that notes it runs, then holds its reader until `release`."""

    def slow_search(conn: sqlite3.Connection) -> int:
        running.append(1)
        release.wait(10)
        return int(conn.execute("SELECT 1").fetchone()[0])

    return slow_search


async def test_searches_leave_one_reader_to_every_other_read(tmp_path: Path) -> None:
    """Slow searches take at most all readers but one (Database.search)."""
    db = Database(tmp_path / "s.db", readers=3)
    await db.open()
    release = threading.Event()
    running: list[int] = []
    slow_search = searching_until(release, running)

    try:
        searches = [asyncio.create_task(db.search(slow_search)) for _ in range(4)]
        while len(running) < 2:
            await asyncio.sleep(0.01)
        # two readers hold searches; the third still answers a plain read at once
        plain = await asyncio.wait_for(db.read(lambda c: c.execute("SELECT 2").fetchone()[0]), 2)
        assert plain == 2 and len(running) == 2
        release.set()
        assert await asyncio.gather(*searches) == [1, 1, 1, 1]
    finally:
        release.set()
        await db.close()


async def test_unbounded_reads_take_one_place_of_the_lane_at_a_time(tmp_path: Path) -> None:
    """A read no time limit ends (the digest) waits for the others like it, so
    searches keep the rest of the lane: four digests polled at once had taken
    both places, and context packets waited behind them."""
    db = Database(tmp_path / "s.db", readers=3)
    await db.open()
    release = threading.Event()
    running: list[int] = []
    slow = searching_until(release, running)

    try:
        unbounded = [asyncio.create_task(db.search(slow, unbounded=True)) for _ in range(2)]
        await asyncio.wait_for(until(lambda: len(running) == 1), 10)
        # the lane's other place is free for a search; the second unbounded read waits
        search = asyncio.create_task(db.search(slow))
        await asyncio.wait_for(until(lambda: len(running) == 2), 10)
        plain = await asyncio.wait_for(db.read(lambda c: c.execute("SELECT 2").fetchone()[0]), 5)
        assert plain == 2 and len(running) == 2
        release.set()
        assert await asyncio.gather(*unbounded, search) == [1, 1, 1]
        assert len(running) == 3
    finally:
        release.set()
        await db.close()


async def test_a_search_whose_caller_left_keeps_its_place_until_it_ends(tmp_path: Path) -> None:
    """A search goes on in its reader thread after its caller is cancelled
    (an MCP call cancelled, a stop): its place in the lane was given back at
    once, two more searches were let in beside it, and a plain read found
    no reader free until a search ended."""
    db = Database(tmp_path / "s.db", readers=3)
    await db.open()
    release = threading.Event()
    running: list[int] = []
    slow_search = searching_until(release, running)

    try:
        left = asyncio.create_task(db.search(slow_search))
        await asyncio.wait_for(until(lambda: len(running) == 1), 10)
        left.cancel()  # its caller leaves; its reader searches on
        await asyncio.gather(left, return_exceptions=True)
        others = [asyncio.create_task(db.search(slow_search)) for _ in range(2)]
        await asyncio.wait_for(until(lambda: len(running) == 2), 10)
        await asyncio.sleep(0.1)  # a third search, had it been let in, would be running
        plain = await asyncio.wait_for(db.read(lambda c: c.execute("SELECT 2").fetchone()[0]), 5)
        assert plain == 2 and len(running) == 2
        release.set()
        assert await asyncio.gather(*others) == [1, 1]
    finally:
        release.set()
        await db.close()


async def test_a_search_whose_caller_left_before_a_reader_took_it_is_not_run(
    tmp_path: Path,
) -> None:
    """Every reader busy with a plain read, a search waits for one; its
    caller leaves. Held to its end so that it kept its place, it then ran
    all the same (up to the search time limit, for nobody)."""
    db = Database(tmp_path / "s.db", readers=2)
    await db.open()
    release, ran = threading.Event(), []
    held: list[int] = []

    def plain(conn: sqlite3.Connection) -> None:
        held.append(1)
        release.wait(10)

    try:
        plains = [asyncio.create_task(db.read(plain)) for _ in range(2)]
        await asyncio.wait_for(until(lambda: len(held) == 2), 10)
        search = asyncio.create_task(db.search(lambda conn: ran.append(1)))
        await asyncio.sleep(0.05)  # it holds the lane's place and waits for a reader
        search.cancel()
        await asyncio.gather(search, return_exceptions=True)
        release.set()
        await asyncio.gather(*plains)
        # the lane's one place is free again, and searches run
        assert (
            await asyncio.wait_for(db.search(lambda c: c.execute("SELECT 3").fetchone()[0]), 5) == 3
        )
        assert ran == []
    finally:
        release.set()
        await db.close()


async def test_a_running_search_whose_caller_left_ends_at_its_next_check(
    tmp_path: Path,
) -> None:
    """A search under its time limit whose caller is cancelled (an MCP call
    cancelled, a WebSocket operation completed) ran on to the limit for no
    one, holding a reader and a place of the lane; it ends at the time
    limit's next check, and the reader's next read is untouched."""
    db = Database(tmp_path / "s.db", readers=2)
    await db.open()
    endless = EndlessSearch()
    try:
        search = asyncio.create_task(db.search(endless))
        assert await asyncio.to_thread(endless.started.wait, 10)
        await asyncio.sleep(0.2)
        search.cancel()
        await asyncio.gather(search, return_exceptions=True)
        assert await asyncio.to_thread(endless.ended.wait, 5), "the search ran on"
        assert endless.outcome == ["SearchAbandoned"]
        # both readers answer, and a search after it runs to its end
        reads = [db.read(lambda c: c.execute("SELECT 2").fetchone()[0]) for _ in range(2)]
        assert await asyncio.wait_for(asyncio.gather(*reads), 5) == [2, 2]
        after = db.search(lambda c: c.execute("SELECT 3").fetchone()[0])
        assert await asyncio.wait_for(after, 5) == 3
    finally:
        await db.close()


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.01)


async def test_a_database_from_a_newer_build_is_refused(tmp_path: Path) -> None:
    """A migration recorded that this build does not have: a newer Waypost
    wrote the file. The first write on the unknown schema was a 500."""
    path = tmp_path / "future.db"
    conn = connect_sync(path)
    migrate(conn)
    conn.execute(
        "INSERT INTO schema_migrations VALUES ('9999_from_the_future.sql', 'x', '2027-01-01')"
    )
    with pytest.raises(MigrationError, match=r"9999_from_the_future\.sql"):
        migrate(conn)
    conn.close()
    db = Database(path)
    with pytest.raises(MigrationError, match="newer Waypost"):
        await db.open()
    await db.close()


def test_another_applications_database_is_left_alone(tmp_path: Path) -> None:
    """A mistyped --db naming another application's SQLite file: `admin
    migrate` added every Waypost table to it."""
    from tests.test_cli import run

    path = tmp_path / "inventory.db"
    other = sqlite3.connect(path)
    other.execute("CREATE TABLE items (sku TEXT)")
    other.commit()
    other.close()
    before = path.read_bytes()
    refusing = [
        ["admin", "migrate", "--db", str(path)],
        ["admin", "principal", "list", "--db", str(path)],
        ["serve", "--db", str(path), "--port", "0", "--lifecycle-port", "0"],
    ]
    for command in refusing:
        result = run(*command)
        assert result.exit_code == 1 and "not a Waypost database" in result.output, result.output
        # untouched: no table of ours, and not switched to WAL mode (the
        # switch rewrote the header and left -wal and -shm files beside it)
        assert path.read_bytes() == before, command
        assert sorted(p.name for p in tmp_path.iterdir()) == ["inventory.db"], command
    check = sqlite3.connect(path)
    names = [r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert check.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    check.close()
    assert names == ["items"]


def test_a_newer_builds_file_is_refused_untouched(tmp_path: Path) -> None:
    """A backup written by a newer Waypost (rollback-journal mode, a migration
    this build lacks): every command refused it, but only after switching it to
    WAL mode, which rewrote its header and left -wal and -shm files beside it."""
    from tests.test_cli import run

    path = tmp_path / "from-a-newer-build.db"
    conn = connect_sync(path)
    migrate(conn)
    conn.execute(
        "INSERT INTO schema_migrations VALUES ('9999_from_the_future.sql', 'x', '2027-01-01')"
    )
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    before = path.read_bytes()
    refusing = [
        ["admin", "migrate", "--db", str(path)],
        ["admin", "project", "create", "--db", str(path), "--id", "late", "--name", "Late"],
        ["serve", "--db", str(path), "--port", "0", "--lifecycle-port", "0"],
    ]
    for command in refusing:
        result = run(*command)
        assert result.exit_code == 1 and "newer Waypost" in result.output, result.output
        assert path.read_bytes() == before, command
        assert [p.name for p in tmp_path.iterdir()] == [path.name], command


async def test_a_retry_is_answered_from_its_receipt_while_another_process_holds_the_lock(
    impatient: Service,
) -> None:
    """A replay reads its receipt beside the writer: it waited in the writer's
    queue, and behind another process's lock it was refused 503 although its
    answer was on disk."""
    human = await impatient.principal("human")
    await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
    first = await human.patch(POLICY, {"expected_revision": 1, "rules": "x"}, key="k")
    assert first.status_code == 200
    other = hold_write_lock(impatient.db_path)
    try:
        again = await human.patch(POLICY, {"expected_revision": 1, "rules": "x"}, key="k")
        assert again.status_code == 200, again.text
        assert again.headers["idempotent-replayed"] == "true"
        assert again.json() == first.json()
        # the key holding another request is refused as before, the lock held or not
        other_body = await human.patch(POLICY, {"expected_revision": 1, "rules": "y"}, key="k")
        assert other_body.status_code == 422
        # a new key still needs the writer: the lock refuses it
        new = await human.patch(POLICY, {"expected_revision": 2, "rules": "z"}, key="new")
        assert new.status_code == 503
    finally:
        other.execute("ROLLBACK")
        other.close()


async def test_the_wal_file_is_cut_back_after_a_burst(service: Service) -> None:
    """The WAL keeps the size of its largest burst unless SQLite is told a
    limit: a purge of 50,000 receipts left it at 16-25 MB for good."""
    wal = Path(f"{service.db_path}-wal")

    def burst(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS ballast (x BLOB)")
        conn.executemany("INSERT INTO ballast VALUES (?)", [(b"x" * 100_000,)] * 200)

    await service.rt.db.write(burst)  # some 20 MB of WAL, checkpointed at its commit
    assert wal.stat().st_size > 16 * 1024 * 1024
    # the next write restarts the checkpointed WAL from its start: cut back then
    await service.rt.db.write(lambda conn: conn.execute("DELETE FROM ballast"))
    await service.rt.db.write(lambda conn: conn.execute("DROP TABLE ballast"))
    assert wal.stat().st_size <= 8 * 1024 * 1024


def test_the_migrations_applied_are_said_before_and_after(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A migration that rebuilds an index (0037: 53 s at a million records)
    held the start with no line after `opening PATH`: what is applied is
    said as it begins and as it ends, with the time it took."""
    caplog.set_level(logging.INFO, logger="waypost.storage")
    conn = connect_sync(tmp_path / "m.db")
    applied = migrate(conn)
    conn.close()
    said = [r.getMessage() for r in caplog.records if r.name == "waypost.storage"]
    every = f"{len(applied)} migrations, {applied[0]} to {applied[-1]}"
    assert said[0] == f"applying {every}"
    assert said[-1].startswith(f"applied {every} in ")
    assert len(said) == 2, said  # two lines however many: not 37 of each on a new file


def test_a_migration_applied_meanwhile_with_another_text_is_refused(tmp_path: Path) -> None:
    """storage/migrate.py: a recorded migration whose text differs is refused,
    also when another process recorded it between this one's read and its
    lock (its INSERT meets the other's row): "applied meanwhile" holds only
    for the same checksum. Taken as applied, the build ran its next
    migrations on a schema another text made."""
    db = tmp_path / "waypost.db"
    conn = sqlite3.connect(db, isolation_level=None)
    other = sqlite3.connect(db, isolation_level=None)
    first = available()[0].name
    raced: list[str] = []

    def meanwhile(statement: str) -> None:
        # the first migration's script is about to take the lock: another
        # process records the same migration, with another text, first
        if not raced and statement.startswith("BEGIN IMMEDIATE"):
            raced.append(statement)
            other.execute(
                "INSERT INTO schema_migrations (name, checksum, applied_at)"
                " VALUES (?, ?, '2026-01-01T00:00:00.000Z')",
                (first, "0" * 64),
            )

    conn.set_trace_callback(meanwhile)
    try:
        with pytest.raises(MigrationError, match=f"migration {first} changed after it was applied"):
            migrate(conn)
    finally:
        conn.set_trace_callback(None)
        other.close()
    assert raced, "the race was not staged"
    assert conn.execute("SELECT name FROM schema_migrations").fetchall() == [(first,)]
    conn.close()


def test_a_wal_of_its_header_alone_holds_no_frames(tmp_path: Path) -> None:
    """A `-wal` of 32 bytes is its header and no frame: nothing to recover,
    nothing said at start; one byte more is a frame begun (review82)."""
    from waypost.storage.connection import wal_frame_bytes

    path = tmp_path / "w.db"
    wal = tmp_path / "w.db-wal"
    assert wal_frame_bytes(path) == 0  # none
    for size, said in ((0, 0), (32, 0), (33, 33)):
        wal.write_bytes(b"\0" * size)
        assert wal_frame_bytes(path) == said, size


async def test_a_start_after_a_crash_says_what_the_wal_held(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The files as a `kill -9` leaves them (copied while the process holds
    them open, a write committed to the WAL): the next start says the last
    stop was not clean and how much SQLite recovers, where it said only
    `opening` (crashjourney); a clean stop's file says nothing."""
    live = Database(tmp_path / "live.db")
    await live.open()
    await live.write(lambda conn: conn.execute("CREATE TABLE crashed (x)"))
    await live.write(lambda conn: conn.execute("INSERT INTO crashed VALUES (42)"))
    crashed = tmp_path / "crashed.db"
    for suffix in ("", "-wal"):
        crashed.with_name(crashed.name + suffix).write_bytes(
            (tmp_path / f"live.db{suffix}").read_bytes()
        )
    await live.close()
    left = os.stat(f"{crashed}-wal").st_size
    caplog.set_level(logging.INFO, logger="waypost.storage")
    for path in (crashed, tmp_path / "live.db"):
        db = Database(path)
        await db.open()
        try:
            rows = await db.read(lambda conn: conn.execute("SELECT x FROM crashed").fetchall())
            assert [tuple(row) for row in rows] == [(42,)]
        finally:
            await db.close()
    said = [r.getMessage() for r in caplog.records if "-wal holds" in r.getMessage()]
    assert said == [
        f"{crashed}-wal holds {left} bytes: the last process to use the database did not close"
        " it (a crash, kill -9 or a power loss), or another process still uses it; SQLite"
        " recovers the writes it committed as the file opens"
    ]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
async def test_a_database_that_fails_to_open_midway_leaves_no_connection_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection that cannot be opened after others were (descriptors run
    out) refuses the database as unusable, and closes the ones already
    opened: only the writer's was closed, and the readers' stayed open for the
    life of a process that embeds the store and goes on (covgapsD)."""
    path = tmp_path / "w.db"
    opened = 0

    def sixth_fails(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        nonlocal opened
        opened += 1
        if opened == 6:
            raise sqlite3.OperationalError("unable to open database file")
        return connect(*args, **kwargs)

    monkeypatch.setattr(db_module, "connect", sixth_fails)
    db = Database(path)
    with pytest.raises(DatabaseUnusable, match="unable to open database file"):
        await db.open()
    assert opened == 6
    assert [name for name in _open_files() if name.startswith(str(path))] == []
