"""Owner operations on a lease (renew, checkpoint, release), recover, submit and complete."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.tasks_support import (
    BASE,
    allow,
    claim,
    claimed_by_agent,
    decline,
    error,
    make_task,
    open_decision,
    set_policy,
    submit,
    task_path,
    wait_until,
)
from waypost.resolvers.tasks.leases import EXPIRED_LEASES_NAMED


async def test_task_json_lease_is_exactly_the_contract_lease_even_when_expired(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    agent = await service.agent()
    lease = (await claim(agent, task["id"]))["lease"]
    assert (await human.get(task_path(task["id"]))).json()["lease"] == lease
    service.clock.advance(minutes=16)
    assert (await human.get(task_path(task["id"]))).json()["lease"] == lease
    assert set(lease) == {"owner_id", "session_id", "expires_at", "workflow"}


async def test_action_routes_accept_no_body_at_all(human: Caller, project: str) -> None:
    task = await make_task(human)
    await claim(human, task["id"])
    for action in ("renew", "publication/prepare", "publication/finalize", "release"):
        r = await human.client.post(task_path(task["id"], action), headers=human.headers(action))
        assert r.status_code == 200, (action, r.text)


async def test_renew_extends_the_lease_from_now(
    service: Service, human: Caller, project: str
) -> None:
    task, agent = await claimed_by_agent(service, human)
    service.clock.advance(minutes=10)
    r = await agent.post(task_path(task["id"], "renew"))
    assert r.status_code == 200, r.text
    assert r.json()["lease"]["expires_at"] == "2026-11-29T18:25:00.000Z"


async def test_renew_by_another_principal_is_lease_conflict(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    owner, other = await service.agent("a"), await service.agent("b")
    await claim(owner, task["id"])
    r = await other.post(task_path(task["id"], "renew"))
    assert error(r)[:2] == (409, "lease_conflict")


async def test_same_agent_in_another_session_is_not_the_owner(
    service: Service, human: Caller, project: str
) -> None:
    task, agent = await claimed_by_agent(service, human)
    await agent.start_session()
    r = await agent.post(task_path(task["id"], "release"))
    assert error(r)[:2] == (409, "lease_conflict")


async def test_owner_agent_without_session_header_is_session_required(
    service: Service, human: Caller, project: str
) -> None:
    task, agent = await claimed_by_agent(service, human)
    agent.session_id = None
    r = await agent.post(task_path(task["id"], "submit"), {"summary": "s"})
    assert error(r) == (403, "forbidden", {"reason": "session_required"})


@pytest.mark.parametrize(
    ("action", "body"),
    [("renew", {}), ("checkpoint", {"note": "n"}), ("release", {}), ("submit", {"summary": "s"}),
     ("recover", {}), ("complete", {})],
)  # fmt: skip
async def test_every_ownership_operation_needs_the_agents_session(
    service: Service, human: Caller, project: str, action: str, body: dict[str, str]
) -> None:
    await set_policy(human, review_mode="none")
    task, agent = await claimed_by_agent(service, human)
    if action == "complete":
        await submit(agent, task["id"])
    if action == "recover":
        service.clock.advance(minutes=16)
    agent.session_id = None
    r = await agent.post(task_path(task["id"], action), body)
    assert error(r) == (403, "forbidden", {"reason": "session_required"})


async def test_renew_after_expiry_is_refused(service: Service, human: Caller, project: str) -> None:
    task, agent = await claimed_by_agent(service, human)
    service.clock.advance(minutes=14)
    await agent.post(f"/api/v1/sessions/{agent.session_id}/heartbeat")
    service.clock.advance(minutes=2)
    r = await agent.post(task_path(task["id"], "renew"))
    status, code, details = error(r)
    assert (status, code, details["reason"]) == (409, "lease_conflict", "lease_expired")


async def test_at_the_instant_a_lease_expires_it_has_expired(
    service: Service, human: Caller, project: str
) -> None:
    """`expires_at` is the first instant the lease no longer holds: then its
    owner can no longer renew it and another agent may recover it; a
    millisecond before, it is live (no test pinned either edge)."""
    task, agent = await claimed_by_agent(service, human)
    other = await service.agent("other")
    lease = (await agent.get(task_path(task["id"]))).json()["lease"]
    # both sessions outlive the lease
    await wait_until(service, lease["expires_at"], agent, other, short_by_seconds=0.001)
    status, code, details = error(await other.post(task_path(task["id"], "recover")))
    assert (status, code, details["reason"]) == (409, "lease_conflict", "lease_live")
    service.clock.advance(seconds=0.001)
    assert service.clock.iso() == lease["expires_at"]
    # an ordinary claim's refusal names it among the expired leases then too
    status, code, details = error(await other.post("/api/v1/projects/demo/claims", {}))
    assert (status, details.get("expired_leases")) == (404, [task["id"]]), details
    status, code, details = error(await agent.post(task_path(task["id"], "renew")))
    assert (status, code, details["reason"]) == (409, "lease_conflict", "lease_expired")
    recovered = await other.post(task_path(task["id"], "recover"))
    assert recovered.status_code == 200, recovered.text
    assert recovered.json()["lease"]["owner_id"] == other.principal_id


@pytest.mark.parametrize(("action", "body"), [("checkpoint", {"note": "  "}),
                                            ("submit", {"summary": "\n\t"})])  # fmt: skip
async def test_a_blank_note_or_summary_is_refused(
    service: Service, human: Caller, project: str, action: str, body: dict[str, str]
) -> None:
    """A summary of whitespace was accepted (a submission that says nothing),
    where a decision's rationale refuses one."""
    task, agent = await claimed_by_agent(service, human)
    r = await agent.post(task_path(task["id"], action), body)
    assert r.status_code == 400 and r.json()["error"]["details"] == {"field": next(iter(body))}
    assert (await agent.get(task_path(task["id"]))).json()["status"] == "claimed"


