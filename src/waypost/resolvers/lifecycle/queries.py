"""Lifecycle reads. Each one checks the caller's tenant policy afresh.

A memo the caller may not read and one that does not exist answer the same
403; 404 is for a missing version or document of a memo the caller may read.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from waypost.errors import NotFound, Unavailable
from waypost.resolvers.context.search import (
    SearchTimedOut,
    escape_fts,
    time_limit,
    time_limit_ms,
)
from waypost.resolvers.lifecycle import authz, store
from waypost.resolvers.lifecycle.authz import Action, Caller
from waypost.resolvers.lifecycle.cursors import CursorSigner, invalid
from waypost.runtime import Runtime

DEFAULT_SEARCH_LIMIT = 20
DEFAULT_EVENTS_LIMIT = 100


def _missing(what: str) -> NotFound:
    return NotFound(f"no such {what}", {"reason": "not_found"})


def _revision(conn: sqlite3.Connection, caller: Caller, memo_id: str, version: int | None) -> Any:
    grant, current = authz.authorize_memo(conn, caller, Action.READ, memo_id)
    row = store.revision(conn, grant.tenant, memo_id, version or current)
    if row is None:
        raise _missing("version")
    return grant, row


async def get_memo(rt: Runtime, caller: Caller, memo_id: str, version: int | None) -> str:
    """The Memo JSON of a revision, as the canonical text stored."""

    def read(conn: sqlite3.Connection) -> str:
        _, row = _revision(conn, caller, memo_id, version)
        return str(row["memo"])

    return await rt.db.read(read)


@dataclass(frozen=True)
class StoredDocument:
    media_type: str
    content: bytes


async def get_document(
    rt: Runtime, caller: Caller, memo_id: str, digest: str, version: int | None
) -> StoredDocument:
    """The bytes of a digest that the revision's packet names."""

    def read(conn: sqlite3.Connection) -> StoredDocument:
        grant, row = _revision(conn, caller, memo_id, version)
        packet = {p["digest"] for p in json.loads(row["memo"])["packet"]}
        doc = store.document(conn, grant.tenant, memo_id, digest) if digest in packet else None
        if doc is None:
            raise _missing("document")
        return StoredDocument(doc["media_type"], bytes(doc["content"]))

    return await rt.db.read(read)


async def events(
    rt: Runtime, caller: Caller, memo_id: str, after: int | None, limit: int | None
) -> dict[str, Any]:
    def read(conn: sqlite3.Connection) -> dict[str, Any]:
        grant, _ = authz.authorize_memo(conn, caller, Action.READ, memo_id)
        rows = store.events(conn, grant.tenant, memo_id, after or 0, limit or DEFAULT_EVENTS_LIMIT)
        return {"events": [store.event_json(r) for r in rows]}

    return await rt.db.read(read)


def memo_match(q: str | None) -> str | None:
    """Each whitespace-separated term as a quoted FTS5 string (all must match),
    in Unicode's composed and decomposed forms alike, as the context packet's
    search (`escape_fts`): `Việt` sent decomposed (a macOS client) found no
    memo titled with it composed.

    A NUL ends an FTS5 string early ("unterminated string"), so it separates
    terms like whitespace does. A term given twice is searched once
    (`escape_fts`): "mu mu mu ..." (66 times) took 4 s where "mu" takes
    milliseconds.
    """
    terms = (q or "").replace("\x00", " ").split()
    if not terms:
        return None
    return escape_fts(terms)


async def search(
    rt: Runtime,
    signer: CursorSigner,
    caller: Caller,
    q: str | None,
    cursor: str | None,
    limit: int | None,
) -> dict[str, Any]:
    size = limit or DEFAULT_SEARCH_LIMIT
    now = rt.now()

    def read(conn: sqlite3.Connection) -> dict[str, Any]:
        grant = authz.authorize(conn, caller, Action.READ)
        binding = {"caller": caller.id, "tenant": grant.tenant, "q": q or ""}
        after: tuple[str, str] | None = None
        if cursor is not None:
            position = signer.open(cursor, binding, now)
            if len(position) != 2:
                raise invalid()
            after = (position[0], position[1])
        try:
            with time_limit(conn, limit_ms):
                rows = store.search(conn, grant.tenant, memo_match(q), after, size + 1)
        except SearchTimedOut:
            raise Unavailable(
                f"the search ran past its time limit of {limit_ms} ms: use more specific terms",
                retry_after=1,
            ) from None
        items = [
            {
                "id": r["id"],
                "version": r["version"],
                "title": r["title"],
                "question": r["question"],
                "updated_at": r["updated_at"],
            }
            for r in rows[:size]
        ]
        next_cursor = None
        if len(rows) > size:
            last = items[-1]
            next_cursor = signer.sign(binding, [last["updated_at"], last["id"]], now)
        return {"items": items, "next_cursor": next_cursor}

    limit_ms = time_limit_ms(rt)
    return await rt.db.search(read)


async def review_requests(rt: Runtime, caller: Caller, memo_id: str, version: int) -> list[str]:
    """The retained receipts of a version's review requests, as first returned."""

    def read(conn: sqlite3.Connection) -> list[str]:
        grant, _ = _revision(conn, caller, memo_id, version)
        return [
            str(r["receipt"]) for r in store.review_requests(conn, grant.tenant, memo_id, version)
        ]

    return await rt.db.read(read)


async def outcomes(rt: Runtime, caller: Caller, memo_id: str, version: int) -> dict[str, Any]:
    def read(conn: sqlite3.Connection) -> dict[str, Any]:
        grant, _ = _revision(conn, caller, memo_id, version)
        requests = store.review_requests(conn, grant.tenant, memo_id, version)
        decided = store.outcomes(conn, grant.tenant, memo_id, version)
        state = "decided" if decided else "requested" if requests else "not_requested"
        return {
            "memo_id": memo_id,
            "version": version,
            "submission_state": state,
            "requests": [
                {
                    "request_id": r["id"],
                    "reviewers": json.loads(r["reviewers"]),
                    "requested_by": r["requested_by"],
                    "requested_at": r["requested_at"],
                }
                for r in requests
            ],
            "outcomes": [
                {
                    "request_id": o["request_id"],
                    "reviewer": o["reviewer"],
                    "disposition": o["disposition"],
                    "rationale": o["rationale"],
                    "at": o["at"],
                }
                for o in decided
            ],
        }

    return await rt.db.read(read)
