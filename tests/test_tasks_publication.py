"""Publication authority: prepare, result, finalize and who may hold it."""

from __future__ import annotations

from typing import Any

from tests.conftest import Caller, Service
from tests.tasks_support import BASE, claim, error, make_task, set_policy, submit, task_path


async def test_prepare_result_finalize_cycle_shows_and_clears_the_holder(
    human: Caller, project: str
) -> None:
    task = await make_task(human)
    r = await human.post(task_path(task["id"], "publication/prepare"))
    assert r.status_code == 200, r.text
    assert r.json()["publication"] == {
        "holder_id": human.principal_id,
        "holder_session_id": None,
        "prepared_at": "2026-11-29T18:00:00.000Z",
        "result": None,
    }
    r = await human.post(
        task_path(task["id"], "publication/result"), {"outcome": "succeeded", "detail": "sha abc"}
    )
    assert r.status_code == 200, r.text
    assert r.json()["publication"]["result"] == {
        "outcome": "succeeded",
        "detail": "sha abc",
        "at": "2026-11-29T18:00:00.000Z",
    }
    r = await human.post(task_path(task["id"], "publication/finalize"))
    assert r.status_code == 200 and r.json()["publication"] is None
    events = (await human.get(f"{BASE}/events")).json()["items"]
    assert [e["type"] for e in events if e["type"].startswith("task.publication")] == [
        "task.publication_prepared",
        "task.publication_result_recorded",
        "task.publication_finalized",
    ]
    assert events[-1]["data"]["result"]["outcome"] == "succeeded"


async def test_a_result_whose_detail_holds_a_credential_is_refused_and_loses_nothing(
    human: Caller, project: str
) -> None:
    """A failed push's output with the token it pushed with was recorded,
    and finalize copied it into an event, which is never rewritten
    (eventdata): the result is refused naming `detail`, and can be sent
    again without it."""
    task = await make_task(human)
    await human.post(task_path(task["id"], "publication/prepare"))
    before = (await human.get(f"{BASE}/events")).json()["items"]
    token = "ghp_" + "B" * 36
    for detail, kind in ((f"push to github.com/o/r.git with {token} refused", "a GitHub token"),
                         ("Authorization: Bearer wp_" + "A" * 43, "a Waypost token"),
                         ("DB_PASSWORD=hunter22hunter", "a password=, secret= or token="),
                         ("fatal: https://ci:hunter2@git.example.com/o/r.git denied",
                          "a password in a URL")):  # fmt: skip
        r = await human.post(
            task_path(task["id"], "publication/result"), {"outcome": "failed", "detail": detail}
        )
        assert error(r) == (400, "invalid_request",
                            {"reason": "secret_marker_detected", "field": "detail"})  # fmt: skip
        assert detail not in r.text and f"looks like {kind}" in r.json()["error"]["message"]
    assert (await human.get(f"{BASE}/events")).json()["items"] == before
    shown = await human.get(task_path(task["id"]))
    assert shown.json()["publication"]["result"] is None
    # a branch whose name holds `sk-` and 20 letters is no key (review60)
    clean = "git push rejected for branch task-20261205releasecandidate (auth)"
    r = await human.post(task_path(task["id"], "publication/result"),
                         {"outcome": "failed", "detail": clean})  # fmt: skip
    assert r.status_code == 200, r.text


