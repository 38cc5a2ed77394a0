"""Advice in refusals, followed to the letter as a literal agent would
(adviceaudit): each step it names exists and leads somewhere further."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from tests.conftest import Caller, Service
from tests.decisions_support import open_decision, send_answer
from tests.tasks_support import (
    BASE,
    claimed_by_agent,
    error,
    make_task,
    task_path,
    wait_until,
)
from waypost.clock import format_time


async def test_a_recover_refused_for_a_live_lease_says_when_it_may_be_recovered(
    service: Service, human: Caller, project: str
) -> None:
    """`lease_live` names the lease's `expires_at` (the MCP advice says
    "until ..." from it); at that instant the same recover goes through.
    No test read it: an answer without it, or with another instant, passed."""
    task, owner = await claimed_by_agent(service, human)
    lease = (await owner.get(task_path(task["id"]))).json()["lease"]
    other = await service.agent("other")
    status, code, details = error(await other.post(task_path(task["id"], "recover")))
    assert (status, code, details["reason"]) == (409, "lease_conflict", "lease_live")
    assert details["expires_at"] == lease["expires_at"]
    # wait exactly as told (the other's session kept live), then recover
    await wait_until(service, details["expires_at"], other)
    assert service.clock.iso() == details["expires_at"]
    r = await other.post(task_path(task["id"], "recover"))
    assert r.status_code == 200, r.text
    assert r.json()["previous_lease"] == lease


async def test_graphql_reopen_required_still_names_the_subscriptions_to_wait_on(
    service: Service, human: Caller, project: str
) -> None:
    """Only `declined` leaves `waitOn` null (docs/decisions.md; the
    UserError's description): a reopen_required refusal keeps REST's
    `wait_on`, so GraphQL's `waitOn` names one subscription per decision
    (after the reopening, that is where the answer comes). No test read
    `waitOn` there: a build that dropped it for reopen_required passed."""
    task = await make_task(human)
    stale = await open_decision(human, [task["id"]])
    assert (await send_answer(human, stale["id"])).status_code == 200
    r = await human.patch(task_path(task["id"]), {"expected_revision": 1, "description": "New."})
    assert r.status_code == 200, r.text
    pending = await open_decision(human, [task["id"]], question="And the other one?")
    agent = await service.agent()
    r = await agent.post(f"{BASE}/claims", {"task_id": task["id"]})
    _status, code, details = error(r)
    assert (code, details["reason"], details["reopen"]) == (
        "decision_required", "reopen_required", [stale["id"]]
    )  # fmt: skip
    assert "wait_on" in details
    answer = await agent.gql(
        "mutation ($input: TaskClaimInput!) { taskClaim(input: $input) {"
        " userErrors { code reason waitOn details } } }",
        {"input": {"idempotencyKey": "gql-claim", "projectId": "demo", "taskId": task["id"]}},
    )
    [user_error] = answer["data"]["taskClaim"]["userErrors"]
    assert user_error["reason"] == "reopen_required"
    assert user_error["details"]["reopen"] == [stale["id"]]
    assert user_error["waitOn"] == [
        f'decisionChanged(id: "{d}")' for d in (stale["id"], pending["id"])
    ]


async def test_graphql_context_names_where_a_declined_decision_is_read_in_graphqls_words(
    service: Service, human: Caller, project: str
) -> None:
    """The packet of a task a denial holds says where to read the denial:
    "the decisions route" over REST, the project's decision field over
    GraphQL (as its other advice does). No test read the GraphQL words."""
    task = await make_task(human, "walrus migration")
    decision = await open_decision(human, [task["id"]])
    denied = await send_answer(
        human, decision["id"], disposition="deny", answer="Stop", conditions_confirmed=False
    )
    assert denied.status_code == 200, denied.text
    r = await human.get(f"{BASE}/context", q="walrus", task_id=task["id"])
    held = r.json()["next_actions"][0]
    assert decision["id"] in held and "the decisions route" in held, held
    data = await human.gql(
        'query($t: String) { project(id: "demo") { context(q: "walrus", taskId: $t)'
        " { nextActions } } }",
        {"t": task["id"]},
    )
    said = data["data"]["project"]["context"]["nextActions"][0]
    assert decision["id"] in said and "the project's decision field" in said, said
    assert "route" not in said, said


async def test_nothing_ready_points_to_work_held_by_dependencies_alone(
    service: Service, human: Caller, project: str
) -> None:
    """The only open task waits on a cancelled dependency (only a human lifts
    it). The claim's refusal sent a REST agent to the digest alone, which
    lists the tasks decisions hold: it showed nothing, and the agent could
    not learn why nothing was ready (adviceaudit; MCP's advice said
    "task_list lists them all"). The route it now names lists the task."""
    base = await make_task(human, "base")
    child = await make_task(human, "child", depends_on=[base["id"]])
    r = await human.patch(task_path(base["id"]), {"expected_revision": 1, "status": "cancelled"})
    assert r.status_code == 200, r.text
    agent = await service.agent()
    r = await agent.post(f"{BASE}/claims", {})
    status, _code, details = error(r)
    assert (status, details["reason"]) == (404, "nothing_ready")
    digest: dict[str, Any] = (await agent.get(f"{BASE}/digest")).json()
    assert digest["blocked_tasks"] == []  # the digest is about decisions
    message = r.json()["error"]["message"]
    named = re.search(r"GET (/api/v1/\S+/tasks\?\S+)", message)
    assert named is not None, message
    path, _, query = named.group(1).partition("?")
    listed = (await agent.get(path, **dict(p.split("=") for p in query.split("&")))).json()
    assert [t["id"] for t in listed["items"]] == [child["id"]], listed


async def test_session_required_says_how_to_start_one(
    service: Service, human: Caller, project: str
) -> None:
    """`session_required` said only that a session is needed: the agent was
    left to guess the route and the header (adviceaudit). Done as it says,
    the claim goes through."""
    await make_task(human, "work")
    agent = await service.agent()
    r = await agent.client.post(f"{BASE}/claims", json={}, headers=agent.headers("c1", False))
    status, _code, details = error(r)
    assert (status, details["reason"]) == (403, "session_required")
    message = r.json()["error"]["message"]
    assert "POST /api/v1/sessions" in message and "Waypost-Session" in message, message
    started = await agent.client.post("/api/v1/sessions", headers=agent.headers("s1", False))
    assert started.status_code == 201, started.text
    header = {**agent.headers("c2", False), "Waypost-Session": started.json()["id"]}
    r = await agent.client.post(f"{BASE}/claims", json={}, headers=header)
    assert r.status_code == 200, r.text


async def test_the_holder_named_by_a_claim_refusal_is_recovered_at_the_time_it_names(
    service: Service, human: Caller, project: str
) -> None:
    """held_by_another -> wait until details.expires_at -> the named claim
    says lease_expired (use recover) -> recover goes through: no loop."""
    task, _owner = await claimed_by_agent(service, human)
    other = await service.agent("other")
    status, code, details = error(await other.post(f"{BASE}/claims", {"task_id": task["id"]}))
    assert (code, details["reason"]) == ("lease_conflict", "held_by_another")
    await wait_until(service, details["expires_at"], other)
    status, code, details = error(await other.post(f"{BASE}/claims", {"task_id": task["id"]}))
    assert (status, code, details["reason"]) == (409, "state_conflict", "lease_expired")
    assert (
        "recover"
        in (await other.post(f"{BASE}/claims", {"task_id": task["id"]})).json()["error"]["message"]
    )
    r = await other.post(task_path(task["id"], "recover"))
    assert r.status_code == 200, r.text


async def test_reopen_required_says_an_expired_decision_needs_a_new_expiry(
    service: Service, human: Caller, project: str
) -> None:
    """The refusal said "reopen each one"; done as said, an expired
    decision's reopen was refused for its passed expiry, one more round
    trip (adviceaudit; MCP's advice said it). Now the refusal says it, and
    the reopen it describes goes through."""
    task = await make_task(human)
    expiry = service.clock.now() + timedelta(minutes=5)
    expired = await open_decision(human, [task["id"]], expires_at=format_time(expiry))
    service.clock.advance(minutes=6)
    agent = await service.agent()
    r = await agent.post(f"{BASE}/claims", {"task_id": task["id"]})
    _status, _code, details = error(r)
    assert (details["reason"], details["reopen"]) == ("reopen_required", [expired["id"]])
    assert "expires_at" in r.json()["error"]["message"], r.text
    path = f"{BASE}/decisions/{expired['id']}/reopen"
    r = await human.post(
        path, {"expected_generation": 1, "rationale": "Again.", "expires_at": None}
    )
    assert r.status_code == 200, r.text


async def test_a_holder_refused_behind_a_denial_is_told_how_to_give_the_task_back(
    service: Service, human: Caller, project: str
) -> None:
    """`declined` said only "leave this work (claim other work)": an agent
    that did so kept the denied task's lease, and once the denial was
    reconsidered and answered allow nobody could claim the task until that
    lease ran out (mcpjourney, over MCP). The message names the release,
    and the release it names leaves the task to whoever claims it next."""
    task, holder = await claimed_by_agent(service, human)
    decision = await open_decision(human, [task["id"]])
    denied = await send_answer(human, decision["id"], disposition="deny", answer="Stop")
    assert denied.status_code == 200, denied.text
    r = await holder.post(task_path(task["id"], "submit"), {"summary": "done it"})
    _status, _code, details = error(r)
    assert details["reason"] == "declined"
    named = re.search(r"POST (\S+/release)", r.json()["error"]["message"])
    assert named is not None, r.text
    release = named.group(1).replace("{id}", task["id"])
    assert (await holder.post(release)).status_code == 200
    reopened = await human.post(
        f"{BASE}/decisions/{decision['id']}/reopen",
        {"expected_generation": 1, "rationale": "The rollback owner is back."},
    )
    assert reopened.status_code == 200, reopened.text
    assert (await send_answer(human, decision["id"], 2)).status_code == 200
    other = await service.agent("other")
    r = await other.post(f"{BASE}/claims", {})
    assert r.status_code == 200, r.text
    assert r.json()["task"]["id"] == task["id"]
