"""A rule is judged by the state its own write unit reads, not by anything
read before it (docs/architecture.md, "The path of one write", step 4).

Each test lets another write commit after the request has passed
authentication (and every look that happens on the event loop) and just
before its own unit enters the writer's queue; the request must then be
judged by the state that write left. Deterministic: the other write is
awaited to its commit before the request's unit is handed to the writer.
"""

from __future__ import annotations

import pytest

from tests.conftest import Caller, Service
from tests.rechecks_support import Meanwhiles
from tests.tasks_support import BASE, claim, error, make_task, open_decision, set_policy, task_path


@pytest.fixture
def meanwhile(service: Service, monkeypatch: pytest.MonkeyPatch) -> Meanwhiles:
    return Meanwhiles(service, monkeypatch)


async def test_delegation_turned_off_meanwhile_refuses_an_agents_rules_edit(
    service: Service, human: Caller, project: str, meanwhile: Meanwhiles
) -> None:
    await set_policy(human, agent_rule_editing=True)
    agent = await service.agent()
    revision = (await human.get(f"{BASE}/policy")).json()["revision"]

    async def turn_off() -> None:
        await set_policy(human, agent_rule_editing=False)

    meanwhile.before_next_write(turn_off)
    # the revision it will find once delegation is off: only the delegation can refuse it
    r = await agent.patch(f"{BASE}/policy", {"expected_revision": revision + 1, "rules": "mine"})
    assert meanwhile.ran
    status, code, details = error(r)
    assert (status, code, details["reason"]) == (403, "forbidden", "agent_rule_editing_off")
    assert (await human.get(f"{BASE}/policy")).json()["rules"] != "mine"


async def test_integration_owner_named_meanwhile_refuses_a_humans_prepare(
    service: Service, human: Caller, project: str, meanwhile: Meanwhiles
) -> None:
    task = await make_task(human)
    owner = await service.principal("human")

    async def name_owner() -> None:
        await set_policy(human, integration_owner=owner.principal_id)

    meanwhile.before_next_write(name_owner)
    r = await human.post(task_path(task["id"], "publication/prepare"))
    assert meanwhile.ran
    status, code, details = error(r)
    assert (status, code, details["reason"]) == (403, "forbidden", "not_integration_owner")
    assert (await human.get(task_path(task["id"]))).json()["publication"] is None


async def test_a_decision_answered_meanwhile_refuses_a_second_answer(
    service: Service, human: Caller, project: str, meanwhile: Meanwhiles
) -> None:
    task = await make_task(human)
    decision_id = await open_decision(human, task["id"])
    other = await service.principal("human")
    allow = {"expected_generation": 1, "disposition": "allow", "answer": "Proceed",
             "rationale": "fine", "conditions_confirmed": True}  # fmt: skip

    async def deny_first() -> None:
        deny = {**allow, "disposition": "deny", "answer": "Stop"}
        r = await other.post(f"{BASE}/decisions/{decision_id}/answer", deny)
        assert r.status_code == 200, r.text

    meanwhile.before_next_write(deny_first)
    r = await human.post(f"{BASE}/decisions/{decision_id}/answer", allow)
    assert meanwhile.ran
    status, code, details = error(r)
    assert (status, code, details["reason"]) == (409, "state_conflict", "already_answered")
    decision = (await human.get(f"{BASE}/decisions/{decision_id}")).json()
    assert decision["status"] == "denied"


async def test_a_decision_opened_meanwhile_blocks_a_named_claim(
    service: Service, human: Caller, project: str, meanwhile: Meanwhiles
) -> None:
    task = await make_task(human)
    agent = await service.agent()

    async def block() -> None:
        await open_decision(human, task["id"])

    meanwhile.before_next_write(block)
    r = await agent.post(f"{BASE}/claims", {"task_id": task["id"]})
    assert meanwhile.ran
    assert error(r)[:2] == (409, "decision_required")
    assert (await human.get(task_path(task["id"]))).json()["status"] == "open"


async def test_a_lease_recovered_meanwhile_refuses_its_former_holders_submit(
    service: Service, human: Caller, project: str, meanwhile: Meanwhiles
) -> None:
    from tests.tasks_support import wait_until

    task = await make_task(human)
    holder, taker = await service.agent(), await service.agent()
    lease = (await claim(holder, task["id"]))["lease"]

    async def lapse_and_recover() -> None:
        await wait_until(service, lease["expires_at"], holder, taker)
        service.clock.advance(seconds=1)
        r = await taker.post(task_path(task["id"], "recover"))
        assert r.status_code == 200, r.text

    meanwhile.before_next_write(lapse_and_recover)
    r = await holder.post(task_path(task["id"], "submit"), {"summary": "done"})
    assert meanwhile.ran
    status, code, details = error(r)
    assert (status, code, details["reason"]) == (409, "lease_conflict", "held_by_another")
    assert (await human.get(task_path(task["id"]))).json()["status"] == "claimed"