async def test_checkpoint_records_a_note_listed_newest_first(
    service: Service, human: Caller, project: str
) -> None:
    task, agent = await claimed_by_agent(service, human)
    for note in ("parsed the input", "wrote the tests"):
        r = await agent.post(task_path(task["id"], "checkpoint"), {"note": note})
        assert r.status_code == 200, r.text
        assert r.json()["checkpoint"]["note"] == note
    listed = (await human.get(task_path(task["id"], "checkpoints"))).json()
    assert [c["note"] for c in listed["items"]] == ["wrote the tests", "parsed the input"]
    assert listed["items"][0]["actor_session_id"] == agent.session_id


async def test_checkpoint_needs_a_note(service: Service, human: Caller, project: str) -> None:
    task = await make_task(human)
    await claim(human, task["id"])
    r = await human.post(task_path(task["id"], "checkpoint"), {})
    assert error(r) == (400, "invalid_request", {"field": "note"})


async def test_release_makes_the_task_open_and_ready_again(
    service: Service, human: Caller, project: str
) -> None:
    task, agent = await claimed_by_agent(service, human)
    r = await agent.post(task_path(task["id"], "release"))
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["status"], body["lease"], body["ready"]) == ("open", None, True)


async def test_release_of_unclaimed_task_is_state_conflict(human: Caller, project: str) -> None:
    task = await make_task(human)
    r = await human.post(task_path(task["id"], "release"))
    assert error(r) == (409, "state_conflict", {"reason": "not_claimed", "status": "open"})


async def test_expired_lease_is_shown_and_task_is_not_ready(
    service: Service, human: Caller, project: str
) -> None:
    task, _agent = await claimed_by_agent(service, human)
    service.clock.advance(minutes=16)
    body = (await human.get(task_path(task["id"]))).json()
    assert body["status"] == "claimed" and body["lease"]["expires_at"] < service.clock.iso()
    assert body["ready"] is False
    r = await human.post(f"{BASE}/claims", {})
    assert error(r)[2] == {"reason": "nothing_ready", "expired_leases": [task["id"]],
                           "expired_leases_truncated": False,
                           "expired_leases_held": []}  # fmt: skip


