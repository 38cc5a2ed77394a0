"""What may be read, corrected or referred to: the knowledge rules that
refuse (a record another project keeps private, a shared record corrected
outside its source project, references to another project's rows, a
replacement that leads back to its record). The queries they ask are in
store.py.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from waypost.errors import Forbidden, InvalidRequest, NotFound
from waypost.resolvers.knowledge.models import Content
from waypost.resolvers.knowledge.store import (
    get_row,
    replaced_through_chain,
    submission_task,
)
from waypost.resolvers.tasks.store import task_exists


def visible_to(record: Mapping[str, Any] | sqlite3.Row, project_id: str) -> bool:
    """A record (row or JSON) is readable through its own project, and through
    any other when shared."""
    return bool(record["project_id"] == project_id or record["collection"] == "shared")


def visible_row(conn: sqlite3.Connection, project_id: str, knowledge_id: str) -> sqlite3.Row:
    """A record readable through `project_id`: its own, or one shared by another project."""
    row = get_row(conn, knowledge_id)
    if row is None or not visible_to(row, project_id):
        raise NotFound("no such knowledge record", {"knowledge_id": knowledge_id})
    return row


def own_row(conn: sqlite3.Connection, project_id: str, knowledge_id: str) -> sqlite3.Row:
    """A record that `project_id` may correct: only its source project can."""
    row = visible_row(conn, project_id, knowledge_id)
    if row["project_id"] != project_id:
        raise Forbidden(
            "a shared record is corrected through its source project",
            {"reason": "source_project_only", "project_id": row["project_id"]},
        )
    return row


def check_references(
    conn: sqlite3.Connection, project_id: str, c: Content, prefix: str = ""
) -> None:
    """Task, submission and replacement references must name records of `project_id`."""
    for index, task_id in enumerate(c.task_ids):
        if not task_exists(conn, project_id, task_id):
            raise InvalidRequest.unknown(
                f"{prefix}scope.task_ids[{index}]",
                f"no task {task_id!r} in this project",
                task_id,
                "Task",
            )
    if c.source_task_id is not None and not task_exists(conn, project_id, c.source_task_id):
        raise InvalidRequest.unknown(
            f"{prefix}provenance.source_task_id",
            "no such task in this project",
            c.source_task_id,
            "Task",
        )
    if c.source_submission_id is not None:
        submitted_for = submission_task(conn, project_id, c.source_submission_id)
        if submitted_for is None:
            raise InvalidRequest.field(
                f"{prefix}provenance.source_submission_id", "no such submission in this project"
            )
        if c.source_task_id is not None and submitted_for != c.source_task_id:
            raise InvalidRequest.field(
                f"{prefix}provenance.source_submission_id",
                "the submission belongs to another task than provenance.source_task_id",
            )
    if c.superseded_by_id is not None:
        replacement = get_row(conn, c.superseded_by_id)
        if replacement is None or replacement["project_id"] != project_id:
            raise InvalidRequest.unknown(
                f"{prefix}superseded_by_id",
                "no such knowledge record in this project",
                c.superseded_by_id,
                "Knowledge",
            )


def check_no_supersession_cycle(
    conn: sqlite3.Connection, knowledge_id: str, replacement_id: str
) -> None:
    """Refuse a replacement whose own chain of replacements leads back to this
    record: a cycle would leave every record in it superseded, with no
    current one to follow."""
    if replaced_through_chain(conn, replacement_id, knowledge_id):
        raise InvalidRequest.field(
            "superseded_by_id", "that record is itself superseded, through a chain, by this one"
        )
