"""A query the fast path answers again without the pipeline (fastpath/known.py)
is built whole on a reader of the pool, outside any pinned snapshot. One
principal's many such queries at once must not take every reader (another
principal's REST read queued behind all of them: 8 answers of 1.6 MB at once
took a `GET /api/v1/projects/{id}` from 4 ms to 330-720 ms at the median,
16 to 0.9-1.0 s; graphqlfair), and another principal's query gets the next
place rather than the last.

Each answer here is held on its reader until the test lets it go, so what is
checked is who holds a reader and who runs next, not how long anything takes.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from tests.conftest import Caller, Service, copy_database
from waypost.runtime import CONNECTION_HOOKS
from waypost.schema import fastpath
from waypost.schema.fastpath import known
from waypost.schema.fastpath.run import execute
from waypost.schema.limits import CACHED_QUERIES
from waypost.schema.memo import Memo
from waypost.storage import db as db_module
from waypost.storage.db import Database
from waypost.storage.readers import begin_snapshot

QUERY = "query Tasks($p: String!) { project(id: $p) { tasks(first: 10) { nodes { title } } } }"
HEAVY = 6  # more than the pool's three readers


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    with mock.patch.object(known, "KNOWN", Memo(CACHED_QUERIES)):
        yield


class HeldAnswers:
    """The fast path's `execute`, each answer held on its reader thread until
    a permit is given; notes whose answer entered, in order."""

    def __init__(self) -> None:
        self.entered: list[str] = []
        self.permits = threading.Semaphore(0)
        self.changed = threading.Condition()

    def __call__(self, reads: Any, plan: Any, parents: list[Any]) -> Any:
        with self.changed:
            self.entered.append(reads.principal_id)
            self.changed.notify_all()
        # bounded, so a failing test never leaves a reader thread behind
        self.permits.acquire(timeout=30)
        return execute(reads, plan, parents)

    async def entered_at_least(self, count: int) -> None:
        def wait() -> None:
            with self.changed:
                assert self.changed.wait_for(lambda: len(self.entered) >= count, timeout=10)

        await asyncio.to_thread(wait)

    def release_all(self) -> None:
        for _ in range(HEAVY + 4):
            self.permits.release()


async def known_query(service: Service, human: Caller) -> dict[str, Any]:
    r = await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
    assert r.status_code == 201, r.text
    body = {"query": QUERY, "variables": {"p": "demo"}}
    for _ in range(2):  # the second is answered from `known`
        r = await human.client.post("/graphql", json=body, headers=human.headers())
        assert r.status_code == 200, r.text
    key = known.request_key(body)
    assert key is not None and known.KNOWN.get(key) is not None
    return body


async def send(caller: Caller, body: dict[str, Any]) -> int:
    r = await caller.client.post("/graphql", json=body, headers=caller.headers())
    return r.status_code


async def test_one_principals_known_queries_leave_a_reader_for_others(
    service: Service, human: Caller
) -> None:
    body = await known_query(service, human)
    other = await service.principal("human", "bob")
    held = HeldAnswers()
    with mock.patch.object(fastpath, "execute", held):
        heavy = [asyncio.create_task(send(human, body)) for _ in range(HEAVY)]
        try:
            await held.entered_at_least(1)
            await asyncio.sleep(0.2)  # let every one of them reach its place or its queue
            # another principal's REST read finds a reader while they are all held
            read = await asyncio.wait_for(other.get("/api/v1/projects/demo"), timeout=10)
            assert read.status_code == 200, read.text
            # the answers took the search lane's places: all readers but one
            assert len(held.entered) == 2
        finally:
            held.release_all()
            statuses = await asyncio.gather(*heavy)
    assert statuses == [200] * HEAVY


async def test_another_principals_known_query_gets_the_next_place(
    service: Service, human: Caller
) -> None:
    body = await known_query(service, human)
    other = await service.principal("human", "bob")
    held = HeldAnswers()
    with mock.patch.object(fastpath, "execute", held):
        heavy = [asyncio.create_task(send(human, body)) for _ in range(HEAVY)]
        try:
            await held.entered_at_least(2)
            await asyncio.sleep(0.2)  # the rest of the heavy ones queue meanwhile
            mine = asyncio.create_task(send(other, body))
            await asyncio.sleep(0.2)  # queued behind them
            held.permits.release()  # one answer ends: its place is given on
            await held.entered_at_least(3)
            # bob's query ran next, ahead of the four alice queued before it
            assert held.entered[2] == other.principal_id
            assert held.entered[:2] == [human.principal_id] * 2
        finally:
            held.release_all()
            statuses = await asyncio.gather(*heavy)
    assert statuses == [200] * HEAVY
    assert await mine == 200


async def test_another_principals_query_gets_the_next_snapshot_connection(
    service: Service, human: Caller
) -> None:
    """A query on graphql-core's path holds a pinned connection from its
    start to its end (schema/snapshot.py); one principal's queued queries
    took them first come, first served, so another principal's query waited
    behind all of them (graphqlfair). Each query's snapshot is held as it
    begins until the test lets it go; distinct texts keep them off the
    known path."""
    r = await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
    assert r.status_code == 201, r.text
    other = await service.principal("human", "bob")
    gates: list[threading.Event] = []
    changed = threading.Condition()
    let_all_in = threading.Event()

    def held_begin(conn: Any) -> None:
        gate = threading.Event()
        with changed:
            gates.append(gate)
            changed.notify_all()
        if not let_all_in.is_set():
            gate.wait(30)
        begin_snapshot(conn)

    async def entered(count: int) -> None:
        def wait() -> None:
            with changed:
                assert changed.wait_for(lambda: len(gates) >= count, timeout=10), len(gates)

        await asyncio.to_thread(wait)

    def text(i: int) -> dict[str, Any]:
        return {"query": f'{{ q{i}: project(id: "demo") {{ name }} }}'}

    slots = 3  # the pinned connections: as many as the readers (Database's default)
    with mock.patch.object(db_module, "begin_snapshot", held_begin):
        alice = [asyncio.create_task(send(human, text(i))) for i in range(slots + 2)]
        try:
            await entered(slots)  # alice's first queries hold every connection
            await asyncio.sleep(0.2)  # her other two wait for one
            bob = asyncio.create_task(send(other, text(99)))
            await asyncio.sleep(0.2)  # queued behind them
            gates[0].set()  # one query ends: its connection is given on
            await entered(slots + 1)
            gates[slots].set()
            # the one that came in was bob's: it answers while alice's wait
            assert await asyncio.wait_for(bob, 10) == 200
            assert sum(task.done() for task in alice) == 1
        finally:
            let_all_in.set()
            for gate in gates:
                gate.set()
            statuses = await asyncio.gather(*alice)
    assert statuses == [200] * (slots + 2)


async def test_known_answers_and_searches_together_leave_a_reader_for_other_reads(
    tmp_path: Path, migrated_template: Path
) -> None:
    """A known answer takes a place of its own lane and then one of the
    search lane (`Database.read_long`), so answers and searches together
    hold at most all readers but one: with two searches on two of the three
    readers, an answer waits for a place, and a plain read takes the third
    reader at once. Taking only its own lane's place, the answer took the
    third reader and the plain read waited for one of them to end."""
    path = copy_database(migrated_template, tmp_path / "lanes.db")
    db = Database(path, hooks=CONNECTION_HOOKS)
    await db.open()
    release = threading.Event()
    entered = threading.Semaphore(0)

    def held(conn: sqlite3.Connection) -> int:
        entered.release()
        release.wait(30)
        return 1

    searches = [asyncio.create_task(db.search(held)) for _ in range(2)]
    answer: asyncio.Task[int] | None = None
    try:
        for _ in range(2):
            assert await asyncio.to_thread(entered.acquire, True, 10)
        answer = asyncio.create_task(db.read_long(held, who="alice"))
        await asyncio.sleep(0.2)  # it waits for a place of the search lane
        one = await asyncio.wait_for(db.read(lambda c: c.execute("SELECT 1").fetchone()[0]), 5)
        assert one == 1
    finally:
        release.set()
        await asyncio.gather(*searches, *([answer] if answer else []))
        await db.close()
