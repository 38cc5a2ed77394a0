"""The digest as a human reads it each morning (digestjourney): what it says
must be the state at the instant it names."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

from tests.conftest import Caller, Service
from tests.decisions_support import BASE, edit_task, new_task, open_decision


async def test_a_digest_queued_behind_another_shows_no_state_newer_than_its_instant(
    service: Service, human: Caller, project: str
) -> None:
    """api.md: a GET is judged at one instant of the clock, its `Waypost-Now`
    is that instant, and a digest's `generated_at` is the same. A digest
    waits for the long reads' lane (one digest at a time) after its instant
    is taken; a write committed meanwhile must not show in an answer stamped
    before it (a blocked task edited a minute after `generated_at` was listed
    with that edit)."""
    task = await new_task(human, "Blocked")
    await open_decision(human, [task])
    release, running = threading.Event(), threading.Semaphore(0)

    def long_read(conn: sqlite3.Connection) -> None:
        running.release()
        release.wait(10)

    lane = service.rt.db._unbounded  # the one place digests take
    held = asyncio.create_task(service.rt.db.search(long_read, unbounded=True))
    try:
        assert await asyncio.to_thread(running.acquire, True, 10)
        asked = asyncio.create_task(human.get(f"{BASE}/digest"))
        for _ in range(1000):  # until the digest waits for the lane
            if lane.waiting():
                break
            await asyncio.sleep(0.005)
        assert lane.waiting(), "the digest never queued for the lane"
        service.clock.advance(minutes=1)
        edited = await edit_task(human, task, priority=5)
        release.set()
        r = await asyncio.wait_for(asked, 10)
    finally:
        release.set()
        await held
    assert r.status_code == 200, r.text
    found = r.json()
    assert r.headers["Waypost-Now"] == found["generated_at"]
    [listed] = found["blocked_tasks"]
    assert listed["updated_at"] <= found["generated_at"], (
        f"generated_at {found['generated_at']} lists the task as edited at"
        f" {listed['updated_at']} (priority {listed['priority']}; the edit: {edited['updated_at']})"
    )
