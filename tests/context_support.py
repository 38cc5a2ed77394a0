"""Helpers shared by the context tests (not a test module)."""

from __future__ import annotations

import threading
from typing import Any

import httpx

from tests.conftest import Caller
from waypost.resolvers.context.search import time_limit

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


class EndlessSearch:
    """A search under a one-minute time limit that would count for ever: it
    ends only when its caller is found gone (`outcome` says how it ended).
    Called as a search's unit of work, or in place of `packet.read_sync`."""

    COUNT_TO_A_BILLION = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1000000000)"
        " SELECT count(*) FROM c"
    )

    def __init__(self) -> None:
        self.started, self.ended = threading.Event(), threading.Event()
        self.outcome: list[str] = []

    def __call__(self, conn: Any, *args: Any, **kwargs: Any) -> None:
        self.started.set()
        try:
            with time_limit(conn, 60_000):  # the limit alone would end it in a minute
                conn.execute(self.COUNT_TO_A_BILLION).fetchone()
            self.outcome.append("finished")
        except BaseException as exc:
            self.outcome.append(type(exc).__name__)
            raise
        finally:
            self.ended.set()
