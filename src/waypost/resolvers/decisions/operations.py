"""Decisions: open one, read one with its generation history, list a project's.

A decision is a narrow question that gates the tasks it affects until it is
answered with a live allow. Generation 1 is written here; answers live in
answers.py, reopening in reopen.py, timeouts in timeouts.py, and the status
rule in status.py.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from waypost.clock import format_time
from waypost.errors import Forbidden, InvalidRequest
from waypost.ids import new_id
from waypost.pagination import Page, check_limit, decode_cursor, encode_cursor
from waypost.resolvers.core.receipts import Idempotency, Outcome, Tx, run_mutation
from waypost.resolvers.core.secret_markers import refuse_credential
from waypost.resolvers.core.text import (
    require_distinct,
    require_drawn_in_order,
    require_one_line,
    require_shown_at_both_ends,
    require_text,
)
from waypost.resolvers.decisions import lists_store, store
from waypost.resolvers.decisions.models import DecisionCreate
from waypost.resolvers.decisions.pins import (
    ensure_no_publication,
    future_instant,
    insert_generation,
    pin_tasks,
)
from waypost.resolvers.decisions.status import STATUSES
from waypost.resolvers.decisions.views import (
    decisions_in_order,
    history_pages,
    load_decision,
)
from waypost.resolvers.projects.operations import require_project
from waypost.runtime import Actor, Runtime

__all__ = [
    "DecisionCreate",  # the transports decode into it
    "get",
    "get_sync",
    "list_decisions",
    "list_sync",
    "open_decision",
    "open_decision_sync",
    "unresolved_sync",
]


def require_pinned_text(
    environment: str | None,
    conditions: list[str] | None,
    kept: tuple[str | None, list[str]] = (None, []),
) -> None:
    """What an allow vouches for (a box to tick each) holds text: the
    environment on one line (a knowledge scope's is held to the same), and
    neither reordered by a bidi override (spoofaudit). What a reopen sends
    as the last generation held it (`kept`) is taken as it is: a decision
    asked before these rules (2026-12-05) is asked again without having to
    be rewritten."""
    kept_environment, kept_conditions = kept
    if environment is not None and environment != kept_environment:
        require_text(environment, "environment")
        require_one_line(environment, "environment")
        # a person ticks "prod": `prod` + U+200B would read so and not be it
        require_shown_at_both_ends(environment, "environment")
        require_drawn_in_order(environment, "environment")
    for i, condition in enumerate(conditions or ()):
        if condition not in kept_conditions:
            require_text(condition, f"conditions[{i}]")
            require_drawn_in_order(condition, f"conditions[{i}]")


def _validate(body: DecisionCreate) -> None:
    require_text(body.question, "question")
    require_text(body.rationale, "rationale")
    for i, option in enumerate(body.options):
        require_text(option, f"options[{i}]")
        require_drawn_in_order(option, f"options[{i}]")
        refuse_credential(option, f"options[{i}]")  # decision.answered keeps the one chosen
    # a person picks one: two that look the same (`Deny`, `Deny` + U+200B) are one too many
    require_distinct(body.options, "options")
    require_pinned_text(body.environment, body.conditions)
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
    store.insert_decision(
        tx.conn,
        {"id": decision_id, "project_id": project_id, "question": body.question,
         "options": body.options, "rationale": body.rationale,
         "required_actor": body.required_actor, "recommendation": body.recommendation,
         "reversible": body.reversible, "at": tx.at, "actor_id": tx.actor.principal_id,
         "actor_kind": tx.actor.kind},
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
         "reversible": body.reversible, "expires_at": expires_at},
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
    backward: bool = False,
) -> Page[dict[str, Any]]:
    """A project's decisions by `created_at`, then id; optionally of one status."""
    check_limit(limit)
    _check_status(status)
    require_project(conn, project_id)
    page = id_page_sync(conn, project_id, now_at, status, cursor, limit, backward)
    return page.with_items(decisions_in_order(conn, page.items, now_at))


def id_page_sync(
    conn: sqlite3.Connection,
    project_id: str,
    now_at: str,
    status: str | None = None,
    cursor: str | None = None,
    limit: int | None = None,
    backward: bool = False,
) -> Page[str]:
    """The ids of `list_sync`'s page, of a project read on this snapshot (so
    that the pages of many projects can load their decisions in one batch)."""
    size = check_limit(limit)
    _check_status(status)
    # forward from the start compares with ("", ""); backward from the end with
    # a key above every stored one
    after = (
        decode_cursor(cursor, str, str) if cursor else (("\uffff", "") if backward else ("", ""))
    )
    start = (str(after[0]), str(after[1]))
    rows = lists_store.list_page_rows(conn, project_id, now_at, status, start, size + 1, backward)
    page = Page.from_rows(
        rows,
        size,
        lambda r: encode_cursor(r["created_at"], r["decision_id"]),
        backward=backward,
        cursor=cursor,
    )
    return page.with_items([r["decision_id"] for r in page.items])


def _check_status(status: str | None) -> None:
    if status is not None and status not in STATUSES:
        raise InvalidRequest.field("status", f"status must be one of {', '.join(STATUSES)}")


def count_sync(
    conn: sqlite3.Connection, project_id: str, now_at: str, status: str | None = None
) -> int:
    """How many decisions the list holds, optionally of one status (`totalCount`)."""
    _check_status(status)
    return lists_store.count_of_status(conn, project_id, now_at, status)


async def list_decisions(
    rt: Runtime,
    project_id: str,
    status: str | None,
    cursor: str | None,
    limit: int | None,
    backward: bool = False,
) -> Page[dict[str, Any]]:
    now_at = format_time(rt.now())
    return await rt.db.read(
        lambda conn: list_sync(conn, project_id, now_at, status, cursor, limit, backward)
    )


async def count_decisions(rt: Runtime, project_id: str, status: str | None) -> int:
    now_at = format_time(rt.now())
    return await rt.db.read(lambda conn: count_sync(conn, project_id, now_at, status))


UNRESOLVED: tuple[str, ...] = ("pending", "stale", "expired")


def unresolved_sync(
    conn: sqlite3.Connection,
    project_id: str,
    now_at: str,
    task_ids: list[str] | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """Pending or invalidated (stale, expired) decisions, oldest first: those
    affecting any of `task_ids` in their current generation, or all of the
    project's when it is None.

    For the context packet, which places these before any text match.
    """
    ids = lists_store.unresolved_ids(conn, project_id, now_at, UNRESOLVED, task_ids, limit)
    return decisions_in_order(conn, ids, now_at)
