"""The project digest: what awaits a human, what proceeded on its own, what will.

- `pending_decisions`: every decision whose current generation has no answer,
  whatever its status (a stale or expired unanswered one awaits a reopening).
- `proceeded_by_timeout`: decisions the sweep answered in the last 7 days.
- `timing_out_soon`: pending decisions the sweep will answer within 6 hours
  (reversible, not an agent-asked human-required cycle, and not expiring first).
- `blocked_tasks`: tasks not done or cancelled that a decision blocks (their
  own, or their subject's when they are activities), in claim order.
- `ready_task_count`: how many tasks an ordinary claim could take now.

Each list holds at most DIGEST_LIMIT items; `truncated` says which were cut.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Final

from waypost.clock import format_time
from waypost.resolvers.decisions import lists_store
from waypost.resolvers.decisions.timeouts import TIMEOUT
from waypost.resolvers.decisions.views import load_decisions
from waypost.resolvers.projects.operations import require_project
from waypost.resolvers.tasks import ready_store
from waypost.resolvers.tasks.readiness import ready_params
from waypost.resolvers.tasks.views import present_tasks
from waypost.runtime import Runtime
from waypost.storage.readers import begin_snapshot

DIGEST_LIMIT: Final = 200
TIMED_OUT_WINDOW: Final = timedelta(days=7)
SOON_WINDOW: Final = timedelta(hours=6)


def digest_sync(conn: sqlite3.Connection, project_id: str, now: datetime) -> dict[str, Any]:
    require_project(conn, project_id)
    at = format_time(now)
    n = DIGEST_LIMIT + 1
    pending = lists_store.unanswered_ids(conn, project_id, n)
    since = format_time(now - TIMED_OUT_WINDOW)
    timed_out = lists_store.timed_out_since_ids(conn, project_id, since, n)
    # Due ones (the sweep has not run yet) count as timing out soon too.
    cutoff = format_time(now + SOON_WINDOW - TIMEOUT)
    soon = lists_store.timing_out_ids(conn, project_id, at, cutoff, n)
    lists = {
        "pending_decisions": pending[:DIGEST_LIMIT],
        "proceeded_by_timeout": timed_out[:DIGEST_LIMIT],
        "timing_out_soon": soon[:DIGEST_LIMIT],
    }
    objects = load_decisions(conn, sorted({i for ids in lists.values() for i in ids}), at)
    blocked = _blocked_task_rows(conn, project_id, now)
    blocked_json = [
        t for t in present_tasks(conn, project_id, blocked[:DIGEST_LIMIT], now)
        if t["blocked_by"]["decisions"]
    ]  # fmt: skip
    return {
        "project_id": project_id,
        "generated_at": at,
        **{name: [objects[i] for i in ids] for name, ids in lists.items()},
        "blocked_tasks": blocked_json,
        "ready_task_count": _ready_count(conn, project_id, now),
        "truncated": {
            "pending_decisions": len(pending) > DIGEST_LIMIT,
            "proceeded_by_timeout": len(timed_out) > DIGEST_LIMIT,
            "timing_out_soon": len(soon) > DIGEST_LIMIT,
            "blocked_tasks": len(blocked) > DIGEST_LIMIT,
        },
    }


def _blocked_task_rows(
    conn: sqlite3.Connection, project_id: str, now: datetime
) -> list[sqlite3.Row]:
    """Live tasks a decision blocks, or whose subject a decision blocks, in claim order."""
    params = ready_params(project_id, now)
    return ready_store.gate_blocked_open_rows(conn, params, DIGEST_LIMIT + 1)


def _ready_count(conn: sqlite3.Connection, project_id: str, now: datetime) -> int:
    """How many tasks pass the readiness predicate, counted in SQL (nothing is loaded)."""
    return ready_store.ready_count(conn, ready_params(project_id, now))


async def digest(rt: Runtime, project_id: str) -> dict[str, Any]:
    # In the long reads' lane, as a search is, one digest at a time: its cost
    # grows with the pairs of open decisions and the tasks each names (250 ms
    # for 900 decisions over 100 tasks), and four clients polling it took
    # every reader, so a policy read elsewhere waited 551 ms at the median.
    # It may wait there: judged at the instant its snapshot begins, which
    # becomes the request's `Waypost-Now` (REST's; GraphQL's digest is read
    # by schema/loaders.py on the query's own snapshot, at the query's instant,
    # read once that snapshot has begun: schema/snapshot.py).
    read = functools.partial(_digest_at_snapshot, project_id=project_id, clock=rt.moving_now())
    return await rt.db.search(read, unbounded=True)


def _digest_at_snapshot(
    conn: sqlite3.Connection, project_id: str, clock: Callable[[], datetime]
) -> dict[str, Any]:
    begin_snapshot(conn)  # so every write it shows was stamped at or before its instant
    return digest_sync(conn, project_id, clock())