async def test_recover_by_another_principal_then_first_owner_submit_is_refused(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    first, second = await service.agent("first"), await service.agent("second")
    await claim(first, task["id"])
    r = await first.post(task_path(task["id"], "checkpoint"), {"note": "half way"})
    assert r.status_code == 200
    # the first owner goes away; its session lives on through heartbeats elsewhere
    service.clock.advance(minutes=14)
    await first.post(f"/api/v1/sessions/{first.session_id}/heartbeat")
    await second.post(f"/api/v1/sessions/{second.session_id}/heartbeat")
    service.clock.advance(minutes=2)
    r = await second.post(task_path(task["id"], "recover"))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["lease"]["owner_id"] == second.principal_id
    assert body["previous_lease"]["owner_id"] == first.principal_id
    assert [c["note"] for c in body["checkpoints"]] == ["half way"]
    r = await first.post(task_path(task["id"], "submit"), {"summary": "late"})
    status, code, details = error(r)
    assert (status, code, details["reason"]) == (409, "lease_conflict", "held_by_another")
    assert details["expires_at"] == body["lease"]["expires_at"]  # when it may be recovered
    assert (await submit(second, task["id"]))["submission"]["actor_id"] == second.principal_id


async def test_first_owner_submit_after_expiry_is_refused_even_unrecovered(
    service: Service, human: Caller, project: str
) -> None:
    task, agent = await claimed_by_agent(service, human)
    service.clock.advance(minutes=14)
    await agent.post(f"/api/v1/sessions/{agent.session_id}/heartbeat")
    service.clock.advance(minutes=2)
    r = await agent.post(task_path(task["id"], "submit"), {"summary": "late"})
    status, code, details = error(r)
    assert (status, code, details["reason"]) == (409, "lease_conflict", "lease_expired")


async def test_recover_of_live_lease_is_lease_conflict(
    service: Service, human: Caller, project: str
) -> None:
    task, _agent = await claimed_by_agent(service, human)
    r = await human.post(task_path(task["id"], "recover"))
    status, code, details = error(r)
    assert (status, code, details["reason"]) == (409, "lease_conflict", "lease_live")


async def test_recover_of_your_own_live_lease_says_you_hold_it(
    service: Service, human: Caller, project: str
) -> None:
    """It said another held the lease (`lease_live`, an MCP agent's advice:
    give the task up), to an agent unsure whether its lease outlived a pause
    (mcpclockaudit); a named claim answers the same case `already_claimed`.
    The same agent in another session is not the holder."""
    task, agent = await claimed_by_agent(service, human)
    r = await agent.post(task_path(task["id"], "recover"))
    assert error(r) == (409, "state_conflict", {"reason": "already_claimed"})
    assert (await agent.post(task_path(task["id"], "renew"))).status_code == 200
    agent.session_id = (await agent.post("/api/v1/sessions")).json()["id"]
    status, code, details = error(await agent.post(task_path(task["id"], "recover")))
    assert (status, code, details["reason"]) == (409, "lease_conflict", "lease_live")


async def test_recover_of_open_task_is_state_conflict(human: Caller, project: str) -> None:
    task = await make_task(human)
    r = await human.post(task_path(task["id"], "recover"))
    assert error(r)[:2] == (409, "state_conflict")


async def test_submit_records_submission_and_ends_the_lease(
    service: Service, human: Caller, project: str
) -> None:
    task, agent = await claimed_by_agent(service, human)
    r = await agent.post(task_path(task["id"], "submit"), {"summary": "all green", "lessons": []})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"submission", "task", "lessons"}
    submission = body["submission"]
    assert set(submission) == {
        "id", "task_id", "task_revision", "summary", "actor_id", "actor_session_id", "at"
    }  # fmt: skip
    assert (submission["task_revision"], submission["actor_session_id"]) == (1, agent.session_id)
    assert (body["task"]["status"], body["task"]["lease"]) == ("submitted", None)
    listed = (await human.get(task_path(task["id"], "submissions"))).json()
    assert [s["id"] for s in listed["items"]] == [submission["id"]]


async def test_a_submit_naming_the_revision_it_answers_is_refused_once_the_task_changed(
    service: Service, human: Caller, project: str
) -> None:
    """tasks.md, Submit: anyone may edit a claimed task's judged fields;
    a holder that names the revision its work answers is told the task
    moved on, and nothing is written; without it the submission is pinned
    to the task's current revision (collabjourney: work on "refunds within
    1 day" was recorded against revision 2's "within 1 hour")."""
    task, agent = await claimed_by_agent(service, human)
    edit = {"expected_revision": 1, "acceptance_criteria": ["refunds within 1 hour"]}
    assert (await human.patch(task_path(task["id"]), edit)).status_code == 200
    body = {"summary": "done against revision 1", "expected_revision": 1}
    status, code, details = error(await agent.post(task_path(task["id"], "submit"), body))
    assert (status, code, details) == (
        409, "revision_conflict", {"expected_revision": 1, "current_revision": 2}
    )  # fmt: skip
    after = (await human.get(task_path(task["id"]))).json()
    assert after["status"] == "claimed" and after["lease"]["owner_id"] == agent.principal_id
    assert (await human.get(task_path(task["id"], "submissions"))).json()["items"] == []
    body["expected_revision"] = 2
    r = await agent.post(task_path(task["id"], "submit"), body)
    assert r.status_code == 200, r.text
    assert r.json()["submission"]["task_revision"] == 2


