"""A gate whose places go in turn to whoever was served least lately.

The long reads' lane (storage/db.py: digests, one at a time) was first come,
first served across every caller: one agent that kept N digests of its large
project queued put another principal's digest of a small project behind all
N of them (16 at once: 6 ms -> 1.6 s at the median, 48 at once: 4.9 s;
abusejourney). Here each caller says who it is, and a place that comes free
goes to the waiting caller served longest ago: one not served while it had
anything waiting or running comes first, then the others in turn. One caller
alone still gets every place, one after the other.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Hashable
from contextvars import ContextVar

# Who is asking, for the gates that take callers in turn where no caller is
# named: set where a request is authenticated (http/auth.py, and the GraphQL
# socket's connection_init), read by `Database.search`.
CALLER: ContextVar[Hashable] = ContextVar("waypost_caller", default=None)


class FairGate:
    """`places` places, each taken by one caller (`who`) at a time."""

    def __init__(self, places: int) -> None:
        self._free = places
        self._waiting: dict[Hashable, deque[asyncio.Future[None]]] = {}
        # who -> the turn it was last given, while it waits or holds a place
        self._served: dict[Hashable, int] = {}
        self._holding: Counter[Hashable] = Counter()
        self._turns = 0

    def of(self, who: Hashable) -> Turn:
        """The gate as `who` takes it (what `cancelling.holding_until_done` holds)."""
        return Turn(self, who)

    def locked(self) -> bool:
        return self._free == 0 or bool(self._waiting)

    def waiting(self) -> int:
        """How many callers' requests wait for a place."""
        return sum(len(queue) for queue in self._waiting.values())

    async def acquire(self, who: Hashable) -> None:
        if not self.locked():
            self._take(who)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(who, deque()).append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(who)  # given its place as it was cancelled: passed on
            else:
                self._forget(who, future)
            raise

    def release(self, who: Hashable) -> None:
        self._holding[who] -= 1
        if self._holding[who] <= 0:
            del self._holding[who]
            self._idle(who)
        self._free += 1
        self._wake()

    def _take(self, who: Hashable) -> None:
        self._free -= 1
        self._turns += 1
        self._served[who] = self._turns
        self._holding[who] += 1

    def _wake(self) -> None:
        while self._free > 0 and self._waiting:
            # the least lately served (never: 0); equal ones in order of arrival
            who = min(self._waiting, key=lambda w: self._served.get(w, 0))
            queue = self._waiting[who]
            future = queue.popleft()
            if not queue:
                del self._waiting[who]
            if future.done():  # cancelled while it waited: its caller forgets it
                self._idle(who)
                continue
            self._take(who)
            future.set_result(None)

    def _forget(self, who: Hashable, future: asyncio.Future[None]) -> None:
        queue = self._waiting.get(who)
        if queue is not None and future in queue:
            queue.remove(future)
            if not queue:
                del self._waiting[who]
        self._idle(who)

    def _idle(self, who: Hashable) -> None:
        # nothing waiting or held: its turns are forgotten (the table stays
        # as small as the callers now waiting or served)
        if who not in self._waiting and who not in self._holding:
            self._served.pop(who, None)


class Turn:
    """A `FairGate` taken as one caller: `locked`, `acquire`, `release`."""

    def __init__(self, gate: FairGate, who: Hashable) -> None:
        self._gate = gate
        self._who = who

    def locked(self) -> bool:
        return self._gate.locked()

    async def acquire(self) -> bool:
        await self._gate.acquire(self._who)
        return True

    def release(self) -> None:
        self._gate.release(self._who)
