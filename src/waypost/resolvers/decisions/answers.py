"""Answering a decision: direct answers and relayed human answers.

Everything is checked inside the writer transaction, after the lock: the
caller's kind and session, the relay switch and who turned it on, the
expected generation and the current status. One generation takes exactly one
answer; a second one (same generation) is a `state_conflict` with reason
`already_answered`: the caller named the right generation, but the decision
is no longer waiting, and only a reopening asks the question again.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from waypost.errors import Forbidden, InvalidRequest, StateConflict
from waypost.resolvers.access.sessions import require_session
from waypost.resolvers.core.receipts import Idempotency, Outcome, Tx, run_mutation
from waypost.resolvers.core.text import require_text
from waypost.resolvers.decisions import store
from waypost.resolvers.decisions.models import DecisionAnswer, Relay
from waypost.resolvers.decisions.pins import check_generation, require_state
from waypost.resolvers.decisions.views import load_decision
from waypost.resolvers.projects.operations import require_project
from waypost.runtime import Actor, Runtime

__all__ = ["DecisionAnswer", "Relay", "answer", "answer_sync", "relay_grant"]


def relay_grant(conn: sqlite3.Connection, project_id: str) -> tuple[int, str]:
    """(revision, human) of the most recent policy revision that turned relaying on."""
    row = store.relay_grant_row(conn, project_id)
    assert row is not None, "the switch is on, so some revision turned it on"
    return int(row["revision"]), str(row["actor_id"])


def _validate(body: DecisionAnswer, decision: sqlite3.Row) -> None:
    require_text(body.rationale, "rationale")
    if body.answer not in json.loads(decision["options"]):
        raise InvalidRequest.field("answer", "the answer must exactly match one of the options")
    if body.disposition == "allow" and not body.conditions_confirmed:
        raise InvalidRequest.field(
            "conditions_confirmed", "an allow must confirm the recorded conditions"
        )
    if body.relay is not None and decision["required_actor"] != "human":
        raise InvalidRequest.field("relay", "only a human-required decision takes a relay")
    if body.relay is not None:
        # the human's words are the evidence of a relayed answer: blank is none
        require_text(body.relay.prompt, "relay.prompt")
        require_text(body.relay.response, "relay.response")


def _authorize(
    conn: sqlite3.Connection,
    actor: Actor,
    project: sqlite3.Row,
    decision: sqlite3.Row,
    body: DecisionAnswer,
) -> tuple[int, str] | None:
    """Who may answer; for a relay, the grant (policy revision, human) it rests on.

    A human-required decision refuses an agent's own answer before anything
    else: "needs a live session" told an agent without one that a session
    would help, when no session would."""
    if body.relay is None and decision["required_actor"] == "human" and not actor.is_human:
        raise Forbidden.reason("human_required", "this decision must be answered by a human")
    require_session(actor)
    if body.relay is not None:
        if not actor.is_agent:
            raise Forbidden.reason(
                "relay_requires_agent_session", "only an agent session relays a human's answer"
            )
        if not project["allow_relayed_human_answers"]:
            raise Forbidden.reason(
                "relay_disabled", "this project's policy does not allow relayed human answers"
            )
        return relay_grant(conn, project["id"])
    return None


def _check_state(body: DecisionAnswer, decision: sqlite3.Row, status: str) -> None:
    check_generation(body.expected_generation, decision["generation"])
    if status in ("stale", "expired"):
        raise StateConflict(
            f"the decision is {status}; reopen it before answering",
            {"reason": status, "status": status},
        )
    if decision["disposition"] is not None:
        raise StateConflict(
            "this generation is already answered; reopen the decision to ask again",
            {"reason": "already_answered", "status": status},
        )


def answer_sync(
    tx: Tx, project_id: str, decision_id: str, body: DecisionAnswer
) -> tuple[int, dict[str, Any]]:
    """The unit of work behind `POST .../decisions/{id}/answer`."""
    project = require_project(tx.conn, project_id)
    decision, status = require_state(tx.conn, project_id, decision_id, tx.at)
    _validate(body, decision)
    grant = _authorize(tx.conn, tx.actor, project, decision, body)
    _check_state(body, decision, status)
    relay = body.relay
    store.insert_answer(
        tx.conn,
        {"decision_id": decision_id, "generation": decision["generation"],
         "disposition": body.disposition, "answer": body.answer, "rationale": body.rationale,
         "conditions_confirmed": body.conditions_confirmed,
         "actor_id": tx.actor.principal_id, "actor_session_id": tx.actor.session_id,
         "relayed": relay is not None, "relay_prompt": relay.prompt if relay else None,
         "relay_response": relay.response if relay else None,
         "authorized_by": grant[1] if grant else None,
         "relay_policy_revision": grant[0] if grant else None, "at": tx.at},
    )  # fmt: skip
    tx.event(
        project_id,
        "decision.answered",
        "decision",
        decision_id,
        {"generation": decision["generation"], "disposition": body.disposition,
         "answer": body.answer, "relayed": relay is not None,
         "task_ids": store.affected_task_ids(tx.conn, decision_id, decision["generation"])},
    )  # fmt: skip
    return 200, load_decision(tx.conn, project_id, decision_id, tx.at)


async def answer(
    rt: Runtime,
    actor: Actor,
    idem: Idempotency,
    project_id: str,
    decision_id: str,
    body: DecisionAnswer,
) -> Outcome:
    return await run_mutation(
        rt, actor, idem, lambda tx: answer_sync(tx, project_id, decision_id, body)
    )
