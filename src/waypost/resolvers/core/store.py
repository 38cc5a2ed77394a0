"""Core rows: idempotency receipts and the event log (this package's SQL).

Plain functions over one `sqlite3.Connection`, called inside a unit of work;
what a receipt means (replay, refusal of a changed request) stays in
receipts.py.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from waypost.json_text import compact


def _json(value: Any) -> str:
    # one canonical spelling, so equal bodies are stored as equal bytes
    # (json.dumps's, without its per-call set-up: waypost/json_text.py)
    return compact(value)


# ---------------------------------------------------------------- receipts


def receipt_row(conn: sqlite3.Connection, principal_id: str, key: str) -> sqlite3.Row | None:
    """The caller's receipt for `key`: its fingerprint, status and body."""
    return receipt_rows(conn, [(principal_id, key)]).get((principal_id, key))


def receipt_rows(
    conn: sqlite3.Connection, slots: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], sqlite3.Row]:
    """The receipt (fingerprint, status, body) of each (principal id, key),
    by slot (a slot with no receipt is left out): one point search of the
    key's index each."""
    one = (
        "SELECT principal_id, key, fingerprint, status, body FROM receipts"
        " WHERE principal_id = ? AND key = ?"
    )
    rows = conn.execute(
        " UNION ALL ".join([one] * len(slots)), [part for slot in slots for part in slot]
    ).fetchall()
    return {(row["principal_id"], row["key"]): row for row in rows}


def insert_receipt(
    conn: sqlite3.Connection,
    slot: tuple[str, str],
    fingerprint: str,
    outcome: tuple[int, dict[str, Any]],
    at: str,
) -> None:
    """Store the outcome (status, body) of the request in `slot` (principal id, key)."""
    conn.execute(
        "INSERT INTO receipts (principal_id, key, fingerprint, status, body, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (*slot, fingerprint, outcome[0], _json(outcome[1]), at),
    )


def delete_receipts_before(conn: sqlite3.Connection, cutoff: str, limit: int) -> int:
    """Delete up to `limit` of the oldest receipts created before `cutoff`; how many."""
    return conn.execute(
        "DELETE FROM receipts WHERE (principal_id, key) IN ("
        " SELECT principal_id, key FROM receipts WHERE created_at < ?"
        " ORDER BY created_at LIMIT ?)",
        (cutoff, limit),
    ).rowcount


# ---------------------------------------------------------------- events


def insert_event(conn: sqlite3.Connection, values: dict[str, Any]) -> int:
    """Append one event; `values` names project_id, type, subject_type,
    subject_id, actor_id, actor_session_id, at and data. Returns its sequence."""
    v = values
    cur = conn.execute(
        "INSERT INTO events (project_id, type, subject_type, subject_id, actor_id,"
        " actor_session_id, at, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (v["project_id"], v["type"], v["subject_type"], v["subject_id"], v["actor_id"],
         v["actor_session_id"], v["at"], _json(v["data"])),
    )  # fmt: skip
    return int(cur.lastrowid or 0)


def event_rows_after(
    conn: sqlite3.Connection, project_id: str, after: int, count: int
) -> list[sqlite3.Row]:
    """Up to `count` of the project's events after sequence `after`, oldest first."""
    return conn.execute(
        "SELECT * FROM events WHERE project_id = ? AND sequence > ? ORDER BY sequence LIMIT ?",
        (project_id, after, count),
    ).fetchall()


def subject_event_rows(
    conn: sqlite3.Connection, project_id: str, after: int, subject_id: str, types: Sequence[str]
) -> list[sqlite3.Row]:
    """The project's events after sequence `after` about `subject_id` of these
    types, oldest first (a decision's changes since a stream last read it)."""
    marks = ", ".join("?" * len(types))
    return conn.execute(
        "SELECT * FROM events WHERE project_id = ? AND sequence > ? AND subject_id = ?"
        f" AND type IN ({marks}) ORDER BY sequence",
        (project_id, after, subject_id, *types),
    ).fetchall()


def last_project_sequence(conn: sqlite3.Connection, project_id: str) -> int:
    """The project's newest event's sequence (0 for none)."""
    row = conn.execute(
        "SELECT max(sequence) FROM events WHERE project_id = ?", (project_id,)
    ).fetchone()
    return int(row[0] or 0)


def event_rows_before(
    conn: sqlite3.Connection, project_id: str, before: int, count: int
) -> list[sqlite3.Row]:
    """Up to `count` of the project's events just before sequence `before`, newest first."""
    return conn.execute(
        "SELECT * FROM events WHERE project_id = ? AND sequence < ? ORDER BY sequence DESC LIMIT ?",
        (project_id, before, count),
    ).fetchall()


def project_has_event_between(
    conn: sqlite3.Connection, project_id: str, low: int, high: int
) -> bool:
    """Whether the project has an event with a sequence from `low` to `high`."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM events WHERE project_id = ? AND sequence BETWEEN ? AND ?)",
        (project_id, low, high),
    ).fetchone()
    return bool(row[0])


def count_project_events(conn: sqlite3.Connection, project_id: str) -> int:
    row = conn.execute("SELECT count(*) FROM events WHERE project_id = ?", (project_id,))
    return int(row.fetchone()[0])


def event_rows_after_any_project(
    conn: sqlite3.Connection, after: int, count: int
) -> list[sqlite3.Row]:
    """Up to `count` events of every project after sequence `after`, oldest first."""
    return conn.execute(
        "SELECT * FROM events WHERE sequence > ? ORDER BY sequence LIMIT ?", (after, count)
    ).fetchall()


def last_event_sequence(conn: sqlite3.Connection) -> int:
    """The newest event's sequence (0 for an empty log)."""
    return int(conn.execute("SELECT coalesce(max(sequence), 0) FROM events").fetchone()[0])
