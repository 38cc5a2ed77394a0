"""Decisions: open one, read one with its generation history, list a project's.

A decision is a narrow question that gates the tasks it affects until it is
answered with a live allow. Generation 1 is written here; answers live in
`decision_answers`, reopening in `decision_reopen`, timeouts in
`decision_sweep`, and the status rule in `decision_status`.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Annotated, Any, Literal

import msgspec

from waypost.clock import format_time
from waypost.errors import Forbidden, InvalidRequest
from waypost.ids import new_id
from waypost.pagination import Page, check_limit, decode_cursor, encode_cursor
from waypost.resolvers.core.receipts import Idempotency, Outcome, Tx, run_mutation
from waypost.resolvers.decisions.pins import (
    ensure_no_publication,
    future_instant,
    insert_generation,
    pin_tasks,
)
from waypost.resolvers.decisions.status import STATUS_SQL, STATUSES
from waypost.resolvers.decisions.views import (
    decisions_in_order,
    history_pages,
    load_decision,
    load_decisions,
)
from waypost.resolvers.projects.operations import require_project
from waypost.runtime import Actor, Runtime

RequiredActor = Literal["human", "agent", "either"]
StatusFilter = Literal["pending", "allowed", "denied", "deferred", "expired", "stale"]
Question = Annotated[str, msgspec.Meta(min_length=1, max_length=4000)]
Option = Annotated[str, msgspec.Meta(min_length=1, max_length=500)]
Text = Annotated[str, msgspec.Meta(min_length=1, max_length=16384)]
Environment = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Condition = Annotated[str, msgspec.Meta(min_length=1, max_length=1000)]
Conditions = Annotated[list[Condition], msgspec.Meta(max_length=50)]
TaskId = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]


class DecisionCreate(msgspec.Struct, forbid_unknown_fields=True):
    question: Question
    options: Annotated[list[Option], msgspec.Meta(min_length=2, max_length=20)]
    rationale: Text
    required_actor: RequiredActor
    task_ids: Annotated[list[TaskId], msgspec.Meta(min_length=1, max_length=100)]
    environment: Environment
    conditions: Conditions = msgspec.field(default_factory=list)
    expires_at: str | None = None
    recommendation: Option | None = None
    reversible: bool = False


def require_text(value: str, field: str) -> None:
    if not value.strip():
        raise InvalidRequest.field(field, "must not be blank")


def _validate(body: DecisionCreate) -> None:
    require_text(body.question, "question")
    require_text(body.rationale, "rationale")
    for i, option in enumerate(body.options):
        if option in body.options[:i]:
            raise InvalidRequest.field(f"options[{i}]", "options must be unique")
    if body.recommendation is not None and body.recommendation not in body.options:
        raise InvalidRequest.field("recommendation", "must be one of the options")
    if body.reversible and body.recommendation is None:
        raise InvalidRequest.field("reversible", "a reversible decision needs a recommendation")


def _authorize(actor: Actor, body: DecisionCreate) -> None:
    # A human-required decision that could time out would let an agent's own
    # question answer itself; only a human may ask one.
    if actor.is_agent and body.reversible and body.required_actor == "human":
        raise Forbidden.reason(
            "human_required_reversible",
            "an agent cannot open a reversible decision that requires a human",
        )


def open_decision_sync(tx: Tx, project_id: str, body: DecisionCreate) -> tuple[int, dict[str, Any]]:
    """The unit of work behind `POST .../decisions` (also used by tests directly)."""
    project = require_project(tx.conn, project_id)
    _validate(body)
    expires_at = future_instant(body.expires_at, tx.now)
    _authorize(tx.actor, body)
    pins = pin_tasks(tx.conn, project_id, body.task_ids)
    ensure_no_publication(tx.conn, body.task_ids)
    decision_id = new_id("dec")
    tx.conn.execute(
        "INSERT INTO decisions (id, project_id, question, options, rationale, required_actor,"
        " recommendation, reversible, generation, created_at, created_by, created_by_kind)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)",
        (decision_id, project_id, body.question, json.dumps(body.options, ensure_ascii=False),
         body.rationale, body.required_actor, body.recommendation, int(body.reversible),
         tx.at, tx.actor.principal_id, tx.actor.kind),
    )  # fmt: skip
    insert_generation(
        tx,
        decision_id,
        1,
        pins,
        {
            "policy_revision": project["policy_revision"],
            "environment": body.environment,
            "conditions": body.conditions,
            "expires_at": expires_at,
            "reopen_rationale": None,
        },
    )
    tx.event(
        project_id,
        "decision.opened",
        "decision",
        decision_id,
        {"generation": 1, "task_ids": body.task_ids, "required_actor": body.required_actor,
         "reversible": body.reversible},
    )  # fmt: skip
    return 201, load_decision(tx.conn, project_id, decision_id, tx.at)


async def open_decision(
    rt: Runtime, actor: Actor, idem: Idempotency, project_id: str, body: DecisionCreate
) -> Outcome:
    return await run_mutation(rt, actor, idem, lambda tx: open_decision_sync(tx, project_id, body))


# --- reads ----------------------------------------------------------------------


def get_sync(
    conn: sqlite3.Connection,
    project_id: str,
    decision_id: str,
    now_at: str,
    cursor: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """The decision object plus `history`: its generations, newest first."""
    require_project(conn, project_id)
    decision = load_decision(conn, project_id, decision_id, now_at)
    page = history_pages(conn, [(decision_id, cursor, limit)])[0]
    return {**decision, "history": page.to_json()}


async def get(
    rt: Runtime, project_id: str, decision_id: str, cursor: str | None, limit: int | None
) -> dict[str, Any]:
    now_at = format_time(rt.now())
    return await rt.db.read(
        lambda conn: get_sync(conn, project_id, decision_id, now_at, cursor, limit)
    )


def list_sync(
    conn: sqlite3.Connection,
    project_id: str,
    now_at: str,
    status: str | None = None,
    cursor: str | None = None,
    limit: int | None = None,
) -> Page[dict[str, Any]]:
    """A project's decisions by `created_at`, then id; optionally of one status."""
    size = check_limit(limit)
    if status is not None and status not in STATUSES:
        raise InvalidRequest.field("status", f"status must be one of {', '.join(STATUSES)}")
    require_project(conn, project_id)
    after = decode_cursor(cursor, str, str) if cursor else ("", "")
    rows = conn.execute(
        "SELECT s.decision_id, s.created_at FROM decision_current s"
        " WHERE s.project_id = :project AND (s.created_at, s.decision_id) > (:at, :id)"
        f" AND (:status IS NULL OR {STATUS_SQL} = :status)"
        " ORDER BY s.created_at, s.decision_id LIMIT :n",
        {"project": project_id, "at": after[0], "id": after[1], "status": status,
         "now": now_at, "n": size + 1},
    ).fetchall()  # fmt: skip
    page = Page.from_rows(rows, size, lambda r: encode_cursor(r["created_at"], r["decision_id"]))
    items = decisions_in_order(conn, [r["decision_id"] for r in page.items], now_at)
    return Page(items, page.cursors, page.has_next)