async def test_submit_refuses_more_than_50_lessons(human: Caller, project: str) -> None:
    task = await make_task(human)
    await claim(human, task["id"])
    body = {"summary": "s", "lessons": [{} for _ in range(51)]}
    r = await human.post(task_path(task["id"], "submit"), body)
    assert error(r) == (400, "invalid_request", {"field": "lessons"})


async def test_submit_refuses_lessons_that_are_not_objects(human: Caller, project: str) -> None:
    task = await make_task(human)
    await claim(human, task["id"])
    r = await human.post(task_path(task["id"], "submit"), {"summary": "s", "lessons": ["x"]})
    assert error(r) == (400, "invalid_request", {"field": "lessons[0]"})


async def test_submit_without_claim_is_state_conflict(human: Caller, project: str) -> None:
    task = await make_task(human)
    r = await human.post(task_path(task["id"], "submit"), {"summary": "s"})
    assert error(r)[:2] == (409, "state_conflict")


@pytest.mark.parametrize(
    ("mode", "refused", "allowed"),
    [("human", ["worker", "reviewer"], "human"), ("none", ["human", "reviewer"], "worker"),
     ("any", ["worker"], "reviewer"), ("any", ["worker"], "human")],
)  # fmt: skip
async def test_complete_follows_the_review_mode_read_at_completion(
    service: Service, human: Caller, project: str, mode: str, refused: list[str], allowed: str
) -> None:
    task = await make_task(human)
    callers = {
        "human": human,
        "worker": await service.agent("w"),
        "reviewer": await service.agent("r"),
    }
    await claim(callers["worker"], task["id"])
    await submit(callers["worker"], task["id"])
    await set_policy(human, review_mode=mode)  # after the submission: completion reads it
    for name in refused:
        r = await callers[name].post(task_path(task["id"], "complete"))
        assert error(r) == (403, "forbidden", {"reason": "review_mode", "review_mode": mode})
    r = await callers[allowed].post(task_path(task["id"], "complete"))
    assert r.status_code == 200 and r.json()["status"] == "done"


async def test_the_latest_submitter_is_the_last_to_submit_whatever_the_clock(
    service: Service, human: Caller, project: str
) -> None:
    """After an NTP step back, the earlier submission (with the later time)
    was taken as the latest: under review_mode any its submitter was refused
    and the latest submitter completed its own work."""
    await set_policy(human, review_mode="any")
    task = await make_task(human)
    first, second = await service.agent("first"), await service.agent("second")
    await claim(first, task["id"])
    await submit(first, task["id"])
    current = (await human.get(task_path(task["id"]))).json()
    reopened = {"expected_revision": current["revision"], "status": "open"}
    assert (await human.patch(task_path(task["id"]), reopened)).status_code == 200
    service.clock.advance(minutes=-5)
    await claim(second, task["id"])
    await submit(second, task["id"])
    r = await second.post(task_path(task["id"], "complete"))
    assert error(r) == (403, "forbidden", {"reason": "review_mode", "review_mode": "any"})
    r = await first.post(task_path(task["id"], "complete"))
    assert r.status_code == 200 and r.json()["status"] == "done"


async def test_a_human_submitter_completes_its_own_work_under_review_mode_human(
    human: Caller, project: str
) -> None:
    task = await make_task(human)
    await claim(human, task["id"])
    await submit(human, task["id"])
    r = await human.post(task_path(task["id"], "complete"))
    assert r.status_code == 200, r.text


async def test_complete_of_unsubmitted_task_is_state_conflict(human: Caller, project: str) -> None:
    task = await make_task(human)
    r = await human.post(task_path(task["id"], "complete"))
    assert error(r) == (409, "state_conflict", {"reason": "not_submitted", "status": "open"})


