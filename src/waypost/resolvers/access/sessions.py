"""Agent sessions: start, heartbeat, end, and the live-session check."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

from waypost.clock import format_time
from waypost.errors import Forbidden
from waypost.ids import new_id
from waypost.resolvers.core.receipts import Idempotency, Outcome, Tx, run_mutation
from waypost.runtime import Actor, Runtime

SESSION_LIFETIME = timedelta(minutes=15)


def session_json(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "principal_id": row["principal_id"],
        "started_at": row["started_at"],
        "expires_at": row["expires_at"],
        "ended_at": row["ended_at"],
    }


def _live_row(conn: sqlite3.Connection, actor: Actor, session_id: str, at: str) -> sqlite3.Row:
    row = conn.execute(
        "SELECT * FROM sessions WHERE id = ? AND principal_id = ?", (session_id, actor.principal_id)
    ).fetchone()
    if row is None or row["ended_at"] is not None or row["expires_at"] <= at:
        raise Forbidden.reason("session_not_live", "the session is not live")
    result: sqlite3.Row = row
    return result


def enter_session(conn: sqlite3.Connection, actor: Actor, session_id: str, at: str) -> Actor:
    """The actor acting in `session_id`, which must be the caller's and live."""
    _live_row(conn, actor, session_id, at)
    return Actor(actor.principal_id, actor.kind, actor.name, actor.token_id, session_id)


def require_session(actor: Actor) -> None:
    """Agents need a live session for ownership, answers and submissions (section 3)."""
    if actor.is_agent and actor.session_id is None:
        raise Forbidden.reason("session_required", "this agent operation needs a live session")


def current_session(conn: sqlite3.Connection, actor: Actor, at: str) -> dict[str, Any] | None:
    if actor.session_id is not None:
        row = conn.execute("SELECT * FROM sessions WHERE id = ?", (actor.session_id,)).fetchone()
    else:
        row = conn.execute(
            "SELECT * FROM sessions WHERE principal_id = ? AND ended_at IS NULL AND expires_at > ?"
            " ORDER BY expires_at DESC LIMIT 1",
            (actor.principal_id, at),
        ).fetchone()
    return session_json(row) if row else None


async def start(rt: Runtime, actor: Actor, idem: Idempotency) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        if not actor.is_agent:
            raise Forbidden.reason("agents_only", "only agents start sessions")
        session_id = new_id("ses")
        expires = format_time(tx.now + SESSION_LIFETIME)
        tx.conn.execute(
            "INSERT INTO sessions (id, principal_id, started_at, expires_at) VALUES (?, ?, ?, ?)",
            (session_id, actor.principal_id, tx.at, expires),
        )
        tx.event(None, "session.started", "session", session_id, {"expires_at": expires})
        row = tx.conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return 201, session_json(row)

    return await run_mutation(rt, actor, idem, unit)


async def heartbeat(rt: Runtime, actor: Actor, idem: Idempotency, session_id: str) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        _live_row(tx.conn, actor, session_id, tx.at)
        expires = format_time(tx.now + SESSION_LIFETIME)
        tx.conn.execute("UPDATE sessions SET expires_at = ? WHERE id = ?", (expires, session_id))
        tx.event(None, "session.renewed", "session", session_id, {"expires_at": expires})
        row = tx.conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return 200, session_json(row)

    return await run_mutation(rt, actor, idem, unit)


async def end(rt: Runtime, actor: Actor, idem: Idempotency, session_id: str) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        _live_row(tx.conn, actor, session_id, tx.at)
        tx.conn.execute("UPDATE sessions SET ended_at = ? WHERE id = ?", (tx.at, session_id))
        tx.event(None, "session.ended", "session", session_id, {})
        row = tx.conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return 200, session_json(row)

    return await run_mutation(rt, actor, idem, unit)


async def get_own(rt: Runtime, actor: Actor, session_id: str) -> dict[str, Any] | None:
    """One of the caller's sessions, live or not; None for anyone else's (sessions
    are a principal's own working state, not project records)."""

    def read(conn: sqlite3.Connection) -> dict[str, Any] | None:
        row = conn.execute(
            "SELECT * FROM sessions WHERE id = ? AND principal_id = ?",
            (session_id, actor.principal_id),
        ).fetchone()
        return session_json(row) if row else None

    return await rt.db.read(read)


async def me(rt: Runtime, actor: Actor) -> dict[str, Any]:
    at = format_time(rt.now())

    def read(conn: sqlite3.Connection) -> dict[str, Any]:
        principal = conn.execute("SELECT * FROM principals WHERE id = ?", (actor.principal_id,))
        row = principal.fetchone()
        return {
            "principal": {"id": row["id"], "kind": row["kind"], "name": row["name"]},
            "session": current_session(conn, actor, at),
        }

    return await rt.db.read(read)
