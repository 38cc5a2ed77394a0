"""Opening decisions: the request rules, the stored shape, lists, detail and storage."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.decisions_support import (
    BASE,
    DECISIONS,
    decision_body,
    decision_path,
    error,
    get_decision,
    new_task,
    open_decision,
    reopen,
    send_answer,
    set_policy,
    task_path,
)


async def test_open_pins_current_task_and_policy_revisions(human: Caller, project: str) -> None:
    task = await new_task(human)
    other = await new_task(human, "Second task")
    r = await human.patch(task_path(task), {"expected_revision": 1, "priority": 5})
    assert r.status_code == 200, r.text
    # the policy's revision, not the one its rules last changed in (3 and 2
    # here; equal, a pin of the wrong one went unnoticed: mutantaudit1)
    await set_policy(human, rules="No Friday deploys.")
    await set_policy(human, lease_seconds=600)
    decision = await open_decision(human, [task, other], expires_at="2026-12-01T00:00:00+01:00")
    assert decision["status"] == "pending" and decision["work_allowed"] is False
    assert decision["generation"] == 1
    current = decision["current"]
    assert current["affected"] == [
        {"task_id": task, "task_revision": 2},
        {"task_id": other, "task_revision": 1},
    ]
    assert current["policy_revision"] == 3
    assert current["environment"] == "staging"
    assert current["conditions"] == ["rollback owner recorded"]
    assert current["expires_at"] == "2026-11-30T23:00:00.000Z"
    assert current["reopen_rationale"] is None and current["answer"] is None
    assert current["actor_id"] == human.principal_id and current["actor_session_id"] is None
    assert decision["created_by"] == human.principal_id
    assert decision["created_at"] == current["at"] == "2026-11-29T18:00:00.000Z"


DECISION_KEYS = {
    "id", "project_id", "question", "options", "rationale", "required_actor",
    "recommendation", "reversible", "status", "work_allowed", "generation", "current",
    "created_at", "created_by",
}  # fmt: skip
GENERATION_KEYS = {
    "generation", "affected", "policy_revision", "environment", "conditions", "expires_at",
    "reopen_rationale", "actor_id", "actor_session_id", "at", "answer",
}  # fmt: skip
ANSWER_KEYS = {
    "disposition", "answer", "rationale", "conditions_confirmed", "actor_id",
    "actor_session_id", "relayed", "relay", "authorized_by", "relay_policy_revision",
    "timed_out", "at",
}  # fmt: skip


async def test_decision_generation_and_answer_have_exactly_the_contract_fields(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    opened = await open_decision(human, [task])
    assert set(opened) == DECISION_KEYS
    assert set(opened["current"]) == GENERATION_KEYS
    assert opened["current"]["affected"] == [{"task_id": task, "task_revision": 1}]
    r = await send_answer(human, opened["id"])
    answered = r.json()
    assert set(answered) == DECISION_KEYS and set(answered["current"]["answer"]) == ANSWER_KEYS
    detail = await get_decision(human, opened["id"])
    assert set(detail) == DECISION_KEYS | {"history"}
    assert set(detail["history"]) == {"items", "next_cursor"}
    assert [set(g) for g in detail["history"]["items"]] == [GENERATION_KEYS]
    listed = (await human.get(DECISIONS)).json()
    assert set(listed) == {"items", "next_cursor"} and set(listed["items"][0]) == DECISION_KEYS


async def test_open_answers_201_and_writes_a_decision_opened_event(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], required_actor="either")
    events = (await human.get(f"{BASE}/events")).json()["items"]
    opened = [e for e in events if e["type"] == "decision.opened"]
    assert len(opened) == 1
    assert opened[0]["subject_id"] == decision["id"]
    assert opened[0]["data"] == {
        "generation": 1, "task_ids": [task], "required_actor": "either", "reversible": False,
        "expires_at": None,
    }  # fmt: skip
    # its expiry, which a follower counts down to by the service's clock (dashdrift)
    at = "2026-12-01T09:00:00.000Z"
    await open_decision(human, [task], expires_at=at)
    events = (await human.get(f"{BASE}/events")).json()["items"]
    assert events[-1]["data"]["expires_at"] == at


@pytest.mark.parametrize(
    "options",
    [["\u05db\u05df", "\u05dc\u05d0"],  # Hebrew: yes, no
     ["\u0646\u0639\u0645", "\u0644\u0627"],  # Arabic
     ["\u0645\u06cc\u200c\u0631\u0648\u0645", "\u0645\u06cc\u0631\u0648\u0645"],  # Persian, ZWNJ
     ["Deploy to \u05de\u05e2\u05e8\u05db\u05ea", "Wait"],
     ["\u2067\u05db\u05df\u2069 (yes)", "\u200fno\u200f", "\u061cmaybe"],
     ["\U0001f468\u200d\U0001f469", "\U0001f468 \U0001f469"],  # one picture, two
     ["\u05db\u05df \u05dc\u05d0", "\u05dc\u05d0 \u05db\u05df"]],  # words in another order
)  # fmt: skip
async def test_right_to_left_text_and_its_marks_are_taken(
    human: Caller, project: str, options: list[str]
) -> None:
    """The rules against text drawn as other words must leave right-to-left
    text, its marks and isolates, and joined emoji alone (review53); the
    environment may hold them too, inside (it begins and ends with a
    character that shows, as a knowledge scope's does)."""
    task = await new_task(human)
    environment = f"eu {options[0]} prod"
    r = await human.post(DECISIONS, decision_body([task], options=options, environment=environment))
    assert r.status_code == 201, r.text
    assert r.json()["options"] == options


@pytest.mark.parametrize(
    "environment",
    ["prod \u26a0\ufe0f", "\u2764\ufe0f prod", "cafe\u0301", "prod 1\ufe0f\u20e3",
     "prod \U0001f44d\U0001f3fd", "\u05e9\u05dc\u05d1 1"],
)  # fmt: skip
async def test_an_environment_ending_in_what_shows_with_its_character_is_taken(
    human: Caller, project: str, environment: str
) -> None:
    """Each end is judged as a reader sees it: an emoji's variation
    selector, a keycap or a combining mark shows with the character before
    it. `prod` + U+26A0 U+FE0F was refused for "a character that shows
    nothing" at its end (review68)."""
    task = await new_task(human)
    r = await human.post(DECISIONS, decision_body([task], environment=environment))
    assert r.status_code == 201, r.text
    assert r.json()["current"]["environment"] == environment


async def test_open_replay_returns_the_stored_decision(human: Caller, project: str) -> None:
    task = await new_task(human)
    body = decision_body([task])
    first = await human.post(DECISIONS, body, key="open-once")
    again = await human.post(DECISIONS, body, key="open-once")
    assert first.status_code == again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    listed = (await human.get(DECISIONS)).json()["items"]
    assert len(listed) == 1


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"options": ["Only"]}, "options"),
        ({"options": [f"o{i}" for i in range(21)]}, "options"),
        ({"options": ["Proceed", "Stop", "Proceed"]}, "options[2]"),
        ({"options": ["Proceed", ""]}, "options[1]"),
        ({"options": ["Proceed", " \u200b "]}, "options[1]"),  # shows nothing
        ({"options": ["Deny", "Deny\u200b", "Allow"]}, "options[1]"),  # shown the same
        ({"options": ["Stop", "Stop\u00a0"]}, "options[1]"),  # a trailing space
        ({"options": ["Caf\u00e9", "Caf\u00e9\ufe0f"]}, "options[1]"),  # no variants
        ({"options": ["Caf\u00e9", "Cafe\u0301"]}, "options[1]"),  # composed, decomposed
        # drawn "Keep it" by its override: it passed as distinct (spoofaudit)
        ({"options": ["Keep it", "\u202eti peeK"]}, "options[1]"),
        ({"options": ["Go", "\u202aStay\u202c"]}, "options[1]"),  # an embedding
        # drawn "Keep it" too: an isolate and two marks reorder the words (review53)
        ({"options": ["Keep it", "\u2067it\u200f \u200fKeep\u2069"]}, "options[1]"),
        ({"options": ["\u05d1 \u05d0", "\u2066\u05d0\u200e \u200e\u05d1\u2069"]}, "options[1]"),
        # a line break is a space on the page; a bracket turned round in an RTL run (review54)
        ({"options": ["\u05db\u05df\n\u05dc\u05d0", "\u05db\u05df \u05dc\u05d0"]}, "options[1]"),
        ({"options": ["Approve (prod)", "\u200f(prod) Approve"]}, "options[1]"),
        # both drawn "1 בלש" on a left-to-right line (a terminal, a mail)
        ({"options": ["\u05e9\u05dc\u05d1 1", "1 \u05e9\u05dc\u05d1"]}, "options[1]"),
        ({"environment": "prod \u202dx"}, "environment"),
        ({"environment": "prod\u2029x"}, "environment"),  # shown "prod x" (spoofaudit)
        ({"environment": "prod\n"}, "environment"),
        ({"environment": "\x1b[31mprod"}, "environment"),
        ({"conditions": ["\u202ekcab"]}, "conditions[0]"),
        ({"environment": "\u2800"}, "environment"),  # the Braille blank
        # read "prod" by the person who ticks it, and not it (unicodeaudit)
        ({"environment": "prod\u200b"}, "environment"),
        ({"environment": " prod"}, "environment"),
        ({"environment": "prod\u00a0"}, "environment"),
        ({"conditions": ["backup taken", "\u202e"]}, "conditions[1]"),
        ({"question": ""}, "question"),
        ({"question": "   "}, "question"),
        ({"rationale": " "}, "rationale"),
        ({"required_actor": "robot"}, "required_actor"),
        ({"task_ids": []}, "task_ids"),
        ({"environment": ""}, "environment"),
        ({"conditions": [""]}, "conditions[0]"),
        ({"recommendation": "Maybe"}, "recommendation"),
        ({"reversible": True}, "reversible"),
        ({"expires_at": "2026-11-29T17:00:00.000Z"}, "expires_at"),
        ({"expires_at": "2026-11-29T18:00:00.000Z"}, "expires_at"),
        ({"expires_at": "tomorrow"}, "expires_at"),
        ({"expires_at": "2026-11-30T18:00:00"}, "expires_at"),
        ({"expires_at": "2026-W49-1T00:00:00Z"}, "expires_at"),  # ISO week date, not RFC 3339
        ({"expires_at": "2026-11-30 18:00:00Z"}, "expires_at"),
        ({"expires_at": "9999-12-31T23:59:59-01:00"}, "expires_at"),  # beyond year 9999 UTC
        ({"expires_at": "0001-01-01T00:00:00+01:00"}, "expires_at"),  # before year 1 UTC
        ({"expires_at": "0999-01-01T00:00:00Z"}, "expires_at"),  # past, though "999-" sorts late
        ({"expires_at": "2026-11-29T18:00:00.0009Z"}, "expires_at"),  # stored as now: passed
        ({"reversible": 1}, "reversible"),
        ({"surprise": True}, "surprise"),
    ],
)
async def test_open_refuses_invalid_bodies_naming_the_field(
    human: Caller, project: str, overrides: dict[str, Any], field: str
) -> None:
    task = await new_task(human)
    r = await human.post(DECISIONS, decision_body([task], **overrides))
    status, code, details = error(r)
    assert (status, code, details["field"]) == (400, "invalid_request", field), r.text