async def test_each_workflow_step_writes_its_event(
    service: Service, human: Caller, project: str
) -> None:
    task, agent = await claimed_by_agent(service, human)
    await agent.post(task_path(task["id"], "renew"))
    await agent.post(task_path(task["id"], "checkpoint"), {"note": "n"})
    await agent.post(task_path(task["id"], "release"))
    await claim(agent, task["id"])
    await submit(agent, task["id"])
    await human.post(task_path(task["id"], "complete"))
    events = (await human.get(f"{BASE}/events")).json()["items"]
    types = [e["type"] for e in events if e["subject_id"] == task["id"]]
    assert types == [
        "task.created", "task.claimed", "task.renewed", "task.checkpointed", "task.released",
        "task.claimed", "task.submitted", "task.completed",
    ]  # fmt: skip
    claimed = next(e for e in events if e["type"] == "task.claimed")
    assert claimed["actor_session_id"] == agent.session_id


async def test_a_completion_names_the_tasks_waiting_on_it(
    service: Service, human: Caller, project: str
) -> None:
    """`task.completed` names its open dependents, oldest first, so that a
    follower re-reads those and not the whole project; done and cancelled
    ones are not named, and past 100 the list is cut and says so."""
    task, agent = await claimed_by_agent(service, human)
    waiting = []
    for i in range(101):
        waiting.append((await make_task(human, f"after {i}", depends_on=[task["id"]]))["id"])
        service.clock.advance(seconds=1)
    cancelled = await make_task(human, "dropped", depends_on=[task["id"]])
    r = await human.patch(
        task_path(cancelled["id"]), {"expected_revision": 1, "status": "cancelled"}
    )
    assert r.status_code == 200, r.text
    await submit(agent, task["id"])
    assert (await human.post(task_path(task["id"], "complete"))).status_code == 200
    events = (await human.get(f"{BASE}/events", limit="200")).json()["items"]
    [completed] = [e for e in events if e["type"] == "task.completed"]
    assert completed["data"]["dependent_task_ids"] == waiting[:100]
    assert completed["data"]["dependents_truncated"] is True


async def test_a_completion_with_nothing_waiting_names_no_task(
    service: Service, human: Caller, project: str
) -> None:
    task, agent = await claimed_by_agent(service, human)
    await submit(agent, task["id"])
    assert (await human.post(task_path(task["id"], "complete"))).status_code == 200
    events = (await human.get(f"{BASE}/events")).json()["items"]
    [completed] = [e for e in events if e["type"] == "task.completed"]
    assert completed["data"]["dependent_task_ids"] == []
    assert completed["data"]["dependents_truncated"] is False


async def test_replayed_renew_does_not_extend_the_lease_again(
    service: Service, human: Caller, project: str
) -> None:
    task, agent = await claimed_by_agent(service, human)
    service.clock.advance(minutes=5)
    first = await agent.post(task_path(task["id"], "renew"), key="renew-1")
    service.clock.advance(minutes=5)
    again = await agent.post(task_path(task["id"], "renew"), key="renew-1")
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert again.json() == first.json()
    current = (await agent.get(task_path(task["id"]))).json()
    assert current["lease"]["expires_at"] == "2026-11-29T18:20:00.000Z"


async def test_invalid_lesson_rolls_back_the_whole_submission(
    service: Service, human: Caller, project: str
) -> None:
    task, agent = await claimed_by_agent(service, human)
    body = {"summary": "s", "lessons": [{"kind": "lesson", "title": "", "body": "b"}]}
    r = await agent.post(task_path(task["id"], "submit"), body)
    assert error(r)[:2] == (400, "invalid_request")
    current = (await human.get(task_path(task["id"]))).json()
    assert current["status"] == "claimed" and current["lease"]["owner_id"] == agent.principal_id
    listed = (await human.get(task_path(task["id"], "submissions"))).json()
    assert listed["items"] == []


async def test_submit_with_lessons_and_recover_write_one_event_each(
    service: Service, human: Caller, project: str
) -> None:
    task, _agent = await claimed_by_agent(service, human)
    service.clock.advance(minutes=16)
    before = len((await human.get(f"{BASE}/events", limit="200")).json()["items"])
    r = await human.post(task_path(task["id"], "recover"))
    assert r.status_code == 200, r.text
    lesson = {"kind": "lesson", "title": "t", "body": "b"}
    r = await human.post(
        task_path(task["id"], "submit"), {"summary": "s", "lessons": [lesson, lesson]}
    )
    assert r.status_code == 200, r.text
    events = (await human.get(f"{BASE}/events", limit="200")).json()["items"][before:]
    assert [e["type"] for e in events] == ["task.recovered", "task.submitted"]


