"""The periodic sweep inside `serve`: housekeeping that runs under the writer lock."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from waypost.resolvers.core.receipts import PURGE_BATCH, purge_receipts
from waypost.resolvers.decisions.timeouts import BATCH as TIMEOUT_BATCH
from waypost.resolvers.decisions.timeouts import answer_timed_out
from waypost.runtime import Runtime

log = logging.getLogger("waypost.sweep")

# Each step takes the writer connection and the service time, and returns what
# it did for the log. Domains append their steps (decision timeouts, ...).
Step = Callable[[sqlite3.Connection, datetime], Any]


@dataclass(frozen=True)
class Batched:
    """A step that does at most `limit` rows per call (returning how many) and
    runs again, each call its own unit of work, until a call does none: other
    writes get the writer in between. A call may stop short of `limit` (the
    decision timeouts stop on time), so fewer is no sign that none are left;
    the pass ends with one call that finds nothing, a cheap one."""

    step: Callable[[sqlite3.Connection, datetime], int]
    limit: int
    max_rounds: int = 10_000

    def __call__(self, conn: sqlite3.Connection, now: datetime) -> int:
        return self.step(conn, now)


STEPS: list[tuple[str, Step]] = [("receipts_purged", Batched(purge_receipts, PURGE_BATCH))]
# batched too: a backlog (a day of reversible decisions, a clock moved on) is
# answered within one pass, not 500 per --sweep-interval
STEPS.append(("decisions_timed_out", Batched(answer_timed_out, TIMEOUT_BATCH)))


def _apply(step: Step, rt: Runtime, conn: sqlite3.Connection) -> Any:
    # the time is read under the writer lock, as every write reads it: read
    # before the unit waited its turn, a decision that came due meanwhile was
    # left for the next sweep, and one that expired could be answered as of
    # before its expiry
    return step(conn, rt.now())


async def run_once(rt: Runtime) -> dict[str, Any]:
    """One pass, each step in its own writer transaction (a batched step in several)."""
    report: dict[str, Any] = {}
    for name, step in STEPS:
        if isinstance(step, Batched):
            total = 0
            for _ in range(step.max_rounds):
                # solo: a write queued meanwhile commits before the next batch
                done = int(await rt.db.write(partial(_apply, step, rt), solo=True))
                total += done
                if done == 0:
                    break
            else:
                log.warning("sweep: %s stopped after %s rounds; the next pass goes on", name,
                            step.max_rounds)  # fmt: skip
            report[name] = total
        else:
            report[name] = await rt.db.write(partial(_apply, step, rt), solo=True)
    return report
