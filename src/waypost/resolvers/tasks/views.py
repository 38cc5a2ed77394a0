"""The task JSON of section 13 and the shapes of its histories.

The task JSON carries computed parts (`ready`, `blocked_by`, `lease` with its
expiry judged at the service time), so shaping needs the connection and the
time: `present_tasks(conn, project_id, rows, now)` shapes many rows with a
constant number of statements; `task_json(conn, row, now)` shapes one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from waypost.resolvers.tasks.readiness import Readiness, readiness
from waypost.resolvers.tasks.store import dependency_map


def lease_json(row: sqlite3.Row | Mapping[str, Any]) -> dict[str, Any] | None:
    """The contract's lease object, exactly its four fields (a lease whose
    `expires_at` has passed is stale work that only `recover` takes over)."""
    if row["lease_owner_id"] is None:
        return None
    return {
        "owner_id": row["lease_owner_id"],
        "session_id": row["lease_session_id"],
        "expires_at": row["lease_expires_at"],
        "workflow": bool(row["lease_workflow"]),
    }


def publication_json(row: sqlite3.Row | Mapping[str, Any]) -> dict[str, Any] | None:
    if row["publication_holder_id"] is None:
        return None
    result = row["publication_result"]
    return {
        "holder_id": row["publication_holder_id"],
        "holder_session_id": row["publication_holder_session_id"],
        "prepared_at": row["publication_prepared_at"],
        "result": json.loads(result) if result else None,
    }


def shape(row: sqlite3.Row, depends_on: list[str], ready: Readiness) -> dict[str, Any]:
    return {
        "id": row["id"],
        "project_id": row["project_id"],
        "title": row["title"],
        "description": row["description"],
        "acceptance_criteria": json.loads(row["acceptance_criteria"]),
        "kind": row["kind"],
        "priority": row["priority"],
        "depends_on": depends_on,
        "subject_task_id": row["subject_task_id"],
        "status": row["status"],
        "revision": row["revision"],
        "ready": ready.ready,
        "blocked_by": ready.blocked_by(),
        "lease": lease_json(row),
        "publication": publication_json(row),
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def present_tasks(
    conn: sqlite3.Connection, project_id: str, rows: list[sqlite3.Row], now: datetime
) -> list[dict[str, Any]]:
    """Task JSON for rows of one project, in batch (dependencies and readiness)."""
    ids = [row["id"] for row in rows]
    deps = dependency_map(conn, ids)
    ready = readiness(conn, project_id, rows, now, deps)
    return [shape(r, [d for d, _ in deps[r["id"]]], ready[r["id"]]) for r in rows]


def task_json(conn: sqlite3.Connection, row: sqlite3.Row, now: datetime) -> dict[str, Any]:
    return present_tasks(conn, row["project_id"], [row], now)[0]


def revision_json(row: sqlite3.Row) -> dict[str, Any]:
    """The task revision of section 13, exactly its fields."""
    return {
        "revision": row["revision"],
        "title": row["title"],
        "description": row["description"],
        "acceptance_criteria": json.loads(row["acceptance_criteria"]),
        "kind": row["kind"],
        "priority": row["priority"],
        "depends_on": json.loads(row["depends_on"]),
        "changed_fields": json.loads(row["changed_fields"]),
        "judged_change": bool(row["judged_change"]),
        "actor_id": row["actor_id"],
        "at": row["at"],
    }


def checkpoint_json(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "task_id": row["task_id"],
        "note": row["note"],
        "actor_id": row["actor_id"],
        "actor_session_id": row["actor_session_id"],
        "at": row["at"],
    }


def submission_json(row: sqlite3.Row) -> dict[str, Any]:
    """Section 13's submission object."""
    return {
        "id": row["id"],
        "task_id": row["task_id"],
        "task_revision": row["task_revision"],
        "summary": row["summary"],
        "actor_id": row["actor_id"],
        "actor_session_id": row["actor_session_id"],
        "at": row["at"],
    }
