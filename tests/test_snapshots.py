"""`Database.pinned()`: every read of a block sees one snapshot; the
connection is given back, its transaction ended, however the block ends."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from waypost.errors import Unavailable
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


async def two_pinned_at_once(db: Database) -> list[int]:
    """Two pinned blocks' counts, each block holding its connection until
    both have one: it returns only while both pinned connections are free."""
    both_read = asyncio.Barrier(2)

    async def pinned_count() -> int:
        async with db.pinned():
            found = await db.read(count)
            await both_read.wait()
            return found

    return await asyncio.wait_for(asyncio.gather(pinned_count(), pinned_count()), 5)


async def test_reads_of_a_pinned_block_see_one_snapshot(db: Database) -> None:
    await insert(db, 1)
    async with db.pinned():
        first = await db.read(count)
        await insert(db, 2)  # commits between two reads of the block
        again = await db.read(count)
        async with db.unpinned():  # also ends the block's snapshot
            fresh = await db.read(count)
        # its tasks too (a context variable follows them)
        in_task = await asyncio.create_task(db.read(count))
    assert (first, again, fresh, in_task) == (1, 1, 2, 2)
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

    async def cancelled(holding: asyncio.Event) -> None:
        async with db.pinned():
            await db.read(count)
            holding.set()
            await asyncio.sleep(10)

    for _ in range(3):  # each round would take every pinned connection for good
        with pytest.raises(RuntimeError):
            await failing()
        holding = asyncio.Event()
        task = asyncio.create_task(cancelled(holding))
        await holding.wait()  # cancelled while it holds its connection
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


async def test_a_connection_that_comes_free_goes_to_whose_turn_it_is(db: Database) -> None:
    """First come, first served, one principal's queued queries put another
    principal's query behind all of them (graphqlfair): a connection that
    comes free goes to the caller served longest ago, bob before alice's
    third, fourth and fifth, though he came after them."""
    await insert(db, 1)
    release = {who: asyncio.Event() for who in ("a1", "a2", "a3", "a4", "a5", "b1")}
    order: list[str] = []

    async def query(who: str, name: str) -> int:
        async with db.pinned(who=who):
            found = await db.read(count)
            order.append(name)
            await release[name].wait()
            return found

    async def reads(n: int) -> None:
        async with asyncio.timeout(5):
            while len(order) < n:
                await asyncio.sleep(0.01)

    alice = [asyncio.create_task(query("alice", f"a{i}")) for i in range(1, 6)]
    try:
        await reads(2)  # two of alice's hold both connections
        await asyncio.sleep(0.05)  # her other three wait for one
        bob = asyncio.create_task(query("bob", "b1"))
        await asyncio.sleep(0.05)
        release[order[0]].set()
        await reads(3)
        assert sorted(order[:2]) == ["a1", "a2"] and order[2] == "b1", order
    finally:
        for event in release.values():
            event.set()
    assert await asyncio.wait_for(asyncio.gather(*alice, bob), 5) == [1] * 6
    assert sorted(order[3:]) == ["a3", "a4", "a5"]


async def every_pinned_connection_held(
    db: Database,
) -> tuple[list[asyncio.Task[int]], threading.Event]:
    """Two blocks, each holding a pinned connection (every one) inside a read
    until the event is set; each read then counts the rows."""
    release = threading.Event()
    holding = threading.Semaphore(0)

    def hold(conn: sqlite3.Connection) -> int:
        holding.release()
        release.wait(10)
        return count(conn)

    async def holder() -> int:
        async with db.pinned():
            return await db.read(hold)

    holders = [asyncio.create_task(holder()) for _ in range(2)]
    for _ in holders:  # each holds its connection, inside its read
        assert await asyncio.to_thread(holding.acquire, True, 10)
    return holders, release


async def test_a_read_still_waiting_when_its_request_ends_gives_its_slot_back(
    db: Database,
) -> None:
    """A task of the request (a DataLoader batch graphql-core stopped waiting
    for) got its slot after the request had ended and kept it: every pinned
    connection leaked this way, and then every GraphQL query hung."""
    await insert(db, 1)
    holders, release = await every_pinned_connection_held(db)
    async with db.pinned():
        stray = asyncio.create_task(db.read(count))  # waits for a connection
        await asyncio.sleep(0.05)
    # the request has ended; the stray read gets a connection only now
    release.set()
    assert await asyncio.gather(*holders) == [1, 1]
    assert await stray == 1

    assert await two_pinned_at_once(db) == [1, 1]  # both connections are free again


async def test_unpinned_ends_the_pinned_snapshot_at_once(db: Database) -> None:
    """The context packet calls the reranking provider in `unpinned()`: the
    query's read transaction must not stay open meanwhile."""
    await insert(db, 1)
    async with db.pinned():
        assert await db.read(count) == 1
        async with db.unpinned():
            # both pinned connections are free: another block holds each
            assert await two_pinned_at_once(db) == [1, 1]
        await insert(db, 2)
        assert await db.read(count) == 2  # a new snapshot after it


