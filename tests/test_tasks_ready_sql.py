"""Readiness in SQL: claims, `ready` lists and the digest count skip blocked work
inside one statement, and must agree with the gate on every way a task is blocked
(its own decision, its subject's, a stale allow) however much blocked work
comes first."""

from __future__ import annotations

from typing import Any

from tests.conftest import Caller, Service
from tests.tasks_support import (
    BASE,
    allow,
    claim,
    make_task,
    open_decision,
    set_policy,
    task_path,
)


async def ready_ids(human: Caller, **params: str) -> list[str]:
    r = await human.get(f"{BASE}/tasks", ready="true", **params)
    assert r.status_code == 200, r.text
    return [t["id"] for t in r.json()["items"]]


async def digest(human: Caller) -> dict[str, Any]:
    r = await human.get(f"{BASE}/digest")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_claim_and_ready_list_skip_an_activity_whose_subject_is_blocked(
    service: Service, human: Caller, project: str
) -> None:
    # the subject is not open (claimed), so only the subject route blocks the review
    subject = await make_task(human, "feature", priority=0)
    await claim(human, subject["id"])
    service.clock.advance(seconds=1)
    review = await make_task(human, "review", subject_task_id=subject["id"], priority=9)
    service.clock.advance(seconds=1)
    free = await make_task(human, "free", priority=1)
    assert await ready_ids(human) == [review["id"], free["id"]]
    await open_decision(human, subject["id"])
    assert await ready_ids(human) == [free["id"]]
    not_ready = (await human.get(f"{BASE}/tasks", ready="false")).json()["items"]
    assert [t["id"] for t in not_ready] == [subject["id"], review["id"]]
    assert (await digest(human))["ready_task_count"] == 1
    agent = await service.agent()
    assert (await claim(agent))["task"]["id"] == free["id"]


async def test_claim_and_ready_list_skip_tasks_under_an_allow_made_stale_by_an_edit(
    service: Service, human: Caller, project: str
) -> None:
    held = await make_task(human, "held", priority=9)
    service.clock.advance(seconds=1)
    edited = await make_task(human, "edited", priority=9)
    service.clock.advance(seconds=1)
    free = await make_task(human, "free", priority=1)
    decision = await open_decision(human, held["id"], edited["id"])
    await allow(human, decision)
    assert await ready_ids(human) == [held["id"], edited["id"], free["id"]]
    # a judged edit of one affected task makes the allow stale for both
    r = await human.patch(task_path(edited["id"]), {"expected_revision": 1, "title": "changed"})
    assert r.status_code == 200, r.text
    assert await ready_ids(human) == [free["id"]]
    assert (await digest(human))["ready_task_count"] == 1
    agent = await service.agent()
    assert (await claim(agent))["task"]["id"] == free["id"]


async def test_claim_and_ready_list_skip_tasks_under_an_allow_made_stale_by_the_rules(
    service: Service, human: Caller, project: str
) -> None:
    held = await make_task(human, "held", priority=9)
    service.clock.advance(seconds=1)
    free = await make_task(human, "free", priority=1)
    await allow(human, await open_decision(human, held["id"]))
    await set_policy(human, rules="No deploys on Fridays.")
    assert await ready_ids(human) == [free["id"]]
    found = await digest(human)
    assert found["ready_task_count"] == 1
    assert [t["id"] for t in found["blocked_tasks"]] == [held["id"]]
    agent = await service.agent()
    assert (await claim(agent))["task"]["id"] == free["id"]


async def test_a_hundred_blocked_tasks_ahead_do_not_hide_the_ready_one(
    service: Service, human: Caller, project: str
) -> None:
    # more than one chunk of the old 64-candidate walk, first in claim and creation order
    blocked = [(await make_task(human, f"b{i}", priority=5))["id"] for i in range(100)]
    await open_decision(human, *blocked)
    service.clock.advance(seconds=1)
    ready = await make_task(human, "ready", priority=0)
    page = (await human.get(f"{BASE}/tasks", ready="true", limit="1")).json()
    assert [t["id"] for t in page["items"]] == [ready["id"]]
    assert page["next_cursor"] is None
    found = await digest(human)
    assert found["ready_task_count"] == 1 and len(found["blocked_tasks"]) == 100
    agent = await service.agent()
    assert (await claim(agent))["task"]["id"] == ready["id"]
    r = await agent.post(f"{BASE}/claims", {})
    assert r.status_code == 404 and r.json()["error"]["details"] == {"reason": "nothing_ready"}
