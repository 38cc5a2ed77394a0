"""Database: one writer connection, several reader connections, SQLite in WAL mode.

Every unit of work is a plain synchronous function over a `sqlite3.Connection`
that runs as one call on the connection's own thread (aiosqlite's worker).
A thread hop costs about 100 µs, so a unit of work never awaits statement by
statement. Writes run inside `BEGIN IMMEDIATE` on the single writer, which
serialises them; reads run inside a deferred transaction on a reader so that
each sees one consistent snapshot.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from waypost.errors import Unavailable
from waypost.storage.migrate import migrate

log = logging.getLogger("waypost")
T = TypeVar("T")
UnitOfWork = Callable[[sqlite3.Connection], T]


def configure(conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """PRAGMAs every connection needs; durability first (see docs/operations.md)."""
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    _enter_wal(conn, busy_timeout_ms)
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")


def _enter_wal(conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """`PRAGMA journal_mode = WAL`, waiting out other connections doing the same.

    Switching a fresh file to WAL needs an exclusive lock, and SQLite answers
    "database is locked" at once (without its busy handler) when several
    processes open a new database together, e.g. `serve` and an admin command.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


def connect_sync(path: Path, busy_timeout_ms: int = 5000) -> sqlite3.Connection:
    """A plain connection in autocommit mode, for admin commands and migrations."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    configure(conn, busy_timeout_ms)
    return conn


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def run_write(conn: sqlite3.Connection, fn: UnitOfWork[T]) -> T:
    """Run `fn` in one BEGIN IMMEDIATE transaction: all of it commits, or none."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if _is_busy(exc):
            raise Unavailable("the database is busy; retry shortly", retry_after=1) from exc
        raise
    try:
        result = fn(conn)
        conn.execute("COMMIT")
    except BaseException as exc:
        conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
            raise Unavailable("the database is busy; retry shortly", retry_after=1) from exc
        raise
    return result


def run_read(conn: sqlite3.Connection, fn: UnitOfWork[T]) -> T:
    """Run `fn` inside one read transaction, so it sees a single snapshot.

    WAL readers rarely wait, but another process can still hold the database
    (an exclusive lock, a WAL recovery): that answers 503, never a 500.
    """
    conn.execute("BEGIN")
    try:
        return fn(conn)
    except sqlite3.OperationalError as exc:
        if _is_busy(exc):
            raise Unavailable("the database is busy; retry shortly", retry_after=1) from exc
        raise
    finally:
        conn.execute("ROLLBACK")


class Database:
    """The store's handle. Open it once per process (the app's lifespan does)."""

    def __init__(self, path: Path, readers: int = 3, busy_timeout_ms: int = 5000) -> None:
        self.path = path
        self._reader_count = max(1, readers)
        self._busy_timeout_ms = busy_timeout_ms
        self._writer: aiosqlite.Connection | None = None
        self._readers: list[aiosqlite.Connection] = []
        self._idle: asyncio.Queue[aiosqlite.Connection] = asyncio.Queue()
        self._trace: Callable[[str], None] | None = None
        self._commit_listeners: list[Callable[[], None]] = []

    def add_commit_listener(self, callback: Callable[[], None]) -> None:
        """Call `callback()` on the event loop after each committed write."""
        self._commit_listeners.append(callback)

    def remove_commit_listener(self, callback: Callable[[], None]) -> None:
        self._commit_listeners.remove(callback)

    def _committed(self) -> None:
        for callback in list(self._commit_listeners):
            try:
                callback()
            except Exception:
                log.exception("commit listener failed")

    async def open(self) -> None:
        self._writer = await self._connect()
        await self._call(self._writer, migrate)
        for _ in range(self._reader_count):
            reader = await self._connect()
            await self._call(reader, lambda c: c.execute("PRAGMA query_only = ON"))
            self._readers.append(reader)
            self._idle.put_nowait(reader)

    async def close(self) -> None:
        for conn in [*self._readers, *([self._writer] if self._writer else [])]:
            await conn.close()
        self._readers.clear()
        self._writer = None

    async def write(self, fn: UnitOfWork[T]) -> T:
        """Run one unit of work as a single writer transaction."""
        if self._writer is None:
            raise Unavailable("the database is not open")
        result = await self._call(self._writer, lambda conn: run_write(conn, fn))
        self._committed()
        return result

    async def read(self, fn: UnitOfWork[T]) -> T:
        """Run one read-only unit of work on a free reader connection."""
        reader = await self._idle.get()
        try:
            return await self._call(reader, lambda conn: run_read(conn, fn))
        finally:
            self._idle.put_nowait(reader)

    async def set_trace(self, callback: Callable[[str], None] | None) -> None:
        """Install a statement trace on every connection (tests count SQL with it).

        sqlite3 accepts the callback only on the connection's own thread.
        """
        self._trace = callback
        for conn in [*self._readers, *([self._writer] if self._writer else [])]:
            await self._call(conn, lambda c: c.set_trace_callback(callback))

    async def _connect(self) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self.path, isolation_level=None)
        await self._call(conn, lambda c: configure(c, self._busy_timeout_ms))
        return conn

    @staticmethod
    async def _call(conn: aiosqlite.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
        # aiosqlite queues callables onto the connection's own thread; handing it
        # the whole unit of work makes it one thread hop instead of one per statement.
        raw: sqlite3.Connection = conn._conn
        result: Any = await conn._execute(fn, raw)  # type: ignore[no-untyped-call]
        return result  # type: ignore[no-any-return]