async def test_a_claimed_event_says_whether_the_claim_named_its_task(
    service: Service, human: Caller, project: str
) -> None:
    """`task.claimed` says whether the claim named its task (docs/api.md, the
    event table: `named`, a claim of this task, not of the next ready one;
    eventaudit: no test pinned it)."""
    agent = await service.agent()
    first = await make_task(human, "first")
    second = await make_task(human, "second")
    after = (await human.get(f"{BASE}/events")).json()["next_after"]
    await claim(agent)  # the next ready one: `first`, the oldest
    r = await agent.post(task_path(first["id"], "release"))
    assert r.status_code == 200, r.text
    await claim(agent, second["id"])
    items = (await human.get(f"{BASE}/events", after=after)).json()["items"]
    claimed = [(e["subject_id"], e["data"]) for e in items if e["type"] == "task.claimed"]
    assert [(subject, data["named"]) for subject, data in claimed] == [
        (first["id"], False),
        (second["id"], True),
    ]
    assert all(
        {"owner_id", "session_id", "expires_at", "workflow", "named"} <= set(data)
        for _, data in claimed
    )
    assert all(data["session_id"] == agent.session_id for _, data in claimed)


async def test_a_named_claim_at_the_instant_a_lease_expires_is_lease_expired(
    service: Service, human: Caller, project: str
) -> None:
    """tasks.md, Leases: a named claim refuses a stale lease first
    (`409 state_conflict`, reason `lease_expired`: use `recover`), and
    `expires_at` is the first instant the lease no longer holds. At that
    instant neither its owner (`already_claimed`) nor another agent
    (`held_by_another`, told to wait until that very instant) is refused
    as if it were live."""
    task, agent = await claimed_by_agent(service, human)
    other = await service.agent("other")
    lease = (await agent.get(task_path(task["id"]))).json()["lease"]
    # both sessions outlive the lease
    await wait_until(service, lease["expires_at"], agent, other, short_by_seconds=0.001)
    status, code, details = error(await other.post(f"{BASE}/claims", {"task_id": task["id"]}))
    assert (status, code, details["reason"]) == (409, "lease_conflict", "held_by_another")
    service.clock.advance(seconds=0.001)
    assert service.clock.iso() == lease["expires_at"]
    for caller in (agent, other):
        status, code, details = error(await caller.post(f"{BASE}/claims", {"task_id": task["id"]}))
        assert (status, code, details["reason"]) == (409, "state_conflict", "lease_expired")


async def test_nothing_ready_names_the_longest_lapsed_lease_first(
    service: Service, human: Caller, project: str
) -> None:
    """tasks.md, Leases: `details.expired_leases` lists the lapsed leases
    longest lapsed first (the one an agent should recover first), not by id."""
    first = (await human.post(f"{BASE}/tasks", {"title": "made first"})).json()
    second = (await human.post(f"{BASE}/tasks", {"title": "made second"})).json()
    agent = await service.agent("holder")
    await claim(agent, second["id"])  # lapses first
    service.clock.advance(minutes=1)
    await claim(agent, first["id"])
    service.clock.advance(minutes=20)
    other = await service.agent("poller")
    status, _, details = error(await other.post(f"{BASE}/claims", {}))
    assert (status, details["reason"]) == (404, "nothing_ready")
    assert details["expired_leases"] == [second["id"], first["id"]]
    assert details["expired_leases_truncated"] is False


async def test_nothing_ready_says_which_lapsed_leases_a_decision_holds(
    service: Service, human: Caller, project: str
) -> None:
    """tasks.md, Leases: a recovery ignores decisions, so the refusal names
    the lapsed tasks the gate holds (`expired_leases_held`) and where to
    look: an agent sent to recover a denied task recovered work it could
    not submit (collabjourney)."""
    denied = (await human.post(f"{BASE}/tasks", {"title": "denied"})).json()
    free = (await human.post(f"{BASE}/tasks", {"title": "free"})).json()
    agent = await service.agent("holder")
    await claim(agent, denied["id"])
    await claim(agent, free["id"])
    await decline(human, await open_decision(agent, denied["id"]))
    service.clock.advance(minutes=20)
    other = await service.agent("poller")
    status, _, details = error(await other.post(f"{BASE}/claims", {}))
    assert (status, details["reason"]) == (404, "nothing_ready")
    # the one an agent can finish first, though it lapsed at the same instant
    assert details["expired_leases"] == [free["id"], denied["id"]]
    assert details["expired_leases_held"] == [denied["id"]]
    message = (await other.post(f"{BASE}/claims", {})).json()["error"]["message"]
    assert "1 of them (details.expired_leases_held) wait on a decision" in message
    assert f"GET {BASE}/digest" in message


