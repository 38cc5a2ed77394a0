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
from collections.abc import Callable, Sequence
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


# The digest's parts that cost reads beyond their ids: the three decision
# lists' objects, the blocked tasks' JSON and the ready count.
PARTS: Final = frozenset(
    {
        "pending_decisions",
        "proceeded_by_timeout",
        "timing_out_soon",
        "blocked_tasks",
        "ready_task_count",
    }
)
_DECISION_LISTS: Final = ("pending_decisions", "proceeded_by_timeout", "timing_out_soon")


def digest_sync(
    conn: sqlite3.Connection, project_id: str, now: datetime, parts: frozenset[str] = PARTS
) -> dict[str, Any]:
    require_project(conn, project_id)
    return digests_of_projects(conn, [project_id], now, parts)[0]


def digests_of_projects(
    conn: sqlite3.Connection,
    project_ids: Sequence[str],
    now: datetime,
    parts: frozenset[str] = PARTS,
) -> list[dict[str, Any]]:
    """The digests of projects read on this snapshot (none is looked up
    again), with only `parts` filled in; `truncated` is always complete.
    Every digest's decisions are loaded in one batch: the console's inbox
    reads fifty digests at a time, and one load per project was a quarter
    of its statements (scalejourney)."""
    at = format_time(now)
    ids_of = [_decision_ids(conn, project_id, now) for project_id in project_ids]
    wanted = [name for name in _DECISION_LISTS if name in parts]
    objects = load_decisions(
        conn,
        sorted({i for lists in ids_of for name in wanted for i in lists[name][:DIGEST_LIMIT]}),
        at,
    )
    return [
        _digest(conn, project_id, now, parts, lists, objects)
        for project_id, lists in zip(project_ids, ids_of, strict=True)
    ]


def _decision_ids(conn: sqlite3.Connection, project_id: str, now: datetime) -> dict[str, list[str]]:
    """Each decision list's ids, one past the limit (so a cut shows)."""
    n = DIGEST_LIMIT + 1
    at = format_time(now)
    since = format_time(now - TIMED_OUT_WINDOW)
    # Due ones (the sweep has not run yet) count as timing out soon too.
    cutoff = format_time(now + SOON_WINDOW - TIMEOUT)
    return {
        "pending_decisions": lists_store.unanswered_ids(conn, project_id, n),
        "proceeded_by_timeout": lists_store.timed_out_since_ids(conn, project_id, since, n),
        "timing_out_soon": lists_store.timing_out_ids(conn, project_id, at, cutoff, n),
    }


def _digest(
    conn: sqlite3.Connection,
    project_id: str,
    now: datetime,
    parts: frozenset[str],
    lists: dict[str, list[str]],
    objects: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    blocked = _blocked_task_rows(conn, project_id, now)
    found: dict[str, Any] = {"project_id": project_id, "generated_at": format_time(now)}
    for name, ids in lists.items():
        if name in parts:
            found[name] = [objects[i] for i in ids[:DIGEST_LIMIT]]
    if "blocked_tasks" in parts:
        found["blocked_tasks"] = [
            t for t in present_tasks(conn, project_id, blocked[:DIGEST_LIMIT], now)
            if t["blocked_by"]["decisions"]
        ]  # fmt: skip
    if "ready_task_count" in parts:
        found["ready_task_count"] = _ready_count(conn, project_id, now)
    found["truncated"] = {
        **{name: len(ids) > DIGEST_LIMIT for name, ids in lists.items()},
        "blocked_tasks": len(blocked) > DIGEST_LIMIT,
    }
    return found


def _blocked_task_rows(
    conn: sqlite3.Connection, project_id: str, now: datetime
) -> list[sqlite3.Row]:
    """Live tasks a decision blocks, or whose subject a decision blocks, in claim order."""
    params = ready_params(project_id, now)
    return ready_store.gate_blocked_open_rows(conn, params, DIGEST_LIMIT + 1)


def _ready_count(conn: sqlite3.Connection, project_id: str, now: datetime) -> int:
    """How many tasks pass the readiness predicate, counted in SQL (nothing is loaded)."""
    return ready_store.ready_count(conn, ready_params(project_id, now))


async def digest(rt: Runtime, project_id: str, who: str | None = None) -> dict[str, Any]:
    # In the long reads' lane, as a search is, one digest at a time: its cost
    # grows with the pairs of open decisions and the tasks each names (250 ms
    # for 900 decisions over 100 tasks), and four clients polling it took
    # every reader, so a policy read elsewhere waited 551 ms at the median.
    # It may wait there: judged at the instant its snapshot begins, which
    # becomes the request's `Waypost-Now` (REST's; GraphQL's digest is read
    # by schema/loaders.py on the query's own snapshot, at the query's instant,
    # read once that snapshot has begun: schema/snapshot.py).
    read = functools.partial(_digest_at_snapshot, project_id=project_id, clock=rt.moving_now())
    # (in turn with other callers' digests: `who`, the caller's principal)
    return await rt.db.search(read, unbounded=True, who=who)


def _digest_at_snapshot(
    conn: sqlite3.Connection, project_id: str, clock: Callable[[], datetime]
) -> dict[str, Any]:
    begin_snapshot(conn)  # so every write it shows was stamped at or before its instant
    return digest_sync(conn, project_id, clock())
