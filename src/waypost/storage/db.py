"""Database: the store's handle, one per process (the Runtime opens it).

Every unit of work is a plain synchronous function over a `sqlite3.Connection`
that runs whole on the thread that owns the connection: a thread hop costs
about 100 µs, so a unit of work never awaits statement by statement.

- Writes go to the one writer thread (`storage/writer.py`), which commits
  the units waiting together: each in its own SAVEPOINT inside one
  `BEGIN IMMEDIATE`, one COMMIT (one fsync) per batch, and no caller answered
  before that COMMIT has returned.
- Reads go to a pool of read-only connections (`storage/readers.py`), each
  unit inside one read transaction (one snapshot).
- Searches (`search`: full-text reads, which may run up to the search time
  limit, and, one at a time, reads whose cost grows with the data, like the
  digest) and long reads (`read_long`: a GraphQL answer built whole on a
  reader) take at most all readers but one, so a few slow ones never leave
  the other reads without a reader.
- Point reads (`read_point`: a few lookups by key, e.g. a bearer token on
  every request) run on the event loop's own read-only connection instead:
  a WAL reader never waits for the writer, such a read takes tens of
  microseconds, and the hop to a pool thread and back would cost more
  than the read. If another process holds the file (busy), the read goes
  to the pool, which waits for it there instead of on the loop.
- Connections are set up once when they open (`storage/connection.py`):
  pragmas, then the hooks the Runtime passes (SQL functions of the domains).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import TypeVar

from waypost.cancelling import CallerGone, holding_until_done, watch_caller
from waypost.errors import Unavailable
from waypost.observe.conditions import ConditionLog
from waypost.storage import snapshots
from waypost.storage.connection import (
    STORAGE_RETRY_AFTER,
    ConnectionHook,
    check_writable,
    connect,
    foreign_wal,
    is_busy,
    is_damage,
    storage_refusal,
    wal_frame_bytes,
)
from waypost.storage.files import FileWatch, files_changed_refusal
from waypost.storage.migrate import migrate
from waypost.storage.readers import ReaderPool, begin_snapshot, run_read
from waypost.storage.schema_guard import available
from waypost.storage.snapshots import PinnedSnapshots
from waypost.storage.turns import CALLER, FairGate
from waypost.storage.upgrades import SchemaWatch, upgraded_refusal
from waypost.storage.writer import BUSY_MESSAGE, Writer

__all__ = [
    "Database",
    "DatabaseUnusable",
    "SearchAbandoned",
    "connect_sync",
    "run_read",
    "run_write",
    "search_left",
]

log = logging.getLogger("waypost.storage")
_conditions = ConditionLog(log)
T = TypeVar("T")


class SearchAbandoned(CallerGone):
    """A search whose caller had gone: not run when it went before a reader
    took it up, else ended at its time limit's next check. Its caller, if
    still there to be told (a REST read, a GraphQL request), answers no one,
    as for any CallerGone."""


# The `left` flag of the search this reader thread runs: a search's time
# limit (resolvers/context/search.py) also ends it once its caller has gone
# (an MCP call cancelled, a WebSocket operation completed, a REST or GraphQL
# client that closed its connection), on this thread
# and inside its own statement, so nothing reaches the reader's next unit
# as `Connection.interrupt()` from another thread could (`search_left`)
_running_search = threading.local()


# A running search watches for its caller's leaving from this age on: nearly
# every search ends sooner (a packet's at 10,000 records in 1-5 ms), and
# starts no watch; one that runs to the time limit is one worth ending.
SEARCH_WATCH_AFTER = 0.05


def search_left() -> threading.Event | None:
    """Set once the caller of the search running on this thread has gone;
    None on a thread that runs no search (a pinned read, a plain read)."""
    left: threading.Event | None = getattr(_running_search, "left", None)
    return left


# Bytes the WAL file is cut back to once a checkpoint restarts it (8 MiB:
# twice what SQLite's automatic checkpoint of 1,000 pages lets it hold).
WAL_SIZE_LIMIT = 8 * 1024 * 1024
UnitOfWork = Callable[[sqlite3.Connection], T]
CommitListener = Callable[[], None]


# Databases whose connections must not be closed (see Database.close).
_LEFT_OPEN: list[object] = []


def connections_left_open() -> bool:
    """Whether a closed Database left its connections open, because closing
    them would drop other processes' writes: the process should then end
    without closing them (`os._exit`)."""
    return bool(_LEFT_OPEN)


class DatabaseUnusable(RuntimeError):
    """The database cannot be opened, migrated or written: `serve` refuses to
    start (with this message) rather than answer reads and fail every write."""


def connect_sync(
    path: Path, busy_timeout_ms: int = 5000, hooks: Sequence[ConnectionHook] = ()
) -> sqlite3.Connection:
    """A plain connection in autocommit mode, for admin commands and migrations."""
    return connect(path, busy_timeout_ms, hooks)


def run_write(conn: sqlite3.Connection, fn: UnitOfWork[T]) -> T:
    """Run `fn` in one BEGIN IMMEDIATE transaction on a plain connection (admin
    commands): all of it commits, or none. The service's writes go through
    `Database.write` instead."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            raise Unavailable(BUSY_MESSAGE, retry_after=1) from exc
        raise
    try:
        result = fn(conn)
        conn.execute("COMMIT")
    except BaseException as exc:
        # SQLite may already have rolled back (disk full): a ROLLBACK then would
        # only replace the cause with "no transaction is active"
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                log.exception("ROLLBACK failed after %r", exc)
        if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
            raise Unavailable(BUSY_MESSAGE, retry_after=1) from exc
        raise
    return result


