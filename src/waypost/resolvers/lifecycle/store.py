"""The lifecycle domain's SQL (tables of migration 0010), and nothing else.

Every function takes the connection of the unit of work it is part of; the
callers decide what one transaction holds.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Sequence
from typing import Any

from waypost.json_text import compact

Row = sqlite3.Row


def _json(value: Any) -> str:
    return compact(value)


# -- grants ------------------------------------------------------------------


def grant(conn: sqlite3.Connection, principal_id: str) -> Row | None:
    row: Row | None = conn.execute(
        "SELECT tenant, role FROM lifecycle_grants WHERE principal_id = ?", (principal_id,)
    ).fetchone()
    return row


def upsert_grant(
    conn: sqlite3.Connection, principal_id: str, tenant: str, role: str, at: str
) -> None:
    conn.execute(
        "INSERT INTO lifecycle_grants (principal_id, tenant, role, granted_at)"
        " VALUES (?, ?, ?, ?) ON CONFLICT (principal_id) DO UPDATE SET"
        " tenant = excluded.tenant, role = excluded.role, granted_at = excluded.granted_at",
        (principal_id, tenant, role, at),
    )


def delete_grant(conn: sqlite3.Connection, principal_id: str) -> bool:
    cursor = conn.execute("DELETE FROM lifecycle_grants WHERE principal_id = ?", (principal_id,))
    return cursor.rowcount > 0


def grant_rows(conn: sqlite3.Connection, tenant: str | None) -> list[Row]:
    """Every grant, or one tenant's, by tenant then principal."""
    sql = "SELECT principal_id, tenant, role, granted_at FROM lifecycle_grants"
    if tenant is None:
        return conn.execute(f"{sql} ORDER BY tenant, principal_id").fetchall()
    return conn.execute(f"{sql} WHERE tenant = ? ORDER BY principal_id", (tenant,)).fetchall()


def members_among(
    conn: sqlite3.Connection, tenant: str, roles: tuple[str, ...], principal_ids: Sequence[str]
) -> set[str]:
    """Which of `principal_ids` hold one of `roles` in the tenant: a look-up
    of each (at most 10 reviewers), where reading every grant of the tenant
    cost a review request about 1 ms in a tenant of thousands."""
    marks = ",".join("?" * len(roles))
    rows = conn.execute(
        "SELECT principal_id FROM lifecycle_grants"
        " WHERE principal_id IN (SELECT value FROM json_each(?))"
        f" AND tenant = ? AND role IN ({marks})",
        (_json(list(principal_ids)), tenant, *roles),
    ).fetchall()
    return {r["principal_id"] for r in rows}


def token_live(conn: sqlite3.Connection, token_id: str) -> bool:
    row = conn.execute("SELECT revoked_at FROM tokens WHERE id = ?", (token_id,)).fetchone()
    return row is not None and row["revoked_at"] is None


# -- memos and revisions -----------------------------------------------------


def current_version(conn: sqlite3.Connection, tenant: str, memo_id: str) -> int | None:
    row = conn.execute(
        "SELECT current_version FROM lifecycle_memos WHERE tenant = ? AND id = ?",
        (tenant, memo_id),
    ).fetchone()
    return int(row["current_version"]) if row else None


def insert_memo(conn: sqlite3.Connection, tenant: str, memo_id: str, by: str, at: str) -> None:
    conn.execute(
        "INSERT INTO lifecycle_memos (tenant, id, current_version, created_by, created_at,"
        " updated_at) VALUES (?, ?, 1, ?, ?, ?)",
        (tenant, memo_id, by, at, at),
    )


def advance_memo(
    conn: sqlite3.Connection, tenant: str, memo_id: str, expected: int, at: str
) -> bool:
    """Compare-and-append: move to expected + 1 only if `expected` is still current."""
    # updated_at never moves back, as knowledge's (its list walks by it)
    cur = conn.execute(
        "UPDATE lifecycle_memos SET current_version = current_version + 1,"
        " updated_at = max(?, updated_at)"
        " WHERE tenant = ? AND id = ? AND current_version = ?",
        (at, tenant, memo_id, expected),
    )
    return cur.rowcount == 1


