"""Agent sessions: start, heartbeat, end, and the live-session check."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

from waypost.clock import format_time
from waypost.errors import CallerSessionNotLive, Forbidden
from waypost.ids import new_id
from waypost.resolvers.access import store
from waypost.resolvers.access.store import principal_json, session_json
from waypost.resolvers.core.receipts import Idempotency, Outcome, Tx, run_mutation
from waypost.runtime import Actor, Runtime

SESSION_LIFETIME = timedelta(minutes=15)


def _own_live_row(
    conn: sqlite3.Connection, actor: Actor, session_id: str, at: str
) -> sqlite3.Row | None:
    row = store.own_session_row(conn, actor.principal_id, session_id)
    if row is None or row["ended_at"] is not None or row["expires_at"] <= at:
        return None
    return row


def _live_row(conn: sqlite3.Connection, actor: Actor, session_id: str, at: str) -> sqlite3.Row:
    """The session a heartbeat or an end names: what was asked is refused."""
    row = _own_live_row(conn, actor, session_id, at)
    if row is None:
        raise Forbidden.reason("session_not_live", "the session is not live")
    return row


def enter_session(conn: sqlite3.Connection, actor: Actor, session_id: str, at: str) -> Actor:
    """The actor acting in `session_id`, which must be the caller's and live
    (else the caller itself is refused)."""
    if _own_live_row(conn, actor, session_id, at) is None:
        raise CallerSessionNotLive
    return Actor(actor.principal_id, actor.kind, actor.name, actor.token_id, session_id)


def require_session(actor: Actor) -> None:
    """Agents need a live session for ownership, answers and submissions (section 3)."""
    if actor.is_agent and actor.session_id is None:
        # how to get one, not only that one is needed: the agent was left to
        # guess the route and the header (adviceaudit)
        raise Forbidden.reason(
            "session_required",
            "this agent operation needs a live session: start one (POST /api/v1/sessions,"
            " or sessionStart over GraphQL) and send its id in the Waypost-Session header",
        )


def current_session(conn: sqlite3.Connection, actor: Actor, at: str) -> dict[str, Any] | None:
    if actor.session_id is not None:
        row = store.session_row(conn, actor.session_id)
    else:
        row = store.latest_live_session_row(conn, actor.principal_id, at)
    return session_json(row) if row else None


async def start(rt: Runtime, actor: Actor, idem: Idempotency) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        if not actor.is_agent:
            raise Forbidden.reason("agents_only", "only agents start sessions")
        session_id = new_id("ses")
        expires = format_time(tx.now + SESSION_LIFETIME)
        row = store.insert_session(tx.conn, session_id, actor.principal_id, tx.at, expires)
        tx.event(None, "session.started", "session", session_id, {"expires_at": expires})
        return 201, session_json(row)

    return await run_mutation(rt, actor, idem, unit)


async def heartbeat(rt: Runtime, actor: Actor, idem: Idempotency, session_id: str) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        live = _live_row(tx.conn, actor, session_id, tx.at)
        # a heartbeat extends (section 3), never shortens: under a clock
        # stepped back, now + 15 minutes came before the expiry it replaced
        expires = max(format_time(tx.now + SESSION_LIFETIME), live["expires_at"])
        row = store.set_session_expiry(tx.conn, session_id, expires)
        tx.event(None, "session.renewed", "session", session_id, {"expires_at": expires})
        return 200, session_json(row)

    return await run_mutation(rt, actor, idem, unit)


async def end(rt: Runtime, actor: Actor, idem: Idempotency, session_id: str) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        _live_row(tx.conn, actor, session_id, tx.at)
        row = store.end_session(tx.conn, session_id, tx.at)
        tx.event(None, "session.ended", "session", session_id, {})
        return 200, session_json(row)

    return await run_mutation(rt, actor, idem, unit)


async def get_own(rt: Runtime, actor: Actor, session_id: str) -> dict[str, Any] | None:
    """One of the caller's sessions, live or not; None for anyone else's (sessions
    are a principal's own working state, not project records)."""

    def read(conn: sqlite3.Connection) -> dict[str, Any] | None:
        row = store.own_session_row(conn, actor.principal_id, session_id)
        return session_json(row) if row else None

    return await rt.db.read(read)


async def me(rt: Runtime, actor: Actor) -> dict[str, Any]:
    at = format_time(rt.now())

    def read(conn: sqlite3.Connection) -> dict[str, Any]:
        row = store.principal_row(conn, actor.principal_id)
        assert row is not None  # the caller authenticated as this principal
        return {
            "principal": principal_json(row),
            "session": current_session(conn, actor, at),
        }

    return await rt.db.read(read)
