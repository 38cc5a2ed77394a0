"""Helpers shared by the context tests (not a test module)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import Caller

CONTEXT = "/api/v1/projects/demo/context"


async def context(caller: Caller, q: str, **params: Any) -> dict[str, Any]:
    r = await caller.get(CONTEXT, q=q, **params)
    assert r.status_code == 200, r.text
    packet: dict[str, Any] = r.json()
    return packet


async def context_response(caller: Caller, **params: Any) -> httpx.Response:
    return await caller.get(CONTEXT, **params)


def ids(packet: dict[str, Any]) -> list[str]:
    return [item["id"] for item in packet["items"]]


def types(packet: dict[str, Any]) -> list[str]:
    return [item["type"] for item in packet["items"]]


async def knowledge(caller: Caller, title: str, body: str = "", **fields: Any) -> dict[str, Any]:
    r = await caller.post(
        "/api/v1/projects/demo/knowledge",
        {"kind": "lesson", "title": title, "body": body or title, **fields},
    )
    assert r.status_code == 201, r.text
    record: dict[str, Any] = r.json()
    return record


async def task(caller: Caller, title: str, **fields: Any) -> dict[str, Any]:
    r = await caller.post("/api/v1/projects/demo/tasks", {"title": title, **fields})
    assert r.status_code == 201, r.text
    created: dict[str, Any] = r.json()
    return created
