"""Claims: ordinary work selection, named and workflow claims, who may claim."""

from __future__ import annotations

from tests.conftest import Caller, Service
from tests.tasks_support import (
    BASE,
    claim,
    claimed_by_agent,
    error,
    make_task,
    open_decision,
    set_policy,
    submit,
    task_path,
)


async def test_claim_without_task_id_takes_highest_priority_then_oldest(
    service: Service, human: Caller, project: str
) -> None:
    await make_task(human, "low", priority=1)
    first_high = await make_task(human, "high one", priority=5)
    service.clock.advance(seconds=1)
    await make_task(human, "high two", priority=5)
    agent = await service.agent()
    result = await claim(agent)
    assert result["task"]["id"] == first_high["id"]
    assert result["task"]["status"] == "claimed"
    assert result["lease"] == {
        "owner_id": agent.principal_id,
        "session_id": agent.session_id,
        "expires_at": "2026-11-29T18:15:01.000Z",
        "workflow": False,
    }


async def test_lease_length_follows_policy_lease_seconds(
    service: Service, human: Caller, project: str
) -> None:
    await set_policy(human, lease_seconds=60)
    task = await make_task(human)
    agent = await service.agent()
    result = await claim(agent, task["id"])
    assert result["lease"]["expires_at"] == "2026-11-29T18:01:00.000Z"


async def test_claim_with_nothing_ready_is_404_nothing_ready(
    service: Service, human: Caller, project: str
) -> None:
    agent = await service.agent()
    r = await agent.post(f"{BASE}/claims", {})
    assert error(r) == (404, "not_found", {"reason": "nothing_ready"})


async def test_nothing_ready_names_the_tasks_whose_lease_expired(
    service: Service, human: Caller, project: str
) -> None:
    """An agent that stopped heartbeating left its work claimed: no claim
    picks it, and the refusal said only "no task is ready"."""
    await set_policy(human, lease_seconds=60)
    first, second = await make_task(human, "first"), await make_task(human, "second")
    gone = await service.agent("gone")
    await claim(gone, first["id"])
    await claim(gone, second["id"])
    other = await service.agent("other")
    r = await other.post(f"{BASE}/claims", {})
    assert error(r) == (404, "not_found", {"reason": "nothing_ready"})  # leases still live
    # and it says where to look next (it said only "no task is ready")
    assert f"GET {BASE}/digest" in r.json()["error"]["message"]
    service.clock.advance(seconds=61)
    r = await other.post(f"{BASE}/claims", {})
    status, code, details = error(r)
    assert (status, code, details["reason"]) == (404, "not_found", "nothing_ready")
    assert details["expired_leases"] == sorted([first["id"], second["id"]])
    assert "recover" in r.json()["error"]["message"]
    recovered = await other.post(f"{BASE}/tasks/{first['id']}/recover", {})
    assert recovered.status_code == 200, recovered.text
    r = await other.post(f"{BASE}/claims", {})
    assert error(r)[2]["expired_leases"] == [second["id"]]


async def test_claim_accepts_an_empty_body(service: Service, human: Caller, project: str) -> None:
    await make_task(human)
    agent = await service.agent()
    r = await agent.client.post(f"{BASE}/claims", headers=agent.headers("empty-body"))
    assert r.status_code == 200, r.text


async def test_ordinary_claim_walks_past_a_chunk_of_blocked_candidates(
    service: Service, human: Caller, project: str
) -> None:
    # more decision-blocked tasks than one claim statement examines (64)
    blocked = [(await make_task(human, f"b{i}", priority=5))["id"] for i in range(70)]
    await open_decision(human, *blocked)
    low = await make_task(human, "low", priority=1)
    agent = await service.agent()
    assert (await claim(agent))["task"]["id"] == low["id"]


async def test_agent_without_session_cannot_claim(
    service: Service, human: Caller, project: str
) -> None:
    await make_task(human)
    agent = await service.principal("agent")
    r = await agent.post(f"{BASE}/claims", {})
    assert error(r) == (403, "forbidden", {"reason": "session_required"})


async def test_ended_session_is_refused_as_not_live(
    service: Service, human: Caller, project: str
) -> None:
    await make_task(human)
    agent = await service.agent()
    r = await agent.post(f"/api/v1/sessions/{agent.session_id}/end")
    assert r.status_code == 200
    r = await agent.post(f"{BASE}/claims", {})
    assert error(r)[:2] == (403, "forbidden")
    assert error(r)[2]["reason"] == "session_not_live"


async def test_human_claims_without_a_session(human: Caller, project: str) -> None:
    task = await make_task(human)
    result = await claim(human, task["id"])
    assert result["lease"]["owner_id"] == human.principal_id
    assert result["lease"]["session_id"] is None


