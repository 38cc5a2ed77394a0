"""A stream resumed from before its project's window reads the log itself
(`Hub._read_behind`) until it reaches the window; a wake that arrives while
that read is under way must not be lost with the wake flag it clears."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.conftest import Caller, Service
from tests.decisions_support import new_task
from waypost.live import LiveLimits, hub_for
from waypost.resolvers.core import events


async def test_a_wake_during_a_read_behind_the_window_is_not_lost(
    service: Service, human: Caller, project: str
) -> None:
    """The listener resumes from demo's last event while the log's end is
    another project's: it is behind its new window (whose floor is the log's
    end), so each look reads the log. An event committed during its first,
    empty, read woke it then; the wake was cleared after the read and the
    event reached the stream only when the wait ran out (the keep-alive
    interval: 14 s by default)."""
    await new_task(human, "demo's last before the stream")
    demo_last = await service.rt.db.read(events.last_sequence)
    r = await human.post("/api/v1/projects", {"id": "other", "name": "Other"})
    assert r.status_code == 201, r.text
    r = await human.post("/api/v1/projects/other/tasks", {"title": "the log's end"})
    assert r.status_code == 201, r.text
    hub = hub_for(service.rt)
    committed: list[str] = []
    async with hub.listen("demo", "tok", demo_last) as listener:
        read_behind = hub._read_behind

        async def read_then_commit(behind: Any) -> Any:
            found = await read_behind(behind)
            if not found and not committed:
                # committed, and read by the follower (which wakes the listener),
                # while this look was under way
                committed.append(await new_task(human, "committed during the look"))
                end = await service.rt.db.read(events.last_sequence)
                while hub.position < end:
                    await asyncio.sleep(0.01)
            return found

        hub._read_behind = read_then_commit  # type: ignore[method-assign]
        started = time.monotonic()
        batch = await listener.next_batch(10)
        elapsed = time.monotonic() - started
    assert committed
    assert [e["data"]["title"] for e in batch] == ["committed during the look"]
    assert elapsed < 5, elapsed


async def test_more_than_a_page_of_new_events_reaches_a_listener_at_once(
    service: Service, human: Caller, project: str
) -> None:
    """The hub reads new events a page (200) at a time and reads on while
    pages come full: 250 events it learns of at one wake reach a caught-up
    listener together, not the last 50 at the next poll (30 s here). The
    first 249 are written as another process writes (no commit hook here),
    the last through the service, which wakes the hub."""
    import sqlite3

    hub = hub_for(service.rt, LiveLimits(poll_seconds=30))
    async with hub.listen("demo", "tok", None) as listener:
        assert await listener.next_batch(0.05) == []
        other = sqlite3.connect(service.db_path, isolation_level=None, timeout=5)
        try:
            other.executemany(
                "INSERT INTO events (project_id, type, subject_type, subject_id, actor_id,"
                " actor_session_id, at, data) VALUES ('demo', 'task.created', 'task', ?, NULL,"
                " NULL, '2026-11-29T18:00:00.000Z', '{}')",
                [(f"tsk_other{n}",) for n in range(249)],
            )
        finally:
            other.close()
        await new_task(human, "the wake")
        got: list[dict[str, Any]] = []
        started = time.monotonic()
        while len(got) < 250 and time.monotonic() - started < 5:
            got += await listener.next_batch(5 - (time.monotonic() - started))
    assert len(got) == 250, len(got)
    sequences = [e["sequence"] for e in got]
    assert sequences == sorted(set(sequences))  # each once, in order
    assert got[-1]["data"]["title"] == "the wake"


async def test_streams_resumed_from_one_position_each_get_every_event_of_their_batch(
    service: Service, human: Caller, project: str
) -> None:
    """The SSE route keeps each batch's bytes for the other streams of the
    hub (`_Encoded.chunk`): a stream whose batch starts where another's
    started but ends further on must get its own, every event of it. The
    first stream reads the two events after `after` from the log; a third is
    committed; the second stream, resumed from the same `after`, reads all
    three in one batch (the first stream's chunk was sent for it, and the
    third was lost: the listener had passed it)."""
    from tests.live_support import next_data_event, running
    from tests.test_live_sse import rest_events, stream

    before = (await rest_events(human))[-1]["sequence"]
    await new_task(human, "one")
    await new_task(human, "two")
    async with running(service) as base, stream(base, human, after=before) as (_, first):
        assert [(await next_data_event(first)).json()["data"]["title"] for _ in range(2)] == [
            "one",
            "two",
        ]
        await new_task(human, "three")
        assert (await next_data_event(first)).json()["data"]["title"] == "three"
        async with stream(base, human, after=before) as (_, second):
            await new_task(human, "four")
            titles: list[str] = []
            while not titles or titles[-1] != "four":  # (a lost one: no wait for it)
                titles.append((await next_data_event(second)).json()["data"]["title"])
            assert titles == ["one", "two", "three", "four"]
