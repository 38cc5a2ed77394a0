"""CPU-bound GraphQL work, on worker threads, one piece at a time per lane.

Parsing and validating a large document is pure Python holding the GIL. On
the event loop it stalls every request; on one thread per request, a few
dozen at once starve the loop of the GIL. One at a time on one thread, the
loop competes with a single thread and gets the GIL back within the switch
interval (schema/documents.py tells the whole story). Two lanes, so at most
two such threads: documents (parsing, validation) and introspection.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import TypeVar

from waypost.cancelling import holding_until_done

T = TypeVar("T")

# One gate per event loop and lane: an asyncio.Semaphore belongs to the loop
# that first waits on it, and tests run many loops in one process.
_GATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)
# Parsing and validating documents (short, bounded work that every new query
# text waits for) and executing introspection (up to the execution limit's
# worth) queue in lanes of their own: a run of introspection must not hold
# up the validation of other clients' queries.
DOCUMENTS = "documents"
INTROSPECTION = "introspection"


def _gate(lane: str) -> asyncio.Semaphore:
    gates = _GATES.setdefault(asyncio.get_running_loop(), {})
    gate = gates.get(lane)
    if gate is None:
        gate = gates[lane] = asyncio.Semaphore(1)
    return gate


async def off_loop(work: Callable[..., T], *args: object, lane: str = DOCUMENTS) -> T:
    """Run CPU-bound work on a worker thread, one at a time in its lane.

    The gate is given back when the thread's work ends, not when its caller
    stops waiting: a cancelled request (a WebSocket `complete`) must not let
    a second piece of work start beside the first."""
    return await holding_until_done(_gate(lane), lambda: asyncio.to_thread(work, *args))
