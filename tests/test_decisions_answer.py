"""Answering decisions: dispositions, actor rules, generations, relayed human answers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.decisions_support import (
    BASE,
    error,
    get_decision,
    get_task,
    new_task,
    open_decision,
    reopen,
    send_answer,
    set_policy,
    task_path,
)

RELAY = {"prompt": "May the migration run on staging? (Proceed/Stop)", "response": "Proceed."}


async def test_allow_lets_work_go_on_and_is_recorded_with_its_actor(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    r = await send_answer(human, decision["id"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "allowed" and body["work_allowed"] is True
    assert body["current"]["answer"] == {
        "disposition": "allow",
        "answer": "Proceed",
        "rationale": "The rollback owner is recorded.",
        "conditions_confirmed": True,
        "actor_id": human.principal_id,
        "actor_session_id": None,
        "relayed": False,
        "relay": None,
        "authorized_by": None,
        "relay_policy_revision": None,
        "timed_out": False,
        "at": "2026-11-29T18:00:00.000Z",
    }
    assert (await get_task(human, task))["ready"] is True
    events = (await human.get(f"{BASE}/events")).json()["items"]
    answered = [e for e in events if e["type"] == "decision.answered"]
    assert [e["data"] for e in answered] == [
        # the tasks it holds or lets go, as decision.opened names them: a
        # follower that starts after the opening can tell which tasks move
        {"generation": 1, "disposition": "allow", "answer": "Proceed", "relayed": False,
         "task_ids": [task]}
    ]  # fmt: skip


@pytest.mark.parametrize(("disposition", "status"), [("deny", "denied"), ("defer", "deferred")])
async def test_deny_and_defer_are_durable_answers_that_keep_work_blocked(
    human: Caller, project: str, disposition: str, status: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    r = await send_answer(
        human, decision["id"], disposition=disposition, answer="Stop", conditions_confirmed=False
    )
    assert r.status_code == 200, r.text
    assert r.json()["status"] == status and r.json()["work_allowed"] is False
    blocked = await get_task(human, task)
    assert blocked["ready"] is False
    assert blocked["blocked_by"]["decisions"] == [decision["id"]]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"answer": "proceed"}, "answer"),
        ({"answer": "Proceed "}, "answer"),
        ({"conditions_confirmed": False}, "conditions_confirmed"),
        ({"disposition": "maybe"}, "disposition"),
        ({"rationale": ""}, "rationale"),
        ({"rationale": "  "}, "rationale"),
        ({"expected_generation": 0}, "expected_generation"),
        ({"expected_generation": True}, "expected_generation"),
        ({"relay": {"prompt": "x"}}, "relay.response"),
        ({"relay": {"prompt": " ", "response": "Yes, go."}}, "relay.prompt"),
        ({"relay": {"prompt": "Run it?", "response": "\n\t "}}, "relay.response"),
    ],
)
async def test_answer_refuses_invalid_bodies_naming_the_field(
    human: Caller, project: str, overrides: dict[str, Any], field: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    r = await send_answer(human, decision["id"], **overrides)
    status, code, details = error(r)
    assert (status, code, details["field"]) == (400, "invalid_request", field), r.text


async def test_allow_without_conditions_confirmed_field_is_refused(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    body = {"expected_generation": 1, "disposition": "allow", "answer": "Proceed",
            "rationale": "ok"}  # fmt: skip
    r = await human.post(f"{BASE}/decisions/{decision['id']}/answer", body)
    assert error(r)[:2] == (400, "invalid_request")
    assert error(r)[2]["field"] == "conditions_confirmed"


async def test_stale_expected_generation_is_a_generation_conflict(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    assert (await reopen(human, decision["id"], 1)).status_code == 200
    r = await send_answer(human, decision["id"], generation=1)
    assert error(r)[:2] == (409, "generation_conflict")
    assert error(r)[2] == {"expected_generation": 1, "current_generation": 2}
    assert (await send_answer(human, decision["id"], generation=2)).status_code == 200


async def test_an_expected_generation_ahead_of_the_current_one_is_a_conflict(
    human: Caller, project: str
) -> None:
    """Only the current generation is answered or reopened: one the client
    cannot have seen is no more current than an old one (pinned over REST
    only by the GraphQL tests: mutantaudit1)."""
    task = await new_task(human)
    decision = await open_decision(human, [task])
    r = await send_answer(human, decision["id"], generation=2)
    assert error(r) == (409, "generation_conflict",
                        {"expected_generation": 2, "current_generation": 1})  # fmt: skip
    r = await reopen(human, decision["id"], 2)
    assert error(r) == (409, "generation_conflict",
                        {"expected_generation": 2, "current_generation": 1})  # fmt: skip
    assert (await get_decision(human, decision["id"]))["generation"] == 1


async def test_a_second_answer_on_the_same_generation_is_a_state_conflict(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    assert (await send_answer(human, decision["id"])).status_code == 200
    r = await send_answer(human, decision["id"], disposition="deny", answer="Stop")
    assert error(r)[:2] == (409, "state_conflict")
    assert error(r)[2]["reason"] == "already_answered"
    assert (await get_decision(human, decision["id"]))["status"] == "allowed"


async def test_answering_an_unknown_decision_is_not_found(human: Caller, project: str) -> None:
    r = await send_answer(human, "dec_missing")
    assert error(r)[:2] == (404, "not_found")


# --- who may answer ---------------------------------------------------------------


async def test_agent_answer_needs_a_live_session(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], required_actor="either")
    agent = await service.principal("agent", "no-session")
    r = await send_answer(agent, decision["id"])
    assert error(r)[:2] == (403, "forbidden") and error(r)[2]["reason"] == "session_required"


async def test_an_agent_without_a_session_is_told_a_human_must_answer(
    service: Service, human: Caller, project: str
) -> None:
    """It was told "needs a live session", which no session would mend."""
    task = await new_task(human)
    decision = await open_decision(human, [task], required_actor="human")
    agent = await service.principal("agent", "sessionless-answerer")
    r = await send_answer(agent, decision["id"])
    assert error(r)[:2] == (403, "forbidden") and error(r)[2]["reason"] == "human_required"


async def test_agent_answer_from_an_ended_session_is_refused(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], required_actor="agent")
    agent = await service.agent()
    assert (await agent.post(f"/api/v1/sessions/{agent.session_id}/end")).status_code == 200
    r = await send_answer(agent, decision["id"])
    assert error(r)[:2] == (403, "forbidden") and error(r)[2]["reason"] == "session_not_live"


@pytest.mark.parametrize("required_actor", ["agent", "either"])
async def test_agent_answer_is_attributed_to_its_session(
    service: Service, human: Caller, project: str, required_actor: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], required_actor=required_actor)
    agent = await service.agent()
    r = await send_answer(agent, decision["id"])
    assert r.status_code == 200, r.text
    answer = r.json()["current"]["answer"]
    assert answer["actor_id"] == agent.principal_id
    assert answer["actor_session_id"] == agent.session_id


async def test_agent_cannot_answer_a_human_required_decision(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], required_actor="human")
    agent = await service.agent()
    r = await send_answer(agent, decision["id"])
    assert error(r)[:2] == (403, "forbidden") and error(r)[2]["reason"] == "human_required"


async def test_a_human_may_answer_an_agent_required_decision(human: Caller, project: str) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], required_actor="agent")
    assert (await send_answer(human, decision["id"])).status_code == 200


# --- status blocks answers ------------------------------------------------------------


async def test_a_stale_decision_cannot_be_answered_until_reopened(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    r = await human.patch(task_path(task), {"expected_revision": 1, "description": "More rows"})
    assert r.status_code == 200
    r = await send_answer(human, decision["id"])
    assert error(r)[:2] == (409, "state_conflict") and error(r)[2]["reason"] == "stale"
    assert (await reopen(human, decision["id"], 1)).status_code == 200
    assert (await send_answer(human, decision["id"], generation=2)).status_code == 200


async def test_an_expired_decision_cannot_be_answered_until_reopened(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], expires_at="2026-11-29T19:00:00.000Z")
    service.clock.advance(hours=1)
    r = await send_answer(human, decision["id"])
    assert error(r)[:2] == (409, "state_conflict") and error(r)[2]["reason"] == "expired"
    r = await reopen(human, decision["id"], 1, expires_at="2026-11-30T19:00:00.000Z")
    assert r.status_code == 200, r.text
    assert (await send_answer(human, decision["id"], generation=2)).status_code == 200


async def test_a_replayed_answer_after_expiry_does_not_revive_the_allow(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], expires_at="2026-11-29T19:00:00.000Z")
    first = await send_answer(human, decision["id"], key="answer-once")
    assert first.json()["status"] == "allowed"
    service.clock.advance(hours=2)
    replay = await send_answer(human, decision["id"], key="answer-once")
    assert replay.status_code == 200
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert replay.json() == first.json()
    assert (await get_decision(human, decision["id"]))["status"] == "expired"
    assert (await get_task(human, task))["ready"] is False


# --- relayed human answers ----------------------------------------------------------


async def test_relayed_answer_records_agent_session_verbatim_text_and_the_enabling_human(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    enabled = await set_policy(human, allow_relayed_human_answers=True)
    await set_policy(human, lease_seconds=600)  # later revisions do not move the grant
    agent = await service.agent()
    relay = {"prompt": "  Proceed or Stop?\n", "response": "proceed  ✓"}
    r = await send_answer(agent, decision["id"], relay=relay)
    assert r.status_code == 200, r.text
    answer = r.json()["current"]["answer"]
    assert answer["actor_id"] == agent.principal_id
    assert answer["actor_session_id"] == agent.session_id
    assert answer["relayed"] is True
    assert answer["relay"] == relay
    assert answer["authorized_by"] == human.principal_id
    assert answer["relay_policy_revision"] == enabled["revision"] == 2
    assert r.json()["status"] == "allowed"
    events = (await human.get(f"{BASE}/events")).json()["items"]
    assert [e["data"]["relayed"] for e in events if e["type"] == "decision.answered"] == [True]


async def test_relay_grant_is_the_most_recent_revision_that_turned_the_switch_on(
    service: Service, human: Caller, project: str
) -> None:
    second_human = await service.principal("human", "bob")
    task = await new_task(human)
    decision = await open_decision(human, [task])
    await set_policy(human, allow_relayed_human_answers=True)
    await set_policy(human, allow_relayed_human_answers=False)
    enabled = await set_policy(second_human, allow_relayed_human_answers=True)
    await set_policy(human, review_mode="any")  # not a rules edit: the pin holds
    agent = await service.agent()
    r = await send_answer(agent, decision["id"], relay=RELAY)
    assert r.status_code == 200, r.text
    answer = r.json()["current"]["answer"]
    assert answer["authorized_by"] == second_human.principal_id
    assert answer["relay_policy_revision"] == enabled["revision"] == 4


async def test_relay_is_refused_while_the_switch_is_off(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    await set_policy(human, allow_relayed_human_answers=True)
    await set_policy(human, allow_relayed_human_answers=False)
    agent = await service.agent()
    r = await send_answer(agent, decision["id"], relay=RELAY)
    assert error(r)[:2] == (403, "forbidden") and error(r)[2]["reason"] == "relay_disabled"


async def test_relay_from_a_human_is_refused(human: Caller, project: str) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    await set_policy(human, allow_relayed_human_answers=True)
    r = await send_answer(human, decision["id"], relay=RELAY)
    assert error(r)[:2] == (403, "forbidden")
    assert error(r)[2]["reason"] == "relay_requires_agent_session"


async def test_relay_from_an_agent_without_a_session_is_refused(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    await set_policy(human, allow_relayed_human_answers=True)
    agent = await service.principal("agent", "sessionless")
    r = await send_answer(agent, decision["id"], relay=RELAY)
    assert error(r)[:2] == (403, "forbidden") and error(r)[2]["reason"] == "session_required"


@pytest.mark.parametrize("required_actor", ["agent", "either"])
async def test_relay_on_a_decision_that_is_not_human_required_is_invalid(
    service: Service, human: Caller, project: str, required_actor: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], required_actor=required_actor)
    await set_policy(human, allow_relayed_human_answers=True)
    agent = await service.agent()
    r = await send_answer(agent, decision["id"], relay=RELAY)
    assert error(r)[:2] == (400, "invalid_request") and error(r)[2]["field"] == "relay"


async def test_relay_with_a_stale_generation_is_a_generation_conflict(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    await set_policy(human, allow_relayed_human_answers=True)
    assert (await reopen(human, decision["id"], 1)).status_code == 200
    agent = await service.agent()
    r = await send_answer(agent, decision["id"], generation=1, relay=RELAY)
    assert error(r)[:2] == (409, "generation_conflict")


async def test_agents_cannot_turn_the_relay_switch_on(
    service: Service, human: Caller, project: str
) -> None:
    await set_policy(human, agent_rule_editing=True)
    agent = await service.agent()
    r = await agent.patch(
        f"{BASE}/policy", {"expected_revision": 2, "allow_relayed_human_answers": True}
    )
    assert error(r)[:2] == (403, "forbidden")


async def test_a_direct_answer_has_a_null_relay_in_history(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    await set_policy(human, allow_relayed_human_answers=True)
    await send_answer(human, decision["id"], disposition="defer", answer="Stop")
    assert (await reopen(human, decision["id"], 1)).status_code == 200
    agent = await service.agent()
    assert (await send_answer(agent, decision["id"], 2, relay=RELAY)).status_code == 200
    history = (await get_decision(human, decision["id"]))["history"]["items"]
    assert [g["answer"]["relay"] for g in history] == [RELAY, None]
    assert [g["answer"]["relayed"] for g in history] == [True, False]


async def test_a_refused_answer_writes_no_event_and_its_key_can_be_retried(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], required_actor="either")
    agent = await service.principal("agent", "later-in-a-session")
    r = await send_answer(agent, decision["id"], key="answer-key")
    assert error(r)[:2] == (403, "forbidden")
    events = (await human.get(f"{BASE}/events")).json()["items"]
    assert [e["type"] for e in events if e["type"].startswith("decision.")] == ["decision.opened"]
    await agent.start_session()
    r = await send_answer(agent, decision["id"], key="answer-key")
    assert r.status_code == 200 and "Idempotent-Replayed" not in r.headers
    events = (await human.get(f"{BASE}/events")).json()["items"]
    assert [e["type"] for e in events if e["type"] == "decision.answered"] == ["decision.answered"]


async def test_concurrent_answers_to_one_generation_record_exactly_one(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    other = await service.principal("human", "bob")
    results = await asyncio.gather(
        send_answer(human, decision["id"]),
        send_answer(other, decision["id"], disposition="deny", answer="Stop"),
    )
    assert sorted(r.status_code for r in results) == [200, 409]
    refused = next(r for r in results if r.status_code == 409)
    assert error(refused)[2]["reason"] == "already_answered"
    found = await get_decision(human, decision["id"])
    winner = next(r for r in results if r.status_code == 200).json()
    assert found["current"]["answer"] == winner["current"]["answer"]
