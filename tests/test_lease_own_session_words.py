"""leasejourney: an agent that lost its session while its lease lived is told,
by every owner operation, that the lease is its own (held by an earlier
session), as a named claim of the task already tells it (tasks.md, Leases:
"The same agent in another session is not the owner"; the named claim says
"another session of yours holds this task")."""

from __future__ import annotations

import pytest

from tests.conftest import Caller, Service
from tests.tasks_support import BASE, claimed_by_agent, error, task_path


@pytest.mark.parametrize("action", ["renew", "checkpoint", "release", "submit"])
async def test_an_owner_operation_from_another_session_says_the_lease_is_yours(
    service: Service, human: Caller, project: str, action: str
) -> None:
    task, agent = await claimed_by_agent(service, human)
    await agent.start_session()
    body = (
        {"note": "n"}
        if action == "checkpoint"
        else ({"summary": "s", "lessons": []} if action == "submit" else {})
    )
    status, code, details = error(await agent.post(task_path(task["id"], action), body))
    assert (status, code, details["reason"]) == (409, "lease_conflict", "held_by_another")
    named = await agent.post(f"{BASE}/claims", {"task_id": task["id"]})
    assert "another session of yours" in named.json()["error"]["message"]
    r = await agent.post(task_path(task["id"], action), body)
    assert "another session of yours" in r.json()["error"]["message"]


async def test_an_owner_operation_says_whose_lease_in_the_words_tasks_md_quotes(
    service: Service, human: Caller, project: str
) -> None:
    # tasks.md, Leases: "another principal holds the lease", or "another
    # session of yours holds the lease until it lapses (then recover takes the
    # task over)"
    task, agent = await claimed_by_agent(service, human)
    other = await service.agent()
    r = await other.post(task_path(task["id"], "renew"), {})
    assert r.json()["error"]["message"] == "another principal holds the lease"
    await agent.start_session()
    r = await agent.post(task_path(task["id"], "renew"), {})
    assert r.json()["error"]["message"] == (
        "another session of yours holds the lease until it lapses"
        " (then recover takes the task over)"
    )
