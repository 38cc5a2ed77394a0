"""Ending a read whose client has gone.

uvicorn does not cancel a request's task when its client disconnects: the
task runs to its end and its answer goes nowhere. For a read that costs
little that is no loss, but a full-text search waits for a place of the
search lane (storage/db.py) and then holds it up to the search time limit:
clients that gave up and asked again queued searches no one would read,
ahead of the ones still wanted. A read's body is never read (its route
takes none), so the request's `receive` is free to watch for the
disconnect while the read runs; once it comes the read is cancelled, and
a search not yet started never runs (`Database._search`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar, cast

from starlette.types import Receive

from waypost.cancelling import cancel_and_wait

T = TypeVar("T")


async def _disconnect(receive: Receive) -> None:
    """Returns once the client has gone: uvicorn then answers every
    `receive` with `http.disconnect` (any body a client sent with its GET is
    read and dropped on the way)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def unless_client_gone(work: Coroutine[Any, Any, T], receive: Receive) -> T | None:
    """`work`'s result, or None when the client went away first (`work` is
    then cancelled and waited for). Only for reads: a write runs to its
    commit whatever its client does, so that a retry with its key replays it."""
    task = asyncio.ensure_future(work)  # in this context: the request's pinned clock
    gone = asyncio.ensure_future(_disconnect(receive))
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # cancelled itself (a stop): it leaves neither behind
        gone.cancel()
        task.cancel()
        raise
    if task.done() or not _left(gone):
        gone.cancel()
        return await task
    await cancel_and_wait(cast("asyncio.Task[None]", task))
    return None


def _left(gone: asyncio.Future[None]) -> bool:
    """Whether the watch saw the client go (a watch that failed saw nothing)."""
    return gone.done() and not gone.cancelled() and gone.exception() is None
