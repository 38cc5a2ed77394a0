"""Helpers shared by the task tests: create tasks and drive them through the workflow."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tests.conftest import Caller, Service

BASE = "/api/v1/projects/demo"


def task_path(task_id: str, action: str = "") -> str:
    return f"{BASE}/tasks/{task_id}" + (f"/{action}" if action else "")


async def make_task(
    caller: Caller, title: str = "Write the parser", **fields: Any
) -> dict[str, Any]:
    r = await caller.post(f"{BASE}/tasks", {"title": title, **fields})
    assert r.status_code == 201, r.text
    task: dict[str, Any] = r.json()
    return task


async def claim(caller: Caller, task_id: str | None = None) -> dict[str, Any]:
    body = {} if task_id is None else {"task_id": task_id}
    r = await caller.post(f"{BASE}/claims", body)
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


async def claimed_by_agent(service: Service, human: Caller) -> tuple[dict[str, Any], Caller]:
    """A new task (made by `human`) claimed by a new agent in a live session."""
    task = await make_task(human)
    agent = await service.agent()
    await claim(agent, task["id"])
    return task, agent


async def wait_until(
    service: Service, instant: str, *live: Caller, short_by_seconds: float = 0
) -> None:
    """Move the service's clock to `instant` (less `short_by_seconds`), as an
    agent waiting until a lease's `expires_at` would: each of `live` beats
    a minute before, so that its session outlives the wait."""
    left = datetime.fromisoformat(instant) - service.clock.now()
    service.clock.advance(seconds=left.total_seconds() - 60)
    for caller in live:
        await caller.post(f"/api/v1/sessions/{caller.session_id}/heartbeat")
    service.clock.advance(seconds=60 - short_by_seconds)


async def submit(caller: Caller, task_id: str, summary: str = "done it") -> dict[str, Any]:
    r = await caller.post(task_path(task_id, "submit"), {"summary": summary})
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


async def open_decision(caller: Caller, *task_ids: str) -> str:
    r = await caller.post(
        f"{BASE}/decisions",
        {"question": "Ship it?", "options": ["Proceed", "Stop"], "rationale": "risky",
         "required_actor": "human", "task_ids": list(task_ids), "environment": "staging"},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    decision_id: str = r.json()["id"]
    return decision_id


async def allow(human: Caller, decision_id: str, generation: int = 1) -> None:
    r = await human.post(
        f"{BASE}/decisions/{decision_id}/answer",
        {"expected_generation": generation, "disposition": "allow", "answer": "Proceed",
         "rationale": "fine", "conditions_confirmed": True},
    )  # fmt: skip
    assert r.status_code == 200, r.text


async def decline(human: Caller, decision_id: str, disposition: str = "deny") -> None:
    """Answer `decision_id` deny or defer: its work stays blocked."""
    r = await human.post(
        f"{BASE}/decisions/{decision_id}/answer",
        {"expected_generation": 1, "disposition": disposition, "answer": "Stop",
         "rationale": "not now", "conditions_confirmed": True},
    )  # fmt: skip
    assert r.status_code == 200, r.text


async def set_policy(human: Caller, **fields: Any) -> dict[str, Any]:
    current = (await human.get(f"{BASE}/policy")).json()
    r = await human.patch(f"{BASE}/policy", {"expected_revision": current["revision"], **fields})
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


def error(r: Any) -> tuple[int, str, dict[str, Any]]:
    body = r.json()["error"]
    return r.status_code, body["code"], body["details"]
