"""The digest over one adversarial world, held to a model computed from the
contract (service-contract section 7 and 13, the knowledge-and-decision
contract's timeout rules, docs/decisions.md "The digest") out of the decisions'
own histories and the task list, with a second project beside it whose items
must never show, and REST, GraphQL (both paths) and MCP giving one answer."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.conftest import Caller, Service, utc
from tests.decisions_support import (
    BASE,
    answer,
    decision_body,
    edit_task,
    new_task,
    open_decision,
    reopen,
    set_policy,
)
from tests.fastpath_support import both
from tests.gate_state_support import assert_gate_exact
from tests.mcp_support import MCP_HEADERS, messages_of, open_session
from tests.test_decisions_sweep import insert_agent_asked_human_decision, run_sweep
from waypost.clock import format_time

REVERSIBLE = {"required_actor": "either", "recommendation": "Proceed", "reversible": True}
HUMAN_REVERSIBLE = {"required_actor": "human", "recommendation": "Proceed", "reversible": True}
OTHER = "/api/v1/projects/other"


async def everything(caller: Caller, path: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 100}
        if cursor:
            params["cursor"] = cursor
        r = await caller.get(path, **params)
        assert r.status_code == 200, r.text
        found += r.json()["items"]
        cursor = r.json()["next_cursor"]
        if not cursor:
            return found


async def model_digest(caller: Caller, base: str, agents: set[str], now: str) -> dict[str, Any]:
    """The digest as the contract words it, from each decision's history."""
    decisions = []
    for d in await everything(caller, f"{base}/decisions"):
        r = await caller.get(f"{base}/decisions/{d['id']}", limit=100)
        assert r.status_code == 200, r.text
        decisions.append(r.json())
    at = utc(now)
    pending = [d for d in decisions if d["current"]["answer"] is None]
    pending.sort(key=lambda d: (d["created_at"], d["id"]))
    timed = []
    for d in decisions:
        times = [
            g["answer"]["at"] for g in d["history"]["items"]
            if g["answer"] is not None and g["answer"]["timed_out"]
            and utc(g["answer"]["at"]) >= at - timedelta(days=7)
        ]  # fmt: skip
        if times:
            timed.append((max(times), d))
    timed.sort(key=lambda x: x[1]["id"])  # ties (one sweep's instant): by id
    timed.sort(key=lambda x: x[0], reverse=True)
    soon = []
    for d in decisions:
        cur = d["current"]
        if not d["reversible"] or d["status"] != "pending" or cur["answer"] is not None:
            continue
        if d["required_actor"] == "human" and cur["actor_id"] in agents:
            continue  # an agent opened this cycle of a human-required question
        due = utc(cur["at"]) + timedelta(hours=24)
        if due > at + timedelta(hours=6):
            continue
        if cur["expires_at"] is not None and utc(cur["expires_at"]) <= due:
            continue  # expires before the sweep would answer it
        soon.append((cur["at"], d["id"], d))
    soon.sort(key=lambda x: (x[0], x[1]))
    tasks = await everything(caller, f"{base}/tasks")
    blocked = [
        t for t in tasks
        if t["status"] not in ("done", "cancelled") and t["blocked_by"]["decisions"]
    ]  # fmt: skip
    blocked.sort(key=lambda t: (-t["priority"], t["created_at"], t["id"]))
    return {
        "pending_decisions": [d["id"] for d in pending],
        "proceeded_by_timeout": [d["id"] for _, d in timed],
        "timing_out_soon": [d["id"] for _, _, d in soon],
        "blocked_tasks": [t["id"] for t in blocked],
        "ready_task_count": sum(1 for t in tasks if t["ready"]),
    }


def shape(digest: dict[str, Any]) -> dict[str, Any]:
    return {
        name: [x["id"] for x in digest[name]]
        for name in ("pending_decisions", "proceeded_by_timeout", "timing_out_soon",
                     "blocked_tasks")
    } | {"ready_task_count": digest["ready_task_count"]}  # fmt: skip


