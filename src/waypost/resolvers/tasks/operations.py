"""Tasks: create, get, list, PATCH with immutable revisions, and the task JSON.

The task JSON carries computed parts (`ready`, `blocked_by`, `lease` with its
expiry judged at the service time), so shaping needs the connection and the
time: `present_tasks(conn, project_id, rows, now)` shapes many rows with a
constant number of statements; `task_json(conn, row, now)` shapes one.

The judged fields (title, description, acceptance criteria, kind) are the ones
a decision pins; `tasks.judged_revision` is the latest revision that changed
one of them, so the decision gate can tell a judged edit from a priority or
dependency edit without reading history.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from waypost.errors import (
    Forbidden,
    InvalidRequest,
    NotFound,
    PublicationInProgress,
    RevisionConflict,
    StateConflict,
)
from waypost.ids import new_id
from waypost.resolvers.core.receipts import Idempotency, Outcome, Tx, run_mutation
from waypost.resolvers.decisions import gate
from waypost.resolvers.projects.operations import require_project
from waypost.resolvers.tasks.readiness import (
    Readiness,
    dependency_map,
    ids_param,
    readiness,
)
from waypost.runtime import Actor, Runtime

TEXT_MAX_BYTES = 64 * 1024
JUDGED_FIELDS = ("title", "description", "acceptance_criteria", "kind")
CONTENT_FIELDS = (*JUDGED_FIELDS, "priority", "depends_on")
STATUSES = ("open", "claimed", "submitted", "done", "cancelled")
# SET clause that ends a lease (release, submit)
CLEAR_LEASE = (
    "lease_owner_id = NULL, lease_session_id = NULL, lease_expires_at = NULL, lease_workflow = 0"
)

Title = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Description = Annotated[str, msgspec.Meta(max_length=TEXT_MAX_BYTES)]
Criterion = Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]
Criteria = Annotated[list[Criterion], msgspec.Meta(max_length=100)]
Kind = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9_-]{1,64}(?![\s\S])")]
Priority = Annotated[int, msgspec.Meta(ge=-1_000_000, le=1_000_000)]
TaskRef = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{1,64}(?![\s\S])")]
TaskRefs = Annotated[list[TaskRef], msgspec.Meta(max_length=100)]
Status = Literal["open", "claimed", "submitted", "done", "cancelled"]


class TaskCreate(msgspec.Struct, forbid_unknown_fields=True):
    title: Title
    description: Description = ""
    acceptance_criteria: Criteria = msgspec.field(default_factory=list)
    kind: Kind = "feature"
    priority: Priority = 0
    depends_on: TaskRefs = msgspec.field(default_factory=list)
    subject_task_id: TaskRef | None = None


class TaskPatch(msgspec.Struct, forbid_unknown_fields=True):
    expected_revision: Annotated[int, msgspec.Meta(ge=1)]
    title: Title | msgspec.UnsetType = msgspec.UNSET
    description: Description | msgspec.UnsetType = msgspec.UNSET
    acceptance_criteria: Criteria | msgspec.UnsetType = msgspec.UNSET
    kind: Kind | msgspec.UnsetType = msgspec.UNSET
    priority: Priority | msgspec.UnsetType = msgspec.UNSET
    depends_on: TaskRefs | msgspec.UnsetType = msgspec.UNSET
    # Humans only: "cancelled" from open/claimed/submitted, "open" to reopen a
    # cancelled task or send a submitted one back for rework.
    status: Literal["open", "cancelled"] | msgspec.UnsetType = msgspec.UNSET

    def changes(self) -> dict[str, Any]:
        names = (*CONTENT_FIELDS, "status")
        return {f: getattr(self, f) for f in names if getattr(self, f) is not msgspec.UNSET}


class TaskListQuery(msgspec.Struct, forbid_unknown_fields=True):
    q: str | None = None  # full-text filter, as the context packet searches (docs/context.md)
    status: Status | None = None
    ready: bool | None = None
    cursor: str | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=200)] | None = None


# ---------------------------------------------------------------- shaping


def lease_json(row: sqlite3.Row) -> dict[str, Any] | None:
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


def publication_json(row: sqlite3.Row) -> dict[str, Any] | None:
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


# ---------------------------------------------------------------- shared checks


def require_task(conn: sqlite3.Connection, project_id: str, task_id: str) -> sqlite3.Row:
    row = conn.execute(
        "SELECT * FROM tasks WHERE id = ? AND project_id = ?", (task_id, project_id)
    ).fetchone()
    if row is None:
        raise NotFound("no such task in this project", {"task_id": task_id})
    result: sqlite3.Row = row
    return result


def load_in_tx(tx: Tx, project_id: str, task_id: str) -> tuple[sqlite3.Row, sqlite3.Row]:
    """The project's row and the task's, read inside the writer transaction (or 404)."""
    return require_project(tx.conn, project_id), require_task(tx.conn, project_id, task_id)


def current_task(tx: Tx, project_id: str, task_id: str) -> dict[str, Any]:
    """The task JSON as this transaction leaves it."""
    return task_json(tx.conn, require_task(tx.conn, project_id, task_id), tx.now)


def tasks_by_ids(conn: sqlite3.Connection, task_ids: list[str]) -> dict[str, sqlite3.Row]:
    rows = conn.execute(
        "SELECT * FROM tasks WHERE id IN (SELECT value FROM json_each(?))", (ids_param(task_ids),)
    ).fetchall()
    return {row["id"]: row for row in rows}


def ensure_work_allowed(conn: sqlite3.Connection, row: sqlite3.Row, now: datetime) -> None:
    """The decision gate for work on a task: the task itself and, for an
    activity, its subject (a workflow operation checks both)."""
    subject = row["subject_task_id"]
    task_ids = [row["id"]] if subject is None else [row["id"], subject]
    gate.ensure_all_resolved(conn, row["project_id"], task_ids, now)


def _check_dependencies(
    conn: sqlite3.Connection, project_id: str, task_id: str, depends_on: list[str]
) -> None:
    seen: set[str] = set()
    for index, dep in enumerate(depends_on):
        if dep == task_id:
            raise InvalidRequest.field(f"depends_on[{index}]", "a task cannot depend on itself")
        if dep in seen:
            raise InvalidRequest.field(f"depends_on[{index}]", "duplicate dependency")
        seen.add(dep)
    found = {
        row["id"]
        for row in conn.execute(
            "SELECT id FROM tasks WHERE project_id = ? AND id IN (SELECT value FROM json_each(?))",
            (project_id, ids_param(depends_on)),
        )
    }
    for index, dep in enumerate(depends_on):
        if dep not in found:
            raise InvalidRequest.field(f"depends_on[{index}]", "no such task in this project")


def _creates_cycle(conn: sqlite3.Connection, task_id: str, depends_on: list[str]) -> bool:
    """Would `task_id` depending on `depends_on` close a loop (reach itself)?"""
    row = conn.execute(
        "WITH RECURSIVE reach(id) AS ("
        " SELECT value FROM json_each(?)"
        " UNION SELECT d.depends_on_id FROM task_dependencies d JOIN reach r ON d.task_id = r.id"
        ") SELECT 1 FROM reach WHERE id = ? LIMIT 1",
        (ids_param(depends_on), task_id),
    ).fetchone()
    return row is not None


def _write_dependencies(conn: sqlite3.Connection, task_id: str, depends_on: list[str]) -> None:
    conn.execute("DELETE FROM task_dependencies WHERE task_id = ?", (task_id,))
    conn.executemany(
        "INSERT INTO task_dependencies (task_id, depends_on_id, position) VALUES (?, ?, ?)",
        [(task_id, dep, index) for index, dep in enumerate(depends_on)],
    )


def _write_revision(
    tx: Tx, task_id: str, revision: int, changed: list[str], depends_on: list[str]
) -> None:
    """Copy the current content of the task into its next immutable revision."""
    tx.conn.execute(
        "INSERT INTO task_revisions (task_id, revision, title, description, acceptance_criteria,"
        " kind, priority, depends_on, changed_fields, judged_change, actor_id, actor_session_id,"
        " at) SELECT id, ?, title, description, acceptance_criteria, kind, priority, ?, ?, ?, ?,"
        " ?, ? FROM tasks WHERE id = ?",
        (revision, json.dumps(depends_on), json.dumps(changed),
         any(f in JUDGED_FIELDS for f in changed),
         tx.actor.principal_id, tx.actor.session_id, tx.at, task_id),
    )  # fmt: skip


def check_bytes(field: str, text: str) -> None:
    """Text fields are bounded in UTF-8 bytes (the models bound characters)."""
    if len(text.encode()) > TEXT_MAX_BYTES:
        raise InvalidRequest.field(field, f"{field} may hold at most 64 KiB")


# ---------------------------------------------------------------- create


async def create(
    rt: Runtime, actor: Actor, idem: Idempotency, project_id: str, body: TaskCreate
) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        require_project(tx.conn, project_id)
        check_bytes("description", body.description)
        task_id = new_id("task")
        _check_dependencies(tx.conn, project_id, task_id, body.depends_on)
        if body.subject_task_id is not None:
            exists = tx.conn.execute(
                "SELECT 1 FROM tasks WHERE id = ? AND project_id = ?",
                (body.subject_task_id, project_id),
            ).fetchone()
            if exists is None:
                raise InvalidRequest.field("subject_task_id", "no such task in this project")
        tx.conn.execute(
            "INSERT INTO tasks (id, project_id, title, description, acceptance_criteria, kind,"
            " priority, subject_task_id, status, revision, judged_revision, created_by,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'open', 1, 1, ?, ?, ?)",
            (task_id, project_id, body.title, body.description,
             json.dumps(body.acceptance_criteria), body.kind, body.priority,
             body.subject_task_id, actor.principal_id, tx.at, tx.at),
        )  # fmt: skip
        _write_dependencies(tx.conn, task_id, body.depends_on)
        _write_revision(tx, task_id, 1, list(CONTENT_FIELDS), body.depends_on)
        row = require_task(tx.conn, project_id, task_id)
        task = task_json(tx.conn, row, tx.now)
        tx.event(
            project_id,
            "task.created",
            "task",
            task_id,
            {"title": body.title, "revision": 1, "subject_task_id": body.subject_task_id},
        )
        return 201, task

    return await run_mutation(rt, actor, idem, unit)


# ---------------------------------------------------------------- patch


def _status_change(actor: Actor, row: sqlite3.Row, status: str) -> None:
    """Check a PATCH of `status` (humans only; see docs/tasks.md)."""
    if not actor.is_human:
        raise Forbidden(
            "only humans change a task's status", {"reason": "humans_only", "field": "status"}
        )
    current = row["status"]
    allowed = {"cancelled": ("open", "claimed", "submitted"), "open": ("cancelled", "submitted")}
    if current not in allowed[status]:
        raise StateConflict(
            f"a {current} task cannot become {status}",
            {"reason": "invalid_transition", "status": current, "field": "status"},
        )
    if row["publication_holder_id"] is not None:
        raise PublicationInProgress(
            "publication authority is held for this task",
            {"holder_id": row["publication_holder_id"]},
        )


def _refuse_judged_edit_while_publishing(conn: sqlite3.Connection, row: sqlite3.Row) -> None:
    """No judged edit while the task, its subject or an activity holds publication
    authority: the edit would make an allow on the task stale, and the holder's
    result and finalize (which pass the gate) would stop until someone reopens
    the decision and answers it again."""
    held = conn.execute(
        "SELECT id, publication_holder_id FROM tasks WHERE publication_holder_id IS NOT NULL"
        " AND (id = ? OR id = ? OR subject_task_id = ?) LIMIT 1",
        (row["id"], row["subject_task_id"], row["id"]),
    ).fetchone()
    if held is not None:
        raise PublicationInProgress(
            "publication authority is held for this task, its subject or an activity;"
            " judged fields cannot change until it is finalized",
            {"task_id": held["id"], "holder_id": held["publication_holder_id"]},
        )


async def update(
    rt: Runtime, actor: Actor, idem: Idempotency, project_id: str, task_id: str, patch: TaskPatch
) -> Outcome:
    requested = patch.changes()

    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        if not requested:
            raise InvalidRequest.field("", "the patch names no task field to change")
        _, row = load_in_tx(tx, project_id, task_id)
        if patch.expected_revision != row["revision"]:
            raise RevisionConflict(
                "the task changed since that revision",
                {"expected_revision": patch.expected_revision, "current_revision": row["revision"]},
            )
        reopening = requested.get("status") == "open" and row["status"] == "cancelled"
        if row["status"] in ("done", "cancelled") and not reopening:
            raise StateConflict(
                f"a {row['status']} task is closed to edits",
                {"reason": "task_closed", "status": row["status"]},
            )
        current_deps = [d for d, _ in dependency_map(tx.conn, [task_id])[task_id]]
        current = {
            "title": row["title"],
            "description": row["description"],
            "acceptance_criteria": json.loads(row["acceptance_criteria"]),
            "kind": row["kind"],
            "priority": row["priority"],
            "depends_on": current_deps,
            "status": row["status"],
        }
        changed = [f for f, value in requested.items() if value != current[f]]
        if "description" in changed:
            check_bytes("description", requested["description"])
        if "depends_on" in changed:
            _check_dependencies(tx.conn, project_id, task_id, requested["depends_on"])
            if _creates_cycle(tx.conn, task_id, requested["depends_on"]):
                raise InvalidRequest.field("depends_on", "this dependency would create a cycle")
        if "status" in changed:
            _status_change(actor, row, requested["status"])
        judged = any(f in JUDGED_FIELDS for f in changed)
        if judged:
            _refuse_judged_edit_while_publishing(tx.conn, row)
        if not changed:
            # Nothing differs: no new revision, but the accepted call is still logged.
            unchanged = {"revision": row["revision"], "changed_fields": []}
            tx.event(project_id, "task.updated", "task", task_id, unchanged)
            return 200, task_json(tx.conn, row, tx.now)
        revision = row["revision"] + 1
        columns = {f: requested[f] for f in changed if f in (*JUDGED_FIELDS, "priority", "status")}
        if "acceptance_criteria" in columns:
            columns["acceptance_criteria"] = json.dumps(columns["acceptance_criteria"])
        if columns.get("status") in ("open", "cancelled"):
            # leaving `claimed` for either state ends any lease
            columns.update(
                lease_owner_id=None, lease_session_id=None, lease_expires_at=None, lease_workflow=0
            )
        sets = "".join(f"{name} = ?, " for name in columns)
        tx.conn.execute(
            f"UPDATE tasks SET {sets}revision = ?, judged_revision = ?, updated_at = ?"
            " WHERE id = ?",
            (*columns.values(), revision, revision if judged else row["judged_revision"],
             tx.at, task_id),
        )  # fmt: skip
        depends_on = requested["depends_on"] if "depends_on" in changed else current_deps
        if "depends_on" in changed:
            _write_dependencies(tx.conn, task_id, depends_on)
        _write_revision(tx, task_id, revision, changed, depends_on)
        data: dict[str, Any] = {
            "revision": revision,
            "changed_fields": changed,
            "judged_change": judged,
        }
        if "status" in changed:
            data["status"] = {"from": row["status"], "to": requested["status"]}
        tx.event(project_id, "task.updated", "task", task_id, data)
        return 200, current_task(tx, project_id, task_id)

    return await run_mutation(rt, actor, idem, unit)