def _say_left_wal(path: Path) -> None:
    """A `-wal` with frames before this process opens the file was left by
    one that did not close it: a crash, `kill -9`, a power loss (or one still
    running, an admin command beside this one). SQLite recovers its commits as
    the file opens; said, so that a log read after an incident shows the
    stop was not clean (the next start said only `opening`: crashjourney)."""
    size = wal_frame_bytes(path)
    if size:
        log.info(
            "%s-wal holds %d bytes: the last process to use the database did not close it"
            " (a crash, kill -9 or a power loss), or another process still uses it; SQLite"
            " recovers the writes it committed as the file opens",
            path,
            size,
        )


class Database:
    """The store's handle. Open it once per process (`waypost.runtime` does)."""

    def __init__(
        self,
        path: Path,
        readers: int = 3,
        busy_timeout_ms: int = 5000,
        hooks: Sequence[ConnectionHook] = (),
        *,
        batch_units: int = 64,
        batch_seconds: float = 0.01,
    ) -> None:
        self.path = path
        self._reader_count = max(1, readers)
        # in turn by caller: first come, first served, one principal's queue
        # of context packets kept every other principal's packet waiting
        self._searches = FairGate(max(1, self._reader_count - 1))
        # long reads no time limit bounds (the digest) take one place at a time
        self._unbounded = FairGate(1)  # in turn, by caller (storage/turns.py)
        # long reads whose cost is what the caller asked for (a GraphQL answer
        # built whole on a reader): as many places as the search lane, in turn
        self._answers = FairGate(max(1, self._reader_count - 1))
        self._busy_timeout_ms = busy_timeout_ms
        self._hooks = tuple(hooks)
        # a batch takes no more units once it holds this many or has run this long
        self._batch_bounds = (batch_units, batch_seconds)
        self._writer: Writer | None = None
        self._readers: ReaderPool | None = None
        self._snapshots: PinnedSnapshots | None = None
        self._point: sqlite3.Connection | None = None
        self._files: FileWatch | None = None
        self._schema = SchemaWatch(available())  # another build's migrations (upgrades.py)
        self._damage: str | None = None  # SQLite's word, the first time it found the file damaged
        self._loop: asyncio.AbstractEventLoop | None = None
        self._commit_listeners: list[CommitListener] = []  # add_commit_listener

    # -- opening and closing ------------------------------------------------------

    async def open(self) -> None:
        """Connect, migrate (on the writer's connection), start the writer thread."""
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._open)

    def _open(self) -> None:
        foreign = foreign_wal(self.path)  # before any connection (its docstring)
        if foreign is not None:
            raise DatabaseUnusable(f"{self.path}: {foreign}")
        _say_left_wal(self.path)
        try:
            conn = connect(self.path, self._busy_timeout_ms, self._hooks)
        except (sqlite3.Error, OSError) as exc:
            raise DatabaseUnusable(f"{self.path}: {exc}") from exc
        # every connection opened so far, closed if a later step fails (the
        # readers opened before a failing one stayed open)
        opened = [conn]

        def reader() -> sqlite3.Connection:
            opened.append(connect(self.path, self._busy_timeout_ms, self._hooks, read_only=True))
            return opened[-1]

        try:
            migrate(conn)
            check_writable(conn)
            readers = [reader() for _ in range(self._reader_count)]
            pinned = [reader() for _ in range(self._reader_count)]
            point = reader()
            # never waits: a lock held elsewhere sends the read to the pool
            point.execute("PRAGMA busy_timeout = 0")
            # Each unit runs in a savepoint, whose journal SQLite otherwise
            # spills past 64 KiB to a temporary file: opened, unlinked, written
            # and closed once per batch, half the writer's system time under
            # load. A batch is bounded (`_batch_bounds`), so is that memory.
            conn.execute("PRAGMA temp_store = MEMORY")
            # The WAL file keeps the size of its largest burst (a receipt purge
            # of 50,000 rows left it at 16-25 MB, while ordinary load fills
            # 4-7): a checkpoint that restarts it truncates it to this.
            conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
            # all three files exist now (WAL mode, connections open)
            files = None if str(self.path) == ":memory:" else FileWatch(self.path)
        except BaseException as exc:
            for each in opened:
                each.close()
            if isinstance(exc, sqlite3.Error | OSError):
                raise DatabaseUnusable(f"{self.path}: {exc}") from exc
            raise
        self._files = files
        self._point = point
        self._readers = ReaderPool(readers)
        self._snapshots = PinnedSnapshots(pinned)
        assert self._loop is not None
        units, seconds = self._batch_bounds
        self._writer = Writer(
            conn,
            self._busy_timeout_ms,
            (self._loop, self._committed),
            max_units=units,
            max_seconds=seconds,
            files_changed=files.check if files is not None else None,
            wal_bytes=self.wal_bytes if files is not None else None,
            schema_moved=self._schema.check,
        )

    async def close(self) -> None:
        """Finish the queued writes and running reads, then close every connection."""
        writer, readers, point = self._writer, self._readers, self._point
        snapshots = self._snapshots
        self._writer = self._readers = self._point = self._snapshots = None
        if snapshots is not None:
            # at once, not after the writer stopped: a pinned read waiting
            # for a slot got the one a finished read gave back meanwhile
            # (flakeaudit: the test that said so failed on a loaded machine)
            snapshots.refuse_new()
        files = self._files
        if files is not None and (files.index_replaced() or files.overwritten()):
            # The last connection to close checkpoints the WAL through this
            # process's index, which is no longer the file's: what another
            # process wrote through its new -shm would be dropped from the
            # WAL. So would it write the WAL's pages over a file copied over
            # this one in place (a backup restored while serving), whose own
            # pages the WAL was never written over. Nothing more is written
            # here (every unit is refused), so the connections stay open for
            # the process's exit, which `serve` takes without closing them
            # (connections_left_open).
            _LEFT_OPEN.append((writer, readers, point, snapshots))
            return
        if point is not None:
            point.close()
        if writer is not None:
            await asyncio.to_thread(writer.stop)
        if readers is not None:
            await asyncio.to_thread(readers.close)
        if snapshots is not None:
            await asyncio.to_thread(snapshots.close)
        if files is not None:
            files.close()  # after every connection: it drops this process's locks
            _say_wal_left(files.wal_name)

    # -- units of work --------------------------------------------------------------

    async def write(self, fn: UnitOfWork[T], *, solo: bool = False, who: Hashable = None) -> T:
        """Run one unit of work in the writer's next transaction; returns once
        the COMMIT that holds it has returned. `solo`: a long unit (a sweep's
        batch), committed in a transaction of its own, so that no write
        batched with it waits for it. `who`: the caller (a principal), whose
        writes the writer takes in turn with other callers' (storage/writer.py),
        so that one caller's backlog keeps no other caller's write waiting."""
        if self._writer is None:
            raise Unavailable("the database is not open")
        try:
            result: T = await self._writer.submit(fn, transaction=True, solo=solo, who=who)
        except sqlite3.DatabaseError as exc:
            refusal = self._refusal(exc)
            if refusal is None:
                raise
            raise refusal from exc
        return result

    async def read(self, fn: UnitOfWork[T]) -> T:
        """Run one read-only unit of work on a free reader, in one snapshot
        (inside `pinned()`, the request's one snapshot)."""
        if self._readers is None:
            raise Unavailable("the database is not open")
        self._check_store()
        pin = snapshots.current(self)
        try:
            if pin is not None:
                return await pin.read(fn)
            return await self._readers.read(fn)
        except sqlite3.DatabaseError as exc:
            refusal = self._refusal(exc)
            if refusal is None:
                raise
            raise refusal from exc

    def pinned(self, who: Hashable = None) -> contextlib.AbstractAsyncContextManager[None]:
        """Every read inside this block (its tasks included) sees one snapshot:
        the database as of the block's first read (storage/snapshots.py).
        Its connection is handed out in turn by `who` (a principal)."""
        if self._snapshots is None:
            raise Unavailable("the database is not open")
        return snapshots.pinned(self, self._snapshots, who)

    def in_pinned(self) -> bool:
        """Whether this task reads inside a `pinned()` block."""
        return snapshots.current(self) is not None

    async def begin_pinned(self) -> None:
        """Begin the `pinned()` block's snapshot now, taking its connection
        (waiting while every one is held), rather than at its first read:
        a GraphQL query then reads its clock after its snapshot has begun.
        Pinned at its start, a query that waited for a connection showed
        writes committed while it waited, stamped after its instant
        (review73)."""
        if self.in_pinned():
            await self.read(begin_snapshot)

    @staticmethod
    def unpinned() -> contextlib.AbstractAsyncContextManager[None]:
        """Reads inside this block each see their own snapshot, also inside
        `pinned()`, whose snapshot ends here: for a unit that must not keep a
        read transaction open while it waits on something else (the
        reranking provider)."""
        return snapshots.unpinned()

    async def search(
        self, fn: UnitOfWork[T], *, unbounded: bool = False, who: Hashable = None
    ) -> T:
        """`read` for a unit that may run long (a full-text search: up to the
        search time limit, or longer where none applies). Searches wait for
        one another beyond all readers but one, so every other read still
        finds a reader: fifteen 1-second context searches at once left a
        plain project read without an answer for over 5 s when they could
        take all three.

        An `unbounded` unit (one no time limit ends, as the digest, whose
        cost grows with the data) also waits for the others like it: they
        hold one place of the lane at most, so searches always have the
        rest (four digests of 300 ms polled at once had taken both places,
        and a context packet waited behind them). Its place goes in turn to
        the callers waiting (`who`, a principal: storage/turns.py), so that
        one caller's queue of them keeps no other caller's last; and so do
        the lane's places themselves, for every search (`who` defaults to
        the request's principal, `CALLER`).

        Inside `pinned()` a search reads on the request's own slot, not the
        reader pool, so it takes no place in that lane: taking one and then
        waiting for a slot, while the requests holding every slot waited for
        a place, hung every GraphQL query and search for good."""
        if snapshots.current(self) is not None:
            return await self.read(fn)  # on the pin, as read() finds it
        if who is None:
            who = CALLER.get()  # the request's principal (storage/turns.py)
        if unbounded:
            # held until the search ends, as the lane's place is (see below)
            return await holding_until_done(self._unbounded.of(who), lambda: self._search(fn, who))
        return await self._search(fn, who)

    async def read_long(self, fn: UnitOfWork[T], *, who: Hashable) -> T:
        """`read` for a unit whose cost grows with what its caller asked (a
        GraphQL query answered whole on a reader, up to the object limit).
        Unbounded on the reader pool, one principal's queries took every
        reader and queued everyone's reads behind them (8 answers of 1.6 MB
        at once: another principal's `GET /api/v1/projects/{id}` went from
        4 ms to 340-730 ms at the median, waiting in the pool's queue;
        16 at once: 0.9-1.0 s; graphqlfair, docs/graphql.md). They now take a place in turn
        by caller (`who`, storage/turns.py) and then one of the search lane,
        so every other read still finds a reader and another principal's
        query gets the next place. Inside `pinned()` it reads on the pin."""
        if snapshots.current(self) is not None:
            return await self.read(fn)
        return await holding_until_done(
            self._answers.of(who),
            lambda: holding_until_done(self._searches.of(who), lambda: self.read(fn)),
        )

    async def _search(self, fn: UnitOfWork[T], who: Hashable) -> T:
        # not pinned: on the reader pool, holding a place in the lane until
        # the reader's search ends, also when its caller leaves first (an
        # MCP call cancelled, a stop): a place given back then let a third
        # search take the reader kept for every other read. One whose caller
        # left before a reader took it up is not run at all.
        left = threading.Event()

        def unless_left(conn: sqlite3.Connection) -> T:
            if left.is_set():
                raise SearchAbandoned
            _running_search.left = left
            try:
                return fn(conn)
            finally:
                _running_search.left = None

        async def read_watched() -> T:
            # a caller that leaves while its search runs (a REST client that
            # closed its connection) ends it at the time limit's next check,
            # as a cancelled one does: it ran on to its end for no one
            stop_watching = watch_caller(left.set, after=SEARCH_WATCH_AFTER)
            try:
                return await self.read(unless_left)
            finally:
                stop_watching()

        try:
            return await holding_until_done(self._searches.of(who), read_watched)
        except asyncio.CancelledError:
            left.set()
            raise

    async def read_point(self, fn: UnitOfWork[T]) -> T:
        """Run a small read-only unit of work (a few lookups by key, nothing that
        scans) on the event loop's own connection.

        No transaction is opened around it: each statement sees the latest
        commit, so use it only where statements need no common snapshot
        (a token, then its session)."""
        conn = self._point
        if conn is None:
            return await self.read(fn)
        self._check_store()
        try:
            return fn(conn)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
                # another process holds the file: wait for it on a pool thread
                return await self.read(fn)
            refusal = self._refusal(exc)
            if refusal is None:
                raise
            raise refusal from exc

    def files_changed(self) -> str | None:
        """What changed among the database's files since they were opened
        (storage/files.py), or None: for /healthz."""
        return self._files.check() if self._files is not None else None

    def upgraded(self) -> str | None:
        """Why this build no longer serves the file, once the writer found it
        migrated by another build (storage/upgrades.py), or None: for /healthz."""
        return self._schema.upgraded

    def damage(self) -> str | None:
        """SQLite's word for the damage a read or write found in the file
        (it stays until a restart on a restored file), or None: for /healthz."""
        return self._damage

    def _refusal(self, exc: sqlite3.DatabaseError) -> Unavailable | None:
        """The 503 for an error of the store rather than of the request: the
        file damaged, or its storage full, read-only or failing (a write's
        are mapped by the writer; a read's here: they answered 500 and
        logged a traceback per request). None for anything else."""
        if is_damage(exc):
            return self._damaged(exc)
        refused = storage_refusal(exc)
        # plain SQLITE_READONLY on a read is a read that tried to write (the
        # readers are query_only): a fault, not the storage's condition
        if refused is None or getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_READONLY:
            return None
        _conditions.warning("a read was refused with 503: %s", exc, key=f"read {refused}")
        return Unavailable(f"{refused}; retry later", retry_after=STORAGE_RETRY_AFTER)

    def _damaged(self, exc: sqlite3.DatabaseError) -> Unavailable:
        """Note damage SQLite found (logged once; each request then answers
        503, not a 500 with a traceback per request)."""
        if self._damage is None:
            self._damage = str(exc)
            log.error(
                "SQLite found %s damaged (%s): every request that reads the damage answers"
                " 503; stop serve and restore the file (docs/operations.md, 'Backups,"
                " restore and verify')",
                self.path,
                exc,
            )
        return Unavailable(
            "the database file is damaged; an operator must restore it from a backup",
            {"reason": "database_damaged"},
            retry_after=STORAGE_RETRY_AFTER,
        )

    def _check_store(self) -> None:
        """Refuse a read once the files changed under the service, or once
        the writer found them migrated by another build."""
        files = self._files
        if files is not None and files.check_now_and_then() is not None:
            raise files_changed_refusal()
        if self._schema.upgraded is not None:
            raise upgraded_refusal()

    # -- commit listeners -------------------------------------------------------------

    def add_commit_listener(self, callback: CommitListener) -> None:
        """Call `callback()` on the event loop after each committed batch."""
        self._commit_listeners.append(callback)

    def remove_commit_listener(self, callback: CommitListener) -> None:
        self._commit_listeners.remove(callback)

    def _committed(self) -> None:
        """On the event loop after a batch committed, before its callers resume."""
        for callback in list(self._commit_listeners):
            try:
                callback()
            except Exception:
                log.exception("commit listener failed")

    # -- diagnostics -----------------------------------------------------------------------

    def observe_batches(self, callback: Callable[[int, float], None] | None) -> None:
        """Call `callback(units, commit_seconds)` after each COMMIT (metrics).

        It runs on the writer thread, inside the writer's loop: keep it cheap
        and thread-safe (prometheus_client's metrics are)."""
        if self._writer is None:
            raise Unavailable("the database is not open")
        self._writer.batch_observer = callback

    def wal_bytes(self) -> int:
        """The size now of the -wal file the connections write (0 when it is
        missing, or the database is in memory or was never opened)."""
        files = self._files
        if files is None:
            return 0
        try:
            return os.stat(files.wal_name).st_size
        except OSError:
            return 0

    def queue_depth(self) -> int:
        """Writes queued for the writer thread now, not yet taken (0 when closed)."""
        return self._writer.queue_depth() if self._writer is not None else 0

    def unanswered_writes(self) -> int:
        """Writes waiting for their answer now: queued, or in the batch the
        writer runs or waits to begin (0 when closed)."""
        return self._writer.unanswered() if self._writer is not None else 0

    async def set_trace(self, callback: Callable[[str], None] | None) -> None:
        """Install a statement trace on every connection (tests count SQL with it)."""
        if self._writer is None or self._readers is None:
            raise Unavailable("the database is not open")

        def trace(conn: sqlite3.Connection) -> None:
            conn.set_trace_callback(callback)

        await self._writer.submit(trace, transaction=False)
        pinned = self._snapshots.connections if self._snapshots is not None else []
        for conn in [*self._readers.connections, *pinned]:
            conn.set_trace_callback(callback)


def _say_wal_left(wal_name: str) -> None:
    """The last connection to close checkpoints the WAL into the database and
    removes it; a `-wal` still there may hold acknowledged writes the
    database file alone lacks (another process has it open, or the
    checkpoint could not finish: a full disk, a lock; its frames may also
    all be in the file already, which its size does not tell). Said,
    because an operator who copies the stopped service's `.db` alone may
    lose them (docs/operations.md)."""
    try:
        size = os.stat(wal_name).st_size
    except OSError:
        return
    if size:
        log.info(
            "stopped with %d bytes of WAL still in %s (another process has the "
            "database open, or the last checkpoint could not finish): it may hold writes "
            "the database file lacks; keep it beside the database, or copy with "
            "`waypost admin backup`",
            size,
            wal_name,
        )