async def test_open_accepts_twenty_options_and_a_recommended_reversible_decision(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    options = [f"option {i}" for i in range(20)]
    decision = await open_decision(
        human, [task], options=options, recommendation="option 3", reversible=True
    )
    assert decision["options"] == options
    assert decision["recommendation"] == "option 3" and decision["reversible"] is True


async def test_open_refuses_unknown_duplicate_and_foreign_tasks(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    r = await human.post("/api/v1/projects", {"id": "other", "name": "Other"})
    assert r.status_code == 201
    r = await human.post("/api/v1/projects/other/tasks", {"title": "Elsewhere"})
    foreign = r.json()["id"]
    for task_ids, field in (
        ([task, "task_nope"], "task_ids[1]"),
        ([task, task], "task_ids[1]"),
        ([foreign], "task_ids[0]"),
    ):
        r = await human.post(DECISIONS, decision_body(task_ids))
        assert error(r)[:2] == (400, "invalid_request") and error(r)[2]["field"] == field


async def test_open_in_an_unknown_project_is_not_found(human: Caller, project: str) -> None:
    task = await new_task(human)
    r = await human.post("/api/v1/projects/nope/decisions", decision_body([task]))
    assert error(r)[:2] == (404, "not_found")


async def test_an_agent_opens_a_human_required_decision_that_is_not_reversible(
    service: Service, human: Caller, project: str
) -> None:
    """Only the reversible kind is refused to an agent (pinned over REST
    only by the MCP loop's test: mutantaudit1)."""
    task = await new_task(human)
    agent = await service.agent()
    r = await agent.post(DECISIONS, decision_body([task], reversible=False))
    assert r.status_code == 201, r.text
    assert r.json()["required_actor"] == "human" and r.json()["status"] == "pending"


async def test_agent_cannot_open_a_reversible_human_required_decision(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    agent = await service.agent()
    body = decision_body([task], recommendation="Proceed", reversible=True)
    r = await agent.post(DECISIONS, body)
    assert error(r)[:2] == (403, "forbidden")
    assert error(r)[2]["reason"] == "human_required_reversible"
    # the same question is fine when an agent may take it, or when a human asks it
    assert (await agent.post(DECISIONS, {**body, "required_actor": "either"})).status_code == 201
    assert (await human.post(DECISIONS, body)).status_code == 201


async def test_agent_opening_records_its_session(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    agent = await service.agent()
    decision = await open_decision(agent, [task], required_actor="agent")
    assert decision["current"]["actor_id"] == agent.principal_id
    assert decision["current"]["actor_session_id"] == agent.session_id


async def _hold_publication(human: Caller, task_id: str) -> None:
    r = await human.post(task_path(task_id, "publication/prepare"))
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("holder", ["task", "subject", "activity"])
async def test_open_and_reopen_are_refused_while_publication_authority_is_held(
    human: Caller, project: str, holder: str
) -> None:
    subject = await new_task(human, "Ship the release")
    activity = await new_task(human, "Review the release", subject_task_id=subject)
    # the decision affects `affected`; publication is held on `held`
    affected, held = {
        "task": (subject, subject),
        "subject": (activity, subject),
        "activity": (subject, activity),
    }[holder]
    earlier = await open_decision(human, [affected])
    await send_answer(human, earlier["id"])  # an allowed decision lets publication start
    await _hold_publication(human, held)
    r = await human.post(DECISIONS, decision_body([affected]))
    assert error(r)[:2] == (409, "publication_in_progress")
    assert error(r)[2]["task_ids"] == [held]
    r = await reopen(human, earlier["id"], 1)
    assert error(r)[:2] == (409, "publication_in_progress")
    r = await human.post(task_path(held, "publication/finalize"))
    assert r.status_code == 200, r.text
    assert (await human.post(DECISIONS, decision_body([affected]))).status_code == 201


async def test_an_unrelated_publication_does_not_block_opening(human: Caller, project: str) -> None:
    task = await new_task(human)
    unrelated = await new_task(human, "Unrelated")
    await _hold_publication(human, unrelated)
    assert (await human.post(DECISIONS, decision_body([task]))).status_code == 201


# --- lists and detail -------------------------------------------------------------


async def test_list_orders_by_creation_and_pages_with_a_cursor(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    ids = []
    for _ in range(5):
        ids.append((await open_decision(human, [task]))["id"])
        service.clock.advance(seconds=1)
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = (await human.get(DECISIONS, **params)).json()
        seen += [d["id"] for d in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids


async def test_list_filters_by_computed_status(human: Caller, project: str) -> None:
    task = await new_task(human)
    other = await new_task(human, "Other")
    pending = await open_decision(human, [task])
    allowed = await open_decision(human, [task])
    denied = await open_decision(human, [task])
    stale = await open_decision(human, [other])
    await send_answer(human, allowed["id"])
    await send_answer(human, denied["id"], disposition="deny", answer="Stop")
    await send_answer(human, stale["id"])
    r = await human.patch(task_path(other), {"expected_revision": 1, "title": "Renamed"})
    assert r.status_code == 200
    for status, expected in (
        ("pending", [pending]),
        ("allowed", [allowed]),
        ("denied", [denied]),
        ("stale", [stale]),
        ("deferred", []),
        ("expired", []),
    ):
        items = (await human.get(DECISIONS, status=status)).json()["items"]
        assert [d["id"] for d in items] == [d["id"] for d in expected], status
        assert all(d["status"] == status for d in items)


async def test_list_refuses_bad_status_cursor_and_limit(human: Caller, project: str) -> None:
    for params, field in (
        ({"status": "maybe"}, "status"),
        ({"cursor": "!!"}, "cursor"),
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
    ):
        r = await human.get(DECISIONS, **params)
        assert error(r)[:2] == (400, "invalid_request") and error(r)[2]["field"] == field


async def test_detail_history_lists_generations_newest_first_with_a_cursor(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    await send_answer(human, decision["id"], disposition="defer", answer="Stop")
    assert (await reopen(human, decision["id"], 1)).status_code == 200
    assert (await reopen(human, decision["id"], 2, environment="production")).status_code == 200
    full = await get_decision(human, decision["id"])
    assert [g["generation"] for g in full["history"]["items"]] == [3, 2, 1]
    assert full["history"]["items"][0] == full["current"]
    assert full["history"]["items"][2]["answer"]["disposition"] == "defer"
    first = await get_decision(human, decision["id"], limit=2)
    assert [g["generation"] for g in first["history"]["items"]] == [3, 2]
    rest = await get_decision(
        human, decision["id"], limit=2, cursor=first["history"]["next_cursor"]
    )
    assert [g["generation"] for g in rest["history"]["items"]] == [1]
    assert rest["history"]["next_cursor"] is None


async def test_detail_of_unknown_or_foreign_decision_is_not_found(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    r = await human.post("/api/v1/projects", {"id": "other", "name": "Other"})
    assert r.status_code == 201
    assert error(await human.get(decision_path("dec_nope")))[:2] == (404, "not_found")
    r = await human.get(f"/api/v1/projects/other/decisions/{decision['id']}")
    assert error(r)[:2] == (404, "not_found")


# --- storage --------------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE decision_generations SET environment = 'prod'",
        "DELETE FROM decision_generations",
        "UPDATE decision_affected SET task_revision = 9",
        "DELETE FROM decision_affected",
        "UPDATE decision_answers SET disposition = 'deny'",
        "DELETE FROM decision_answers",
        "UPDATE decisions SET question = 'Something else?'",
        "UPDATE decisions SET required_actor = 'agent'",
        "UPDATE decisions SET generation = 5",
        "DELETE FROM decisions",
    ],
)
async def test_history_rows_are_immutable_in_the_database(
    service: Service, human: Caller, project: str, statement: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    await send_answer(human, decision["id"])
    conn = sqlite3.connect(service.db_path)
    try:
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(statement)
    finally:
        conn.close()


async def test_the_database_lets_a_decision_move_to_its_next_generation(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    conn = sqlite3.connect(service.db_path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        moved = conn.execute(
            "UPDATE decisions SET generation = generation + 1 WHERE id = ?", (decision["id"],)
        )
        assert moved.rowcount == 1  # no trigger refused it, and it named the decision
        (generation,) = conn.execute(
            "SELECT generation FROM decisions WHERE id = ?", (decision["id"],)
        ).fetchone()
        assert generation == 2
        conn.execute("ROLLBACK")
    finally:
        conn.close()


@pytest.mark.parametrize(
    "expires_at",
    [
        "2027-01-01T00:00:00.000+99:99",
        "2027-01-01T00:00:00+24:00",
        "2027-13-01T00:00:00Z",
        "2027-01-01T00:00:00+05:60",
        "2027-01-01T00:00:00-00:99",
    ],  # (read as +06:00, -01:39)
)
async def test_an_out_of_range_time_field_is_400_in_the_services_words(
    human: Caller, project: str, expires_at: str
) -> None:
    """datetime's own exception text ("offset must be a timedelta ...") never
    reaches a client (contract section 2)."""
    task = await new_task(human)
    r = await human.post(DECISIONS, decision_body([task], expires_at=expires_at))
    status, code, details = error(r)
    assert (status, code, details["field"]) == (400, "invalid_request", "expires_at"), r.text
    assert r.json()["error"]["message"] == "a date, time or offset field is out of range"
