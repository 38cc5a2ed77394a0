"""The periodic sweep inside `serve`: housekeeping that runs under the writer lock."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any

from waypost.resolvers.core.receipts import purge_receipts
from waypost.resolvers.decisions.timeouts import answer_timed_out
from waypost.runtime import Runtime

# Each step takes the writer connection and the service time, and returns what
# it did for the log. Domains append their steps (decision timeouts, ...).
Step = Callable[[sqlite3.Connection, datetime], Any]
STEPS: list[tuple[str, Step]] = [("receipts_purged", purge_receipts)]
STEPS.append(("decisions_timed_out", answer_timed_out))


def _apply(step: Step, now: datetime, conn: sqlite3.Connection) -> Any:
    return step(conn, now)


async def run_once(rt: Runtime) -> dict[str, Any]:
    """One pass, each step in its own writer transaction."""
    report: dict[str, Any] = {}
    for name, step in STEPS:
        now = rt.now()
        report[name] = await rt.db.write(partial(_apply, step, now))
    return report
