"""`Database.pinned()`: every read of a block sees one snapshot; the
connection is given back, its transaction ended, however the block ends."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from waypost.storage.db import Database


def count(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM kv").fetchone()[0])


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(tmp_path / "s.db", readers=2)
    await database.open()
    await database.write(lambda c: c.execute("CREATE TABLE kv (k INTEGER PRIMARY KEY)"))
    yield database
    await database.close()


async def insert(db: Database, k: int) -> None:
    await db.write(lambda c: c.execute("INSERT INTO kv VALUES (?)", (k,)))


async def test_reads_of_a_pinned_block_see_one_snapshot(db: Database) -> None:
    await insert(db, 1)
    async with db.pinned():
        first = await db.read(count)
        await insert(db, 2)  # commits between two reads of the block
        again = await db.read(count)
        with db.unpinned():
            fresh = await db.read(count)
        # its tasks too (a context variable follows them)
        in_task = await asyncio.create_task(db.read(count))
    assert (first, again, in_task, fresh) == (1, 1, 1, 2)
    assert await db.read(count) == 2  # after the block: the latest commit


async def test_a_block_without_reads_takes_no_connection(db: Database) -> None:
    for k in range(10):  # more blocks than pinned connections, none read
        async with db.pinned():
            await insert(db, k)
    assert await db.read(count) == 10


async def test_connections_come_back_after_errors_and_cancellations(db: Database) -> None:
    await insert(db, 1)

    async def failing() -> None:
        async with db.pinned():
            await db.read(count)
            raise RuntimeError("the request failed")

    async def cancelled() -> None:
        async with db.pinned():
            await db.read(count)
            await asyncio.sleep(10)

    for _ in range(3):  # each round would take every pinned connection for good
        with pytest.raises(RuntimeError):
            await failing()
        task = asyncio.create_task(cancelled())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    await insert(db, 2)

    async def pinned_count() -> int:
        async with db.pinned():
            return await db.read(count)

    # every connection free and its old transaction ended: all see the latest
    assert await asyncio.gather(*(pinned_count() for _ in range(6))) == [2] * 6


async def test_more_blocks_than_connections_wait_their_turn(db: Database) -> None:
    await insert(db, 1)
    inside = 0
    most = 0

    async def block() -> int:
        nonlocal inside, most
        async with db.pinned():
            found = await db.read(count)
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0.02)
            inside -= 1
            return found

    assert await asyncio.gather(*(block() for _ in range(6))) == [1] * 6
    assert most == 2  # as many at once as there are pinned connections