def insert_revision(
    conn: sqlite3.Connection,
    tenant: str,
    memo_id: str,
    version: int,
    memo: str,
    fields: dict[str, str],
    actor: str,
    at: str,
) -> None:
    conn.execute(
        "INSERT INTO lifecycle_revisions (tenant, memo_id, version, memo, summary, title,"
        " question, context, actor, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            tenant,
            memo_id,
            version,
            memo,
            fields["summary"],
            fields["title"],
            fields["question"],
            fields["context"],
            actor,
            at,
        ),
    )


def revision(conn: sqlite3.Connection, tenant: str, memo_id: str, version: int) -> Row | None:
    row: Row | None = conn.execute(
        "SELECT * FROM lifecycle_revisions WHERE tenant = ? AND memo_id = ? AND version = ?",
        (tenant, memo_id, version),
    ).fetchone()
    return row


# The tenant's memos whose current revision matches `q`: the index's
# matches first (CROSS JOIN keeps that order: a plain JOIN made SQLite walk
# the tenant's keys and run the match once per memo, 1.3 s at 50,000 memos),
# each looked up in the keys by rowid.
_MATCHES = (
    "SELECT k.memo_id FROM lifecycle_search s CROSS JOIN lifecycle_search_keys k"
    " ON k.rowid = s.rowid WHERE lifecycle_search MATCH :match AND k.tenant = :tenant"
)
# One memo's own row of the index, matched against `q`.
_MATCHES_MEMO = (
    "EXISTS (SELECT 1 FROM lifecycle_search_keys k CROSS JOIN lifecycle_search s"
    " ON s.rowid = k.rowid WHERE k.tenant = m.tenant AND k.memo_id = m.id"
    " AND lifecycle_search MATCH :match)"
)
# Which way a search goes. A tenant of at most PROBE_MEMOS memos is walked
# newest first, each memo's own index row matched against `q` (a full-text
# query per memo, 30-100 us, so only where there are few: a tenant of 20
# beside one of 50,000 paid 7-8 ms for the large one's matches of `the` the
# next way). Otherwise the tenant's matches are read, up to FEW_MATCHES + 1:
# with at most FEW_MATCHES the page is made from them, ordered by time;
# with more, the tenant's memos are walked newest first and kept when among
# its matches, which SQLite gathers once, and the walk stops after a page.
# At 50,000 memos in one tenant, a rare term took 19 ms the last way and
# 0.12 ms from its matches; a term in 8,497 memos 2.9 ms the last way
# against 25 from its matches, one in all of them 11 against 89.
PROBE_MEMOS = 50
FEW_MATCHES = 1000


def search(
    conn: sqlite3.Connection,
    tenant: str,
    match: str | None,
    after: tuple[str, str] | None,
    limit: int,
) -> list[Row]:
    """Current revisions, most recently updated first, keyset after (updated_at, id)."""
    params: dict[str, Any] = {"tenant": tenant, "match": match, "limit": limit}
    source = "lifecycle_memos m"
    where = ["m.tenant = :tenant"]
    if match is not None:
        small = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM lifecycle_memos WHERE tenant = :tenant"
            f" LIMIT {PROBE_MEMOS + 1})",
            params,
        ).fetchone()[0]
        if small <= PROBE_MEMOS:
            where.append(_MATCHES_MEMO)
        else:
            ids = [r[0] for r in conn.execute(f"{_MATCHES} LIMIT {FEW_MATCHES + 1}", params)]
            if len(ids) <= FEW_MATCHES:
                source = "json_each(:ids) hit CROSS JOIN lifecycle_memos m ON m.id = hit.value"
                params["ids"] = _json(ids)
            else:
                where.append(f"m.id IN ({_MATCHES})")
    if after is not None:
        # `m.updated_at <=` first: the range of the index starts at the
        # cursor (the OR alone walked from the newest memo down to it)
        where.append(
            "m.updated_at <= :at AND (m.updated_at < :at OR (m.updated_at = :at AND m.id > :id))"
        )
        params.update(at=after[0], id=after[1])
    return conn.execute(
        "SELECT m.id, m.current_version AS version, m.updated_at, r.title, r.question"
        f" FROM {source} JOIN lifecycle_revisions r"
        " ON r.tenant = m.tenant AND r.memo_id = m.id AND r.version = m.current_version"
        f" WHERE {' AND '.join(where)} ORDER BY m.updated_at DESC, m.id LIMIT :limit",
        params,
    ).fetchall()


