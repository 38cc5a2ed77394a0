"""Turns of the event loop for graphql-core's execution.

graphql-core completes a value synchronously down to the next awaitable: when
a DataLoader batch resolves, every field waiting on it resumes in the same
turn of the loop and completes its whole subtree there (100 decisions'
generations, each with its affected tasks, held the loop about 0.5 s in one
turn, and every other request waited for it). Here the objects of a result
start within a slice of the loop's time: once a turn has run graphql work for
`SLICE` seconds, the next objects to start wait, and later turns start them,
a slice's worth each, so the loop serves other requests in between. Each
principal's objects wait in a queue of their own, in order, and the queues
take turns object by object: in one queue for everyone, another principal's
small query waited behind every object one principal's large answers had
queued (up to 1,050 objects of two dashboards; docs/graphql.md has the
figures; slicereview).
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from waypost.storage.turns import CALLER

# A turn's share of graphql work (seconds). A REST read takes a few turns, so
# its wait under a flood of large answers is a few slices (graphqlyield).
SLICE = 0.010

_clock = time.perf_counter


_Waiting = tuple[Callable[[], Any], asyncio.Future[Any], contextvars.Context]


class _State(threading.local):
    loop: asyncio.AbstractEventLoop | None = None  # the loop whose turn is being timed
    start = 0.0
    pumping: asyncio.AbstractEventLoop | None = None  # the loop a pump is scheduled on

    def __init__(self) -> None:
        # whose (storage/turns.py's CALLER) -> its objects waiting, in order;
        # the principals in the order they are served next
        self.queues: dict[Hashable, collections.deque[_Waiting]] = {}


_state = _State()


def _turn_over(state: _State) -> None:
    state.loop = None


def spent() -> bool:
    """Whether this turn of the loop has run graphql work for a whole slice
    (the first call in a turn starts timing it). Never off a running loop
    (introspection is built synchronously on a worker thread)."""
    state = _state
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    if state.loop is not loop:
        state.loop = loop
        state.start = _clock()
        loop.call_soon(_turn_over, state)  # runs in the next turn: timing starts again
        return False
    return _clock() - state.start > SLICE


async def later(work: Callable[[], Any]) -> Any:
    """`work()` run in a later turn, in its place in the queue (in the
    caller's context), and awaited if it is awaitable."""
    state = _state
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    if state.pumping is not loop:  # none scheduled (or one on a loop since closed)
        state.queues.clear()
        state.pumping = loop
        loop.call_soon(_pump, state, loop)
    queue = state.queues.get(CALLER.get())
    if queue is None:
        queue = state.queues[CALLER.get()] = collections.deque()
    queue.append((work, done, contextvars.copy_context()))
    result = await done
    if isinstance(result, asyncio.Future):
        # shielded: a caller cancelled now (a sibling's error, the object
        # limit) leaves the work to end rather than cancel it half done
        return await asyncio.shield(result)
    return result


def _pump(state: _State, loop: asyncio.AbstractEventLoop) -> None:
    queues = state.queues
    try:
        while queues:
            # the next principal's first object; that principal then goes
            # to the back of the line, if it has more waiting
            who = next(iter(queues))
            queue = queues.pop(who)
            work, done, context = queue.popleft()
            if queue:
                queues[who] = queue
            if done.cancelled():
                continue
            try:
                result = context.run(work)
            except BaseException as error:  # the awaiting field handles it
                if not done.cancelled():
                    done.set_exception(error)
            else:
                if asyncio.iscoroutine(result):
                    # started now, as graphql-core starts the awaitables it
                    # gathers (left for a later await, a caller cancelled
                    # meanwhile left the fields it made never awaited), and in
                    # the caller's context: the pump runs in that of the query
                    # whose wait scheduled it, and another query's pinned read,
                    # instant and caller were used (review79)
                    result = loop.create_task(result, context=context)
                    result.add_done_callback(_seen)
                if not done.cancelled():
                    done.set_result(result)
            if spent():
                break
    finally:
        # whatever escaped, the queue is pumped on: a pump that stopped with
        # `pumping` set left every later object on this loop waiting for good
        if queues:
            loop.call_soon(_pump, state, loop)
        else:
            state.pumping = None


def _seen(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # its caller sees it; a caller gone leaves it unlogged


async def next_turn() -> None:
    """Wait for a turn with time left in its slice, for a resolver resuming
    with work of its own to do (each waiter checks again in each turn: for a
    few hundred waiters at most, as a page's decisions)."""
    await asyncio.sleep(0)
    while spent():
        await asyncio.sleep(0)
