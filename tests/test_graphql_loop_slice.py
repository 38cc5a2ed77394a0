"""graphql-core's execution shares the event loop with every other request.

graphql-core completes a value synchronously down to its next awaitable, so
when a DataLoader batch resolves, every field waiting on it resumes in the
same turn of the loop and completes its whole subtree there: on a real
`serve`, the dashboard of 100 decisions (two generations, 21 affected tasks
each) held the loop 0.4-0.6 s in one turn, and another principal's REST read
waited behind it (graphqlyield). Objects now start within a slice of the loop's
time (schema/loop_slice.py); the answer is the same, byte for byte.
"""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

import pytest

from bench.graphql import DASHBOARD  # the query docs/graphql.md prints
from tests.conftest import Caller, Service
from tests.decisions_support import new_task, open_decision
from tests.fastpath_support import graphql_core_only


async def _decisions(human: Caller, decisions: int, tasks: int, per: int) -> None:
    ids = [await new_task(human, f"task {n}") for n in range(tasks)]
    for d in range(decisions):
        affected = [ids[(d + k) % tasks] for k in range(per)]
        await open_decision(human, affected, question=f"Batch {d}?")


async def _dashboard(human: Caller) -> bytes:
    r = await human.post("/graphql", {"query": DASHBOARD, "variables": {"project": "demo"}})
    assert r.status_code == 200 and b'"errors"' not in r.content, r.text[:500]
    return r.content


async def _longest_turn(human: Caller) -> tuple[float, float]:
    """(the longest stretch of the loop thread's CPU time between two turns of
    another task, the query's whole CPU time) while the dashboard is answered
    through graphql-core. CPU time, not wall time: a loaded machine's
    preemption is no turn held; the collector is paused for the same reason."""
    gaps: list[float] = []
    last = [time.thread_time()]

    async def other_work() -> None:
        while True:
            await asyncio.sleep(0)
            now = time.thread_time()
            gaps.append(now - last[0])
            last[0] = now

    gc.collect()
    gc.disable()
    ticker = asyncio.ensure_future(other_work())
    try:
        await asyncio.sleep(0)
        start = last[0] = time.thread_time()
        gaps.clear()
        await _dashboard(human)
        whole = time.thread_time() - start
    finally:
        ticker.cancel()
        gc.enable()
    return max(gaps), whole


async def test_other_work_gets_turns_while_graphql_core_completes_a_large_answer(
    service: Service, human: Caller, project: str
) -> None:
    await _decisions(human, decisions=40, tasks=100, per=25)  # 1,000 affected tasks
    with graphql_core_only():
        await _dashboard(human)  # warm: plans, memos, imports
        longest, whole = await _longest_turn(human)
    # before: one turn completed nearly every decision's subtree (about 70%
    # of the query's time); now a turn starts objects for 10 ms at most
    assert longest < 0.05 and longest < whole / 4, (longest, whole)


@pytest.mark.parametrize("slice_seconds", [0.0, -1.0])
async def test_the_answer_is_the_same_when_every_object_waits_for_a_turn(
    service: Service, human: Caller, project: str, slice_seconds: float, monkeypatch: Any
) -> None:
    """With a slice of nothing (every object after a turn's first waits for a
    later turn) the answer is the same bytes as without slicing."""
    from waypost.schema import loop_slice

    await _decisions(human, decisions=6, tasks=12, per=5)
    with graphql_core_only():
        whole = await _dashboard(human)
        monkeypatch.setattr(loop_slice, "SLICE", slice_seconds)
        sliced = await _dashboard(human)
    assert sliced == whole


async def test_work_started_in_a_later_turn_runs_in_its_own_callers_context() -> None:
    """The pump is scheduled by whichever query first waited for a turn: an
    object's async fields (its loaders, its resolvers' reads) must still run
    in the context of the query they belong to, not of that first one (the
    request's pinned snapshot and instant, its caller_gone watch, its
    principal's turn and its log line are all context variables)."""
    import contextvars

    from waypost.schema import loop_slice

    whose: contextvars.ContextVar[str] = contextvars.ContextVar("whose")

    async def request(name: str) -> str:
        whose.set(name)

        async def field() -> str:
            await asyncio.sleep(0)
            return whose.get()

        result: str = await loop_slice.later(field)
        return result

    assert await asyncio.gather(request("A"), request("B")) == ["A", "B"]


async def test_a_query_whose_objects_wait_for_a_turn_is_judged_at_its_own_instant(
    service: Service, human: Caller, project: str, clock: Any, monkeypatch: Any
) -> None:
    """Another query's objects wait in the same queue: this one's decisions
    are still judged at this one's instant (its `Waypost-Now`), not at the
    instant of the query whose wait scheduled the turn that started them."""
    from datetime import timedelta

    from tests.decisions_support import answer
    from waypost.clock import format_time
    from waypost.schema import loop_slice

    await _decisions(human, decisions=30, tasks=60, per=10)
    task = await new_task(human, "expiring")
    expires = format_time(clock.now() + timedelta(minutes=30))
    decision = (await open_decision(human, [task], expires_at=expires))["id"]
    await answer(human, decision)
    query = """query ($task: String!) { project(id: "demo") { task(id: $task) {
      decisions(first: 5) { nodes { restId status } } } } }"""
    monkeypatch.setattr(loop_slice, "SLICE", -1.0)  # every object waits for a turn
    statuses: list[str] = []
    with graphql_core_only():
        other = asyncio.ensure_future(_dashboard(human))  # judged before the expiry
        while loop_slice._state.pumping is None:  # its objects wait for turns
            await asyncio.sleep(0)
        clock.advance(hours=1)  # every query from here on: past the allow's expiry
        while not other.done():
            r = await human.post("/graphql", {"query": query, "variables": {"task": task}})
            nodes = r.json()["data"]["project"]["task"]["decisions"]["nodes"]
            statuses += [n["status"] for n in nodes]
        await other
    assert statuses and set(statuses) == {"EXPIRED"}, statuses


