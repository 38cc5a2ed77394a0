"""The decision gate in the task workflow: readiness, claims and owner operations."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.tasks_support import (
    BASE,
    allow,
    claim,
    claimed_by_agent,
    error,
    make_task,
    open_decision,
    submit,
    task_path,
)

WAIT_ON = {"stream": "/api/v1/projects/demo/events/stream", "subscription": "decisionChanged"}


def blocked(decision_id: str, stale: bool = False) -> tuple[int, str, dict[str, Any]]:
    """The refusal of work `decision_id` blocks; `stale`: it only a reopening lifts."""
    details: dict[str, Any] = {"decision_ids": [decision_id], "truncated": False,
                               "wait_on": WAIT_ON}  # fmt: skip
    if stale:
        details |= {"reason": "reopen_required", "reopen": [decision_id]}
    return 409, "decision_required", details


async def test_pending_decision_makes_task_not_ready_and_lists_it(
    human: Caller, project: str
) -> None:
    task = await make_task(human)
    decision = await open_decision(human, task["id"])
    body = (await human.get(task_path(task["id"]))).json()
    assert body["ready"] is False
    assert body["blocked_by"] == {
        "decisions": [decision],
        "decisions_truncated": False,
        "dependencies": [],
    }
    ready = (await human.get(f"{BASE}/tasks", ready="true")).json()["items"]
    assert ready == []


async def test_ready_list_skips_decision_blocked_tasks_across_scans(
    service: Service, human: Caller, project: str
) -> None:
    gated = []
    for i in range(5):
        gated.append((await make_task(human, f"gated {i}"))["id"])
    await open_decision(human, *gated)
    service.clock.advance(seconds=1)
    free = (await make_task(human, "free"))["id"]
    page = (await human.get(f"{BASE}/tasks", ready="true", limit="2")).json()
    assert [t["id"] for t in page["items"]] == [free] and page["next_cursor"] is None


async def test_ordinary_claim_skips_decision_blocked_task(
    service: Service, human: Caller, project: str
) -> None:
    gated = await make_task(human, "urgent", priority=10)
    other = await make_task(human, "routine", priority=0)
    await open_decision(human, gated["id"])
    agent = await service.agent()
    assert (await claim(agent))["task"]["id"] == other["id"]
    r = await agent.post(f"{BASE}/claims", {})
    assert error(r) == (404, "not_found", {"reason": "nothing_ready"})


async def test_named_claim_blocked_by_gate_is_decision_required(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    decision = await open_decision(human, task["id"])
    agent = await service.agent()
    r = await agent.post(f"{BASE}/claims", {"task_id": task["id"]})
    assert error(r) == blocked(decision)


async def test_allow_answer_lets_the_claim_through(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    decision = await open_decision(human, task["id"])
    await allow(human, decision)
    assert (await human.get(task_path(task["id"]))).json()["ready"] is True
    agent = await service.agent()
    assert (await claim(agent))["task"]["id"] == task["id"]


async def test_workflow_claim_is_gated_by_the_subjects_decision(
    service: Service, human: Caller, project: str
) -> None:
    subject = await make_task(human, "feature")
    review = await make_task(human, "review", kind="review", subject_task_id=subject["id"])
    decision = await open_decision(human, subject["id"])
    body = (await human.get(task_path(review["id"]))).json()
    assert body["ready"] is False and body["blocked_by"]["decisions"] == [decision]
    agent = await service.agent()
    r = await agent.post(f"{BASE}/claims", {"task_id": review["id"]})
    assert error(r) == blocked(decision)


async def test_workflow_claim_reports_the_activitys_then_the_subjects_decisions_each_once(
    service: Service, human: Caller, project: str
) -> None:
    subject = await make_task(human, "feature")
    review = await make_task(human, "review", kind="review", subject_task_id=subject["id"])
    # opened a second apart: each task's decisions are reported oldest first
    own = await open_decision(human, review["id"])
    service.clock.advance(seconds=1)
    both = await open_decision(human, review["id"], subject["id"])
    service.clock.advance(seconds=1)
    subjects = await open_decision(human, subject["id"])
    agent = await service.agent()
    r = await agent.post(f"{BASE}/claims", {"task_id": review["id"]})
    assert error(r) == (409, "decision_required", {
        "decision_ids": [own, both, subjects], "truncated": False, "wait_on": WAIT_ON
    })  # fmt: skip
    body = (await human.get(task_path(review["id"]))).json()
    assert body["blocked_by"]["decisions"] == [own, both, subjects]


async def test_submit_is_refused_while_a_decision_blocks_but_renew_checkpoint_release_work(
    service: Service, human: Caller, project: str
) -> None:
    task, agent = await claimed_by_agent(service, human)
    decision = await open_decision(human, task["id"])
    r = await agent.post(task_path(task["id"], "submit"), {"summary": "s"})
    assert error(r) == blocked(decision)
    assert (await agent.post(task_path(task["id"], "renew"))).status_code == 200
    r = await agent.post(task_path(task["id"], "checkpoint"), {"note": "waiting on a decision"})
    assert r.status_code == 200
    assert (await agent.post(task_path(task["id"], "release"))).status_code == 200


async def test_submit_of_activity_is_gated_by_the_subject(
    service: Service, human: Caller, project: str
) -> None:
    subject = await make_task(human, "feature")
    review = await make_task(human, "review", kind="review", subject_task_id=subject["id"])
    agent = await service.agent()
    await claim(agent, review["id"])
    decision = await open_decision(human, subject["id"])
    r = await agent.post(task_path(review["id"], "submit"), {"summary": "s"})
    assert error(r) == blocked(decision)


async def test_recover_stays_open_under_the_gate_but_submit_does_not(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    first, second = await service.agent("first"), await service.agent("second")
    await claim(first, task["id"])
    decision = await open_decision(human, task["id"])
    service.clock.advance(minutes=14)
    await second.post(f"/api/v1/sessions/{second.session_id}/heartbeat")
    service.clock.advance(minutes=2)
    r = await second.post(task_path(task["id"], "recover"))
    assert r.status_code == 200, r.text
    r = await second.post(task_path(task["id"], "submit"), {"summary": "s"})
    assert error(r) == blocked(decision)


async def test_complete_is_gated(service: Service, human: Caller, project: str) -> None:
    task = await make_task(human)
    await claim(human, task["id"])
    await submit(human, task["id"])
    decision = await open_decision(human, task["id"])
    r = await human.post(task_path(task["id"], "complete"))
    assert error(r) == blocked(decision)


async def test_judged_edit_after_allow_blocks_again_but_priority_edit_does_not(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    decision = await open_decision(human, task["id"])
    await allow(human, decision)
    r = await human.patch(task_path(task["id"]), {"expected_revision": 1, "priority": 4})
    assert r.json()["ready"] is True
    r = await human.patch(task_path(task["id"]), {"expected_revision": 2, "title": "changed"})
    assert r.json()["ready"] is False
    assert r.json()["blocked_by"]["decisions"] == [decision]


async def test_publication_prepare_is_gated(human: Caller, project: str) -> None:
    task = await make_task(human)
    decision = await open_decision(human, task["id"])
    r = await human.post(task_path(task["id"], "publication/prepare"))
    assert error(r) == blocked(decision)


@pytest.mark.parametrize("count", [20, 21])
async def test_blocked_by_truncates_past_twenty_decisions(
    human: Caller, project: str, count: int
) -> None:
    """Twenty blockers are all named and nothing was left out: `truncated`
    only past them (the boundary went untested: mutantaudit2)."""
    task = await make_task(human)
    # opened at the same service instant: the stable order falls back to the id
    ids = sorted([await open_decision(human, task["id"]) for _ in range(count)])
    body = (await human.get(task_path(task["id"]))).json()
    assert body["blocked_by"]["decisions"] == ids[:20]
    assert body["blocked_by"]["decisions_truncated"] is (count > 20)
    r = await human.post(f"{BASE}/claims", {"task_id": task["id"]})
    status, code, details = error(r)
    assert (status, code, details["truncated"], details["decision_ids"]) == (
        409, "decision_required", count > 20, ids[:20],
    )  # fmt: skip


async def test_publication_result_and_finalize_are_gated(human: Caller, project: str) -> None:
    # an allow on two tasks; authority taken on one; a judged edit of the other
    # makes the allow stale, which blocks the holder's result and finalize
    held, other = await make_task(human, "held"), await make_task(human, "other")
    decision = await open_decision(human, held["id"], other["id"])
    await allow(human, decision)
    r = await human.post(task_path(held["id"], "publication/prepare"))
    assert r.status_code == 200, r.text
    r = await human.patch(task_path(other["id"]), {"expected_revision": 1, "title": "changed"})
    assert r.status_code == 200, r.text
    r = await human.post(task_path(held["id"], "publication/result"), {"outcome": "succeeded"})
    assert error(r) == blocked(decision, stale=True)
    r = await human.post(task_path(held["id"], "publication/finalize"))
    assert error(r) == blocked(decision, stale=True)


async def test_complete_of_activity_is_gated_by_the_subject(
    service: Service, human: Caller, project: str
) -> None:
    subject = await make_task(human, "feature")
    review = await make_task(human, "review", subject_task_id=subject["id"])
    await claim(human, review["id"])
    await submit(human, review["id"])
    decision = await open_decision(human, subject["id"])
    r = await human.post(task_path(review["id"], "complete"))
    assert error(r) == blocked(decision)


async def test_publication_on_activity_is_gated_by_the_subject(human: Caller, project: str) -> None:
    subject = await make_task(human, "feature")
    review = await make_task(human, "review", subject_task_id=subject["id"])
    decision = await open_decision(human, subject["id"])
    r = await human.post(task_path(review["id"], "publication/prepare"))
    assert error(r) == blocked(decision)


async def test_activity_of_blocked_subject_is_not_ready_and_ordinary_claims_skip_it(
    service: Service, human: Caller, project: str
) -> None:
    subject = await make_task(human, "feature", priority=0)
    review = await make_task(human, "review", subject_task_id=subject["id"], priority=9)
    decision = await open_decision(human, subject["id"])
    body = (await human.get(task_path(review["id"]))).json()
    assert (body["ready"], body["blocked_by"]["decisions"]) == (False, [decision])
    r = await human.post(f"{BASE}/claims", {})
    assert error(r)[2] == {"reason": "nothing_ready"}
