"""Tasks: create, PATCH with immutable revisions, and the checks the workflow shares.

The judged fields (title, description, acceptance criteria, kind) are the ones
a decision pins; `tasks.judged_revision` is the latest revision that changed
one of them, so the decision gate can tell a judged edit from a priority or
dependency edit without reading history. Request models live in models.py,
the task JSON in views.py, the SQL in store.py.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any

from waypost.clock import format_time
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
from waypost.resolvers.core.secret_markers import refuse_credential
from waypost.resolvers.core.text import require_text
from waypost.resolvers.decisions import gate
from waypost.resolvers.projects.operations import require_project
from waypost.resolvers.tasks import store
from waypost.resolvers.tasks.models import (
    CONTENT_FIELDS,
    JUDGED_FIELDS,
    TEXT_MAX_BYTES,
    TaskCreate,
    TaskListQuery,
    TaskPatch,
)
from waypost.resolvers.tasks.ready_store import gate_held
from waypost.resolvers.tasks.store import dependency_map
from waypost.resolvers.tasks.views import task_json
from waypost.runtime import Actor, Runtime

__all__ = [
    # the transports decode into these models
    "TaskCreate",
    "TaskListQuery",
    "TaskPatch",
    "check_bytes",
    "create",
    "current_task",
    "ensure_work_allowed",
    "load_in_tx",
    "require_task",
    "update",
]


# ---------------------------------------------------------------- shared checks


def require_task(conn: sqlite3.Connection, project_id: str, task_id: str) -> sqlite3.Row:
    row = store.task_row(conn, project_id, task_id)
    if row is None:
        raise NotFound("no such task in this project", {"task_id": task_id})
    return row


def load_in_tx(tx: Tx, project_id: str, task_id: str) -> tuple[sqlite3.Row, sqlite3.Row]:
    """The project's row and the task's, read inside the writer transaction (or 404)."""
    return require_project(tx.conn, project_id), require_task(tx.conn, project_id, task_id)


def current_task(tx: Tx, project_id: str, task_id: str) -> dict[str, Any]:
    """The task JSON as this transaction leaves it."""
    return task_json(tx.conn, require_task(tx.conn, project_id, task_id), tx.now)


def ensure_work_allowed(conn: sqlite3.Connection, row: sqlite3.Row, now: datetime) -> None:
    """The decision gate for work on a task: the task itself and, for an
    activity, its subject (a workflow operation checks both). The row's stored
    gate state only chooses the way the gate is asked (gate.ensure_all_resolved);
    a row read earlier in the transaction can choose the slower way, never a
    wrong answer."""
    subject = row["subject_task_id"]
    held = gate_held(row, format_time(now))
    if subject is None:
        gate.ensure_decisions_resolved(conn, row["project_id"], row["id"], now, held=held)
    else:  # one refusal naming both tasks' decisions, the activity's first
        ids = [row["id"], subject]
        gate.ensure_all_resolved(conn, row["project_id"], ids, now, held=held)


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
    found = store.existing_task_ids(conn, project_id, depends_on)
    for index, dep in enumerate(depends_on):
        if dep not in found:
            missing = "no such task in this project"
            raise InvalidRequest.unknown(f"depends_on[{index}]", missing, dep, "Task")


def _creates_cycle(conn: sqlite3.Connection, task_id: str, depends_on: list[str]) -> bool:
    """Would `task_id` depending on `depends_on` close a loop (reach itself)?"""
    return store.reaches(conn, depends_on, task_id)


def _write_revision(
    tx: Tx, task_id: str, revision: int, changed: list[str], depends_on: list[str]
) -> None:
    """Copy the current content of the task into its next immutable revision."""
    judged = any(f in JUDGED_FIELDS for f in changed)
    actor = (tx.actor.principal_id, tx.actor.session_id)
    store.insert_revision(tx.conn, task_id, revision, changed, judged, depends_on, actor, tx.at)


def check_bytes(field: str, text: str) -> None:
    """Text fields are bounded in UTF-8 bytes (the models bound characters)."""
    if len(text.encode()) > TEXT_MAX_BYTES:
        raise InvalidRequest.field(field, f"{field} may hold at most 64 KiB")


# the task fields whose new value `task.updated` carries
EVENT_VALUES = frozenset({"title", "kind", "priority", "depends_on"})


def check_text_fields(values: dict[str, Any]) -> None:
    """A title and each acceptance criterion hold text, not only whitespace
    (as a knowledge title and a decision's question do)."""
    if "title" in values:
        require_text(values["title"], "title")
        refuse_credential(values["title"], "title")  # task.created and task.updated keep it
    for i, criterion in enumerate(values.get("acceptance_criteria", ())):
        require_text(criterion, f"acceptance_criteria[{i}]")


# ---------------------------------------------------------------- create


async def create(
    rt: Runtime, actor: Actor, idem: Idempotency, project_id: str, body: TaskCreate
) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        require_project(tx.conn, project_id)
        check_text_fields({"title": body.title, "acceptance_criteria": body.acceptance_criteria})
        check_bytes("description", body.description)
        task_id = new_id("task")
        _check_dependencies(tx.conn, project_id, task_id, body.depends_on)
        subject = body.subject_task_id
        if subject is not None and not store.task_exists(tx.conn, project_id, subject):
            missing = "no such task in this project"
            raise InvalidRequest.unknown("subject_task_id", missing, subject, "Task")
        store.insert_task(
            tx.conn,
            {"id": task_id, "project_id": project_id, "title": body.title,
             "description": body.description, "acceptance_criteria": body.acceptance_criteria,
             "kind": body.kind, "priority": body.priority,
             "subject_task_id": body.subject_task_id, "created_by": actor.principal_id,
             "at": tx.at},
        )  # fmt: skip
        store.replace_dependencies(tx.conn, task_id, body.depends_on)
        _write_revision(tx, task_id, 1, list(CONTENT_FIELDS), body.depends_on)
        row = require_task(tx.conn, project_id, task_id)
        task = task_json(tx.conn, row, tx.now)
        tx.event(
            project_id,
            "task.created",
            "task",
            task_id,
            # what a board shows of a new card, as task.updated's `values`
            {"title": body.title, "revision": 1, "subject_task_id": body.subject_task_id,
             "kind": body.kind, "priority": body.priority, "depends_on": body.depends_on},
        )  # fmt: skip
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


def _refuse_removing_blockers(
    actor: Actor, dependencies: list[tuple[str, str]], requested: list[str]
) -> None:
    """Any principal may edit a task because an edit only adds blockers; taking
    away a dependency that is not done would remove one (an agent could skip the
    order a human set), so that is for humans, as `status` is. Dropping a done
    dependency removes nothing and stays open to agents."""
    if actor.is_human:
        return
    kept = set(requested)
    removed = [dep for dep, status in dependencies if dep not in kept and status != "done"]
    if removed:
        raise Forbidden(
            "only humans remove a dependency that is not done",
            {"reason": "humans_only", "field": "depends_on", "task_ids": removed},
        )


def _refuse_judged_edit_while_publishing(conn: sqlite3.Connection, row: sqlite3.Row) -> None:
    """No judged edit while the task, its subject or an activity holds publication
    authority: the edit would make an allow on the task stale, and the holder's
    result and finalize (which pass the gate) would stop until someone reopens
    the decision and answers it again."""
    held = store.publication_held_around(conn, row)
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
            raise RevisionConflict.behind("task", patch.expected_revision, row["revision"])
        reopening = requested.get("status") == "open" and row["status"] == "cancelled"
        if row["status"] in ("done", "cancelled") and not reopening:
            raise StateConflict(
                f"a {row['status']} task is closed to edits",
                {"reason": "task_closed", "status": row["status"]},
            )
        dependencies = dependency_map(tx.conn, [task_id])[task_id]
        current_deps = [dep for dep, _ in dependencies]
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
        # what changes only: a record kept from before the rule still takes other edits
        check_text_fields({f: requested[f] for f in changed})
        if "description" in changed:
            check_bytes("description", requested["description"])
        if "depends_on" in changed:
            _refuse_removing_blockers(actor, dependencies, requested["depends_on"])
            _check_dependencies(tx.conn, project_id, task_id, requested["depends_on"])
            if _creates_cycle(tx.conn, task_id, requested["depends_on"]):
                raise InvalidRequest.field("depends_on", "this dependency would create a cycle")
        if "status" in changed:
            _status_change(actor, row, requested["status"])
        judged = any(f in JUDGED_FIELDS for f in changed)
        if judged:
            _refuse_judged_edit_while_publishing(tx.conn, row)
        # every accepted edit writes the next revision (section 5), one that
        # changes nothing too: `changed_fields` is then empty (a knowledge
        # correction identical to the record is a revision as well)
        revision = row["revision"] + 1
        columns = {f: requested[f] for f in changed if f in (*JUDGED_FIELDS, "priority", "status")}
        judged_revision = revision if judged else row["judged_revision"]
        store.update_task(tx.conn, task_id, columns, revision, judged_revision, tx.at)
        depends_on = requested["depends_on"] if "depends_on" in changed else current_deps
        if "depends_on" in changed:
            store.replace_dependencies(tx.conn, task_id, depends_on)
        _write_revision(tx, task_id, revision, changed, depends_on)
        data: dict[str, Any] = {
            "revision": revision,
            "changed_fields": changed,
            # the new values a list or a board shows, as policy.updated's;
            # not the description's or the criteria's (up to 64 KiB: the
            # revision holds them), nor the status's (`status` below)
            "values": {f: requested[f] for f in changed if f in EVENT_VALUES},
            "judged_change": judged,
        }
        if "status" in changed:
            data["status"] = {"from": row["status"], "to": requested["status"]}
        tx.event(project_id, "task.updated", "task", task_id, data)
        return 200, current_task(tx, project_id, task_id)

    return await run_mutation(rt, actor, idem, unit)