async def list_decisions(
    rt: Runtime, project_id: str, status: str | None, cursor: str | None, limit: int | None
) -> Page[dict[str, Any]]:
    now_at = format_time(rt.now())
    return await rt.db.read(lambda conn: list_sync(conn, project_id, now_at, status, cursor, limit))


async def history(
    rt: Runtime, requests: list[tuple[str, str | None, int | None]]
) -> list[Page[dict[str, Any]]]:
    """Generation pages for many decisions at once (GraphQL's loader)."""
    return await rt.db.read(lambda conn: history_pages(conn, requests))


async def load_many(rt: Runtime, ids: list[str]) -> list[dict[str, Any] | None]:
    """Decision objects by id, None for unknown ids (GraphQL's loader)."""
    now_at = format_time(rt.now())

    def read(conn: sqlite3.Connection) -> list[dict[str, Any] | None]:
        found = load_decisions(conn, ids, now_at)
        return [found.get(i) for i in ids]

    return await rt.db.read(read)


UNRESOLVED: tuple[str, ...] = ("pending", "stale", "expired")


def unresolved_sync(
    conn: sqlite3.Connection,
    project_id: str,
    now_at: str,
    task_id: str | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """Pending or invalidated (stale, expired) decisions, oldest first: those
    affecting `task_id` in their current generation, or all of the project's.

    For the context packet, which places these before any text match.
    """
    statuses = json.dumps(UNRESOLVED)
    rows = conn.execute(
        "SELECT s.decision_id FROM decision_current s"
        " WHERE s.project_id = :project"
        " AND (:task IS NULL OR EXISTS (SELECT 1 FROM decision_affected x"
        "  WHERE x.decision_id = s.decision_id AND x.generation = s.generation"
        "  AND x.task_id = :task))"
        f" AND {STATUS_SQL} IN (SELECT value FROM json_each(:statuses))"
        " ORDER BY s.created_at, s.decision_id LIMIT :n",
        {"project": project_id, "task": task_id, "statuses": statuses, "now": now_at,
         "n": limit},
    ).fetchall()  # fmt: skip
    return decisions_in_order(conn, [r["decision_id"] for r in rows], now_at)