async def test_lapsed_leases_a_decision_holds_never_hide_one_it_does_not(
    service: Service, human: Caller, project: str
) -> None:
    """Held lapsed tasks are left alone (the advice says so), so they are the
    oldest: named longest lapsed first, 21 of them filled every place, and
    a task lapsed later that nothing holds was never named nor offered
    (review71). Those no decision holds come first."""
    agent = await service.agent("holder")
    held = []
    for i in range(EXPIRED_LEASES_NAMED + 1):
        task = (await human.post(f"{BASE}/tasks", {"title": f"held {i}"})).json()
        await claim(agent, task["id"])
        held.append(task["id"])
    for part in (held[:11], held[11:]):
        await decline(human, await open_decision(agent, *part))
    service.clock.advance(minutes=1)
    free = (await human.post(f"{BASE}/tasks", {"title": "free"})).json()
    await claim(agent, free["id"])
    service.clock.advance(minutes=20)
    other = await service.agent("poller")
    status, _, details = error(await other.post(f"{BASE}/claims", {}))
    assert (status, details["reason"]) == (404, "nothing_ready")
    assert details["expired_leases"][0] == free["id"]
    assert details["expired_leases"][1:] == held[: EXPIRED_LEASES_NAMED - 1]
    assert details["expired_leases_truncated"] is True
    assert details["expired_leases_held"] == held[: EXPIRED_LEASES_NAMED - 1]


