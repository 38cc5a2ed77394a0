"""`cancel_and_wait`: a stopped task's cancellation is swallowed, the caller's is not;
`holding_until_done`: a caller that goes while it waits for a place runs nothing."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

import pytest

from waypost.cancelling import (
    CallerGone,
    caller_gone,
    cancel_and_wait,
    holding_until_done,
    wait_at_most,
)


async def _forever() -> None:
    await asyncio.sleep(3600)


async def _slow_to_stop(stopping: asyncio.Event) -> None:
    """A task whose clean-up takes a while after it is asked to stop."""
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        stopping.set()
        await asyncio.sleep(3600)  # its clean-up; a second cancellation ends it
        raise


async def test_the_stopped_task_ends_and_the_caller_carries_on() -> None:
    task = asyncio.create_task(_forever())
    await asyncio.sleep(0)
    await cancel_and_wait(task)
    assert task.cancelled()


async def test_a_cancelled_caller_is_still_cancelled() -> None:
    stopping = asyncio.Event()
    worker = asyncio.create_task(_slow_to_stop(stopping))
    await asyncio.sleep(0)
    caller = asyncio.create_task(cancel_and_wait(worker))
    await stopping.wait()  # the caller is now waiting for the worker's clean-up
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert caller.cancelled()
    assert worker.cancelled()


async def test_a_failure_of_the_stopped_task_reaches_the_caller() -> None:
    async def fails_on_stop() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise RuntimeError("clean-up failed") from None

    task = asyncio.create_task(fails_on_stop())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="clean-up failed"):
        await cancel_and_wait(task)


# -- a place of a gate, while the caller may go --------------------------------------


async def _ran(gate: asyncio.Semaphore, gone: Any) -> list[str]:
    ran: list[str] = []

    async def work() -> None:
        ran.append("work")

    token = caller_gone.set(gone)
    try:
        await holding_until_done(gate, work)
    finally:
        caller_gone.reset(token)
    return ran


async def _waiting(gone: Any) -> tuple[asyncio.Semaphore, asyncio.Future[list[str]]]:
    """A gate whose only place is taken, and work waiting for it."""
    gate = asyncio.Semaphore(1)
    await gate.acquire()
    waiting = asyncio.ensure_future(_ran(gate, gone))
    await asyncio.sleep(0.01)
    return gate, waiting


async def test_work_whose_caller_went_while_it_waited_never_runs() -> None:
    left = asyncio.Event()
    gate, waiting = await _waiting(left.wait)
    left.set()
    with pytest.raises(CallerGone):
        await waiting
    gate.release()
    # no place was kept for it: the gate has its one place again
    assert not gate.locked()


async def test_work_that_got_its_place_runs_though_its_watch_goes_on() -> None:
    gate, waiting = await _waiting(asyncio.Event().wait)
    gate.release()
    assert await waiting == ["work"]
    assert not gate.locked()


async def test_a_watch_that_fails_leaves_the_work_waiting_for_its_place() -> None:
    async def broken() -> None:
        raise RuntimeError("the transport's receive failed")

    gate, waiting = await _waiting(broken)
    assert not waiting.done()
    gate.release()
    assert await waiting == ["work"]


async def test_a_caller_cancelled_while_it_waits_keeps_no_place() -> None:
    gate, waiting = await _waiting(asyncio.Event().wait)
    waiting.cancel()
    gate.release()  # the place frees as the cancellation lands
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await asyncio.sleep(0.01)
    assert not gate.locked()


async def test_a_free_place_is_taken_without_watching() -> None:
    gate = asyncio.Semaphore(1)

    async def must_not_be_called() -> None:
        raise AssertionError("watched although a place was free")

    assert await _ran(gate, must_not_be_called) == ["work"]


async def _follow(wait: Any, event: asyncio.Event) -> None:
    """A follower's loop, as the live hub's: wake on the event or the poll."""
    while True:
        await wait(event, 10)
        event.clear()


async def _wait_for(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)


@pytest.mark.parametrize("wait", [wait_at_most, _wait_for], ids=["wait_at_most", "wait_for"])
async def test_a_cancellation_as_the_event_is_set_stops_the_loop(wait: Any) -> None:
    """The event set, then the follower cancelled a few turns of the loop
    later: whatever the turn, the follower ends. `asyncio.wait_for` on
    Python 3.11 swallows the cancellation in one of them (gh-86296): the live
    hub's follower ran on, and the stop awaiting it waited for ever."""
    went_on = []
    for turns in range(6):
        event = asyncio.Event()
        follower = asyncio.create_task(_follow(wait, event))
        await asyncio.sleep(0)  # waiting on the event
        event.set()
        for _ in range(turns):
            await asyncio.sleep(0)
        follower.cancel()
        done, _ = await asyncio.wait([follower], timeout=1)
        if not done:
            went_on.append(turns)
            follower.cancel()  # the swallowed one asked again: it ends now
            with contextlib.suppress(asyncio.CancelledError):
                await follower
    if wait is wait_at_most or sys.version_info >= (3, 12):
        assert went_on == []
    else:  # what the stdlib's does here: shown, so that the test can tell
        assert went_on != []


async def test_a_wait_at_most_ends_quietly_once_its_time_is_up() -> None:
    """The poll of the live hub's follower, the MCP waker and the lifecycle
    delivery: no event within `seconds` returns, no TimeoutError, after
    about `seconds`; a set event returns at once."""
    event = asyncio.Event()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.wait_for(wait_at_most(event, 0.1), 5)
    assert 0.1 <= loop.time() - started < 1.0
    event.set()
    started = loop.time()
    await asyncio.wait_for(wait_at_most(event, 30), 5)
    assert loop.time() - started < 1.0
