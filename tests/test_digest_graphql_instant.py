"""GraphQL's digest, like REST's (test_digest_journey.py): nothing it lists
is newer than its `generatedAt`, also when the query waited for a pinned
connection (the pipeline) or a reader (the fast path) before its snapshot
began: the instant is read once it has (review73)."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.decisions_support import edit_task, new_task, open_decision
from tests.fastpath_support import spying

QUERY = """query { project(id: "demo") { digest { generatedAt
  blockedTasks { id updatedAt priority } } } }"""


async def test_a_graphql_digest_that_waited_for_a_connection_lists_nothing_newer(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = await new_task(human, "Blocked")
    await open_decision(human, [task])
    snapshots: Any = service.rt.db._snapshots
    take = snapshots.take
    meanwhile: list[dict[str, Any]] = []

    async def take_after_an_edit(who: Any = None) -> Any:
        # another query held every pinned connection; meanwhile a minute
        # passes and the task is edited (committed before this query's read)
        if not meanwhile:
            meanwhile.append({})
            service.clock.advance(minutes=1)
            # another client's request: none of this query's pins
            edit = edit_task(human, task, priority=5)
            meanwhile[0] = await asyncio.create_task(edit, context=contextvars.Context())
        return await take(who)

    monkeypatch.setattr(snapshots, "take", take_after_an_edit)
    found = (await human.gql(QUERY))["data"]["project"]["digest"]
    assert meanwhile
    [listed] = found["blockedTasks"]
    assert listed["updatedAt"] <= found["generatedAt"], (found, meanwhile[0]["updated_at"])


async def test_a_fast_path_digest_that_waited_for_a_reader_lists_nothing_newer(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast path (a query the pipeline answered before) reads on the
    reader pool, and may wait for a reader as well: its instant, and the
    answer's `Waypost-Now`, are read once its snapshot has begun."""
    task = await new_task(human, "Blocked")
    await open_decision(human, [task])
    await human.gql(QUERY)  # the pipeline answers, and the fast path learns it
    db = service.rt.db
    read = db.read
    armed: list[bool] = [True]

    async def read_after_an_edit(fn: Any) -> Any:
        if armed[0]:
            armed[0] = False  # the edit's own reads, and any later, as they are
            service.clock.advance(minutes=1)
            edit = edit_task(human, task, priority=5)
            await asyncio.create_task(edit, context=contextvars.Context())
        return await read(fn)

    with spying() as fast:
        monkeypatch.setattr(db, "read", read_after_an_edit)
        r = await human.client.post("/graphql", json={"query": QUERY}, headers=human.headers())
    assert fast == [True], "the fast path did not answer"
    found = r.json()["data"]["project"]["digest"]
    [listed] = found["blockedTasks"]
    assert listed["updatedAt"] <= found["generatedAt"], found
    assert r.headers["Waypost-Now"] == found["generatedAt"]
