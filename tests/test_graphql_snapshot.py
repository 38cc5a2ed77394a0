"""A GraphQL query reads one snapshot (storage/snapshots.py, schema/snapshot.py).

graphql-core resolves a query level by level, each DataLoader batch a read of
its own; a write that commits between two of them made one answer mix two
moments (a task blocked by a decision the same answer showed as allowed).
These tests commit a write exactly there: inside the batch that reads the
decisions, after the tasks were read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

import pytest

from tests.conftest import Caller, MovableClock
from tests.decisions_support import answer, new_task, open_decision
from tests.fastpath_support import graphql_core_only
from waypost.clock import format_time
from waypost.schema.loaders import Loaders


@pytest.fixture(autouse=True)
def _on_graphql_core() -> Iterator[None]:
    """graphql-core's level-by-level reads are what is tested (the fast path
    reads one snapshot in one unit of work)."""
    with graphql_core_only():
        yield


QUERY = """query ($task: String!) { project(id: "demo") { task(id: $task) {
  ready
  blockedBy { decisionIds decisions { ... on Decision { restId status } } }
  lease { expiresAt }
} } }"""


async def test_a_write_between_two_reads_of_a_query_is_not_half_seen(
    human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = await new_task(human)
    decision = (await open_decision(human, [task]))["id"]
    read_decisions = Loaders._decisions
    answered: list[str] = []

    async def answer_first(self: Loaders, ids: Sequence[str]) -> list[Any]:
        if not answered:  # another client's answer commits mid-query
            answered.append((await answer(human, decision))["status"])
        return await read_decisions(self, ids)

    monkeypatch.setattr(Loaders, "_decisions", answer_first)
    got = (await human.gql(QUERY, {"task": task}))["data"]
    assert answered == ["allowed"]
    found = got["project"]["task"]
    # as of the query's first read: still blocked, by a decision still pending
    assert found["ready"] is False
    assert found["blockedBy"]["decisionIds"] == [decision]
    assert found["blockedBy"]["decisions"] == [{"restId": decision, "status": "PENDING"}]
    # and the next query sees the answer
    monkeypatch.undo()
    after = (await human.gql(QUERY, {"task": task}))["data"]["project"]["task"]
    assert after["ready"] is True and after["blockedBy"]["decisionIds"] == []


async def test_a_query_is_judged_at_one_instant(
    human: Caller, project: str, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its lists and loaders each read the clock: near an allow's expiry one
    answer showed the task ready and its only decision expired. Here the
    clock passes the expiry between the task's read and the decisions'."""
    task = await new_task(human)
    later = format_time(clock.now() + timedelta(minutes=30))
    decision = (await open_decision(human, [task], expires_at=later))["id"]
    await answer(human, decision)
    read_decisions = Loaders._task_decisions

    async def an_hour_later(self: Loaders, keys: Sequence[Any]) -> list[Any]:
        clock.advance(hours=1)  # mid-query: the allow has expired by the clock
        return await read_decisions(self, keys)

    monkeypatch.setattr(Loaders, "_task_decisions", an_hour_later)
    query = """query ($task: String!) { project(id: "demo") { task(id: $task) {
      ready lease { expiresAt }
      decisions(first: 5) { nodes { restId status } } } } }"""
    found = (await human.gql(query, {"task": task}))["data"]["project"]["task"]
    assert found["decisions"]["nodes"] == [{"restId": decision, "status": "ALLOWED"}]
    assert found["ready"] is True
    monkeypatch.undo()
    after = (await human.gql(query, {"task": task}))["data"]["project"]["task"]
    assert after["decisions"]["nodes"] == [{"restId": decision, "status": "EXPIRED"}]
    assert after["ready"] is False


async def test_a_mutation_answer_sees_its_own_write(human: Caller, project: str) -> None:
    """Mutations are not pinned: their payload is read after their write."""
    made = await human.gql(
        """mutation { taskCreate(input: {idempotencyKey: "snap-1", projectId: "demo",
          title: "seen"}) { task { title revisions(first: 5) { totalCount } } } }"""
    )
    assert made["data"]["taskCreate"]["task"] == {"title": "seen", "revisions": {"totalCount": 1}}


async def test_pinned_reads_give_their_connection_back(human: Caller, project: str) -> None:
    """Every query ends its read transaction and frees its connection: more
    queries than there are pinned connections, one after another and at
    once, all answer."""
    task = await new_task(human)
    for _ in range(8):
        found = (await human.gql(QUERY, {"task": task}))["data"]["project"]["task"]
        assert found["ready"] is True
    answers = await asyncio.gather(*(human.gql(QUERY, {"task": task}) for _ in range(12)))
    assert all(a["data"]["project"]["task"]["ready"] is True for a in answers)


async def test_concurrent_queries_with_a_packet_and_a_search_all_answer(
    human: Caller, project: str
) -> None:
    """`context` ends its query's snapshot (it must not hold one across the
    reranker); a sibling `tasks(q:)` then took a place in the search lane and
    waited for a snapshot, while the queries holding every snapshot waited
    for a place: 8 such queries at once hung every GraphQL query for good."""
    for i in range(30):
        made = await human.post("/api/v1/projects/demo/tasks", {"title": f"alpha {i}"})
        assert made.status_code == 201, made.text
    query = """query { project(id: "demo") { context(q: "alpha") { truncated }
      tasks(first: 5, q: "alpha") { totalCount } } }"""
    answers = await asyncio.wait_for(asyncio.gather(*[human.gql(query) for _ in range(8)]), 30)
    for reply in answers:
        assert "errors" not in reply, reply
        assert reply["data"]["project"]["tasks"]["totalCount"] == 30
    assert (await asyncio.wait_for(human.gql("{ me { name } }"), 10))["data"]["me"]