async def test_expired_leases_held_is_the_gate_a_submit_meets(
    service: Service, human: Caller, project: str
) -> None:
    """`expired_leases_held` reads the gate as the claim does: an allow past
    its `expires_at`, an allow made stale by a judged edit and an activity
    whose subject a decision holds are held (each recovered is refused at
    its submit), an allow that a priority edit left current is not."""
    names = ("lapsed allow", "stale allow", "subject", "activity", "reprioritised")
    made: dict[str, str] = {}
    for name in names:
        extra = {"subject_task_id": made["subject"]} if name == "activity" else {}
        made[name] = (await make_task(human, name, **extra))["id"]
    holder = await service.agent("holder")
    for name in names:
        await claim(holder, made[name])
    r = await human.post(
        f"{BASE}/decisions",
        {"question": "Ship it?", "options": ["Proceed", "Stop"], "rationale": "risky",
         "required_actor": "human", "task_ids": [made["lapsed allow"]],
         "environment": "staging", "expires_at": "2026-11-29T18:10:00.000Z"},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    await allow(human, r.json()["id"])
    for name in ("stale allow", "reprioritised"):
        await allow(human, await open_decision(human, made[name]))
    await open_decision(human, made["subject"])  # pending: holds the activity too
    edits: dict[str, dict[str, Any]] = {
        "stale allow": {"title": "renamed"},
        "reprioritised": {"priority": 5},
    }
    for name, edit in edits.items():
        r = await human.patch(task_path(made[name]), {"expected_revision": 1, **edit})
        assert r.status_code == 200, r.text
    service.clock.advance(minutes=20)
    poller = await service.agent("poller")
    _, _, details = error(await poller.post(f"{BASE}/claims", {}))
    by_id = {made[name]: name for name in names}
    assert sorted(by_id[i] for i in details["expired_leases"]) == sorted(names)
    held = sorted(by_id[i] for i in details["expired_leases_held"])
    assert held == ["activity", "lapsed allow", "stale allow", "subject"]
    for name in names:  # as each recovered task's submit finds it
        assert (await poller.post(task_path(made[name], "recover"))).status_code == 200
        r = await poller.post(task_path(made[name], "submit"), {"summary": "done"})
        refused = r.status_code == 409 and r.json()["error"]["code"] == "decision_required"
        assert refused is (name in held), (name, r.text)


async def test_a_submit_behind_an_edit_is_a_revision_conflict_before_the_gate(
    service: Service, human: Caller, project: str
) -> None:
    """tasks.md, Submit: the revision is checked before the decision gate, so
    a judged edit that also made the task's allow stale is reported as the
    edit (what the holder must read first), and a revision ahead of the task
    is refused too, as PATCH refuses one."""
    task, agent = await claimed_by_agent(service, human)
    await allow(human, await open_decision(human, task["id"]))
    r = await human.patch(task_path(task["id"]), {"expected_revision": 1, "title": "renamed"})
    assert r.status_code == 200, r.text
    path = task_path(task["id"], "submit")
    for expected in (1, 3):
        r = await agent.post(path, {"summary": "done", "expected_revision": expected})
        assert error(r) == (
            409, "revision_conflict", {"expected_revision": expected, "current_revision": 2}
        ), r.text  # fmt: skip
    assert "was never at revision 3" in r.json()["error"]["message"]
    r = await agent.post(path, {"summary": "done", "expected_revision": 2})
    assert error(r)[:2] == (409, "decision_required")  # now the gate: the allow is stale
    after = (await human.get(task_path(task["id"]))).json()
    assert after["status"] == "claimed" and after["lease"]["owner_id"] == agent.principal_id


async def test_recover_answers_the_latest_20_checkpoints(
    service: Service, human: Caller, project: str
) -> None:
    """tasks.md, Leases: `recover` answers the lapsed lease and the latest
    20 checkpoints (newest first, as the checkpoint list), not more."""
    task, agent = await claimed_by_agent(service, human)
    for i in range(22):
        r = await agent.post(task_path(task["id"], "checkpoint"), {"note": f"step {i}"})
        assert r.status_code == 200, r.text
    service.clock.advance(minutes=16)
    other = await service.agent("other")
    r = await other.post(task_path(task["id"], "recover"))
    assert r.status_code == 200, r.text
    notes = [c["note"] for c in r.json()["checkpoints"]]
    assert notes == [f"step {i}" for i in range(21, 1, -1)]


async def test_nothing_ready_names_at_most_20_lapsed_leases(
    service: Service, human: Caller, project: str
) -> None:
    """tasks.md, Leases: at most 20 lapsed leases are named, and
    `expired_leases_truncated` says there are more (21 here)."""
    agent = await service.agent("holder")
    made = []
    for i in range(21):
        task = (await human.post(f"{BASE}/tasks", {"title": f"task {i}"})).json()
        await claim(agent, task["id"])
        made.append(task["id"])
        service.clock.advance(seconds=1)
    service.clock.advance(minutes=16)
    other = await service.agent("poller")
    status, _, details = error(await other.post(f"{BASE}/claims", {}))
    assert (status, details["reason"]) == (404, "nothing_ready")
    assert details["expired_leases"] == made[:20]
    assert details["expired_leases_truncated"] is True


async def test_a_lapsed_lease_whose_allow_expired_is_named_after_one_nothing_holds(
    service: Service, human: Caller, project: str
) -> None:
    """An allow past its `expires_at` holds the task as a decline does
    (`expired_leases_held`), so it is named with the held ones, after a task
    nothing holds that lapsed later: its stored `gate_held` is 0, only its
    `gate_expires` says so (review72: ordering by `gate_held` alone passed
    every other test)."""
    holder = await service.agent("holder")
    lapsed_allow = (await make_task(human, "lapsed allow"))["id"]
    await claim(holder, lapsed_allow)
    r = await human.post(
        f"{BASE}/decisions",
        {"question": "Ship it?", "options": ["Proceed", "Stop"], "rationale": "risky",
         "required_actor": "human", "task_ids": [lapsed_allow],
         "environment": "staging", "expires_at": "2026-11-29T18:10:00.000Z"},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    await allow(human, r.json()["id"])
    service.clock.advance(minutes=1)
    free = (await make_task(human, "free"))["id"]
    await claim(holder, free)
    service.clock.advance(minutes=20)
    poller = await service.agent("poller")
    status, _, details = error(await poller.post(f"{BASE}/claims", {}))
    assert (status, details["reason"]) == (404, "nothing_ready")
    assert details["expired_leases_held"] == [lapsed_allow]
    assert details["expired_leases"] == [free, lapsed_allow]
