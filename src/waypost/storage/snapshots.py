"""One snapshot for every read of a request: `Database.pinned()`.

A read unit of work sees one snapshot, but a GraphQL query on graphql-core's
path reads in many units: each DataLoader batch, each root list, one after
another as the levels of the answer resolve. With writes committing in
between, one answer mixed moments: a task listed as blocked by a decision
the same answer showed as allowed (15-25% of answers under six concurrent
writers). A pinned request instead reads every unit on one connection inside
one read transaction, opened by its first read and closed when the request
ends; so the whole answer is the database as of one commit.

The pinned connections are their own small set, each with its own thread,
apart from the reader pool: a request holds its connection for as long as it
runs, and the pool's connections must stay free for every other read (a
thread blocked waiting for a connection, while the holders of the
connections wait for a thread, would be a deadlock). A request that finds
every pinned connection taken waits for one, in turn by whose request it is
(storage/turns.py): first come, first served, another principal's query
waited behind every query one principal had queued (graphqlfair). Reads
outside pinned requests never wait for them.

Nothing is pinned by default: the GraphQL schema pins its queries
(`schema/snapshot.py`), never its mutations, whose answers must see their own
writes. A unit that must not hold a read transaction open (a context packet,
which calls the reranking provider in between) runs `unpinned()`; the
request's other reads wait until it ends, so none holds a connection open
meanwhile either.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import TypeVar

from waypost.errors import Unavailable
from waypost.storage.connection import is_busy
from waypost.storage.turns import FairGate

T = TypeVar("T")


class _Slot:
    """A read-only connection and the one thread that uses it."""

    def __init__(self, conn: sqlite3.Connection, index: int) -> None:
        self.conn = conn
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"waypost-pinned{index}")
        self.holder: Hashable = None  # whose request took it (its place in the gate)

    def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` inside the slot's read transaction, begun by the first unit."""
        try:
            if not self.conn.in_transaction:
                self.conn.execute("BEGIN")
            return fn(self.conn)
        except sqlite3.OperationalError as exc:
            if is_busy(exc):
                raise Unavailable("the database is busy; retry shortly", retry_after=1) from exc
            raise

    def end(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")


class PinnedSnapshots:
    """The connections pinned requests read on (see the module docstring)."""

    def __init__(self, connections: Sequence[sqlite3.Connection]) -> None:
        self._slots = [_Slot(conn, i) for i, conn in enumerate(connections)]
        # a place in the gate for each free slot: a caller granted one takes a
        # slot at once (no await between), so there is always one to take
        self._places = FairGate(len(self._slots))
        self._free = list(self._slots)  # the last given back is taken first
        self._closed = False

    @property
    def connections(self) -> list[sqlite3.Connection]:
        return [slot.conn for slot in self._slots]

    async def take(self, who: Hashable = None) -> _Slot:
        """A free slot, waiting in turn with the other callers (`who`)."""
        if self._closed:
            raise Unavailable("the database is not open")
        await self._places.acquire(who)
        if self._closed:
            self._places.release(who)
            raise Unavailable("the database is not open")
        slot = self._free.pop()
        slot.holder = who
        return slot

    async def run(self, slot: _Slot, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(slot.thread, slot.run, fn)
        except RuntimeError:
            if self._closed:  # its thread was shut down: the database closed
                raise Unavailable("the database is not open") from None
            raise

    async def give_back(self, slot: _Slot) -> None:
        """End the slot's transaction, whatever became of the request, and free it."""
        loop = asyncio.get_running_loop()
        try:
            if not self._closed:  # closing ends every transaction anyway
                await asyncio.shield(loop.run_in_executor(slot.thread, slot.end))
        except RuntimeError:
            if not self._closed:
                raise
        finally:
            self._free.append(slot)
            self._places.release(slot.holder)

    def refuse_new(self) -> None:
        """Hand out no slot from now on: the database is closing. A read
        already running goes on; one waiting for a slot is refused."""
        self._closed = True

    def close(self) -> None:
        """Wait for running reads, then close every connection (blocks)."""
        self.refuse_new()
        for slot in self._slots:
            slot.thread.shutdown(wait=True)
            slot.conn.close()


class PinnedRead:
    """One request's snapshot: every read on one slot, one at a time.

    A request's tasks may outlive it (a DataLoader batch graphql-core no
    longer waits for, once a sibling field failed): a read that comes, or
    gets its slot, after the request ended reads on a slot of its own and
    gives it back at once, so no slot is ever left taken."""

    def __init__(self, snapshots: PinnedSnapshots, who: Hashable = None) -> None:
        self._snapshots = snapshots
        self._who = who  # whose request: slots are handed out in turn by it
        self._slot: _Slot | None = None
        self._ended = False
        self._lock = asyncio.Lock()
        # `unpinned()` blocks of this request now running; while any runs,
        # the request's other reads wait rather than begin a snapshot that
        # would stay open as long as the block (a reranking provider's call)
        self._suspensions = 0
        self._free_to_read = asyncio.Event()
        self._free_to_read.set()

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        async with self._lock:  # a request's loaders may dispatch together
            while (slot := self._slot) is None:
                await self._free_to_read.wait()
                slot = await self._snapshots.take(self._who)
                if self._ended:  # before this read, or while it waited for a slot
                    try:
                        return await self._snapshots.run(slot, fn)
                    finally:
                        await self._snapshots.give_back(slot)
                if self._suspensions:  # a block began while this read waited for a slot
                    await self._snapshots.give_back(slot)
                    continue
                self._slot = slot
            return await self._snapshots.run(slot, fn)

    def suspend(self) -> None:
        """An `unpinned()` block begins: hold the request's reads that come
        from outside it until it ends (its caller then ends the snapshot)."""
        self._suspensions += 1
        self._free_to_read.clear()

    def resume(self) -> None:
        self._suspensions -= 1
        if not self._suspensions:
            self._free_to_read.set()

    async def release(self) -> None:
        """End the snapshot now and free its slot; a later read begins another."""
        slot, self._slot = self._slot, None
        if slot is not None:
            await self._snapshots.give_back(slot)

    async def end(self) -> None:
        self._ended = True
        self._free_to_read.set()  # a read after the end waits for nothing
        await self.release()


# The pinned read of the running request (contextvars follow its tasks).
_CURRENT: ContextVar[tuple[object, PinnedRead] | None] = ContextVar(
    "waypost_pinned_read", default=None
)


def current(owner: object) -> PinnedRead | None:
    """The request's pinned read on `owner` (a Database), if it pins one."""
    found = _CURRENT.get()
    return found[1] if found is not None and found[0] is owner else None


@contextlib.asynccontextmanager
async def pinned(
    owner: object, snapshots: PinnedSnapshots, who: Hashable = None
) -> AsyncIterator[None]:
    pin = PinnedRead(snapshots, who)
    token = _CURRENT.set((owner, pin))
    try:
        yield
    finally:
        try:
            await pin.end()  # first: nothing below may leave the slot taken
        finally:
            _CURRENT.reset(token)


@contextlib.asynccontextmanager
async def unpinned() -> AsyncIterator[None]:
    """Reads in this block use the reader pool, each its own snapshot; and
    the request's pinned snapshot, if any, ends here (its transaction must
    not stay open while the block waits on something else). The request's
    other reads (sibling GraphQL fields) wait for the block to end, then
    begin another snapshot: one begun meanwhile would stay open as long as
    the block and hold a pinned connection all that time. So the block
    must never wait for one of those reads."""
    found = _CURRENT.get()
    pin = found[1] if found is not None else None
    token = _CURRENT.set(None)
    if pin is not None:
        pin.suspend()
    try:
        if pin is not None:
            await pin.release()
        yield
    finally:
        _CURRENT.reset(token)
        if pin is not None:
            pin.resume()
