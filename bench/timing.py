"""Samples, medians and the table every suite prints."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass
class Result:
    name: str
    samples: list[float]  # seconds

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p90(self) -> float:
        if len(self.samples) < 2:
            return self.samples[0]
        return statistics.quantiles(self.samples, n=10)[-1]


async def measure(
    name: str,
    n: int,
    call: Callable[[int], Awaitable[None]],
    *,
    budget: float | None = None,
    warmup: int = 20,
) -> Result:
    """`n` timed calls after `warmup` untimed ones (negative indexes).

    With a `budget` (seconds), stop early once it is spent, keeping at least
    ten samples: slow rows then cost seconds, not minutes, and their median
    is still stable enough to compare.
    """
    for i in range(min(warmup, n)):  # warm caches and code paths first
        await call(-1 - i)
    samples: list[float] = []
    started = time.perf_counter()
    for i in range(n):
        start = time.perf_counter()
        await call(i)
        samples.append(time.perf_counter() - start)
        if budget is not None and len(samples) >= 10 and start - started > budget:
            break
    return Result(name, samples)


def report(results: list[Result], base: Result, base_label: str = "x GET") -> None:
    width = max(len(r.name) for r in results)
    print(f"{'':{width}}  {'median':>9}  {'p90':>9}  {'per s':>7}  {base_label:>7}  {'n':>5}")
    for r in results:
        print(
            f"{r.name:{width}}  {r.median * 1e3:7.3f}ms  {r.p90 * 1e3:7.3f}ms"
            f"  {1 / r.median:7.0f}  {r.median / base.median:7.2f}  {len(r.samples):5d}"
        )
