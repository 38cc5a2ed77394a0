"""Principals and tokens: creation, issue, revocation and authentication."""

from __future__ import annotations

import hmac
import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from waypost.errors import InvalidRequest, NotFound, Unauthenticated
from waypost.ids import new_id, new_token, token_digest
from waypost.runtime import Actor

AUDIENCES = ("api", "lifecycle")


def principal_json(row: sqlite3.Row) -> dict[str, Any]:
    return {"id": row["id"], "kind": row["kind"], "name": row["name"]}


def create_principal(conn: sqlite3.Connection, kind: str, name: str, at: str) -> dict[str, Any]:
    """Create a principal and its first `api` token; the token is returned only here."""
    if kind not in ("human", "agent"):
        raise InvalidRequest.field("kind", "kind must be human or agent")
    if not 1 <= len(name) <= 200:
        raise InvalidRequest.field("name", "name must be 1-200 characters")
    principal_id = new_id("prn")
    conn.execute(
        "INSERT INTO principals (id, kind, name, created_at) VALUES (?, ?, ?, ?)",
        (principal_id, kind, name, at),
    )
    token = issue_token(conn, principal_id, "api", at)
    return {"principal_id": principal_id, "kind": kind, "name": name, "token": token["token"]}


def issue_token(
    conn: sqlite3.Connection, principal_id: str, audience: str, at: str
) -> dict[str, Any]:
    if audience not in AUDIENCES:
        raise InvalidRequest.field("audience", "audience must be api or lifecycle")
    if conn.execute("SELECT 1 FROM principals WHERE id = ?", (principal_id,)).fetchone() is None:
        raise NotFound("no such principal", {"field": "principal"})
    token = new_token()
    token_id = new_id("tok")
    conn.execute(
        "INSERT INTO tokens (id, principal_id, audience, sha256, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (token_id, principal_id, audience, token_digest(token), at),
    )
    return {
        "principal_id": principal_id,
        "audience": audience,
        "token_id": token_id,
        "token": token,
    }


def revoke_token(conn: sqlite3.Connection, token_id: str, at: str) -> None:
    cur = conn.execute(
        "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (at, token_id)
    )
    if (
        cur.rowcount == 0
        and conn.execute("SELECT 1 FROM tokens WHERE id = ?", (token_id,)).fetchone() is None
    ):
        raise NotFound("no such token", {"field": "token_id"})


def authenticate(conn: sqlite3.Connection, token: str, audience: str) -> Actor:
    """The principal a bearer token names, or Unauthenticated (same for every failure).

    The lookup is by SHA-256, so the secret itself is never compared byte by byte
    against stored data; the final digest comparison is constant-time as well.
    """
    digest = token_digest(token)
    row = conn.execute(
        "SELECT t.id AS token_id, t.sha256, t.audience, t.revoked_at, p.id, p.kind, p.name"
        " FROM tokens t JOIN principals p ON p.id = t.principal_id WHERE t.sha256 = ?",
        (digest,),
    ).fetchone()
    if (
        row is None
        or not hmac.compare_digest(bytes(row["sha256"]), digest)
        or row["revoked_at"] is not None
        or row["audience"] != audience
    ):
        raise Unauthenticated("unauthenticated")
    return Actor(row["id"], row["kind"], row["name"], row["token_id"])


def get_principal(conn: sqlite3.Connection, principal_id: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM principals WHERE id = ?", (principal_id,)).fetchone()
    return principal_json(row) if row else None


def has_principals(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM principals LIMIT 1").fetchone() is not None


def bootstrap_admin(conn: sqlite3.Connection, at: str) -> dict[str, Any] | None:
    """On a database with no principals, create the human `admin` (first start)."""
    if has_principals(conn):
        return None
    return create_principal(conn, "human", "admin", at)


def principals_by_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Principals by id in one statement (GraphQL's per-request loader)."""
    rows = conn.execute(
        "SELECT * FROM principals WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(sorted(set(ids))),),
    ).fetchall()
    return {r["id"]: principal_json(r) for r in rows}
