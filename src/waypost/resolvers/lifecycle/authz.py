"""Tenant policy of the lifecycle adapter: who may do what to which memo.

A principal holds at most one lifecycle tenant with one role, granted by
`waypost admin lifecycle grant`. `reader` may use the GET routes, `reviewer`
the GET routes and comments, `author` every route. A memo belongs to the
tenant of the caller who registered it, and memo ids are looked up in the
caller's tenant only: a memo that does not exist and one of another tenant
are the same 403 `policy_denied`.

Every request is checked afresh (replays and cursor pages included), and
commands are checked again inside their write transaction.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from enum import Enum
from typing import Any

from waypost.errors import Forbidden, NotFound, Unauthenticated
from waypost.resolvers.lifecycle import store

ROLES = ("reader", "author", "reviewer")


class Action(Enum):
    READ = "read"
    COMMENT = "comment"
    WRITE = "write"


ALLOWED: dict[str, frozenset[Action]] = {
    "reader": frozenset({Action.READ}),
    "reviewer": frozenset({Action.READ, Action.COMMENT}),
    "author": frozenset({Action.READ, Action.COMMENT, Action.WRITE}),
}


@dataclass(frozen=True)
class Caller:
    """An authenticated lifecycle caller, as a verifier returns it.

    `id` is what grants name: a Waypost principal id, or the username a
    Kubernetes TokenReview returned. `token_id` is set for Waypost tokens so
    the write transaction can see a revocation that happened meanwhile.
    """

    id: str
    kind: str  # "human" | "agent" | "service"
    token_id: str | None = None


@dataclass(frozen=True)
class Grant:
    caller: Caller
    tenant: str
    role: str

    def allows(self, action: Action) -> bool:
        return action in ALLOWED[self.role]


def grant(
    conn: sqlite3.Connection, principal_id: str, tenant: str, role: str, at: str
) -> dict[str, Any]:
    """Give `principal_id` its one role in `tenant`, replacing any earlier one
    (`waypost admin lifecycle grant`)."""
    store.upsert_grant(conn, principal_id, tenant, role, at)
    return {"principal_id": principal_id, "tenant": tenant, "role": role, "granted_at": at}


def revoke(conn: sqlite3.Connection, principal_id: str) -> dict[str, Any]:
    """Take `principal_id`'s lifecycle grant away (`waypost admin lifecycle
    revoke`): its next request is `403 policy_denied`. Without it, the only
    way to shut out a TokenReview username (no Waypost token to revoke) was
    a grant of another tenant."""
    if not store.delete_grant(conn, principal_id):
        raise NotFound("this principal holds no lifecycle grant", {"field": "principal"})
    return {"principal_id": principal_id, "revoked": True}


def grants(conn: sqlite3.Connection, tenant: str | None) -> list[dict[str, Any]]:
    """`waypost admin lifecycle grants`: who holds which role where."""
    return [dict(row) for row in store.grant_rows(conn, tenant)]


def denied() -> Forbidden:
    return Forbidden("policy denied", {"reason": "policy_denied"})


def grant_of(conn: sqlite3.Connection, caller: Caller) -> Grant | None:
    row = store.grant(conn, caller.id)
    return Grant(caller, row["tenant"], row["role"]) if row else None


def authorize(conn: sqlite3.Connection, caller: Caller, action: Action) -> Grant:
    """The caller's grant if it allows `action`, else 403 policy_denied."""
    grant = grant_of(conn, caller)
    if grant is None or not grant.allows(action):
        raise denied()
    return grant


def authorize_memo(
    conn: sqlite3.Connection, caller: Caller, action: Action, memo_id: str
) -> tuple[Grant, int]:
    """The grant and the memo's current version; missing and foreign memos alike 403."""
    grant = authorize(conn, caller, action)
    version = store.current_version(conn, grant.tenant, memo_id)
    if version is None:
        raise denied()
    return grant, version


def recheck_identity(conn: sqlite3.Connection, caller: Caller) -> None:
    """In the write transaction, or a replay's point read: a Waypost token
    revoked meanwhile is 401."""
    if caller.token_id is None:
        return
    if not store.token_live(conn, caller.token_id):
        raise Unauthenticated("unauthenticated")
