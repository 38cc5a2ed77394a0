"""Edges of leases, publication and receipts that no test pinned (review81:
each test fails on a small change of the rule it names, which every other
test let through)."""

from __future__ import annotations

import pytest

from tests.conftest import Caller, Service
from tests.rechecks_support import Meanwhiles
from tests.tasks_support import (
    BASE,
    claim,
    claimed_by_agent,
    error,
    make_task,
    submit,
    task_path,
    wait_until,
)
from waypost.resolvers.tasks.leases import EVENT_DEPENDENTS_MOST, EXPIRED_LEASES_NAMED


async def test_its_owner_recovers_a_lease_at_the_instant_it_expires(
    service: Service, human: Caller, project: str
) -> None:
    """At `expires_at` the lease is stale for its own owner as for anyone:
    its recover takes the task over again, rather than being told it still
    holds the task (whose renew and submit are refused then)."""
    task, agent = await claimed_by_agent(service, human)
    lease = (await agent.get(task_path(task["id"]))).json()["lease"]
    await wait_until(service, lease["expires_at"], agent)
    assert service.clock.iso() == lease["expires_at"]
    r = await agent.post(task_path(task["id"], "recover"))
    assert r.status_code == 200, r.text
    assert r.json()["previous_lease"] == lease
    assert r.json()["lease"]["expires_at"] > lease["expires_at"]


async def test_exactly_twenty_lapsed_leases_are_all_named_and_not_truncated(
    service: Service, human: Caller, project: str
) -> None:
    """`expired_leases_truncated` means some lapsed lease was left out: with
    exactly EXPIRED_LEASES_NAMED of them every one is named, and the
    message counts them rather than saying "more than"."""
    agent = await service.agent("holder")
    lapsed = []
    for i in range(EXPIRED_LEASES_NAMED):
        lapsed.append((await make_task(human, f"lapsed {i}"))["id"])
        await claim(agent, lapsed[-1])
    service.clock.advance(minutes=20)
    other = await service.agent("poller")
    r = await other.post(f"{BASE}/claims", {})
    status, _, details = error(r)
    assert (status, details["reason"]) == (404, "nothing_ready")
    assert details["expired_leases"] == lapsed
    assert details["expired_leases_truncated"] is False
    assert f"but {EXPIRED_LEASES_NAMED} task(s) hold a lease" in r.json()["error"]["message"]


async def test_a_completion_with_exactly_100_waiting_names_them_all_untruncated(
    service: Service, human: Caller, project: str
) -> None:
    """`dependents_truncated` says a dependent was left out: with exactly
    EVENT_DEPENDENTS_MOST open dependents all are named and none is."""
    task, agent = await claimed_by_agent(service, human)
    waiting = []
    for i in range(EVENT_DEPENDENTS_MOST):
        waiting.append((await make_task(human, f"after {i}", depends_on=[task["id"]]))["id"])
        service.clock.advance(seconds=1)
    await submit(agent, task["id"])
    assert (await human.post(task_path(task["id"], "complete"))).status_code == 200
    events = (await human.get(f"{BASE}/events", limit="200")).json()["items"]
    [completed] = [e for e in events if e["type"] == "task.completed"]
    assert completed["data"]["dependent_task_ids"] == waiting
    assert completed["data"]["dependents_truncated"] is False


async def test_a_human_cancels_a_submitted_task(
    service: Service, human: Caller, project: str
) -> None:
    """docs/tasks.md, the workflow: `submitted --> cancelled` (human). Only
    the claimed and open ways out were exercised."""
    task, agent = await claimed_by_agent(service, human)
    await submit(agent, task["id"])
    current = (await human.get(task_path(task["id"]))).json()
    r = await human.patch(
        task_path(task["id"]), {"expected_revision": current["revision"], "status": "cancelled"}
    )
    assert r.status_code == 200, r.text
    assert (r.json()["status"], r.json()["lease"]) == ("cancelled", None)
    r = await human.post(task_path(task["id"], "complete"))
    assert error(r)[:2] == (409, "state_conflict")


async def test_a_claim_whose_session_reaches_its_expiry_while_queued_is_refused(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Section 3: a session lives 15 minutes; at its `expires_at` it is no
    longer live, for the writer's re-check as for authentication (the
    existing test moves the clock 16 minutes, so the edge went unpinned).
    Nothing is written: no lease, no receipt."""
    task = await make_task(human)
    agent = await service.agent("lapses-at-the-edge")
    meanwhile = Meanwhiles(service, monkeypatch)

    async def reach_the_expiry() -> None:
        service.clock.advance(minutes=15)

    meanwhile.before_next_write(reach_the_expiry)
    r = await agent.post(f"{BASE}/claims", {"task_id": task["id"]}, key="edge")
    assert meanwhile.ran
    assert error(r) == (403, "forbidden", {"reason": "session_not_live"})
    assert (await human.get(task_path(task["id"]))).json()["lease"] is None


async def test_an_idempotency_key_of_256_characters_is_taken_and_257_refused(
    human: Caller, project: str
) -> None:
    """Section 13: keys are 1-256 characters from `!` to `~`; both edges."""
    longest = "k" * 256
    r = await human.post(f"{BASE}/tasks", {"title": "keyed"}, key=longest)
    assert r.status_code == 201, r.text
    again = await human.post(f"{BASE}/tasks", {"title": "keyed"}, key=longest)
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == r.json()
    r = await human.post(f"{BASE}/tasks", {"title": "keyed"}, key=longest + "k")
    assert error(r) == (400, "invalid_request", error(r)[2])
    assert error(r)[2]["field"] == "Idempotency-Key"


async def test_a_completion_does_not_name_a_cancelled_dependent(
    service: Service, human: Caller, project: str
) -> None:
    """`task.completed` names the dependents that may become ready: a
    cancelled one never does (the existing test put its cancelled dependent
    past the 101st, where the limit hid it whatever the filter)."""
    task, agent = await claimed_by_agent(service, human)
    dropped = await make_task(human, "dropped", depends_on=[task["id"]])
    service.clock.advance(seconds=1)
    waiting = await make_task(human, "waiting", depends_on=[task["id"]])
    r = await human.patch(task_path(dropped["id"]), {"expected_revision": 1, "status": "cancelled"})
    assert r.status_code == 200, r.text
    await submit(agent, task["id"])
    assert (await human.post(task_path(task["id"], "complete"))).status_code == 200
    events = (await human.get(f"{BASE}/events", limit="200")).json()["items"]
    [completed] = [e for e in events if e["type"] == "task.completed"]
    assert completed["data"]["dependent_task_ids"] == [waiting["id"]]
    assert completed["data"]["dependents_truncated"] is False
