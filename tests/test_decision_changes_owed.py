"""`decisionChanged`'s owed read (live/streams.py `decision_changes`): a change
whose read met an unreadable clock is read again at the next poll, not only at
the next token re-check; once read, nothing is owed, and polls with nothing
new read nothing (the cost `_may_change` keeps down)."""

from __future__ import annotations

import asyncio
import contextlib
from contextlib import aclosing
from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.decisions_support import new_task, open_decision, send_answer
from tests.test_clock_unreadable_streams import (
    _follow_through_an_unreadable_clock,
    _UnreadableToOneTask,
)
from waypost.live import hub_for, streams
from waypost.live.hub import Listener, LiveLimits
from waypost.resolvers.access import principals

# polls every 0.05 s, never re-checks the token within a test: a read the
# re-check makes cannot stand in for the owed one
NO_RECHECK = LiveLimits(
    per_token=3, total=5, window=20, poll_seconds=0.05, keepalive_seconds=0.5,
    recheck_seconds=3600,
)  # fmt: skip


async def test_a_change_whose_read_met_an_unreadable_clock_is_read_at_the_next_poll(
    service: Service, human: Caller, project: str
) -> None:
    hub_for(service.rt, NO_RECHECK)  # made first: the helper's QUICK is then unused
    statuses = await _follow_through_an_unreadable_clock(service, human, None, polls_first=False)
    assert statuses == ["pending", "allowed"]


async def test_once_the_change_is_read_polls_with_nothing_new_read_nothing(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub_for(service.rt, NO_RECHECK)
    reads = 0
    real_load = streams.load_changes

    async def counted_load(*args: Any) -> Any:
        nonlocal reads
        reads += 1
        return await real_load(*args)

    polls = 0
    polled = asyncio.Event()
    real_next = Listener.next_batch

    async def counted_next(self: Listener, timeout: float) -> Any:
        nonlocal polls
        polls += 1
        if polls >= 12:
            polled.set()
        return await real_next(self, timeout)

    monkeypatch.setattr(streams, "load_changes", counted_load)
    monkeypatch.setattr(Listener, "next_batch", counted_next)
    task = await new_task(human)
    decision = await open_decision(human, [task])
    actor = await service.rt.db.read(lambda conn: principals.authenticate(conn, human.token, "api"))
    flaky = _UnreadableToOneTask(service.clock, times=1)
    own_clock = service.rt.clock
    changes = streams.decision_changes(service.rt, actor, human.token, decision["id"])
    async with aclosing(changes), asyncio.timeout(10):
        assert (await anext(changes))["status"] == "pending"
        nxt = asyncio.create_task(anext(changes))
        flaky.target = nxt
        service.rt.clock = flaky
        try:
            assert (await send_answer(human, decision["id"])).status_code == 200
            assert (await nxt)["status"] == "allowed"
        finally:
            service.rt.clock = own_clock
        after_answer = reads
        polls = 0
        polled.clear()
        waiting = asyncio.create_task(anext(changes))  # nothing more comes
        await polled.wait()
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
    assert reads == after_answer
