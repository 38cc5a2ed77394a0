"""Stopping a background task and waiting for it to end.

`task.cancel()` followed by `with suppress(CancelledError): await task` has a
hole: if the *waiting* task is itself cancelled while it waits (a server
shutting down, a request abandoned), its own `CancelledError` is swallowed
too, and it carries on as if nothing had asked it to stop. `cancel_and_wait`
swallows only the stopped task's cancellation: `Task.cancelling()` tells the
two apart (Python 3.11).
"""

from __future__ import annotations

import asyncio


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