async def test_an_error_raised_as_an_object_starts_in_a_later_turn_reaches_its_field(
    monkeypatch: Any,
) -> None:
    """An object started by a later turn that raises (a non-null field's
    error, which graphql-core raises out of the object to its nullable
    parent) raises in the field that waited for it, with its message and
    path: answered `None`, the parent showed the object as null with no
    error, or a "Cannot return null" at another path."""
    from graphql import GraphQLError

    from waypost.schema import loop_slice

    monkeypatch.setattr(loop_slice, "SLICE", -1.0)  # every object waits for a turn

    def failing() -> Any:
        raise GraphQLError("the field failed", path=["project", "tasks", 3, "title"])

    async def fine() -> str:
        return "ok"

    results = await asyncio.gather(
        loop_slice.later(failing), loop_slice.later(fine), return_exceptions=True
    )
    error, ok = results
    assert isinstance(error, GraphQLError), results
    assert error.message == "the field failed"
    assert error.path == ["project", "tasks", 3, "title"]
    assert ok == "ok"


def test_a_new_event_loop_starts_no_object_left_waiting_on_a_closed_one(
    tmp_path: Any, migrated_template: Any, caplog: Any
) -> None:
    """Each test (and `asyncio.run`) runs on an event loop of its own, in the
    same thread: objects left waiting by a loop that stopped before their
    turn (a server stopped mid-answer) are not started on the next loop. Kept,
    the next loop's first pump ran the dead query's work in the dead
    query's context, and answered a future of the closed loop ("Event loop
    is closed", logged as an error in every later pump)."""
    import logging

    from tests.conftest import MovableClock, copy_database, serving
    from waypost.schema import loop_slice
    from waypost.settings import Settings

    ran: list[str] = []
    left: list[asyncio.Future[Any]] = []  # never finished: the loop closes under them
    first = asyncio.new_event_loop()
    try:

        async def leave_an_object_waiting() -> None:
            left.append(asyncio.ensure_future(loop_slice.later(lambda: ran.append("closed"))))
            # the task queues its object in the next turn, and the loop stops
            # at that turn's end: the pump it scheduled never runs
            first.call_soon(first.stop)

        left.append(first.create_task(leave_an_object_waiting()))
        first.run_forever()
        assert loop_slice._state.pumping is first and not ran
    finally:
        first.close()

    async def on_a_new_loop() -> tuple[bytes, bytes]:
        settings = Settings(db_path=copy_database(migrated_template, tmp_path / "w.db"))
        async with serving(settings, MovableClock()) as service:
            human = await service.principal("human", "alice")
            r = await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
            assert r.status_code == 201, r.text
            await _decisions(human, decisions=3, tasks=6, per=3)
            with graphql_core_only():
                whole = await _dashboard(human)
                previous, loop_slice.SLICE = loop_slice.SLICE, -1.0
                try:
                    sliced = await asyncio.wait_for(_dashboard(human), 30)
                finally:
                    loop_slice.SLICE = previous
            return whole, sliced

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        whole, sliced = asyncio.run(on_a_new_loop())
    assert sliced == whole
    assert ran == []  # the closed loop's object was never started
    pumps = [r for r in caplog.records if "_pump" in r.getMessage() or "closed" in r.getMessage()]
    assert pumps == [], [r.getMessage() for r in pumps]


async def test_another_principals_small_query_waits_behind_none_of_a_large_answers_objects(
    service: Service, human: Caller, project: str, monkeypatch: Any
) -> None:
    """Objects waiting for a turn take turns by principal: an object of one
    principal's small query starts after at most one of each other
    principal's waiting objects, not after every object their large answers
    queued before it (in one queue for everyone, an object of another
    principal's `{ mySession { id } }` started after up to 1,050 of theirs)."""
    from waypost.schema import loop_slice
    from waypost.storage.turns import CALLER

    await _decisions(human, decisions=40, tasks=100, per=25)  # 1,000 affected tasks
    other = await service.principal("human", "bob")
    monkeypatch.setattr(loop_slice, "SLICE", -1.0)  # every object waits for a turn
    started: list[object] = []  # whose object started, in order
    ahead: list[int] = []  # for each of bob's objects: others' objects started before it
    later = loop_slice.later

    async def noting_later(work: Any) -> Any:
        who, queued = CALLER.get(), len(started)

        def start() -> Any:
            if who == other.principal_id:
                ahead.append(sum(1 for w in started[queued:] if w != who))
            started.append(who)
            return work()

        return await later(start)

    monkeypatch.setattr(loop_slice, "later", noting_later)
    with graphql_core_only():
        # two (a query holds one of three pinned connections: a third waits for none)
        large = asyncio.gather(_dashboard(human), _dashboard(human))
        while not large.done():  # again and again while their objects wait
            small = await other.gql("query { mySession { id } }")
            assert small == {"data": {"mySession": None}}
        await large
    assert started.count(human.principal_id) > 1000  # the large answers' objects waited
    assert len(ahead) > 3 and max(ahead) <= 1, sorted(ahead)
