"""Reopening: new immutable generations pinned to current revisions, and who may."""

from __future__ import annotations

import pytest

from tests.conftest import Caller, Service
from tests.decisions_support import (
    BASE,
    edit_task,
    error,
    get_decision,
    get_task,
    new_task,
    open_decision,
    reopen,
    send_answer,
    set_policy,
)
from waypost.resolvers.decisions import operations


async def test_reopen_pins_all_current_revisions_and_unblocks_after_a_new_allow(
    service: Service, human: Caller, project: str
) -> None:
    first = await new_task(human)
    second = await new_task(human, "Second")
    decision = await open_decision(human, [first, second])
    await send_answer(human, decision["id"])
    await edit_task(human, second, title="Second, rescoped")
    await set_policy(human, rules="New rules.")
    assert (await get_decision(human, decision["id"]))["status"] == "stale"
    service.clock.advance(minutes=5)
    r = await reopen(human, decision["id"], 1, rationale="The second task was rescoped.")
    assert r.status_code == 200, r.text
    reopened = r.json()
    assert reopened["status"] == "pending" and reopened["generation"] == 2
    current = reopened["current"]
    assert current["affected"] == [
        {"task_id": first, "task_revision": 1},
        {"task_id": second, "task_revision": 2},
    ]
    assert current["policy_revision"] == 2
    assert current["reopen_rationale"] == "The second task was rescoped."
    assert current["actor_id"] == human.principal_id
    assert current["at"] == "2026-11-29T18:05:00.000Z" and current["answer"] is None
    assert (await get_task(human, first))["ready"] is False
    await send_answer(human, decision["id"], generation=2)
    assert (await get_task(human, first))["ready"] is True
    assert (await get_task(human, second))["ready"] is True


async def test_reopen_keeps_question_options_and_required_actor(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], options=["A", "B", "C"])
    reopened = (await reopen(human, decision["id"], 1)).json()
    for name in ("question", "options", "required_actor", "rationale", "recommendation",
                 "reversible", "created_at", "created_by"):  # fmt: skip
        assert reopened[name] == decision[name], name


async def test_reopen_carries_omitted_pins_over_and_takes_new_ones(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(
        human, [task], conditions=["backup taken"], expires_at="2026-12-05T00:00:00.000Z"
    )
    carried = (await reopen(human, decision["id"], 1)).json()["current"]
    assert carried["environment"] == "staging"
    assert carried["conditions"] == ["backup taken"]
    assert carried["expires_at"] == "2026-12-05T00:00:00.000Z"
    changed = (
        await reopen(human, decision["id"], 2, environment="production", conditions=[],
                     expires_at=None)
    ).json()["current"]  # fmt: skip
    assert changed["environment"] == "production"
    assert changed["conditions"] == [] and changed["expires_at"] is None


async def test_reopen_refuses_a_carried_over_expiry_that_has_passed(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], expires_at="2026-11-29T19:00:00.000Z")
    # at the expiry's very instant it has passed (the status says `expired`)
    service.clock.advance(hours=1)
    r = await reopen(human, decision["id"], 1)
    assert error(r)[:2] == (400, "invalid_request") and error(r)[2]["field"] == "expires_at"
    service.clock.advance(hours=1)
    r = await reopen(human, decision["id"], 1)
    assert error(r)[:2] == (400, "invalid_request") and error(r)[2]["field"] == "expires_at"
    r = await reopen(human, decision["id"], 1, expires_at="2026-11-29T19:30:00.000Z")
    assert error(r)[:2] == (400, "invalid_request")
    r = await reopen(human, decision["id"], 1, expires_at=None)
    assert r.status_code == 200 and r.json()["status"] == "pending"