# -- documents ---------------------------------------------------------------


def document(conn: sqlite3.Connection, tenant: str, memo_id: str, digest: str) -> Row | None:
    row: Row | None = conn.execute(
        "SELECT digest, media_type, content FROM lifecycle_documents"
        " WHERE tenant = ? AND memo_id = ? AND digest = ?",
        (tenant, memo_id, digest),
    ).fetchone()
    return row


def insert_document(
    conn: sqlite3.Connection,
    tenant: str,
    memo_id: str,
    digest: str,
    media_type: str,
    content: bytes,
    at: str,
) -> None:
    conn.execute(
        "INSERT INTO lifecycle_documents (tenant, memo_id, digest, media_type, content,"
        " stored_at) VALUES (?, ?, ?, ?, ?, ?)",
        (tenant, memo_id, digest, media_type, content, at),
    )


# -- events and deliveries ---------------------------------------------------


def append_event(
    conn: sqlite3.Connection,
    tenant: str,
    memo_id: str,
    version: int,
    type: str,
    actor: str,
    at: str,
    data: dict[str, Any],
) -> int:
    """One event and its pending delivery, in the caller's transaction."""
    cur = conn.execute(
        "INSERT INTO lifecycle_events (tenant, memo_id, version, type, actor, at, data)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (tenant, memo_id, version, type, actor, at, _json(data)),
    )
    sequence = int(cur.lastrowid or 0)
    conn.execute(
        "INSERT INTO lifecycle_deliveries (event_sequence, state, delivery_id)"
        " VALUES (?, 'pending', ?)",
        (sequence, secrets.token_hex(16)),  # migration 0024: the receiver's dedupe key
    )
    return sequence


def event_json(row: Row) -> dict[str, Any]:
    return {
        "sequence": row["sequence"],
        "memo_id": row["memo_id"],
        "version": row["version"],
        "type": row["type"],
        "actor": row["actor"],
        "at": row["at"],
        "data": json.loads(row["data"]),
    }


def events(
    conn: sqlite3.Connection, tenant: str, memo_id: str, after: int, limit: int
) -> list[Row]:
    return conn.execute(
        "SELECT * FROM lifecycle_events WHERE tenant = ? AND memo_id = ? AND sequence > ?"
        " ORDER BY sequence LIMIT ?",
        (tenant, memo_id, after, limit),
    ).fetchall()


# a delivery with the event it sends
_DELIVERY_ROWS = (
    "SELECT d.*, e.tenant, e.memo_id, e.version, e.type, e.actor, e.at, e.data,"
    " e.sequence FROM lifecycle_deliveries d"
    " JOIN lifecycle_events e ON e.sequence = d.event_sequence"
)


def deliveries(conn: sqlite3.Connection, state: str | None, limit: int) -> list[Row]:
    sql = _DELIVERY_ROWS
    args: list[Any] = []
    if state is not None:
        sql += " WHERE d.state = ?"
        args.append(state)
    sql += " ORDER BY d.event_sequence LIMIT ?"
    args.append(limit)
    return conn.execute(sql, args).fetchall()


def mark_delivered(conn: sqlite3.Connection, sequence: int, at: str) -> None:
    conn.execute(
        "UPDATE lifecycle_deliveries SET state = 'delivered', attempts = attempts + 1,"
        " last_attempt_at = ?, delivered_at = ?, last_error = NULL WHERE event_sequence = ?",
        (at, at, sequence),
    )


def mark_failed(conn: sqlite3.Connection, sequence: int, at: str, error: str) -> None:
    conn.execute(
        "UPDATE lifecycle_deliveries SET attempts = attempts + 1, last_attempt_at = ?,"
        " last_error = ? WHERE event_sequence = ?",
        (at, error[:200], sequence),
    )


def oldest_pending(conn: sqlite3.Connection) -> int | None:
    """The sequence of the delivery the worker sends next, if any."""
    row = conn.execute(
        "SELECT event_sequence FROM lifecycle_deliveries WHERE state = 'pending'"
        " ORDER BY event_sequence LIMIT 1"
    ).fetchone()
    return None if row is None else int(row[0])


def delivery(conn: sqlite3.Connection, sequence: int) -> Row | None:
    row: Row | None = conn.execute(
        _DELIVERY_ROWS + " WHERE d.event_sequence = ?", (sequence,)
    ).fetchone()
    return row


