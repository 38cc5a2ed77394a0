"""Reopening a decision: a new immutable generation against all current revisions.

The question, options and required actor never change, so a reopening cannot
weaken a human requirement. Environment, conditions and expiry may be given
again; omitted ones carry over from the previous generation. Any status may
be reopened; the previous generations and their answers stay as they were.
While publication authority is held around an affected task, only a live
allow is refused (it would become a blocker); a decision that already blocks
may be reopened, which is how a publication whose allow went stale finishes.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from waypost.clock import parse_time
from waypost.errors import Forbidden, InvalidRequest
from waypost.resolvers.core.receipts import Idempotency, Outcome, Tx, run_mutation
from waypost.resolvers.core.text import require_text
from waypost.resolvers.decisions import store
from waypost.resolvers.decisions.models import DecisionReopen
from waypost.resolvers.decisions.operations import require_pinned_text
from waypost.resolvers.decisions.pins import (
    check_generation,
    ensure_no_publication,
    future_instant,
    insert_generation,
    pin_tasks,
    require_state,
)
from waypost.resolvers.decisions.status import work_allowed
from waypost.resolvers.decisions.views import load_decision
from waypost.resolvers.projects.operations import require_project
from waypost.runtime import Actor, Runtime

__all__ = ["DecisionReopen", "reopen", "reopen_sync"]  # the transports decode DecisionReopen


def reopen_sync(
    tx: Tx, project_id: str, decision_id: str, body: DecisionReopen
) -> tuple[int, dict[str, Any]]:
    """The unit of work behind `POST .../decisions/{id}/reopen`."""
    project = require_project(tx.conn, project_id)
    decision, status = require_state(tx.conn, project_id, decision_id, tx.at)
    require_text(body.rationale, "rationale")
    previous = store.generation_row(tx.conn, decision_id, decision["generation"])
    require_pinned_text(
        None if isinstance(body.environment, msgspec.UnsetType) else body.environment,
        None if isinstance(body.conditions, msgspec.UnsetType) else body.conditions,
        kept=(previous["environment"], json.loads(previous["conditions"])),
    )
    if tx.actor.is_agent and decision["required_actor"] == "human" and decision["reversible"]:
        # It could then time out on an agent's say-so; only a human may ask it again.
        raise Forbidden.reason(
            "human_required_reversible",
            "an agent cannot reopen a reversible decision that requires a human",
        )
    generation = decision["generation"]
    check_generation(body.expected_generation, generation)
    if isinstance(body.expires_at, msgspec.UnsetType):
        expires_at = previous["expires_at"]
        if expires_at is not None and parse_time(expires_at) <= tx.now:
            raise InvalidRequest.field(
                "expires_at",
                "the previous expiry has passed; send a new expires_at, or null for none",
            )
    else:
        expires_at = future_instant(body.expires_at, tx.now)
    task_ids = store.affected_task_ids(tx.conn, decision_id, generation)
    pins = pin_tasks(tx.conn, project_id, task_ids)
    if work_allowed(status):
        # Reopening a live allow adds a blocker in the middle of a publication.
        # A decision that already blocks adds none, and reopening it is the way
        # out when an allow stops counting mid-publication (section 14).
        ensure_no_publication(tx.conn, task_ids)
    store.advance_generation(tx.conn, decision_id)
    insert_generation(
        tx,
        decision_id,
        generation + 1,
        pins,
        {
            "policy_revision": project["policy_revision"],
            "environment": previous["environment"]
            if isinstance(body.environment, msgspec.UnsetType)
            else body.environment,
            "conditions": json.loads(previous["conditions"])
            if isinstance(body.conditions, msgspec.UnsetType)
            else body.conditions,
            "expires_at": expires_at,
            "reopen_rationale": body.rationale,
        },
    )
    tx.event(
        project_id,
        "decision.reopened",
        "decision",
        decision_id,
        {
            "generation": generation + 1,
            "previous_status": status,
            "task_ids": task_ids,
            "expires_at": expires_at,
        },
    )
    return 200, load_decision(tx.conn, project_id, decision_id, tx.at)


async def reopen(
    rt: Runtime,
    actor: Actor,
    idem: Idempotency,
    project_id: str,
    decision_id: str,
    body: DecisionReopen,
) -> Outcome:
    return await run_mutation(
        rt, actor, idem, lambda tx: reopen_sync(tx, project_id, decision_id, body)
    )
