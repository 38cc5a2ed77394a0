"""Usefulness feedback: append-only, bound to the exact revision the caller read.

The revision check runs under the writer lock, in the transaction that
inserts the row, so a correction that commits first turns the feedback into
`revision_conflict`: stale feedback is never attributed to the new revision.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from waypost.errors import RevisionConflict
from waypost.ids import new_id
from waypost.resolvers.core.receipts import Idempotency, Outcome, Tx, run_mutation
from waypost.resolvers.knowledge.models import FeedbackInput
from waypost.resolvers.knowledge.rules import visible_row
from waypost.resolvers.knowledge.store import feedback_totals, insert_feedback
from waypost.resolvers.projects.operations import require_project
from waypost.runtime import Actor, Runtime


def feedback_json(row: sqlite3.Row, project_id: str) -> dict[str, Any]:
    return {
        "id": row["id"],
        "knowledge_id": row["knowledge_id"],
        "project_id": project_id,
        "revision": row["revision"],
        "useful": bool(row["useful"]),
        "comment": row["comment"],
        "actor_id": row["actor_id"],
        "actor_session_id": row["actor_session_id"],
        "at": row["at"],
    }


async def record(
    rt: Runtime,
    actor: Actor,
    idem: Idempotency,
    project_id: str,
    knowledge_id: str,
    body: FeedbackInput,
) -> Outcome:
    """Append one feedback row to revision `expected_revision`, which must be current."""

    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        require_project(tx.conn, project_id)
        row = visible_row(tx.conn, project_id, knowledge_id)
        if body.expected_revision != row["revision"]:
            raise RevisionConflict.behind(
                "knowledge record", body.expected_revision, row["revision"]
            )
        feedback_id = new_id("kfb")
        stored = insert_feedback(
            tx.conn,
            feedback_id,
            (knowledge_id, row["revision"]),
            (body.useful, body.comment),
            (actor.principal_id, actor.session_id),
            tx.at,
        )
        # the event goes to the record's source project, where its history lives
        source_project = row["project_id"]
        tx.event(
            source_project,
            "knowledge.feedback_recorded",
            "knowledge",
            knowledge_id,
            {"feedback_id": feedback_id, "revision": row["revision"], "useful": body.useful,
             "via_project_id": project_id},
        )  # fmt: skip
        return 201, feedback_json(stored, source_project)

    return await run_mutation(rt, actor, idem, unit)


def totals_sync(conn: sqlite3.Connection, ids: Sequence[str]) -> list[dict[str, int]]:
    """The feedback totals of `ids`, in that order."""
    found = feedback_totals(conn, ids)
    return [found[i] for i in ids]
