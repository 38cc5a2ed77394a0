"""Leases and the work on them: claims, renew, checkpoint, release, recover,
submit and complete.

A lease belongs to one principal and, for an agent, to one session. Every
check runs inside the writer transaction, after `run_mutation` has re-checked
the token and session: the service time, the lease's owner and expiry, the
policy (lease length, review mode) as it is now, and, for the operations the
knowledge-and-decision contract lists, the decision gate. An expired lease is
owned by nobody: its former owner's renew, checkpoint, release and submit are
refused with `lease_conflict`, and only `recover` takes the task over.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

from waypost.clock import format_time
from waypost.errors import Forbidden, LeaseConflict, NotFound, RevisionConflict, StateConflict
from waypost.ids import new_id
from waypost.resolvers.access.sessions import require_session
from waypost.resolvers.core.receipts import Idempotency, Outcome, Tx, run_mutation
from waypost.resolvers.core.text import require_text
from waypost.resolvers.knowledge import operations as knowledge
from waypost.resolvers.projects.operations import require_project
from waypost.resolvers.tasks import store
from waypost.resolvers.tasks.models import CheckpointBody, ClaimBody, SubmitBody
from waypost.resolvers.tasks.operations import (
    check_bytes,
    current_task,
    ensure_work_allowed,
    load_in_tx,
    require_task,
)
from waypost.resolvers.tasks.readiness import next_ready, readiness_apart_from_gate
from waypost.resolvers.tasks.reads import CHECKPOINTS, history_pages
from waypost.resolvers.tasks.ready_store import gate_held
from waypost.resolvers.tasks.views import checkpoint_json, lease_json, submission_json, task_json
from waypost.runtime import Actor, Runtime

__all__ = [
    "CheckpointBody",  # the transports decode into these models
    "ClaimBody",
    "SubmitBody",
    "checkpoint",
    "claim",
    "complete",
    "recover",
    "release",
    "renew",
    "require_owner",
    "submit",
]

RECOVER_CHECKPOINTS = 20
# the dependents `task.completed` names; more are `dependents_truncated`
EVENT_DEPENDENTS_MOST = 100


# ---------------------------------------------------------------- checks


def _holds(actor: Actor, row: sqlite3.Row) -> bool:
    """Is `actor` the lease's principal and, for an agent, in the lease's session?"""
    if row["lease_owner_id"] != actor.principal_id:
        return False
    return not actor.is_agent or row["lease_session_id"] == actor.session_id


def require_owner(tx: Tx, row: sqlite3.Row) -> None:
    """The caller holds a live lease on the task (re-checked under the writer lock)."""
    require_session(tx.actor)
    if row["status"] != "claimed" or row["lease_owner_id"] is None:
        raise StateConflict(
            "the task is not claimed", {"reason": "not_claimed", "status": row["status"]}
        )
    if row["lease_expires_at"] <= tx.at:
        raise LeaseConflict(
            "the lease has expired; use recover to take the task over",
            {"reason": "lease_expired", "expires_at": row["lease_expires_at"]},
        )
    if not _holds(tx.actor, row):
        raise _held_by_another(tx, row, "the lease")


def _held_by_another(tx: Tx, row: sqlite3.Row, what: str) -> LeaseConflict:
    """Another's live lease, in words saying whose: the lease names its
    session too, so an agent's own earlier session holds it alike (renew and
    submit said "another principal or session", and the agent could not
    tell the lease was its own; leasejourney). `expires_at` says when it
    lapses (then `recover` takes the task over): an agent whose session
    ended meanwhile could not tell how long to wait."""
    yours = row["lease_owner_id"] == tx.actor.principal_id
    whose = "another session of yours" if yours else "another principal"
    until = " until it lapses (then recover takes the task over)" if yours else ""
    return LeaseConflict(
        f"{whose} holds {what}{until}",
        {"reason": "held_by_another", "owner_id": row["lease_owner_id"],
         "expires_at": row["lease_expires_at"]},
    )  # fmt: skip


def _take_lease(tx: Tx, row: sqlite3.Row) -> sqlite3.Row:
    """Give the caller a fresh lease of the policy's length (read now, in this transaction)."""
    project = require_project(tx.conn, row["project_id"])
    expires = format_time(tx.now + timedelta(seconds=project["lease_seconds"]))
    owner = (tx.actor.principal_id, tx.actor.session_id)
    workflow = row["subject_task_id"] is not None
    store.set_lease(tx.conn, row["id"], owner, expires, workflow, tx.at)
    return require_task(tx.conn, row["project_id"], row["id"])


