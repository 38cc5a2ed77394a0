"""A non-blocking concurrency limiter shared by the process's context requests.

Unlike a semaphore, nobody waits: a request that finds every permit taken
skips reranking at once (reason `busy`) and answers in FTS order, so the
provider's latency never queues context requests behind one another. A
permit is held until the provider's response body has been read (or the
call failed), which is what bounds the concurrent provider calls. Everything
runs on the event loop's thread, so a plain counter is enough.
"""

from __future__ import annotations


class Limiter:
    def __init__(self, permits: int) -> None:
        if permits < 1:
            raise ValueError("a limiter needs at least one permit")
        self.permits = permits
        self._free = permits

    @property
    def in_use(self) -> int:
        return self.permits - self._free

    def try_acquire(self) -> bool:
        """Take a permit if one is free; never waits."""
        if self._free == 0:
            return False
        self._free -= 1
        return True

    def release(self) -> None:
        if self._free >= self.permits:
            raise RuntimeError("release without a permit")
        self._free += 1
