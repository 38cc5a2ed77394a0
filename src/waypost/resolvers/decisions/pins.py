"""What opening, answering and reopening a decision share: pins and guards.

All of it runs inside the caller's writer transaction, after the writer lock
was taken, so what it reads cannot change before the write commits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from waypost.clock import format_time, parse_time
from waypost.errors import GenerationConflict, InvalidRequest, NotFound, PublicationInProgress
from waypost.resolvers.core.receipts import Tx
from waypost.resolvers.decisions import store
from waypost.resolvers.decisions.status import Status, decision_status


def pin_tasks(
    conn: sqlite3.Connection, project_id: str, task_ids: Sequence[str]
) -> list[tuple[str, int]]:
    """(task id, current revision) for each id, in order; unknown ids are a 400."""
    for i, task_id in enumerate(task_ids):
        if task_id in task_ids[:i]:
            raise InvalidRequest.field(f"task_ids[{i}]", "each task may be listed once")
    revisions = store.task_revisions(conn, project_id, task_ids)
    for i, task_id in enumerate(task_ids):
        if task_id not in revisions:
            missing = "no such task in this project"
            raise InvalidRequest.unknown(f"task_ids[{i}]", missing, task_id, "Task")
    return [(task_id, revisions[task_id]) for task_id in task_ids]


def ensure_no_publication(conn: sqlite3.Connection, task_ids: Sequence[str]) -> None:
    """Refuse a new blocker while publication authority is held around these tasks.

    For each affected task: the task itself, its subject (when it is an
    activity) and its activities (the tasks whose subject it is).
    """
    holders = store.publication_holders_around(conn, task_ids)
    if holders:
        raise PublicationInProgress(
            "an affected task, its subject or one of its activities holds publication authority",
            {"task_ids": holders},
        )


def future_instant(value: str | None, now: datetime) -> str | None:
    """A client-sent expiry, normalised; it must carry an offset and lie in the future."""
    if value is None:
        return None
    try:
        moment = parse_time(value)
    except ValueError as exc:
        raise InvalidRequest.field("expires_at", str(exc)) from exc
    # Compared as it will be stored (whole milliseconds), so an accepted expiry has
    # never already passed.
    moment = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    if moment <= now:
        raise InvalidRequest.field("expires_at", "the expiry must lie in the future")
    return format_time(moment)


def check_generation(expected: int, current: int) -> None:
    """A stale `expected_generation` is a generation_conflict (answer and reopen)."""
    if expected != current:
        raise GenerationConflict.behind(expected, current)


def require_state(
    conn: sqlite3.Connection, project_id: str, decision_id: str, now_at: str
) -> tuple[sqlite3.Row, Status]:
    """The decision's `decision_current` row (plus its stable columns) and status."""
    row = store.current_state_row(conn, project_id, decision_id)
    if row is None:
        raise NotFound("no such decision", {"decision_id": decision_id})
    status = decision_status(row["disposition"], row["expires_at"], now_at, row["stale"])
    return row, status


def insert_generation(
    tx: Tx,
    decision_id: str,
    generation: int,
    pins: list[tuple[str, int]],
    pinned: dict[str, Any],
) -> None:
    """Write one immutable generation and its affected-task pins.

    `pinned` holds policy_revision, environment, conditions, expires_at and
    reopen_rationale; the asker and the time come from the transaction.
    """
    asked = {
        **pinned,
        "actor_id": tx.actor.principal_id,
        "actor_kind": tx.actor.kind,
        "actor_session_id": tx.actor.session_id,
        "at": tx.at,
    }
    store.insert_generation(tx.conn, decision_id, generation, pins, asked)