def _check_named_claim(tx: Tx, row: sqlite3.Row) -> None:
    """Section 13: another's live lease is `lease_conflict`; any other reason the
    task is not ready but the gate is `state_conflict` with a reason. A lease
    past its expiry is held by nobody, so it is one of those other reasons."""
    if row["status"] == "claimed" and row["lease_owner_id"] is not None:
        if row["lease_expires_at"] <= tx.at:
            raise StateConflict(
                "the task's lease has expired; use recover to take it over",
                {"reason": "lease_expired", "owner_id": row["lease_owner_id"]},
            )
        if _holds(tx.actor, row):
            raise StateConflict("you already hold this task", {"reason": "already_claimed"})
        raise _held_by_another(tx, row, "this task")
    ready = readiness_apart_from_gate(tx.conn, row)
    if ready.reason in ("not_open", "leased"):
        raise StateConflict(
            f"the task is {row['status']}, not open",
            {"reason": "not_open", "status": row["status"]},
        )
    if ready.reason == "dependencies_not_done":
        raise StateConflict(
            "some dependencies are not done",
            {"reason": "dependencies_not_done", "dependencies": ready.dependencies},
        )


def _lease_body(tx: Tx, row: sqlite3.Row) -> dict[str, Any]:
    task = task_json(tx.conn, row, tx.now)
    return {"task": task, "lease": task["lease"]}


# At most this many tasks with a lapsed lease are named in a refusal, chosen
# among at most this many read (the longest lapsed).
EXPIRED_LEASES_NAMED = 20
EXPIRED_LEASES_READ = 200


_WHERE_TO_LOOK = (
    "GET /api/v1/projects/{project}/digest lists the"
    " pending decisions and the blocked tasks with the decisions that hold each;"
    " a decision's own route gives its status (wait on a pending one, reopen a"
    " stale or expired one; one answered deny or defer holds its tasks until"
    " reconsidered); GET /api/v1/projects/{project}/tasks?status=open&ready=false"
    " lists every open task not ready, those waiting on a dependency included"
)


def _nothing_ready(tx: Tx, project_id: str) -> NotFound:
    """`nothing_ready`, naming the tasks whose lease lapsed when there are
    some: only a recovery gives them back, and neither the refusal nor the
    digest said they were there (an agent that stopped heartbeating left its
    work where no claim finds it)."""
    # Held ones, which an agent is told not to take over, are the oldest, and
    # named longest lapsed first twenty of them hid a later one it could
    # finish (review71): those no decision holds come first, each part in
    # lapse order, among the EXPIRED_LEASES_READ longest lapsed (ordering
    # every lapsed lease held the writer 7.5 ms an empty claim at 8,000: review72)
    lapsed = store.expired_leases(tx.conn, project_id, tx.at, EXPIRED_LEASES_READ)
    if not lapsed:
        # where to look next: the refusal said only "no task is ready", and
        # then only the digest, which lists the tasks decisions hold: a task
        # waiting on an unfinished or cancelled dependency was nowhere in it
        # (adviceaudit)
        return NotFound(
            f"no task is ready to claim: {_WHERE_TO_LOOK.format(project=project_id)}",
            {"reason": "nothing_ready"},
        )
    # a recovery ignores decisions, so an agent told only "take one over" took
    # over work a denial holds, and learnt so only when its submit was refused
    # (collabjourney): name the ones the gate holds now, as the claim reads it
    held_now = {row["id"] for row in lapsed if gate_held(row, tx.at)}
    ordered = sorted(lapsed, key=lambda row: row["id"] in held_now)  # stable: lapse order
    named = ordered[:EXPIRED_LEASES_NAMED]
    truncated = len(lapsed) > EXPIRED_LEASES_NAMED
    count = f"more than {EXPIRED_LEASES_NAMED}" if truncated else str(len(lapsed))
    held = [row["id"] for row in named if row["id"] in held_now]
    message = (
        f"no task is ready to claim, but {count} task(s) hold a lease that expired"
        f" (details.expired_leases): take one over with POST /api/v1/projects/{project_id}"
        "/tasks/{id}/recover, which gives its latest checkpoints"
    )
    if held:
        message += (
            f"; {len(held)} of them (details.expired_leases_held) wait on a decision, and"
            " one recovered cannot be submitted until its decisions allow the work: "
            + _WHERE_TO_LOOK.format(project=project_id)
        )
    return NotFound(
        message,
        {
            "reason": "nothing_ready",
            "expired_leases": [row["id"] for row in named],
            "expired_leases_truncated": truncated,
            "expired_leases_held": held,
        },
    )


