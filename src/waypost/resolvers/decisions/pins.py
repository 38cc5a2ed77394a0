"""What opening, answering and reopening a decision share: pins and guards.

All of it runs inside the caller's writer transaction, after the writer lock
was taken, so what it reads cannot change before the write commits.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from waypost.clock import format_time, parse_time
from waypost.errors import GenerationConflict, InvalidRequest, NotFound, PublicationInProgress
from waypost.resolvers.core.receipts import Tx
from waypost.resolvers.decisions.status import Status, decision_status


def pin_tasks(
    conn: sqlite3.Connection, project_id: str, task_ids: Sequence[str], field: str = "task_ids"
) -> list[tuple[str, int]]:
    """(task id, current revision) for each id, in order; unknown ids are a 400."""
    for i, task_id in enumerate(task_ids):
        if task_id in task_ids[:i]:
            raise InvalidRequest.field(f"{field}[{i}]", "each task may be listed once")
    rows = conn.execute(
        "SELECT t.id, t.revision FROM json_each(?) k JOIN tasks t ON t.id = k.value"
        " WHERE t.project_id = ?",
        (json.dumps(list(task_ids)), project_id),
    ).fetchall()
    revisions = {r["id"]: r["revision"] for r in rows}
    for i, task_id in enumerate(task_ids):
        if task_id not in revisions:
            raise InvalidRequest.field(f"{field}[{i}]", "no such task in this project")
    return [(task_id, revisions[task_id]) for task_id in task_ids]


def ensure_no_publication(conn: sqlite3.Connection, task_ids: Sequence[str]) -> None:
    """Refuse a new blocker while publication authority is held around these tasks.

    For each affected task: the task itself, its subject (when it is an
    activity) and its activities (the tasks whose subject it is).
    """
    ids = json.dumps(list(task_ids))
    rows = conn.execute(
        "SELECT t.id FROM tasks t WHERE t.publication_holder_id IS NOT NULL AND ("
        " t.id IN (SELECT value FROM json_each(:ids))"
        " OR t.id IN (SELECT a.subject_task_id FROM tasks a"
        "             WHERE a.id IN (SELECT value FROM json_each(:ids)))"
        " OR t.subject_task_id IN (SELECT value FROM json_each(:ids)))"
        " ORDER BY t.id",
        {"ids": ids},
    ).fetchall()
    if rows:
        raise PublicationInProgress(
            "an affected task, its subject or one of its activities holds publication authority",
            {"task_ids": [r["id"] for r in rows]},
        )


def future_instant(value: str | None, now: datetime, field: str = "expires_at") -> str | None:
    """A client-sent expiry, normalised; it must carry an offset and lie in the future."""
    if value is None:
        return None
    try:
        moment = parse_time(value)
    except ValueError as exc:
        raise InvalidRequest.field(field, str(exc)) from exc
    # Compared as it will be stored (whole milliseconds), so an accepted expiry has
    # never already passed.
    moment = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    if moment <= now:
        raise InvalidRequest.field(field, "the expiry must lie in the future")
    return format_time(moment)


def check_generation(expected: int, current: int) -> None:
    """A stale `expected_generation` is a generation_conflict (answer and reopen)."""
    if expected != current:
        raise GenerationConflict(
            "the decision has moved to another generation",
            {"expected_generation": expected, "current_generation": current},
        )


def require_state(
    conn: sqlite3.Connection, project_id: str, decision_id: str, now_at: str
) -> tuple[sqlite3.Row, Status]:
    """The decision's `decision_current` row (plus its stable columns) and status."""
    row = conn.execute(
        "SELECT s.*, d.options, d.question FROM decision_current s"
        " JOIN decisions d ON d.id = s.decision_id"
        " WHERE s.decision_id = ? AND s.project_id = ?",
        (decision_id, project_id),
    ).fetchone()
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
    tx.conn.execute(
        "INSERT INTO decision_generations (decision_id, generation, policy_revision,"
        " environment, conditions, expires_at, reopen_rationale, actor_id, actor_kind,"
        " actor_session_id, at) VALUES (:decision_id, :generation, :policy_revision,"
        " :environment, :conditions, :expires_at, :reopen_rationale, :actor_id, :actor_kind,"
        " :actor_session_id, :at)",
        {
            **pinned,
            "decision_id": decision_id,
            "generation": generation,
            "conditions": json.dumps(pinned["conditions"], ensure_ascii=False),
            "actor_id": tx.actor.principal_id,
            "actor_kind": tx.actor.kind,
            "actor_session_id": tx.actor.session_id,
            "at": tx.at,
        },
    )
    tx.conn.executemany(
        "INSERT INTO decision_affected (decision_id, generation, position, task_id,"
        " task_revision) VALUES (?, ?, ?, ?, ?)",
        [
            (decision_id, generation, i, task_id, revision)
            for i, (task_id, revision) in enumerate(pins)
        ],
    )