async def test_named_claim_of_task_held_by_another_is_lease_conflict(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    first, second = await service.agent("a"), await service.agent("b")
    held = await claim(first, task["id"])
    r = await second.post(f"{BASE}/claims", {"task_id": task["id"]})
    status, code, details = error(r)
    assert (status, code, details["reason"]) == (409, "lease_conflict", "held_by_another")
    assert details["expires_at"] == held["lease"]["expires_at"]
    assert r.json()["error"]["message"] == "another principal holds this task"
    # the same agent in another session is another holder too, and told so
    await first.start_session()
    r = await first.post(f"{BASE}/claims", {"task_id": task["id"]})
    assert error(r)[:2] == (409, "lease_conflict")
    assert r.json()["error"]["message"] == (
        "another session of yours holds this task until it lapses"
        " (then recover takes the task over)"
    )


async def test_named_claim_of_a_task_the_caller_holds_is_state_conflict(
    service: Service, human: Caller, project: str
) -> None:
    task, agent = await claimed_by_agent(service, human)
    r = await agent.post(f"{BASE}/claims", {"task_id": task["id"]})
    assert error(r) == (409, "state_conflict", {"reason": "already_claimed"})


async def test_named_claim_lease_conflict_comes_before_the_gate(
    service: Service, human: Caller, project: str
) -> None:
    # a live lease of another is reported as such even when a decision also blocks
    task, _ = await claimed_by_agent(service, human)
    await open_decision(human, task["id"])
    r = await human.post(f"{BASE}/claims", {"task_id": task["id"]})
    assert error(r)[:2] == (409, "lease_conflict")


async def test_named_claim_with_dependency_not_done_is_state_conflict(
    service: Service, human: Caller, project: str
) -> None:
    base = await make_task(human, "base")
    dependent = await make_task(human, "dependent", depends_on=[base["id"]])
    agent = await service.agent()
    r = await agent.post(f"{BASE}/claims", {"task_id": dependent["id"]})
    assert error(r) == (
        409,
        "state_conflict",
        {"reason": "dependencies_not_done", "dependencies": [base["id"]]},
    )


async def test_a_cancelled_dependency_is_not_done(
    service: Service, human: Caller, project: str
) -> None:
    """Section 5: ready needs "every dependency done"; cancelled is no done,
    for the list, the ordinary claim and the named one alike (the stored
    form of the rule could have counted it unnoticed: mutantaudit2)."""
    base = await make_task(human, "base")
    dependent = await make_task(human, "dependent", depends_on=[base["id"]])
    r = await human.patch(
        task_path(base["id"]), {"expected_revision": base["revision"], "status": "cancelled"}
    )
    assert r.status_code == 200, r.text
    ready = (await human.get(f"{BASE}/tasks", ready="true")).json()["items"]
    assert ready == []
    assert (await human.get(task_path(dependent["id"]))).json()["ready"] is False
    agent = await service.agent()
    r = await agent.post(f"{BASE}/claims", {})
    assert error(r) == (404, "not_found", {"reason": "nothing_ready"})
    r = await agent.post(f"{BASE}/claims", {"task_id": dependent["id"]})
    assert error(r) == (
        409,
        "state_conflict",
        {"reason": "dependencies_not_done", "dependencies": [base["id"]]},
    )


async def test_an_ordinary_claim_never_takes_another_projects_task(
    service: Service, human: Caller, project: str
) -> None:
    r = await human.post("/api/v1/projects", {"id": "other", "name": "Other"})
    assert r.status_code == 201, r.text
    r = await human.post("/api/v1/projects/other/tasks", {"title": "their work"})
    assert r.status_code == 201, r.text
    theirs = r.json()
    agent = await service.agent()
    r = await agent.post(f"{BASE}/claims", {})
    assert error(r) == (404, "not_found", {"reason": "nothing_ready"})
    r = await human.get(f"/api/v1/projects/other/tasks/{theirs['id']}")
    assert r.json()["status"] == "open" and r.json()["lease"] is None


async def test_ordinary_claim_skips_task_whose_dependency_is_not_done(
    service: Service, human: Caller, project: str
) -> None:
    base = await make_task(human, "base", priority=0)
    await make_task(human, "dependent", priority=9, depends_on=[base["id"]])
    agent = await service.agent()
    assert (await claim(agent))["task"]["id"] == base["id"]


async def test_dependent_becomes_ready_once_dependency_is_done(
    service: Service, human: Caller, project: str
) -> None:
    base = await make_task(human, "base")
    dependent = await make_task(human, "dependent", depends_on=[base["id"]])
    assert dependent["ready"] is False
    assert dependent["blocked_by"]["dependencies"] == [base["id"]]
    await claim(human, base["id"])
    await submit(human, base["id"])
    r = await human.post(task_path(base["id"], "complete"))
    assert r.status_code == 200, r.text
    again = (await human.get(task_path(dependent["id"]))).json()
    assert again["ready"] is True and again["blocked_by"]["dependencies"] == []


async def test_named_claim_of_submitted_task_is_state_conflict_not_open(
    human: Caller, project: str
) -> None:
    task = await make_task(human)
    await claim(human, task["id"])
    await submit(human, task["id"])
    r = await human.post(f"{BASE}/claims", {"task_id": task["id"]})
    assert error(r) == (409, "state_conflict", {"reason": "not_open", "status": "submitted"})


async def test_claim_of_unknown_task_is_404(human: Caller, project: str) -> None:
    r = await human.post(f"{BASE}/claims", {"task_id": "task_nope"})
    assert r.status_code == 404


async def test_claim_of_activity_is_a_workflow_claim(
    service: Service, human: Caller, project: str
) -> None:
    subject = await make_task(human, "feature")
    review = await make_task(human, "review it", kind="review", subject_task_id=subject["id"])
    agent = await service.agent()
    result = await claim(agent, review["id"])
    assert result["lease"]["workflow"] is True
    assert result["task"]["subject_task_id"] == subject["id"]


async def test_named_claim_of_expired_lease_is_state_conflict_pointing_to_recover(
    service: Service, human: Caller, project: str
) -> None:
    # an expired lease is held by nobody: not "another holds it" (lease_conflict)
    # but "not ready for another reason" (section 13)
    task, _agent = await claimed_by_agent(service, human)
    service.clock.advance(minutes=16)
    r = await human.post(f"{BASE}/claims", {"task_id": task["id"]})
    status, code, details = error(r)
    assert (status, code, details["reason"]) == (409, "state_conflict", "lease_expired")
