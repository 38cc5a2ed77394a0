"""Integration publication authority: prepare, result, finalize.

`prepare` grants the caller exclusive authority to publish a task's work to
the outside world (only the policy's `integration_owner`, or any human when it
is null). The holder records the external outcome once with `result` and
gives the authority back with `finalize`, after which `publication` is null
again. The policy is read again at each step: a holder it no longer names
(its `integration_owner` changed) records no result, and may only give the
authority back; so may the principal it names now, so that changing the
owner is a way to end authority whose holder has gone away. While authority
is held no decision can be opened on the task, its subject or its
activities, and no live allow among them reopened (the decisions resolver
reads these columns), so a publisher never meets a new blocker halfway
through.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from waypost.errors import Forbidden, PublicationInProgress, StateConflict
from waypost.resolvers.access.sessions import require_session
from waypost.resolvers.access.store import principal_row
from waypost.resolvers.core.receipts import Idempotency, Outcome, Tx, run_mutation
from waypost.resolvers.core.secret_markers import refuse_credential
from waypost.resolvers.tasks import store
from waypost.resolvers.tasks.models import ResultBody
from waypost.resolvers.tasks.operations import current_task, ensure_work_allowed, load_in_tx
from waypost.runtime import Actor, Runtime

__all__ = ["ResultBody", "finalize", "prepare", "result"]  # transports decode ResultBody


def _may_publish(principal_id: str, is_human: bool, project: sqlite3.Row) -> bool:
    """Whether the policy as it stands lets this principal hold authority."""
    owner = project["integration_owner"]
    return owner == principal_id or (owner is None and is_human)


def _authorize(actor: Actor, project: sqlite3.Row) -> None:
    """The caller may publish (`_may_publish`, said as the policy stands)."""
    owner = project["integration_owner"]
    if not _may_publish(actor.principal_id, actor.is_human, project):
        if owner is None:
            raise Forbidden(
                "only a human may publish while the policy names no integration owner",
                {"reason": "not_integration_owner"},
            )
        raise Forbidden(
            "only the policy's integration owner may publish",
            {"reason": "not_integration_owner", "integration_owner": owner},
        )
    require_session(actor)


def _require_holder(tx: Tx, row: sqlite3.Row) -> None:
    """The caller's principal holds the task's publication authority.

    Authority is granted to the principal (the session is recorded for the
    audit trail), so an agent that restarted with a new live session can still
    record the result and give the authority back.
    """
    require_session(tx.actor)
    holder = row["publication_holder_id"]
    if holder is None:
        raise StateConflict(
            "no publication authority is held for this task", {"reason": "not_prepared"}
        )
    if holder != tx.actor.principal_id:
        raise PublicationInProgress(
            "another principal holds publication authority for this task", {"holder_id": holder}
        )


def _require_finalizer(tx: Tx, project: sqlite3.Row, row: sqlite3.Row) -> None:
    """The holder gives its authority back; so may the principal the policy
    lets publish now, once the policy no longer lets the holder (else the
    holder's 409)."""
    try:
        _require_holder(tx, row)
    except PublicationInProgress:
        holder = principal_row(tx.conn, row["publication_holder_id"])
        human = holder is not None and holder["kind"] == "human"
        if _may_publish(row["publication_holder_id"], human, project):
            raise
        _authorize(tx.actor, project)


async def prepare(
    rt: Runtime, actor: Actor, idem: Idempotency, project_id: str, task_id: str
) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        project, row = load_in_tx(tx, project_id, task_id)
        _authorize(actor, project)
        # held first: a task completed while its authority was held is still
        # held (section 5: a second prepare while authority is held is
        # publication_in_progress), and its holder must finalize either way
        if row["publication_holder_id"] is not None:
            raise PublicationInProgress(
                "publication authority is already held for this task",
                {"holder_id": row["publication_holder_id"]},
            )
        if row["status"] in ("done", "cancelled"):
            raise StateConflict(
                f"a {row['status']} task cannot be published",
                {"reason": "task_closed", "status": row["status"]},
            )
        ensure_work_allowed(tx.conn, row, tx.now)
        store.grant_publication(tx.conn, task_id, (actor.principal_id, actor.session_id), tx.at)
        tx.event(project_id, "task.publication_prepared", "task", task_id, {})
        return 200, current_task(tx, project_id, task_id)

    return await run_mutation(rt, actor, idem, unit)


async def result(
    rt: Runtime, actor: Actor, idem: Idempotency, project_id: str, task_id: str, body: ResultBody
) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        project, row = load_in_tx(tx, project_id, task_id)
        _require_holder(tx, row)
        if not _may_publish(actor.principal_id, actor.is_human, project):
            # its right to publish came from the policy, which changed since
            raise Forbidden(
                "the policy no longer lets you publish (its integration owner changed"
                " since you prepared): finalize to give the authority back",
                {
                    "reason": "not_integration_owner",
                    "integration_owner": project["integration_owner"],
                },
            )
        if row["publication_result"] is not None:
            raise StateConflict(
                "the result is already recorded; finalize, then prepare again to retry",
                {"reason": "result_recorded"},
            )
        ensure_work_allowed(tx.conn, row, tx.now)
        # a failed push's output may carry the credential it pushed with (a
        # token or a password in the remote's URL); the finalize event keeps it
        refuse_credential(body.detail, "detail")
        recorded = {"outcome": body.outcome, "detail": body.detail, "at": tx.at}
        store.record_publication_result(tx.conn, task_id, recorded, tx.at)
        data = {"outcome": body.outcome}
        tx.event(project_id, "task.publication_result_recorded", "task", task_id, data)
        return 200, current_task(tx, project_id, task_id)

    return await run_mutation(rt, actor, idem, unit)


async def finalize(
    rt: Runtime, actor: Actor, idem: Idempotency, project_id: str, task_id: str
) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        project, row = load_in_tx(tx, project_id, task_id)
        _require_finalizer(tx, project, row)
        ensure_work_allowed(tx.conn, row, tx.now)
        recorded = row["publication_result"]
        store.clear_publication(tx.conn, task_id, tx.at)
        # The event keeps what the projection forgets: who held it and the outcome.
        data = {
            "holder_id": row["publication_holder_id"],
            "prepared_at": row["publication_prepared_at"],
            "result": json.loads(recorded) if recorded else None,
        }
        tx.event(project_id, "task.publication_finalized", "task", task_id, data)
        return 200, current_task(tx, project_id, task_id)

    return await run_mutation(rt, actor, idem, unit)
