"""`cancel_and_wait`: a stopped task's cancellation is swallowed, the caller's is not."""

from __future__ import annotations

import asyncio

import pytest

from waypost.cancelling import cancel_and_wait


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