async def test_other_reads_of_the_request_wait_out_an_unpinned_block(db: Database) -> None:
    """A GraphQL query with `Project.context` and a sibling field: the
    sibling's read, begun while the packet waited on the reranking provider,
    held a pinned connection (and a read transaction) until the query ended,
    so a few such queries stalled every other GraphQL query."""
    await insert(db, 1)
    provider_called = asyncio.Event()
    provider_answers = asyncio.Event()

    async def packet() -> int:
        async with db.unpinned():
            found = await db.read(count)
            provider_called.set()
            await provider_answers.wait()
            return found

    async with db.pinned():
        assert await db.read(count) == 1
        building = asyncio.create_task(packet())
        await provider_called.wait()
        sibling = asyncio.create_task(db.read(count))  # a sibling field's read
        await asyncio.sleep(0.05)
        assert not sibling.done()  # it waits for the block to end
        # meanwhile no pinned connection is held: two other requests hold both
        assert await two_pinned_at_once(db) == [1, 1]
        await insert(db, 2)
        provider_answers.set()
        assert await building == 1
        assert await asyncio.wait_for(sibling, 5) == 2  # a snapshot begun after the block
        assert await db.read(count) == 2  # and the request's reads share it again


async def test_a_pinned_read_waiting_when_the_database_closes_is_unavailable(
    tmp_path: Path,
) -> None:
    """A forced quit closes the database under running requests: a read that
    then got a connection answered a masked RuntimeError (a logged ERROR)."""
    db = Database(tmp_path / "c.db", readers=1)
    await db.open()
    await db.write(lambda c: c.execute("CREATE TABLE kv (k INTEGER PRIMARY KEY)"))
    holding, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> int:
        holding.set()
        release.wait(10)
        return count(conn)

    async def pinned_read(fn: Callable[[sqlite3.Connection], int]) -> int:
        async with db.pinned():
            return await db.read(fn)

    holder = asyncio.create_task(pinned_read(hold))
    assert await asyncio.to_thread(holding.wait, 5)
    waiter = asyncio.create_task(pinned_read(count))  # the one connection is taken
    await asyncio.sleep(0.05)
    closing = asyncio.create_task(db.close())
    # the holder's slot comes back while the writer may still be stopping
    # (a loaded machine): the waiter must not get it then (flakeaudit)
    await asyncio.sleep(0)
    release.set()
    await closing
    assert await holder == 0  # the running read finished before the close
    with pytest.raises(Unavailable):
        await waiter


async def test_pinned_searches_never_wait_on_each_other_for_slots_and_permits(
    db: Database,
) -> None:
    """A search took a permit of the search lane, then waited for a pinned
    slot; the requests holding every slot then waited for a permit: every
    GraphQL query and search hung for good (8 concurrent dashboard queries
    with `context` and `tasks(q:)` did it), and SIGTERM could not stop serve.
    A pinned search reads on its request's own slot, never the reader pool
    the lane protects, so it takes no permit."""
    go = asyncio.Event()
    holding: list[int] = []

    async def holds_a_slot_then_searches() -> int:
        async with db.pinned():
            await db.read(count)  # takes one of the two slots
            holding.append(1)
            await go.wait()
            return await db.search(count)

    async def searches_first() -> int:
        async with db.pinned():
            return await db.search(count)  # the lane's one permit, then a slot

    holders = [asyncio.create_task(holds_a_slot_then_searches()) for _ in range(2)]
    while len(holding) < 2:
        await asyncio.sleep(0.01)
    waiting = asyncio.create_task(searches_first())
    await asyncio.sleep(0.1)  # it holds the permit (before: and waits for a slot)
    go.set()
    assert await asyncio.wait_for(asyncio.gather(*holders, waiting), 5) == [0, 0, 0]


async def test_a_read_that_got_its_slot_during_an_unpinned_block_gives_it_back(
    db: Database,
) -> None:
    """A sibling field's read waited for a pinned connection (every one
    taken by other queries); the packet's `unpinned()` block began
    meanwhile. The connection the read then got must go back at once, the
    read waiting for the block to end (docs/graphql.md): kept, its read
    transaction stayed open as long as the reranking provider took."""
    await insert(db, 1)
    holders, release = await every_pinned_connection_held(db)
    provider_called = asyncio.Event()
    provider_answers = asyncio.Event()

    async def packet() -> int:
        async with db.unpinned():
            found = await db.read(count)  # on the reader pool
            provider_called.set()
            await provider_answers.wait()
            return found

    async with db.pinned():
        sibling = asyncio.create_task(db.read(count))
        await asyncio.sleep(0.05)  # it waits for a pinned connection
        building = asyncio.create_task(packet())
        await provider_called.wait()
        release.set()  # the holders end: the sibling gets a connection now
        assert await asyncio.gather(*holders) == [1, 1]
        # it gave the connection back: two other requests can hold both
        assert await two_pinned_at_once(db) == [1, 1]
        await insert(db, 2)
        provider_answers.set()
        assert await building == 1
        assert await asyncio.wait_for(sibling, 5) == 2  # a snapshot begun after the block
