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
import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Gate(Protocol):
    """What `holding_until_done` holds a place of: an `asyncio.Semaphore`,
    or a `storage.turns.FairGate` taken as one caller."""

    def locked(self) -> bool: ...

    async def acquire(self) -> bool: ...

    def release(self) -> None: ...


# Set by a transport that can tell when its caller has gone (a REST read, a
# GraphQL request over HTTP): returns once it has. uvicorn never cancels a
# request whose client went, so without it a search queued for the search
# lane ran its turn for no one, ahead of the searches still wanted.
caller_gone: contextvars.ContextVar[Callable[[], Coroutine[Any, Any, None]] | None] = (
    contextvars.ContextVar("caller_gone", default=None)
)


class CallerGone(Exception):
    """The caller went away while its work waited for a place of a gate (the
    work never ran) or while it ran (a search, ended early: SearchAbandoned,
    storage/db.py). No one is answered."""


def for_everyone(work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """`work` as a task whose result more callers than the one starting it
    wait for: it runs on when that caller goes (it watches none of theirs)."""
    context = contextvars.copy_context()
    context.run(caller_gone.set, None)
    return asyncio.get_running_loop().create_task(work, context=context)


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


async def holding_until_done(gate: Gate, work: Callable[[], Awaitable[T]]) -> T:
    """`work()`, run as a task of its own once it holds a place of `gate`; the
    place is given back when that work ends, not when its caller stops
    waiting. Work on a thread (a search, a document's validation) runs on
    after its caller is cancelled: a place given back then let more of it
    run at once than the gate admits (the reader that search lanes keep
    free for other reads was taken)."""
    await _acquire(gate)
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


async def _acquire(gate: Gate) -> None:
    """A place of `gate`; CallerGone when `caller_gone` fires while waiting
    for one (watched only when there is a wait: a free place costs nothing)."""
    gone = caller_gone.get()
    if gone is None or not gate.locked():
        await gate.acquire()
        return
    acquiring = asyncio.ensure_future(gate.acquire())
    watching = _watch(gone)
    try:
        await asyncio.wait((acquiring, watching), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # cancelled itself: it leaves no place taken behind
        watching.cancel()
        _give_up(gate, acquiring)
        raise
    if acquiring.done():
        watching.cancel()
        return
    if watching.exception() is not None:  # a watch that failed saw nothing
        await acquiring
        return
    _give_up(gate, acquiring)
    raise CallerGone


def watch_caller(on_gone: Callable[[], None], after: float) -> Callable[[], None]:
    """Call `on_gone` once `caller_gone` fires, watching from `after` seconds
    on (work that ends sooner, nearly every search, starts no watch); returns
    what stops the watch. For work already running, which a gate's wait
    (`_acquire`) no longer watches."""
    gone = caller_gone.get()
    if gone is None:
        return _nothing
    loop = asyncio.get_running_loop()
    watching: list[asyncio.Task[None]] = []

    def went(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is None:
            on_gone()

    def start() -> None:
        task = _watch(gone)
        task.add_done_callback(went)
        watching.append(task)

    timer = loop.call_later(after, start)

    def stop() -> None:
        timer.cancel()
        for task in watching:
            task.cancel()

    return stop


def _nothing() -> None:
    return None


def _watch(gone: Callable[[], Coroutine[Any, Any, None]]) -> asyncio.Task[None]:
    """`gone()` as a task in a context of its own: the watch reads the
    connection, and uvicorn's `receive` resumes reading there, which on
    asyncio's loop registers the socket's reader in the current context; the
    next request on the connection started in it, with this read's pinned
    clock and watch (review49)."""
    return asyncio.get_running_loop().create_task(gone(), context=contextvars.Context())


def _give_up(gate: Gate, acquiring: asyncio.Future[Any]) -> None:
    if acquiring.done() and not acquiring.cancelled():
        gate.release()
    else:
        acquiring.cancel()


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


async def wait_at_most(event: asyncio.Event, seconds: float) -> None:
    """Wait until `event` is set, or for `seconds` at most.

    Not `asyncio.wait_for(event.wait(), seconds)`: on Python 3.11 a
    cancellation that lands while the event's own wait has just ended is
    swallowed (the wait's result is returned instead; gh-86296, rewritten in
    3.12), and the cancelled task runs on. The live hub's follower did so
    once, and the stop that cancelled it waited for it for ever (a test's
    `hub.close()` held a CI run for 30 minutes). `asyncio.timeout` tells its
    own cancellation from another's (`Task.uncancel`)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