def insert_agent_reopened_generation(
    db_path: Path, decision_id: str, agent_id: str, at: str
) -> None:
    """A human-required reversible decision reopened by an agent, as rows recorded
    before the service refused such a reopening: generation 2 opened by the agent."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        cols = [r[1] for r in conn.execute("PRAGMA table_info(decision_generations)")]
        row = dict(zip(cols, conn.execute(
            "SELECT * FROM decision_generations WHERE decision_id = ? AND generation = 1",
            (decision_id,)).fetchone(), strict=True))  # fmt: skip
        row.update(
            generation=2,
            actor_id=agent_id,
            actor_kind="agent",
            at=at,
            reopen_rationale="agent asked again",
        )
        # as a reopening writes it: the decision's generation first (store.py)
        conn.execute("UPDATE decisions SET generation = 2 WHERE id = ?", (decision_id,))
        marks = ",".join("?" * len(cols))
        conn.execute(f"INSERT INTO decision_generations VALUES ({marks})", [row[c] for c in cols])
        for a in conn.execute(
            "SELECT * FROM decision_affected WHERE decision_id = ? AND generation = 1",
            (decision_id,),
        ).fetchall():
            conn.execute(
                "INSERT INTO decision_affected VALUES (?, 2, ?, ?, ?)", (a[0], a[2], a[3], a[4])
            )
        conn.execute("COMMIT")
        # the stored state followed, as it did for such rows (migration 0029)
        held = conn.execute(
            "SELECT generation, answered, timeout_opened_at FROM decision_holds"
            " WHERE decision_id = ?", (decision_id,),
        ).fetchone()  # fmt: skip
        assert held == (2, 0, None), held
    finally:
        conn.close()


async def build_world(service: Service, human: Caller) -> dict[str, Any]:
    clock = service.clock
    r = await human.post("/api/v1/projects", {"id": "other", "name": "Other"})
    assert r.status_code == 201, r.text
    agent = await service.agent()
    w: dict[str, Any] = {"agent": agent}
    # t0: an allow made stale by a rules edit, two reversible ones the sweep will take
    t_policy = await new_task(human, "policy pinned")
    d_policy = await open_decision(human, [t_policy])
    await answer(human, d_policy["id"])
    await set_policy(human, rules="Be careful.")
    w["timed"] = await open_decision(human, [await new_task(human, "timed")], **REVERSIBLE)
    clock.advance(seconds=1)
    w["timed_reopened"] = await open_decision(
        agent, [await new_task(human, "timed twice")], **REVERSIBLE
    )
    # the other project: its own timeout, pending decision and blocked task
    r = await human.post(f"{OTHER}/tasks", {"title": "elsewhere", "priority": 9})
    other_task = r.json()["id"]
    r = await human.post(f"{OTHER}/decisions", decision_body([other_task], **REVERSIBLE))
    assert r.status_code == 201, r.text
    w["other_timed"] = r.json()["id"]
    clock.advance(hours=24)
    assert await run_sweep(service) == 3
    # t1: a second cycle of one timed-out decision; a pending one in the other project
    assert (await reopen(human, w["timed_reopened"]["id"], 1)).status_code == 200
    r = await human.post(f"{OTHER}/decisions", decision_body([other_task], **REVERSIBLE))
    assert r.status_code == 201, r.text
    clock.advance(seconds=1)
    # every status of a decision in this project
    await open_decision(human, [await new_task(human, "pending", priority=2)])
    allowed_task = await new_task(human, "allowed")
    await answer(human, (await open_decision(human, [allowed_task]))["id"])
    await answer(human, (await open_decision(human, [await new_task(human, "denied")]))["id"],
                 disposition="deny")  # fmt: skip
    await answer(human, (await open_decision(human, [await new_task(human, "deferred")]))["id"],
                 disposition="defer")  # fmt: skip
    stale_answered = await new_task(human, "stale answered")
    await answer(human, (await open_decision(human, [stale_answered]))["id"])
    stale_open = await new_task(human, "stale unanswered")
    await open_decision(human, [stale_open])
    reopened_task = await new_task(human, "reopened")
    d = await open_decision(human, [reopened_task])
    await answer(human, d["id"])
    assert (await reopen(human, d["id"], 1)).status_code == 200
    expiry = format_time(clock.now() + timedelta(hours=1))
    await open_decision(human, [await new_task(human, "expired open")], expires_at=expiry)
    d = await open_decision(human, [await new_task(human, "expired allow")], expires_at=expiry)
    await answer(human, d["id"])
    # timing out soon and not: opened now (due in 24 h), later, expiring first,
    # not reversible, an agent's reversible "either" one, human-required by a human
    clock.advance(seconds=1)
    w["soon"] = await open_decision(human, [await new_task(human, "soon")], **REVERSIBLE)
    agent.session_id = None  # its session ended a day ago: agents ask without one
    w["agent_soon"] = await open_decision(
        agent, [await new_task(human, "agent soon")], **REVERSIBLE
    )
    w["human_soon"] = await open_decision(
        human, [await new_task(human, "human soon")], **HUMAN_REVERSIBLE
    )
    await open_decision(
        human, [await new_task(human, "expires first")], **REVERSIBLE,
        expires_at=format_time(clock.now() + timedelta(hours=23)),
    )  # fmt: skip
    await open_decision(human, [await new_task(human, "never")], recommendation="Proceed")
    # rows recorded before the rule: an agent asked a human-required one, an
    # agent reopened one a human asked, and one an agent asked a human reopened
    legacy_task = await new_task(human, "legacy")
    w["legacy"] = insert_agent_asked_human_decision(
        service.db_path, legacy_task, agent.principal_id, clock.iso()
    )
    w["agent_reopened"] = await open_decision(
        human, [await new_task(human, "agent reopened")], **HUMAN_REVERSIBLE
    )
    insert_agent_reopened_generation(
        service.db_path, w["agent_reopened"]["id"], agent.principal_id, clock.iso()
    )
    # tasks in each status with a blocker: done, cancelled, claimed, an activity
    done = await new_task(human, "done")
    assert (await human.post(f"{BASE}/claims", {"task_id": done})).status_code == 200
    r = await human.post(f"{BASE}/tasks/{done}/submit", {"summary": "did it"})
    assert r.status_code == 200, r.text
    r = await human.post(f"{BASE}/tasks/{done}/complete")
    assert r.status_code == 200, r.text
    cancelled = await new_task(human, "cancelled")
    r = await human.patch(f"{BASE}/tasks/{cancelled}", {"expected_revision": 1,
                                                        "status": "cancelled"})  # fmt: skip
    assert r.status_code == 200, r.text
    claimed = await new_task(human, "claimed", priority=5)
    assert (await human.post(f"{BASE}/claims", {"task_id": claimed})).status_code == 200
    for t in (done, cancelled, claimed):  # pending decisions on them; only `claimed` is listed
        await open_decision(human, [t])
    subject = await new_task(human, "subject", priority=1)
    await new_task(human, "review it", subject_task_id=subject)
    await open_decision(human, [subject])
    await new_task(human, "free")
    await new_task(human, "free too", priority=3)
    # invalidations last: a judged edit of two tasks
    await edit_task(human, stale_answered, title="stale answered, renamed")
    await edit_task(human, stale_open, description="changed")
    await edit_task(human, allowed_task, priority=7)  # not judged: stays allowed
    clock.advance(hours=19)  # t1 + 19 h: the first cycles opened at t1 time out within 6 h
    return w


async def test_every_list_of_the_digest_matches_the_contract_model(
    service: Service, human: Caller, project: str
) -> None:
    w = await build_world(service, human)
    await assert_gate_exact(service)  # the stored state the digest reads is the history's
    r = await human.get(f"{BASE}/digest")
    assert r.status_code == 200, r.text
    got = r.json()
    agents = {w["agent"].principal_id}
    expected = await model_digest(human, BASE, agents, got["generated_at"])
    assert shape(got) == expected
    assert w["legacy"] in expected["pending_decisions"]
    assert w["legacy"] not in expected["timing_out_soon"]
    assert w["agent_reopened"]["id"] in expected["pending_decisions"]
    assert w["agent_reopened"]["id"] not in expected["timing_out_soon"]
    assert {w["soon"]["id"], w["agent_soon"]["id"], w["human_soon"]["id"],
            w["timed_reopened"]["id"]} <= set(expected["timing_out_soon"])  # fmt: skip
    assert set(expected["proceeded_by_timeout"]) == {w["timed"]["id"], w["timed_reopened"]["id"]}
    # the other project's items never show here, nor this project's there
    other = (await human.get(f"{OTHER}/digest")).json()
    other_expected = await model_digest(human, OTHER, agents, other["generated_at"])
    assert shape(other) == other_expected
    mine = {x for k, v in expected.items() if k != "ready_task_count" for x in v}
    theirs = {x for k, v in other_expected.items() if k != "ready_task_count" for x in v}
    assert not mine & theirs
    assert other_expected["pending_decisions"] and other_expected["timing_out_soon"]
    assert other_expected["proceeded_by_timeout"] and other_expected["blocked_tasks"]


GQL_DIGEST = """query ($p: String!) { project(id: $p) { digest {
  projectId generatedAt readyTaskCount
  pendingDecisions { restId status } proceededByTimeout { restId status }
  timingOutSoon { restId status } blockedTasks { restId status }
  truncated { pendingDecisions proceededByTimeout timingOutSoon blockedTasks } } } }"""


def as_gql(d: dict[str, Any]) -> dict[str, Any]:
    lists = {
        "pendingDecisions": "pending_decisions", "proceededByTimeout": "proceeded_by_timeout",
        "timingOutSoon": "timing_out_soon", "blockedTasks": "blocked_tasks",
    }  # fmt: skip
    return {
        "projectId": d["project_id"], "generatedAt": d["generated_at"],
        "readyTaskCount": d["ready_task_count"],
        **{k: [{"restId": x["id"], "status": x["status"].upper()} for x in d[v]]
           for k, v in lists.items()},
        "truncated": {k: d["truncated"][v] for k, v in lists.items()},
    }  # fmt: skip


async def mcp_digest(caller: Caller, project_id: str) -> dict[str, Any]:
    session_id = await open_session(caller)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "digest", "arguments": {"project": project_id}}}  # fmt: skip
    headers = {**caller.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    r = await caller.client.post("/mcp", json=call, headers=headers)
    assert r.status_code == 200, r.text
    (message,) = [m for m in messages_of(r) if m.get("id") == 1]
    result = message["result"]
    assert not result.get("isError"), result
    found: dict[str, Any] = result.get("structuredContent") or json.loads(
        result["content"][0]["text"]
    )
    return found


async def test_rest_graphql_and_mcp_give_one_digest_of_the_same_world(
    service: Service, human: Caller, project: str
) -> None:
    await build_world(service, human)
    for project_id in ("demo", "other"):
        rest = (await human.get(f"/api/v1/projects/{project_id}/digest")).json()
        result = await both(human, GQL_DIGEST, {"p": project_id})
        assert result.answered  # the fast path answered; graphql-core gave the same bytes
        assert result.fast == result.slow
        gql = json.loads(result.fast)["data"]["project"]["digest"]
        assert gql == as_gql(rest)
        mcp = await mcp_digest(human, project_id)
        assert mcp == rest
