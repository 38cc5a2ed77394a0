"""The workflow gate: every listed operation refuses work a decision blocks, while
renew, checkpoint, release and recover stay open; readiness uses the same predicate."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import Caller, Service
from tests.decisions_support import (
    BASE,
    error,
    get_task,
    new_task,
    open_decision,
    reopen,
    send_answer,
    task_path,
)


def refused_by(
    r: Any, decision_ids: list[str], truncated: bool = False, reopen: list[str] | None = None
) -> bool:
    """`decision_required` naming `decision_ids`; `reopen`: those of them
    stale or expired, which only a reopening lifts."""
    status, code, details = error(r)
    assert (status, code) == (409, "decision_required"), r.text
    wait_on = {"stream": "/api/v1/projects/demo/events/stream", "subscription": "decisionChanged"}
    expected = {"decision_ids": decision_ids, "truncated": truncated, "wait_on": wait_on}
    if reopen:
        expected |= {"reason": "reopen_required", "reopen": reopen}
    assert details == expected
    return True


async def claim(agent: Caller, task_id: str | None = None) -> Any:
    return await agent.post(f"{BASE}/claims", {} if task_id is None else {"task_id": task_id})


async def stale_on(human: Caller, task: str) -> dict[str, Any]:
    """A decision on `task`, allowed, then stale: the task's description edited."""
    decision = await open_decision(human, [task])
    await send_answer(human, decision["id"])
    r = await human.patch(task_path(task), {"expected_revision": 1, "description": "Changed."})
    assert r.status_code == 200, r.text
    return decision


async def gql_claim_refusal(agent: Caller, task_id: str) -> dict[str, Any]:
    """The one userError of a GraphQL claim of `task_id` (code, reason, waitOn)."""
    answer = await agent.gql(
        "mutation ($input: TaskClaimInput!) { taskClaim(input: $input) {"
        " userErrors { code reason waitOn } } }",
        {"input": {"idempotencyKey": "gql-claim", "projectId": "demo", "taskId": task_id}},
    )
    assert answer.get("data"), answer
    [user_error] = answer["data"]["taskClaim"]["userErrors"]
    return dict(user_error)


async def allowed_then_reopened(human: Caller, task: str) -> str:
    """A decision that was allowed (work started) and is pending again."""
    decision = await open_decision(human, [task])
    await send_answer(human, decision["id"])
    return str(decision["id"])


