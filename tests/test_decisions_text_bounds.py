"""The text and count bounds docs/decisions.md states for opening and answering,
each at its edge: the largest value taken, one more refused naming the field
(kdocaudit: no test held the question's 4,000, an option's 500, the 100
affected tasks or a relay's 16,384 to what the page says)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.decisions_support import (
    DECISIONS,
    decision_body,
    error,
    new_task,
    open_decision,
    send_answer,
    set_policy,
)


def _options(most: int) -> list[str]:
    return ["P" * most, "Stop"]


@pytest.mark.parametrize(
    ("field", "taken", "refused", "named"),
    [
        ("question", {"question": "q" * 4000}, {"question": "q" * 4001}, "question"),
        ("option", {"options": _options(500)}, {"options": _options(501)}, "options[0]"),
        ("condition", {"conditions": ["c" * 1000]}, {"conditions": ["c" * 1001]}, "conditions[0]"),
        ("rationale", {"rationale": "r" * 16384}, {"rationale": "r" * 16385}, "rationale"),
        ("environment", {"environment": "e" * 200}, {"environment": "e" * 201}, "environment"),
        (
            "conditions",
            {"conditions": [f"c{i}" for i in range(50)]},
            {"conditions": [f"c{i}" for i in range(51)]},
            "conditions",
        ),
    ],
)
async def test_open_takes_each_text_at_its_bound_and_refuses_one_more(
    human: Caller,
    project: str,
    field: str,
    taken: dict[str, Any],
    refused: dict[str, Any],
    named: str,
) -> None:
    task = await new_task(human)
    r = await human.post(DECISIONS, decision_body([task], **taken))
    assert r.status_code == 201, (field, r.text[:300])
    r = await human.post(DECISIONS, decision_body([task], **refused))
    assert error(r)[:2] == (400, "invalid_request") and error(r)[2]["field"] == named, r.text[:300]


async def test_open_takes_100_affected_tasks_and_refuses_101(human: Caller, project: str) -> None:
    tasks = [await new_task(human, f"Task {i}") for i in range(101)]
    decision = await open_decision(human, tasks[:100])
    assert len(decision["current"]["affected"]) == 100
    r = await human.post(DECISIONS, decision_body(tasks))
    status, code, details = error(r)
    assert (status, code, details["field"]) == (400, "invalid_request", "task_ids"), r.text[:300]


@pytest.mark.parametrize("part", ["prompt", "response"])
async def test_a_relay_takes_16384_characters_and_refuses_16385(
    service: Service, human: Caller, project: str, part: str
) -> None:
    await set_policy(human, allow_relayed_human_answers=True)
    agent = await service.agent()
    task = await new_task(human)
    too_long = await open_decision(human, [task])
    relay = {"prompt": "Proceed?", "response": "Yes.", part: "x" * 16385}
    r = await send_answer(agent, too_long["id"], relay=relay)
    status, code, details = error(r)
    assert (status, code, details["field"]) == (400, "invalid_request", f"relay.{part}"), r.text
    longest = await open_decision(human, [task])
    relay = {"prompt": "Proceed?", "response": "Yes.", part: "x" * 16384}
    r = await send_answer(agent, longest["id"], relay=relay)
    assert r.status_code == 200, r.text[:300]
    assert r.json()["current"]["answer"]["relay"][part] == "x" * 16384