# ---------------------------------------------------------------- operations


async def claim(
    rt: Runtime, actor: Actor, idem: Idempotency, project_id: str, body: ClaimBody
) -> Outcome:
    """Ordinary work selection, or a named (possibly workflow) claim."""

    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        require_project(tx.conn, project_id)
        require_session(actor)
        if body.task_id is None:
            # next_ready has put its pick to the decision gate (task and
            # subject) in this transaction already; no second look needed
            found = next_ready(tx.conn, project_id, tx.now)
            if found is None:
                raise _nothing_ready(tx, project_id)
            row = found
        else:
            row = require_task(tx.conn, project_id, body.task_id)
            _check_named_claim(tx, row)
            ensure_work_allowed(tx.conn, row, tx.now)
        row = _take_lease(tx, row)
        result = _lease_body(tx, row)
        data = {**result["lease"], "named": body.task_id is not None}
        tx.event(project_id, "task.claimed", "task", row["id"], data)
        return 200, result

    return await run_mutation(rt, actor, idem, unit)


async def renew(
    rt: Runtime, actor: Actor, idem: Idempotency, project_id: str, task_id: str
) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        _, row = load_in_tx(tx, project_id, task_id)
        require_owner(tx, row)
        row = _take_lease(tx, row)
        result = _lease_body(tx, row)
        data = {"expires_at": result["lease"]["expires_at"]}
        tx.event(project_id, "task.renewed", "task", task_id, data)
        return 200, result

    return await run_mutation(rt, actor, idem, unit)


async def checkpoint(
    rt: Runtime,
    actor: Actor,
    idem: Idempotency,
    project_id: str,
    task_id: str,
    body: CheckpointBody,
) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        require_text(body.note, "note")
        check_bytes("note", body.note)
        _, row = load_in_tx(tx, project_id, task_id)
        require_owner(tx, row)
        checkpoint_id = new_id("chk")
        by = (actor.principal_id, actor.session_id)
        saved = store.insert_checkpoint(tx.conn, checkpoint_id, task_id, body.note, by, tx.at)
        tx.event(project_id, "task.checkpointed", "task", task_id, {"checkpoint_id": checkpoint_id})
        task = current_task(tx, project_id, task_id)
        return 200, {"checkpoint": checkpoint_json(saved), "task": task}

    return await run_mutation(rt, actor, idem, unit)


async def release(
    rt: Runtime, actor: Actor, idem: Idempotency, project_id: str, task_id: str
) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        _, row = load_in_tx(tx, project_id, task_id)
        require_owner(tx, row)
        store.end_lease(tx.conn, task_id, "open", tx.at)
        tx.event(project_id, "task.released", "task", task_id, {})
        return 200, current_task(tx, project_id, task_id)

    return await run_mutation(rt, actor, idem, unit)


async def recover(
    rt: Runtime, actor: Actor, idem: Idempotency, project_id: str, task_id: str
) -> Outcome:
    """Take over stale work (a lease past its expiry); any principal may.

    The answer shows the lease that lapsed and the latest checkpoints, so the
    new owner can see where the work stood. The decision gate is not consulted:
    inspection stays open, but submit and complete still pass through it.
    """

    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        _, row = load_in_tx(tx, project_id, task_id)
        require_session(actor)
        if row["status"] != "claimed" or row["lease_owner_id"] is None:
            raise StateConflict(
                "the task is not claimed", {"reason": "not_claimed", "status": row["status"]}
            )
        if row["lease_expires_at"] > tx.at and _holds(tx.actor, row):
            # as a named claim answers it: an agent unsure whether its lease
            # outlived a pause was told someone else held the task, and to
            # give it up
            raise StateConflict("you already hold this task", {"reason": "already_claimed"})
        if row["lease_expires_at"] > tx.at:
            raise LeaseConflict(
                "the lease is still live; only a stale lease can be recovered",
                {"reason": "lease_live", "expires_at": row["lease_expires_at"]},
            )
        previous = lease_json(row)
        row = _take_lease(tx, row)
        result = _lease_body(tx, row)
        latest = (task_id, RECOVER_CHECKPOINTS, None, False)
        checkpoints = history_pages(tx.conn, CHECKPOINTS, [latest])[latest]
        result["previous_lease"] = previous
        result["checkpoints"] = checkpoints.items
        data = {"previous_lease": previous, "expires_at": result["lease"]["expires_at"]}
        tx.event(project_id, "task.recovered", "task", task_id, data)
        return 200, result

    return await run_mutation(rt, actor, idem, unit)