def mark_skipped(conn: sqlite3.Connection, sequence: int, at: str, reason: str) -> bool:
    """Whether the delivery was pending (and is skipped now)."""
    cur = conn.execute(
        "UPDATE lifecycle_deliveries SET state = 'skipped', skipped_at = ?, skip_reason = ?"
        " WHERE event_sequence = ? AND state = 'pending'",
        (at, reason, sequence),
    )
    return cur.rowcount == 1


# -- receipts ----------------------------------------------------------------


def receipt(conn: sqlite3.Connection, caller: str, key: str) -> Row | None:
    row: Row | None = conn.execute(
        "SELECT * FROM lifecycle_receipts WHERE caller = ? AND key = ?", (caller, key)
    ).fetchone()
    return row


def insert_receipt(
    conn: sqlite3.Connection,
    caller: str,
    key: str,
    fingerprint: str,
    scope: tuple[str, str, str],
    body: str,
    at: str,
) -> None:
    tenant, memo_id, action = scope
    conn.execute(
        "INSERT INTO lifecycle_receipts (caller, key, fingerprint, tenant, memo_id, action,"
        " body, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (caller, key, fingerprint, tenant, memo_id, action, body, at),
    )


# -- review requests and outcomes -------------------------------------------


def insert_review_request(
    conn: sqlite3.Connection,
    request_id: str,
    tenant: str,
    memo_id: str,
    version: int,
    reviewers: list[str],
    receipt_text: str,
    by: str,
    at: str,
) -> None:
    conn.execute(
        "INSERT INTO lifecycle_review_requests (id, tenant, memo_id, version, reviewers,"
        " receipt, requested_by, requested_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (request_id, tenant, memo_id, version, _json(reviewers), receipt_text, by, at),
    )


def review_request(conn: sqlite3.Connection, request_id: str) -> Row | None:
    row: Row | None = conn.execute(
        "SELECT * FROM lifecycle_review_requests WHERE id = ?", (request_id,)
    ).fetchone()
    return row


def review_request_count(conn: sqlite3.Connection, tenant: str, memo_id: str, version: int) -> int:
    found: int = conn.execute(
        "SELECT count(*) FROM lifecycle_review_requests WHERE tenant = ? AND memo_id = ?"
        " AND version = ?",
        (tenant, memo_id, version),
    ).fetchone()[0]
    return found


def review_requests(conn: sqlite3.Connection, tenant: str, memo_id: str, version: int) -> list[Row]:
    """In the order they were made: rowid (the table is insert-only), not
    `requested_at`, which a wall clock stepped back would put out of order."""
    return conn.execute(
        "SELECT * FROM lifecycle_review_requests WHERE tenant = ? AND memo_id = ?"
        " AND version = ? ORDER BY rowid",
        (tenant, memo_id, version),
    ).fetchall()


def insert_outcome(
    conn: sqlite3.Connection,
    request_id: str,
    reviewer: str,
    disposition: str,
    rationale: str,
    at: str,
) -> bool:
    """False when this reviewer already recorded an outcome on the request.

    Looked up first (one writer: nothing can come in between): an insert of
    a taken key is refused by the table's history trigger (migration 0017),
    before any `ON CONFLICT DO NOTHING` could apply."""
    taken = conn.execute(
        "SELECT 1 FROM lifecycle_outcomes WHERE request_id = ? AND reviewer = ?",
        (request_id, reviewer),
    ).fetchone()
    if taken is not None:
        return False
    conn.execute(
        "INSERT INTO lifecycle_outcomes (request_id, reviewer, disposition, rationale, at)"
        " VALUES (?, ?, ?, ?, ?)",
        (request_id, reviewer, disposition, rationale, at),
    )
    return True


def outcomes(conn: sqlite3.Connection, tenant: str, memo_id: str, version: int) -> list[Row]:
    return conn.execute(
        "SELECT o.* FROM lifecycle_outcomes o JOIN lifecycle_review_requests r"
        " ON r.id = o.request_id WHERE r.tenant = ? AND r.memo_id = ? AND r.version = ?"
        " ORDER BY o.at, o.request_id, o.reviewer",
        (tenant, memo_id, version),
    ).fetchall()
