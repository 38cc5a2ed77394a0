"""Access rows: principals, their tokens and agent sessions (all of this domain's SQL).

Plain functions over one `sqlite3.Connection`, called inside a unit of work;
the rules (who may, what is valid, which errors) stay in the operation modules.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any


def principal_json(row: sqlite3.Row) -> dict[str, Any]:
    return {"id": row["id"], "kind": row["kind"], "name": row["name"]}


def session_json(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "principal_id": row["principal_id"],
        "started_at": row["started_at"],
        "expires_at": row["expires_at"],
        "ended_at": row["ended_at"],
    }


# principals


def insert_principal(
    conn: sqlite3.Connection, principal_id: str, kind: str, name: str, at: str
) -> None:
    conn.execute(
        "INSERT INTO principals (id, kind, name, created_at) VALUES (?, ?, ?, ?)",
        (principal_id, kind, name, at),
    )


def principal_row(conn: sqlite3.Connection, principal_id: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM principals WHERE id = ?", (principal_id,)
    ).fetchone()
    return row


def principal_exists(conn: sqlite3.Connection, principal_id: str) -> bool:
    found = conn.execute("SELECT 1 FROM principals WHERE id = ?", (principal_id,)).fetchone()
    return found is not None


def first_human_row(conn: sqlite3.Connection) -> sqlite3.Row | None:
    """The human principal created first (the admin of a fresh database):
    first inserted, not earliest stamped, since `serve` may have stamped it
    with a simulated clock (`WAYPOST_CLOCK_FILE`) and the admin commands use
    the machine's."""
    row: sqlite3.Row | None = conn.execute(
        "SELECT id FROM principals WHERE kind = 'human' ORDER BY rowid LIMIT 1"
    ).fetchone()
    return row


def any_principal(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM principals LIMIT 1").fetchone() is not None


# tokens


def insert_token(
    conn: sqlite3.Connection,
    token_id: str,
    principal_id: str,
    audience: str,
    digest: bytes,
    at: str,
) -> None:
    conn.execute(
        "INSERT INTO tokens (id, principal_id, audience, sha256, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (token_id, principal_id, audience, digest, at),
    )


def mark_token_revoked(conn: sqlite3.Connection, token_id: str, at: str) -> bool:
    """Revoke a live token; False when no live token has that id."""
    cur = conn.execute(
        "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (at, token_id)
    )
    return cur.rowcount != 0


def principal_rows(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """Every principal, oldest first (administration lists them all)."""
    return conn.execute(
        "SELECT id, kind, name, created_at FROM principals ORDER BY created_at, id"
    ).fetchall()


def token_rows(conn: sqlite3.Connection, principal_id: str | None) -> list[sqlite3.Row]:
    """Tokens without their digests, oldest first; of one principal when given."""
    sql = "SELECT id, principal_id, audience, created_at, revoked_at FROM tokens"
    if principal_id is None:
        return conn.execute(sql + " ORDER BY created_at, id").fetchall()
    return conn.execute(
        sql + " WHERE principal_id = ? ORDER BY created_at, id", (principal_id,)
    ).fetchall()


def token_exists(conn: sqlite3.Connection, token_id: str) -> bool:
    return conn.execute("SELECT 1 FROM tokens WHERE id = ?", (token_id,)).fetchone() is not None


def token_with_principal(conn: sqlite3.Connection, digest: bytes) -> sqlite3.Row | None:
    """The token stored under `digest` with its principal's id, kind and name."""
    return tokens_with_principals(conn, [digest]).get(digest)


def tokens_with_principals(
    conn: sqlite3.Connection, digests: Sequence[bytes]
) -> dict[bytes, sqlite3.Row]:
    """The token stored under each digest with its principal's id, kind and
    name, by digest (a digest stored under no token is left out)."""
    marks = ",".join("?" * len(digests))
    rows = conn.execute(
        "SELECT t.id AS token_id, t.sha256, t.audience, t.revoked_at, p.id, p.kind, p.name"
        f" FROM tokens t JOIN principals p ON p.id = t.principal_id WHERE t.sha256 IN ({marks})",
        list(digests),
    ).fetchall()
    return {bytes(row["sha256"]): row for row in rows}


def token_revocation(conn: sqlite3.Connection, token_id: str) -> sqlite3.Row | None:
    """The token's `revoked_at` (None for no such token)."""
    row: sqlite3.Row | None = conn.execute(
        "SELECT revoked_at FROM tokens WHERE id = ?", (token_id,)
    ).fetchone()
    return row


# sessions


def session_liveness(
    conn: sqlite3.Connection, principal_id: str, session_id: str
) -> sqlite3.Row | None:
    """The `ended_at` and `expires_at` of a session of `principal_id`."""
    row: sqlite3.Row | None = conn.execute(
        "SELECT ended_at, expires_at FROM sessions WHERE id = ? AND principal_id = ?",
        (session_id, principal_id),
    ).fetchone()
    return row


def session_row(conn: sqlite3.Connection, session_id: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    return row


def own_session_row(
    conn: sqlite3.Connection, principal_id: str, session_id: str
) -> sqlite3.Row | None:
    """A session of `principal_id`, live or not."""
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM sessions WHERE id = ? AND principal_id = ?", (session_id, principal_id)
    ).fetchone()
    return row


def latest_live_session_row(
    conn: sqlite3.Connection, principal_id: str, at: str
) -> sqlite3.Row | None:
    """The principal's live session that expires last, if any; of several
    that expire together, the one started last."""
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM sessions WHERE principal_id = ? AND ended_at IS NULL AND expires_at > ?"
        " ORDER BY expires_at DESC, started_at DESC, rowid DESC LIMIT 1",
        (principal_id, at),
    ).fetchone()
    return row


def insert_session(
    conn: sqlite3.Connection, session_id: str, principal_id: str, at: str, expires_at: str
) -> sqlite3.Row:
    conn.execute(
        "INSERT INTO sessions (id, principal_id, started_at, expires_at) VALUES (?, ?, ?, ?)",
        (session_id, principal_id, at, expires_at),
    )
    return _reread(conn, session_id)


def set_session_expiry(conn: sqlite3.Connection, session_id: str, expires_at: str) -> sqlite3.Row:
    conn.execute("UPDATE sessions SET expires_at = ? WHERE id = ?", (expires_at, session_id))
    return _reread(conn, session_id)


def end_session(conn: sqlite3.Connection, session_id: str, at: str) -> sqlite3.Row:
    conn.execute("UPDATE sessions SET ended_at = ? WHERE id = ?", (at, session_id))
    return _reread(conn, session_id)


def _reread(conn: sqlite3.Connection, session_id: str) -> sqlite3.Row:
    row = session_row(conn, session_id)
    assert row is not None  # written by this same unit of work
    return row


def principals_by_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Principals by id in one statement (GraphQL's per-request loader)."""
    rows = conn.execute(
        "SELECT * FROM principals WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(sorted(set(ids))),),
    ).fetchall()
    return {r["id"]: principal_json(r) for r in rows}
