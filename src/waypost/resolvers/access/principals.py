"""Principals and tokens: creation, issue, revocation and authentication."""

from __future__ import annotations

import hmac
import sqlite3
from collections.abc import Sequence
from typing import Any

from waypost.errors import InvalidRequest, NotFound, Unauthenticated
from waypost.ids import new_id, new_token, token_digest
from waypost.resolvers.access import store
from waypost.resolvers.access.store import principal_json
from waypost.resolvers.core.text import drawn_as, require_name
from waypost.runtime import Actor

__all__ = [
    "AUDIENCES",
    "KINDS",
    "authenticate",
    "bootstrap_admin",
    "create_principal",
    "first_human_id",
    "has_principals",
    "issue_token",
    "list_principals",
    "list_tokens",
    "principal_json",
    "revoke_token",
]

AUDIENCES = ("api", "lifecycle", "metrics")
KINDS = ("human", "agent")


def create_principal(conn: sqlite3.Connection, kind: str, name: str, at: str) -> dict[str, Any]:
    """Create a principal and its first `api` token; the token is returned only here."""
    if kind not in KINDS:
        raise InvalidRequest.field("kind", "kind must be human or agent")
    if not 1 <= len(name) <= 200:
        raise InvalidRequest.field("name", "name must be 1-200 characters")
    require_name(name, "name")
    # names are how people tell principals apart in the console and in
    # `principal list` (answers show a name, not an id): a second "admin"
    # made every answer of the first read as its (spoofaudit)
    drawn = drawn_as(name)
    for row in store.principal_rows(conn):
        if any(a == b for a, b in zip(drawn_as(row["name"]), drawn, strict=True)):
            raise InvalidRequest.field("name", "a principal is already shown by that name")
    principal_id = new_id("prn")
    store.insert_principal(conn, principal_id, kind, name, at)
    token = issue_token(conn, principal_id, "api", at)
    return {
        "principal_id": principal_id,
        "kind": kind,
        "name": name,
        "token_id": token["token_id"],
        "token": token["token"],
    }


def list_principals(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return [
        {"id": r["id"], "kind": r["kind"], "name": r["name"], "created_at": r["created_at"]}
        for r in store.principal_rows(conn)
    ]


def list_tokens(conn: sqlite3.Connection, principal_id: str | None) -> list[dict[str, Any]]:
    """Token metadata for revocation and rotation: never a token or its digest."""
    if principal_id is not None and not store.principal_exists(conn, principal_id):
        raise NotFound("no such principal", {"field": "principal"})
    return [
        {
            "token_id": r["id"],
            "principal_id": r["principal_id"],
            "audience": r["audience"],
            "created_at": r["created_at"],
            "revoked_at": r["revoked_at"],
        }
        for r in store.token_rows(conn, principal_id)
    ]


def issue_token(
    conn: sqlite3.Connection, principal_id: str, audience: str, at: str
) -> dict[str, Any]:
    if audience not in AUDIENCES:
        raise InvalidRequest.field("audience", "audience must be api, lifecycle or metrics")
    if not store.principal_exists(conn, principal_id):
        raise NotFound("no such principal", {"field": "principal"})
    token = new_token()
    token_id = new_id("tok")
    store.insert_token(conn, token_id, principal_id, audience, token_digest(token), at)
    return {
        "principal_id": principal_id,
        "audience": audience,
        "token_id": token_id,
        "token": token,
    }


def revoke_token(conn: sqlite3.Connection, token_id: str, at: str) -> None:
    if not store.mark_token_revoked(conn, token_id, at) and not store.token_exists(conn, token_id):
        raise NotFound("no such token", {"field": "token_id"})


def authenticate(conn: sqlite3.Connection, token: str, audience: str | tuple[str, ...]) -> Actor:
    """The principal a bearer token names, or Unauthenticated (same for every failure);
    the token's audience must be `audience` (or one of them).

    The lookup is by SHA-256, so the secret itself is never compared byte by byte
    against stored data; the final digest comparison is constant-time as well.
    """
    digest = token_digest(token)
    return actor_of_token(store.token_with_principal(conn, digest), digest, audience)


def actor_of_token(
    row: sqlite3.Row | None, digest: bytes, audience: str | tuple[str, ...]
) -> Actor:
    """The principal of the token stored under `digest` (`row`, as
    `store.token_with_principal` reads it), or Unauthenticated."""
    if (
        row is None
        or not hmac.compare_digest(bytes(row["sha256"]), digest)
        or row["revoked_at"] is not None
        or row["audience"] not in ((audience,) if isinstance(audience, str) else audience)
    ):
        raise Unauthenticated("unauthenticated")
    return Actor(row["id"], row["kind"], row["name"], row["token_id"])


def has_principals(conn: sqlite3.Connection) -> bool:
    return store.any_principal(conn)


def first_human_id(conn: sqlite3.Connection) -> str | None:
    """The id of the human principal created first (the admin of a fresh database)."""
    row = store.first_human_row(conn)
    return None if row is None else str(row["id"])


def bootstrap_admin(conn: sqlite3.Connection, at: str) -> dict[str, Any] | None:
    """On a database with no principals, create the human `admin` (first start)."""
    if has_principals(conn):
        return None
    return create_principal(conn, "human", "admin", at)


def principals_by_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> list[dict[str, Any] | None]:
    """The principals of `ids` in that order (None for an unknown id)."""
    found = store.principals_by_ids(conn, ids)
    return [found.get(i) for i in ids]


def token_revoked(conn: sqlite3.Connection, token_id: str) -> bool:
    """Whether the token is revoked or gone (a stream re-checks its token)."""
    row = store.token_revocation(conn, token_id)
    return row is None or row["revoked_at"] is not None