async def submit(
    rt: Runtime, actor: Actor, idem: Idempotency, project_id: str, task_id: str, body: SubmitBody
) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        require_text(body.summary, "summary")
        check_bytes("summary", body.summary)
        submission_id = new_id("sub")
        # the lessons' shape and text checked as the body's are, before the
        # task's state (a malformed lesson was `409 not_claimed` on a task not
        # claimed); the insert below validates the batch again, as the contract's
        # function does, which costs microseconds
        knowledge.decode_submission_lessons(body.lessons, task_id, submission_id)
        _, row = load_in_tx(tx, project_id, task_id)
        require_owner(tx, row)
        # before the gate: an edit of the judged fields also makes their
        # decisions stale, and the holder first needs to read what changed
        expected = body.expected_revision
        if expected is not None and expected != row["revision"]:
            raise RevisionConflict.behind("task", expected, row["revision"])
        ensure_work_allowed(tx.conn, row, tx.now)
        by = (actor.principal_id, actor.session_id)
        store.insert_submission(
            tx.conn, submission_id, task_id, row["revision"], body.summary, by, tx.at
        )
        store.end_lease(tx.conn, task_id, "submitted", tx.at)
        lessons = knowledge.insert_submission_lessons(
            tx.conn, actor, tx.now, project_id, task_id, submission_id, body.lessons
        )
        submission = submission_json(store.submission_row(tx.conn, submission_id))
        data = {"submission_id": submission_id, "lesson_ids": [k["id"] for k in lessons]}
        tx.event(project_id, "task.submitted", "task", task_id, data)
        task = current_task(tx, project_id, task_id)
        return 200, {"submission": submission, "task": task, "lessons": lessons}

    return await run_mutation(rt, actor, idem, unit)


def _authorize_completion(actor: Actor, review_mode: str, submitter: str) -> None:
    if review_mode == "none" and actor.principal_id != submitter:
        raise Forbidden(
            "review mode none: only the submitter completes its task",
            {"reason": "review_mode", "review_mode": review_mode},
        )
    if review_mode == "human" and not actor.is_human:
        raise Forbidden(
            "review mode human: only a human completes a task",
            {"reason": "review_mode", "review_mode": review_mode},
        )
    if review_mode == "any" and actor.principal_id == submitter:
        raise Forbidden(
            "review mode any: the submitter cannot complete its own task",
            {"reason": "review_mode", "review_mode": review_mode},
        )


async def complete(
    rt: Runtime, actor: Actor, idem: Idempotency, project_id: str, task_id: str
) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        project, row = load_in_tx(tx, project_id, task_id)
        require_session(actor)
        if row["status"] != "submitted":
            raise StateConflict(
                "only a submitted task can be completed",
                {"reason": "not_submitted", "status": row["status"]},
            )
        latest = store.latest_submission_row(tx.conn, task_id)
        assert latest is not None  # a submitted task has its submission
        _authorize_completion(actor, project["review_mode"], latest["actor_id"])
        ensure_work_allowed(tx.conn, row, tx.now)
        store.set_status(tx.conn, task_id, "done", tx.at)
        # the tasks that may become ready now, for a follower to re-read
        # rather than every task of the project
        dependents = store.open_dependents(tx.conn, task_id, EVENT_DEPENDENTS_MOST + 1)
        data = {
            "submission_id": latest["id"],
            "review_mode": project["review_mode"],
            "dependent_task_ids": dependents[:EVENT_DEPENDENTS_MOST],
            "dependents_truncated": len(dependents) > EVENT_DEPENDENTS_MOST,
        }
        tx.event(project_id, "task.completed", "task", task_id, data)
        return 200, current_task(tx, project_id, task_id)

    return await run_mutation(rt, actor, idem, unit)
