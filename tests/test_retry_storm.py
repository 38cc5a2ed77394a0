"""The retry storm (issue 11): 100 identical requests on one idempotency key,
all at once: the mutation runs once; every other answer is a replay of it or
`409 idempotency_in_flight`."""

from __future__ import annotations

import asyncio
import sqlite3

from tests.conftest import Caller, Service


async def test_a_hundred_identical_requests_on_one_key_run_once(
    service: Service, human: Caller, project: str
) -> None:
    body = {"title": "Only once", "priority": 3}
    path = "/api/v1/projects/demo/tasks"
    answers = await asyncio.gather(*[human.post(path, body, key="storm-1") for _ in range(100)])
    first = [a for a in answers if a.status_code == 201 and "idempotent-replayed" not in a.headers]
    replays = [a for a in answers if a.headers.get("idempotent-replayed") == "true"]
    in_flight = [a for a in answers if a.status_code == 409]
    assert len(first) == 1, [a.status_code for a in answers]
    assert len(first) + len(replays) + len(in_flight) == 100
    print(f"1 execution, {len(replays)} replays, {len(in_flight)} in flight (409)")
    assert all(a.status_code == 201 and a.json() == first[0].json() for a in replays)
    assert all(a.json()["error"]["code"] == "idempotency_in_flight" for a in in_flight)
    # one execution: one task, one event, one receipt
    conn = sqlite3.connect(service.db_path)
    try:
        assert conn.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 1
        events = conn.execute("SELECT COUNT(*) FROM events WHERE type = 'task.created'")
        assert events.fetchone()[0] == 1
        receipts = conn.execute("SELECT COUNT(*) FROM receipts WHERE key = 'storm-1'")
        assert receipts.fetchone()[0] == 1
    finally:
        conn.close()
    # and a late retry, after the storm, is a replay too
    late = await human.post(path, body, key="storm-1")
    assert late.status_code == 201 and late.headers["idempotent-replayed"] == "true"
    assert late.json() == first[0].json()
