"""Helpers shared by the decision tests: tasks, decisions, answers and policy edits."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import Caller

BASE = "/api/v1/projects/demo"
DECISIONS = f"{BASE}/decisions"


def decision_path(decision_id: str, action: str = "") -> str:
    return f"{DECISIONS}/{decision_id}" + (f"/{action}" if action else "")


def task_path(task_id: str, action: str = "") -> str:
    return f"{BASE}/tasks/{task_id}" + (f"/{action}" if action else "")


async def new_task(caller: Caller, title: str = "Migrate the billing table", **fields: Any) -> str:
    r = await caller.post(f"{BASE}/tasks", {"title": title, **fields})
    assert r.status_code == 201, r.text
    task_id: str = r.json()["id"]
    return task_id


def decision_body(task_ids: list[str], /, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "question": "May the migration run against staging?",
        "options": ["Proceed", "Stop"],
        "rationale": "The migration rewrites the billing table.",
        "required_actor": "human",
        "task_ids": task_ids,
        "environment": "staging",
        "conditions": ["rollback owner recorded"],
    }
    body.update(overrides)
    return body


async def open_decision(caller: Caller, task_ids: list[str], /, **overrides: Any) -> dict[str, Any]:
    r = await caller.post(DECISIONS, decision_body(task_ids, **overrides))
    assert r.status_code == 201, r.text
    decision: dict[str, Any] = r.json()
    return decision


def answer_body(generation: int = 1, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "expected_generation": generation,
        "disposition": "allow",
        "answer": "Proceed",
        "rationale": "The rollback owner is recorded.",
        "conditions_confirmed": True,
    }
    body.update(overrides)
    return body


async def send_answer(
    caller: Caller, decision_id: str, generation: int = 1, key: str | None = None, **overrides: Any
) -> httpx.Response:
    body = answer_body(generation, **overrides)
    return await caller.post(decision_path(decision_id, "answer"), body, key=key)


async def answer(
    caller: Caller, decision_id: str, generation: int = 1, **overrides: Any
) -> dict[str, Any]:
    r = await send_answer(caller, decision_id, generation, **overrides)
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


async def reopen(
    caller: Caller, decision_id: str, generation: int, **overrides: Any
) -> httpx.Response:
    body = {"expected_generation": generation, "rationale": "Scope changed; asking again."}
    body.update(overrides)
    return await caller.post(decision_path(decision_id, "reopen"), body)


async def get_decision(caller: Caller, decision_id: str, **params: Any) -> dict[str, Any]:
    r = await caller.get(decision_path(decision_id), **params)
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


async def get_task(caller: Caller, task_id: str) -> dict[str, Any]:
    r = await caller.get(task_path(task_id))
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


async def edit_task(caller: Caller, task_id: str, **fields: Any) -> dict[str, Any]:
    current = await get_task(caller, task_id)
    r = await caller.patch(task_path(task_id), {"expected_revision": current["revision"], **fields})
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


async def set_policy(human: Caller, **fields: Any) -> dict[str, Any]:
    current = (await human.get(f"{BASE}/policy")).json()
    r = await human.patch(f"{BASE}/policy", {"expected_revision": current["revision"], **fields})
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


def error(r: httpx.Response) -> tuple[int, str, dict[str, Any]]:
    body = r.json()["error"]
    return r.status_code, body["code"], body["details"]
