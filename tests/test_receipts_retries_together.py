"""Retries of a request that has finished, sent together while other writes
run: each is answered from the receipt (service contract section 10: "Same
key while the first request is still running: 409 idempotency_in_flight";
once it has finished, "the stored status and body come back"). The receipt's
point read is coalesced while the writer is busy (storage/coalesced.py), and
`run_mutation` held the key's in-flight slot across that read, so every
retry but one heard `409 idempotency_in_flight` about a request committed
long before (the lifecycle listener reads the receipt before taking the slot
for this reason: resolvers/lifecycle/commands.py `run`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.test_receipts import events, wait_until, writer_held

TASKS = "/api/v1/projects/demo/tasks"
GQL_CREATE = """
mutation ($i: TaskCreateInput!) {
  taskCreate(input: $i) { task { id title } userErrors { code } replayed }
}
"""


async def test_rest_retries_of_a_finished_request_sent_together_all_replay(
    service: Service, human: Caller, project: str
) -> None:
    body = {"title": "Written once"}
    first = await human.post(TASKS, body, key="finished-1")
    assert first.status_code == 201, first.text
    before = events(service)
    async with writer_held(service):  # another write is under way meanwhile
        retries = await asyncio.gather(
            *[human.post(TASKS, body, key="finished-1") for _ in range(5)]
        )
    assert [r.status_code for r in retries] == [201] * 5, [r.text for r in retries]
    assert all(r.headers.get("idempotent-replayed") == "true" for r in retries)
    assert all(r.json() == first.json() for r in retries)
    assert events(service) == before


async def test_graphql_retries_of_a_finished_mutation_sent_together_all_replay(
    service: Service, human: Caller, project: str
) -> None:
    variables = {"i": {"idempotencyKey": "finished-g", "projectId": "demo", "title": "Once"}}
    first = await human.gql(GQL_CREATE, variables)
    assert first["data"]["taskCreate"]["userErrors"] == []
    async with writer_held(service):
        retries = await asyncio.gather(*[human.gql(GQL_CREATE, variables) for _ in range(5)])
    payloads = [r["data"]["taskCreate"] for r in retries]
    assert [p["userErrors"] for p in payloads] == [[]] * 5, payloads
    assert all(p["replayed"] and p["task"] == first["data"]["taskCreate"]["task"] for p in payloads)


async def test_a_retry_whose_read_found_nothing_while_the_first_ran_replays_once_it_ends(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receipt is read before the slot is taken: a retry can read
    "no receipt" while the first request runs, and take the slot once the
    first has committed and let it go. The writer's own look at the receipt
    (`_run`) must then replay it: the task is written once (review85)."""
    real_get = service.rt.receipt_rows.get
    retry_read, first_done = asyncio.Event(), asyncio.Event()
    reads = 0

    async def get(slot: tuple[str, str]) -> Any:
        nonlocal reads
        reads += 1
        row = await real_get(slot)
        if reads == 2:  # the retry's read, made while the first is running
            retry_read.set()
            await first_done.wait()
        return row

    monkeypatch.setattr(service.rt.receipt_rows, "get", get)
    body = {"title": "Written once, raced"}
    before = events(service)
    async with writer_held(service):
        first = asyncio.create_task(human.post(TASKS, body, key="raced-1"))
        await wait_until(lambda: (human.principal_id, "raced-1") in service.rt.inflight)
        retry = asyncio.create_task(human.post(TASKS, body, key="raced-1"))
        await asyncio.wait_for(retry_read.wait(), 10)
    answer = await first
    first_done.set()
    again = await retry
    assert answer.status_code == 201, answer.text
    assert again.status_code == 201, again.text
    assert again.headers.get("idempotent-replayed") == "true"
    assert again.json() == answer.json()
    assert events(service) == before + 1