async def test_named_claim_of_a_blocked_task_is_decision_required(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    agent = await service.agent()
    assert refused_by(await claim(agent, task), [decision["id"]])
    await send_answer(human, decision["id"])
    assert (await claim(agent, task)).status_code == 200


async def test_ordinary_claim_passes_over_a_blocked_task(
    service: Service, human: Caller, project: str
) -> None:
    blocked = await new_task(human, "Urgent but blocked", priority=10)
    free = await new_task(human, "Routine", priority=0)
    await open_decision(human, [blocked])
    agent = await service.agent()
    r = await claim(agent)
    assert r.status_code == 200 and r.json()["task"]["id"] == free
    r = await claim(agent)
    assert error(r)[:2] == (404, "not_found") and error(r)[2]["reason"] == "nothing_ready"


async def test_workflow_claim_of_an_activity_is_blocked_by_its_subjects_decision(
    service: Service, human: Caller, project: str
) -> None:
    subject = await new_task(human, "Ship the release")
    activity = await new_task(human, "Review the release", subject_task_id=subject)
    decision = await open_decision(human, [subject])
    agent = await service.agent()
    assert refused_by(await claim(agent, activity), [decision["id"]])
    listed = await get_task(human, activity)
    assert listed["ready"] is False and listed["blocked_by"]["decisions"] == [decision["id"]]
    await send_answer(human, decision["id"])
    r = await claim(agent, activity)
    assert r.status_code == 200 and r.json()["lease"]["workflow"] is True


async def test_workflow_claim_of_an_activity_is_blocked_by_its_own_decision(
    service: Service, human: Caller, project: str
) -> None:
    subject = await new_task(human, "Ship the release")
    activity = await new_task(human, "Review the release", subject_task_id=subject)
    own = await open_decision(human, [activity])
    theirs = await open_decision(human, [subject])
    agent = await service.agent()
    assert refused_by(await claim(agent, activity), [own["id"], theirs["id"]])


async def test_submit_is_refused_but_renew_checkpoint_and_release_stay_open(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await allowed_then_reopened(human, task)
    agent = await service.agent()
    assert (await claim(agent, task)).status_code == 200
    assert (await reopen(human, decision, 1)).status_code == 200
    r = await agent.post(task_path(task, "submit"), {"summary": "done"})
    assert refused_by(r, [decision])
    assert (await agent.post(task_path(task, "renew"))).status_code == 200
    r = await agent.post(task_path(task, "checkpoint"), {"note": "waiting on the decision"})
    assert r.status_code == 200, r.text
    assert (await agent.post(task_path(task, "release"))).status_code == 200
    assert refused_by(await claim(agent, task), [decision])


async def test_complete_is_refused_while_a_decision_blocks(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await allowed_then_reopened(human, task)
    agent = await service.agent()
    assert (await claim(agent, task)).status_code == 200
    assert (await agent.post(task_path(task, "submit"), {"summary": "done"})).status_code == 200
    assert (await reopen(human, decision, 1)).status_code == 200
    assert refused_by(await human.post(task_path(task, "complete")), [decision])
    await send_answer(human, decision, generation=2)
    assert (await human.post(task_path(task, "complete"))).status_code == 200


async def test_publication_prepare_is_refused_while_a_decision_blocks(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    assert refused_by(await human.post(task_path(task, "publication/prepare")), [decision["id"]])


async def test_publication_result_and_finalize_are_refused_once_the_allow_expires(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], expires_at="2026-11-29T19:00:00.000Z")
    await send_answer(human, decision["id"])
    assert (await human.post(task_path(task, "publication/prepare"))).status_code == 200
    service.clock.advance(hours=1)
    r = await human.post(task_path(task, "publication/result"), {"outcome": "succeeded"})
    assert refused_by(r, [decision["id"]], reopen=[decision["id"]])
    finalize = await human.post(task_path(task, "publication/finalize"))
    assert refused_by(finalize, [decision["id"]], reopen=[decision["id"]])


async def test_recover_stays_open_but_the_work_cannot_resume(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await allowed_then_reopened(human, task)
    first = await service.agent("first")
    assert (await claim(first, task)).status_code == 200
    assert (await reopen(human, decision, 1)).status_code == 200
    service.clock.advance(minutes=16)
    second = await service.agent("second")
    r = await second.post(task_path(task, "recover"))
    assert r.status_code == 200, r.text
    assert r.json()["previous_lease"]["owner_id"] == first.principal_id
    r = await second.post(task_path(task, "submit"), {"summary": "finished it"})
    assert refused_by(r, [decision])


async def test_twenty_one_decisions_report_twenty_ids_and_truncated(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    ids = []
    for _ in range(21):
        ids.append((await open_decision(human, [task]))["id"])
        service.clock.advance(milliseconds=1)
    agent = await service.agent()
    assert refused_by(await claim(agent, task), ids[:20], truncated=True)
    listed = await get_task(human, task)
    assert listed["blocked_by"]["decisions"] == ids[:20]
    assert listed["blocked_by"]["decisions_truncated"] is True
    await send_answer(human, ids[0])
    assert refused_by(await claim(agent, task), ids[1:21], truncated=False)


async def test_task_list_reports_blocked_tasks_as_not_ready(human: Caller, project: str) -> None:
    blocked = await new_task(human, "Blocked")
    denied = await new_task(human, "Denied")
    free = await new_task(human, "Free")
    pending = await open_decision(human, [blocked])
    no = await open_decision(human, [denied])
    await send_answer(human, no["id"], disposition="deny", answer="Stop")
    items = (await human.get(f"{BASE}/tasks")).json()["items"]
    by_id = {t["id"]: t for t in items}
    assert by_id[blocked]["ready"] is False
    assert by_id[blocked]["blocked_by"]["decisions"] == [pending["id"]]
    assert by_id[denied]["blocked_by"]["decisions"] == [no["id"]]
    assert by_id[free]["ready"] is True and by_id[free]["blocked_by"]["decisions"] == []
    ready = (await human.get(f"{BASE}/tasks", ready="true")).json()["items"]
    assert [t["id"] for t in ready] == [free]


async def test_decisions_of_another_project_do_not_block(human: Caller, project: str) -> None:
    task = await new_task(human)
    assert (await human.post("/api/v1/projects", {"id": "other", "name": "O"})).status_code == 201
    r = await human.post("/api/v1/projects/other/tasks", {"title": "Elsewhere"})
    other_task = r.json()["id"]
    r = await human.post(
        "/api/v1/projects/other/decisions",
        {"question": "Q?", "options": ["a", "b"], "rationale": "r", "required_actor": "human",
         "task_ids": [other_task], "environment": "e"},
    )  # fmt: skip
    assert r.status_code == 201
    assert (await get_task(human, task))["ready"] is True


async def test_way_out_an_allow_that_goes_stale_mid_publication_is_reopened_and_answered(
    service: Service, human: Caller, project: str
) -> None:
    """Result and finalize stay gated, so an allow that stops counting mid-publication
    blocks the holder; the decision already blocks, so it may be reopened while
    authority is held (section 14), answered again, and the publication completes."""
    task = await new_task(human)
    other = await new_task(human, "Another task in the same scope")
    decision = await open_decision(human, [task, other])
    await send_answer(human, decision["id"])
    assert (await human.post(task_path(task, "publication/prepare"))).status_code == 200
    # the task code refuses judged edits around the publishing task, but not on
    # another task of the same decision's scope; a rules edit stales it as well
    r = await human.patch(task_path(other), {"expected_revision": 1, "title": "Rescoped"})
    assert r.status_code == 200, r.text
    r = await human.post(task_path(task, "publication/result"), {"outcome": "succeeded"})
    assert refused_by(r, [decision["id"]], reopen=[decision["id"]])
    finalize = await human.post(task_path(task, "publication/finalize"))
    assert refused_by(finalize, [decision["id"]], reopen=[decision["id"]])
    r = await reopen(human, decision["id"], 1)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "pending"
    r = await send_answer(human, decision["id"], generation=2)
    assert r.status_code == 200, r.text
    r = await human.post(task_path(task, "publication/result"), {"outcome": "succeeded"})
    assert r.status_code == 200, r.text
    r = await human.post(task_path(task, "publication/finalize"))
    assert r.status_code == 200, r.text
    assert r.json()["publication"] is None


async def test_an_expired_allow_is_reopened_while_publication_is_held(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], expires_at="2026-11-29T19:00:00.000Z")
    await send_answer(human, decision["id"])
    assert (await human.post(task_path(task, "publication/prepare"))).status_code == 200
    service.clock.advance(hours=1)
    r = await reopen(human, decision["id"], 1, expires_at=None)
    assert r.status_code == 200, r.text
    assert (r.json()["generation"], r.json()["status"]) == (2, "pending")


async def test_reopening_a_live_allow_while_publication_is_held_stays_refused(
    human: Caller, project: str
) -> None:
    # a live allow lets the publication go on; reopening it would add a blocker
    task = await new_task(human)
    decision = await open_decision(human, [task])
    await send_answer(human, decision["id"])
    assert (await human.post(task_path(task, "publication/prepare"))).status_code == 200
    r = await reopen(human, decision["id"], 1)
    assert error(r) == (409, "publication_in_progress", {"task_ids": [task]})
    r = await human.post(task_path(task, "publication/result"), {"outcome": "succeeded"})
    assert r.status_code == 200, r.text


async def test_a_denied_or_deferred_decision_is_refused_as_declined_not_wait(
    service: Service, human: Caller, project: str
) -> None:
    """A decision answered deny or defer keeps its tasks blocked, and the
    refusal said to wait for its answer: the wait returned at once (it is
    answered) and the retry was refused again, for ever (agentflow). It
    now names them as declined, apart from those still to be answered."""
    task = await new_task(human)
    denied = await open_decision(human, [task])
    deferred = await open_decision(human, [task], question="And later?")
    pending = await open_decision(human, [task], question="And the other one?")
    for decision, disposition in ((denied, "deny"), (deferred, "defer")):
        r = await send_answer(human, decision["id"], disposition=disposition)
        assert r.status_code == 200, r.text
    agent = await service.agent()
    r = await claim(agent, task)
    status, code, details = error(r)
    assert (status, code, details["reason"]) == (409, "decision_required", "declined")
    assert details["decision_ids"] == [denied["id"], deferred["id"], pending["id"]]
    assert details["declined"] == [denied["id"], deferred["id"]]
    # while they stand, an answer to the pending one lifts nothing: no place
    # to wait is named, over REST or GraphQL (review30, review31)
    assert "reopen" not in details and "wait_on" not in details
    message = r.json()["error"]["message"]
    assert "deny or defer" in message and "wait for its answer" not in message
    user_error = await gql_claim_refusal(agent, task)
    assert (user_error["code"], user_error["reason"]) == ("decision_required", "declined")
    assert user_error["waitOn"] is None
    # a stale one beside them: reopen first, and the declined ones still named
    r = await human.patch(task_path(task), {"expected_revision": 1, "description": "Changed."})
    assert r.status_code == 200, r.text
    status, code, details = error(await claim(agent, task))
    assert (status, code, details["reason"]) == (409, "decision_required", "reopen_required")
    # the pin changed under all three: stale, which no answer lifts
    assert details["reopen"] == [denied["id"], deferred["id"], pending["id"]]
    assert "declined" not in details
    # reconsidered: reopened and allowed, the denial no longer holds the task
    for decision in (denied, deferred, pending):
        assert (await reopen(human, decision["id"], 1)).status_code == 200
        assert (await send_answer(human, decision["id"], generation=2)).status_code == 200
    assert (await claim(agent, task)).status_code == 200


async def test_declined_and_stale_decisions_are_named_apart(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    stale = await stale_on(human, task)
    denied = await open_decision(human, [task], question="And the other one?")
    assert (await send_answer(human, denied["id"], disposition="deny")).status_code == 200
    r = await claim(await service.agent(), task)
    status, code, details = error(r)
    # the denial first: reopening the stale one would lift nothing while it
    # stands, and asked a human to answer it for nothing (review31)
    assert (status, code, details["reason"]) == (409, "decision_required", "declined")
    assert (details["reopen"], details["declined"]) == ([stale["id"]], [denied["id"]])
    assert "wait_on" not in details and "details.reopen" in r.json()["error"]["message"]


async def test_a_task_held_by_declined_decisions_alone_names_nowhere_to_wait(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    denied = await open_decision(human, [task])
    assert (await send_answer(human, denied["id"], disposition="deny")).status_code == 200
    agent = await service.agent()
    status, code, details = error(await claim(agent, task))
    assert (status, code, details["reason"]) == (409, "decision_required", "declined")
    assert "wait_on" not in details
    user_error = await gql_claim_refusal(agent, task)
    assert (user_error["reason"], user_error["waitOn"]) == ("declined", None)
    # more than the 20 named, all declined: the same, whatever is not named
    for n in range(20):
        more = await open_decision(human, [task], question=f"And {n}?")
        assert (await send_answer(human, more["id"], disposition="deny")).status_code == 200
    status, code, details = error(await claim(agent, task))
    assert (details["reason"], details["truncated"], len(details["declined"])) == (
        "declined",
        True,
        20,
    )
    assert "wait_on" not in details


async def test_a_declined_decision_past_the_twenty_named_still_says_declined(
    service: Service, human: Caller, project: str
) -> None:
    """The refusal judged only the 20 (21) blockers it names: a denial past
    them was refused as "wait for its answer" on 20 pending decisions that
    cannot lift the work while it stands (specaudit-svc); a stale one there
    went unnamed the same way. The context packet said nothing of them."""
    task = await new_task(human)
    pending = [await open_decision(human, [task], question=f"Q{n}?") for n in range(22)]
    denied = await open_decision(human, [task], question="Ship it?")
    assert (await send_answer(human, denied["id"], disposition="deny")).status_code == 200
    agent = await service.agent()
    status, code, details = error(await claim(agent, task))
    assert (status, code, details["reason"]) == (409, "decision_required", "declined")
    assert details["decision_ids"] == [d["id"] for d in pending[:20]] and details["truncated"]
    assert details["declined"] == [denied["id"]] and "wait_on" not in details
    packet = await human.get(f"/api/v1/projects/{project}/context", q="ship", task_id=task)
    assert denied["id"] in json.dumps(packet.json()["next_actions"]), packet.text
    # one expired past them too: named for reopening beside the denial
    last = await open_decision(
        human, [task], question="Before seven?", expires_at="2026-11-29T19:00:00.000Z"
    )
    service.clock.advance(hours=1)
    status, code, details = error(await claim(await service.agent(), task))
    assert details["declined"] == [denied["id"]], details
    assert last["id"] in details["reopen"]


async def test_a_stale_decision_is_refused_with_reopen_not_wait(
    service: Service, human: Caller, project: str
) -> None:
    """The refusal said "wait for its answer" for a decision no answer can
    lift (stale, or expired): the wait returned at once, the retry was
    refused again. It now names the decisions to reopen."""
    task = await new_task(human)
    stale = await stale_on(human, task)
    pending = await open_decision(human, [task], question="And the other one?")
    agent = await service.agent()
    r = await claim(agent, task)
    status, code, details = error(r)
    assert (status, code, details["reason"]) == (409, "decision_required", "reopen_required")
    assert details["decision_ids"] == [stale["id"], pending["id"]]
    assert details["reopen"] == [stale["id"]]  # the pending one waits for its answer
    assert "reopen" in r.json()["error"]["message"]
    user_error = await gql_claim_refusal(agent, task)
    assert (user_error["code"], user_error["reason"]) == ("decision_required", "reopen_required")
    assert (await reopen(human, stale["id"], 1)).status_code == 200
    r = await claim(agent, task)
    assert refused_by(r, [stale["id"], pending["id"]])  # both pending now: wait for answers