async def test_second_prepare_while_held_is_publication_in_progress(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    other = await service.principal("human", "bob")
    assert (await human.post(task_path(task["id"], "publication/prepare"))).status_code == 200
    for caller in (other, human):
        r = await caller.post(task_path(task["id"], "publication/prepare"))
        assert error(r) == (409, "publication_in_progress", {"holder_id": human.principal_id})


async def test_prepare_again_after_finalize_is_allowed(human: Caller, project: str) -> None:
    task = await make_task(human)
    await human.post(task_path(task["id"], "publication/prepare"))
    await human.post(task_path(task["id"], "publication/finalize"))
    assert (await human.post(task_path(task["id"], "publication/prepare"))).status_code == 200


async def test_agent_cannot_prepare_when_no_integration_owner(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    agent = await service.agent()
    r = await agent.post(task_path(task["id"], "publication/prepare"))
    assert error(r) == (403, "forbidden", {"reason": "not_integration_owner"})


async def test_only_the_integration_owner_prepares_when_one_is_set(
    service: Service, human: Caller, project: str
) -> None:
    agent = await service.agent("integrator")
    await set_policy(human, integration_owner=agent.principal_id)
    task = await make_task(human)
    r = await human.post(task_path(task["id"], "publication/prepare"))
    assert error(r)[:2] == (403, "forbidden")
    r = await agent.post(task_path(task["id"], "publication/prepare"))
    assert r.status_code == 200, r.text
    assert r.json()["publication"]["holder_session_id"] == agent.session_id


async def test_integration_owner_agent_needs_a_session(
    service: Service, human: Caller, project: str
) -> None:
    agent = await service.principal("agent", "integrator")
    await set_policy(human, integration_owner=agent.principal_id)
    task = await make_task(human)
    r = await agent.post(task_path(task["id"], "publication/prepare"))
    assert error(r) == (403, "forbidden", {"reason": "session_required"})


async def test_result_and_finalize_by_another_principal_are_refused(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    other = await service.principal("human", "bob")
    await human.post(task_path(task["id"], "publication/prepare"))
    r = await other.post(task_path(task["id"], "publication/result"), {"outcome": "failed"})
    assert error(r)[:2] == (409, "publication_in_progress")
    r = await other.post(task_path(task["id"], "publication/finalize"))
    assert error(r)[:2] == (409, "publication_in_progress")


async def test_result_without_prepare_is_state_conflict(human: Caller, project: str) -> None:
    task = await make_task(human)
    r = await human.post(task_path(task["id"], "publication/result"), {"outcome": "failed"})
    assert error(r) == (409, "state_conflict", {"reason": "not_prepared"})


async def test_result_is_recorded_once(human: Caller, project: str) -> None:
    task = await make_task(human)
    await human.post(task_path(task["id"], "publication/prepare"))
    r = await human.post(task_path(task["id"], "publication/result"), {"outcome": "failed"})
    assert r.status_code == 200 and r.json()["publication"]["result"]["detail"] == ""
    r = await human.post(task_path(task["id"], "publication/result"), {"outcome": "succeeded"})
    assert error(r) == (409, "state_conflict", {"reason": "result_recorded"})


async def test_result_refuses_an_unknown_outcome(human: Caller, project: str) -> None:
    task = await make_task(human)
    await human.post(task_path(task["id"], "publication/prepare"))
    r = await human.post(task_path(task["id"], "publication/result"), {"outcome": "maybe"})
    assert error(r) == (400, "invalid_request", {"field": "outcome"})


async def test_prepare_on_a_done_task_is_state_conflict(human: Caller, project: str) -> None:
    task = await make_task(human)
    await claim(human, task["id"])
    await submit(human, task["id"])
    await human.post(task_path(task["id"], "complete"))
    r = await human.post(task_path(task["id"], "publication/prepare"))
    assert error(r) == (409, "state_conflict", {"reason": "task_closed", "status": "done"})


async def test_prepare_on_a_task_completed_while_held_is_publication_in_progress(
    human: Caller, project: str
) -> None:
    """`complete` is open while authority is held, so a done task can still
    hold it: another prepare names the holder (section 5), as on an open
    task, rather than the task's status; the holder finalizes either way."""
    task = await make_task(human)
    await claim(human, task["id"])
    await submit(human, task["id"])
    assert (await human.post(task_path(task["id"], "publication/prepare"))).status_code == 200
    assert (await human.post(task_path(task["id"], "complete"))).json()["status"] == "done"
    r = await human.post(task_path(task["id"], "publication/prepare"))
    assert error(r) == (409, "publication_in_progress", {"holder_id": human.principal_id})
    assert (await human.post(task_path(task["id"], "publication/finalize"))).status_code == 200
    r = await human.post(task_path(task["id"], "publication/prepare"))
    assert error(r) == (409, "state_conflict", {"reason": "task_closed", "status": "done"})


async def test_prepare_on_a_cancelled_task_is_state_conflict(human: Caller, project: str) -> None:
    task = await make_task(human)
    await human.patch(task_path(task["id"]), {"expected_revision": 1, "status": "cancelled"})
    r = await human.post(task_path(task["id"], "publication/prepare"))
    assert error(r) == (409, "state_conflict", {"reason": "task_closed", "status": "cancelled"})


async def test_prepare_works_on_a_submitted_task(human: Caller, project: str) -> None:
    task = await make_task(human)
    await claim(human, task["id"])
    await submit(human, task["id"])
    assert (await human.post(task_path(task["id"], "publication/prepare"))).status_code == 200


async def test_prepare_works_on_a_task_another_principal_has_claimed(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    await claim(await service.agent(), task["id"])
    r = await human.post(task_path(task["id"], "publication/prepare"))
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "claimed"


async def test_cancel_is_refused_while_publication_is_held(human: Caller, project: str) -> None:
    task = await make_task(human)
    await human.post(task_path(task["id"], "publication/prepare"))
    r = await human.patch(task_path(task["id"]), {"expected_revision": 1, "status": "cancelled"})
    assert error(r)[:2] == (409, "publication_in_progress")


async def test_integration_owner_agent_finalizes_from_a_new_session(
    service: Service, human: Caller, project: str
) -> None:
    agent = await service.agent("integrator")
    await set_policy(human, integration_owner=agent.principal_id)
    task = await make_task(human)
    assert (await agent.post(task_path(task["id"], "publication/prepare"))).status_code == 200
    await agent.start_session()
    r = await agent.post(task_path(task["id"], "publication/finalize"))
    assert r.status_code == 200 and r.json()["publication"] is None


async def test_judged_edit_is_refused_while_the_task_or_an_activity_publishes(
    human: Caller, project: str
) -> None:
    # an edit would make an allow stale under the holder, whose finalize has
    # passed the gate: judged edits wait for the publication to end (a decision
    # that already blocks may still be reopened meanwhile: section 14)
    task = await make_task(human)
    review = await make_task(human, "review", subject_task_id=task["id"])
    r = await human.post(task_path(review["id"], "publication/prepare"))
    assert r.status_code == 200, r.text
    for target in (task, review):
        r = await human.patch(task_path(target["id"]), {"expected_revision": 1, "title": "new"})
        status, code, details = error(r)
        assert (status, code) == (409, "publication_in_progress")
        assert details == {"task_id": review["id"], "holder_id": human.principal_id}
    r = await human.patch(task_path(task["id"]), {"expected_revision": 1, "priority": 3})
    assert r.status_code == 200, r.text
    await human.post(task_path(review["id"], "publication/finalize"))
    r = await human.patch(task_path(task["id"]), {"expected_revision": 2, "title": "new"})
    assert r.status_code == 200, r.text


async def test_a_judged_edit_names_the_nearest_task_holding_publication(
    service: Service, human: Caller, project: str
) -> None:
    """Several tasks around the edited one holding authority: `task_id` named
    whichever the query plan gave (publicationmodel). Now the task itself,
    else its subject, else its oldest activity holding it: here the activity
    made first in the file is the newer (the clock stepped back between
    them), so the file's order cannot stand in for the rule (review63)."""
    task = await make_task(human)
    service.clock.advance(seconds=10)
    newer = await make_task(human, "second review", subject_task_id=task["id"])
    service.clock.advance(seconds=-5)
    older = await make_task(human, "first review", subject_task_id=task["id"])

    async def named(target: dict[str, Any]) -> str:
        r = await human.patch(task_path(target["id"]), {"expected_revision": 1, "title": "x"})
        status, code, details = error(r)
        assert (status, code) == (409, "publication_in_progress"), r.text
        return str(details["task_id"])

    for holder in (newer, older):
        r = await human.post(task_path(holder["id"], "publication/prepare"))
        assert r.status_code == 200, r.text
    assert await named(task) == older["id"]
    assert (await human.post(task_path(task["id"], "publication/prepare"))).status_code == 200
    assert await named(task) == task["id"]
    assert await named(newer) == newer["id"]
    await human.post(task_path(newer["id"], "publication/finalize"))
    assert await named(newer) == task["id"]


async def test_a_holder_the_policy_no_longer_names_records_no_result_but_gives_it_back(
    service: Service, human: Caller, project: str
) -> None:
    """Changing `integration_owner` is a human's lever over publication: the
    old owner went on to record a result, and the new one was locked out
    (publicationaudit)."""
    old, new = await service.agent("old-owner"), await service.agent("new-owner")
    await set_policy(human, integration_owner=old.principal_id)
    task = await make_task(human)
    assert (await old.post(task_path(task["id"], "publication/prepare"))).status_code == 200
    await set_policy(human, integration_owner=new.principal_id)
    r = await old.post(task_path(task["id"], "publication/result"), {"outcome": "succeeded"})
    assert error(r) == (
        403,
        "forbidden",
        {"reason": "not_integration_owner", "integration_owner": new.principal_id},
    )
    # the new owner may not publish over it, and the old one may give it back
    r = await new.post(task_path(task["id"], "publication/prepare"))
    assert error(r) == (409, "publication_in_progress", {"holder_id": old.principal_id})
    r = await old.post(task_path(task["id"], "publication/finalize"))
    assert r.status_code == 200 and r.json()["publication"] is None, r.text
    finalized = (await human.get(f"{BASE}/events")).json()["items"][-1]
    assert finalized["type"] == "task.publication_finalized"
    assert finalized["data"] == {
        "holder_id": old.principal_id,
        "prepared_at": "2026-11-29T18:00:00.000Z",
        "result": None,
    }


async def test_the_owner_named_now_ends_authority_the_policy_no_longer_backs(
    service: Service, human: Caller, project: str
) -> None:
    """A holder that has gone away kept its authority for good (no forced
    release): the principal the policy now lets publish may end it, and
    only once the policy no longer lets the holder."""
    bob = await service.principal("human", "bob")
    agent = await service.agent("integrator")
    task = await make_task(human)
    assert (await bob.post(task_path(task["id"], "publication/prepare"))).status_code == 200
    # while the policy still lets bob publish, another human cannot end it
    r = await human.post(task_path(task["id"], "publication/finalize"))
    assert error(r) == (409, "publication_in_progress", {"holder_id": bob.principal_id})
    await set_policy(human, integration_owner=agent.principal_id)
    # nor may a principal the policy does not name now
    r = await human.post(task_path(task["id"], "publication/finalize"))
    assert error(r)[:3] == (
        403,
        "forbidden",
        {"reason": "not_integration_owner", "integration_owner": agent.principal_id},
    )
    r = await agent.post(task_path(task["id"], "publication/finalize"))
    assert r.status_code == 200 and r.json()["publication"] is None, r.text
    finalized = (await human.get(f"{BASE}/events")).json()["items"][-1]
    assert (finalized["actor_id"], finalized["data"]["holder_id"]) == (
        agent.principal_id,
        bob.principal_id,
    )
    assert (await agent.post(task_path(task["id"], "publication/prepare"))).status_code == 200
