"""Stopping a background task and waiting for it to end; holding a place of
a gate for as long as the work that took it runs; settling a future another
thread computed for, unless its waiter has gone.

`task.cancel()` followed by `with suppress(CancelledError): await task` has a
hole: if the *waiting* task is itself cancelled while it waits (a server
shutting down, a request abandoned), its own `CancelledError` is swallowed
too, and it carries on as if nothing had asked it to stop. `cancel_and_wait`
swallows only the stopped task's cancellation: `Task.cancelling()` tells the
two apart (Python 3.11).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def cancel_and_wait(task: asyncio.Task[None]) -> None:
    """Cancel `task` and wait until it has ended; re-raise a cancellation of
    the caller. The task's own exceptions other than its cancellation reach
    the caller as well, since a background task that failed should be heard."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise


async def holding_until_done(gate: asyncio.Semaphore, work: Callable[[], Awaitable[T]]) -> T:
    """`work()`, run as a task of its own once it holds a place of `gate`; the
    place is given back when that work ends, not when its caller stops
    waiting. Work on a thread (a search, a document's validation) runs on
    after its caller is cancelled: a place given back then let more of it
    run at once than the gate admits (the reader that search lanes keep
    free for other reads was taken)."""
    await gate.acquire()
    try:
        running = asyncio.ensure_future(work())
    except BaseException:
        gate.release()
        raise

    def ended(task: asyncio.Future[T]) -> None:
        gate.release()
        if not task.cancelled():
            task.exception()  # seen here too: a caller that left never reads it

    running.add_done_callback(ended)
    return await asyncio.shield(running)


def settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """`future`'s result or exception, on its loop (call it there: with
    `call_soon_threadsafe` from another thread); nothing when its waiter was
    cancelled meanwhile (the work stands, no one is left to tell)."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