@pytest.mark.parametrize("disposition", ["allow", "deny", "defer", None])
async def test_any_status_may_be_reopened(
    human: Caller, project: str, disposition: str | None
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    if disposition:
        await send_answer(human, decision["id"], disposition=disposition)
    r = await reopen(human, decision["id"], 1)
    assert r.status_code == 200 and r.json()["status"] == "pending"


async def test_reopen_with_a_stale_generation_is_a_generation_conflict(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    assert (await reopen(human, decision["id"], 1)).status_code == 200
    r = await reopen(human, decision["id"], 1)
    assert error(r)[:2] == (409, "generation_conflict")
    assert error(r)[2] == {"expected_generation": 1, "current_generation": 2}


async def test_reopen_refuses_unknown_fields_blank_rationale_and_bad_expiry(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    for extra, field in (
        ({"question": "Other?"}, "question"),
        ({"options": ["x", "y"]}, "options"),
        ({"required_actor": "agent"}, "required_actor"),
        ({"rationale": " "}, "rationale"),
        ({"environment": ""}, "environment"),
        ({"expires_at": "9999-12-31T23:59:59-01:00"}, "expires_at"),
        ({"expires_at": "2026-12-01 00:00:00Z"}, "expires_at"),
        ({"expected_generation": 0}, "expected_generation"),
    ):
        r = await reopen(human, decision["id"], 1, **extra)
        assert error(r)[:2] == (400, "invalid_request") and error(r)[2]["field"] == field


async def test_agent_cannot_reopen_a_reversible_human_required_decision(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], recommendation="Proceed", reversible=True)
    agent = await service.agent()
    r = await reopen(agent, decision["id"], 1)
    assert error(r)[:2] == (403, "forbidden")
    assert error(r)[2]["reason"] == "human_required_reversible"


async def test_agent_may_reopen_other_decisions(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    agent = await service.agent()
    not_reversible = await open_decision(human, [task], required_actor="human")
    either = await open_decision(human, [task], required_actor="either",
                                 recommendation="Proceed", reversible=True)  # fmt: skip
    for decision in (not_reversible, either):
        r = await reopen(agent, decision["id"], 1)
        assert r.status_code == 200, r.text
        assert r.json()["current"]["actor_session_id"] == agent.session_id


async def test_reopen_leaves_earlier_generations_and_answers_untouched(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    await send_answer(human, decision["id"])
    before = (await get_decision(human, decision["id"]))["history"]["items"]
    await edit_task(human, task, title="Changed")
    service.clock.advance(hours=1)
    await reopen(human, decision["id"], 1, environment="production")
    await send_answer(human, decision["id"], generation=2, disposition="deny", answer="Stop")
    after = (await get_decision(human, decision["id"]))["history"]["items"]
    assert after[1:] == before


async def test_reopen_writes_a_decision_reopened_event(human: Caller, project: str) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    await send_answer(human, decision["id"], disposition="deny", answer="Stop")
    await reopen(human, decision["id"], 1)
    events = (await human.get(f"{BASE}/events")).json()["items"]
    reopened = [e for e in events if e["type"] == "decision.reopened"]
    assert [e["data"] for e in reopened] == [
        {"generation": 2, "previous_status": "denied", "task_ids": [task], "expires_at": None}
    ]
    assert reopened[0]["subject_id"] == decision["id"]


async def test_a_reopen_takes_back_what_an_earlier_build_let_the_decision_hold(
    human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decision asked before the environment had to be one line (and
    before overrides were refused, 2026-12-05): a reopen that sends its pins
    back as they were is taken; a new text is held to today's rules."""
    task = await new_task(human)
    with monkeypatch.context() as earlier:  # the rules an earlier build applied
        earlier.setattr(operations, "require_one_line", lambda value, field: None)
        earlier.setattr(operations, "require_drawn_in_order", lambda value, field: None)
        decision = await open_decision(
            human, [task], environment="prod\neu-west", conditions=["kcab\u202e", "line1\nline2"]
        )
    again = await reopen(
        human, decision["id"], 1, environment="prod\neu-west", conditions=["kcab\u202e"]
    )
    assert again.status_code == 200, again.text
    assert again.json()["current"]["environment"] == "prod\neu-west"
    for changed, field in (({"environment": "prod\nus-east"}, "environment"),
                           ({"conditions": ["new\u202e"]}, "conditions[0]")):  # fmt: skip
        r = await reopen(human, decision["id"], 2, **changed)
        assert error(r) == (400, "invalid_request", {"field": field}), r.text
