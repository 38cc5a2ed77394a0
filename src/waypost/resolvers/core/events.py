"""The event log: one event per mutation, written in the mutation's transaction."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from waypost.pagination import Page, check_limit
from waypost.resolvers.core import store
from waypost.runtime import Runtime


def append(
    conn: sqlite3.Connection,
    *,
    project_id: str | None,
    type: str,
    subject_type: str,
    subject_id: str,
    actor_id: str | None,
    actor_session_id: str | None,
    at: str,
    data: dict[str, Any],
) -> int:
    """Append one event. `data` must never hold credentials or request headers."""
    return store.insert_event(
        conn,
        {
            "project_id": project_id,
            "type": type,
            "subject_type": subject_type,
            "subject_id": subject_id,
            "actor_id": actor_id,
            "actor_session_id": actor_session_id,
            "at": at,
            "data": data,
        },
    )


def event_json(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "sequence": row["sequence"],
        "project_id": row["project_id"],
        "type": row["type"],
        "subject_type": row["subject_type"],
        "subject_id": row["subject_id"],
        "actor_id": row["actor_id"],
        "actor_session_id": row["actor_session_id"],
        "at": row["at"],
        "data": json.loads(row["data"]),
    }


def list_events(
    conn: sqlite3.Connection, project_id: str, after: int | None, limit: int | None
) -> dict[str, Any]:
    """Events oldest first after `after`; `next_after` is where to poll from next."""
    size = check_limit(limit)
    start = after or 0
    rows = store.event_rows_after(conn, project_id, start, size)
    items = [event_json(r) for r in rows]
    return {"items": items, "next_after": items[-1]["sequence"] if items else start}


async def for_project(
    rt: Runtime, project_id: str, after: int | None, limit: int | None
) -> dict[str, Any]:
    from waypost.resolvers.projects.operations import require_project  # projects writes events

    def read(conn: sqlite3.Connection) -> dict[str, Any]:
        require_project(conn, project_id)
        return list_events(conn, project_id, after, limit)

    return await rt.db.read(read)


def events_before(
    conn: sqlite3.Connection, project_id: str, before: int | None, count: int
) -> list[dict[str, Any]]:
    """Up to `count` events just before sequence `before` (the newest when None),
    oldest first: GraphQL's backward paging (`last`/`before`)."""
    rows = store.event_rows_before(conn, project_id, 2**62 if before is None else before, count)
    return [event_json(r) for r in reversed(rows)]


def count_events(conn: sqlite3.Connection, project_id: str) -> int:
    return store.count_project_events(conn, project_id)


# above every sequence SQLite can hand out (an INTEGER PRIMARY KEY is 64 bits)
_TOP: Final = 2**63 - 1


def event_page(
    conn: sqlite3.Connection, project_id: str, start: int | None, limit: int, backward: bool
) -> Page[dict[str, Any]]:
    """GraphQL's page of the project's events, oldest first: `limit` after
    sequence `start` (or before it, `backward`). One extra event tells
    whether another page follows in the paging direction; whether one lies
    on the cursor's other side is asked of the log, because a cursor is a
    position, not an event of this project (sequences are shared by every
    project, and `after: "0"` names none): the project may have no event
    there at all."""
    if backward:
        found = events_before(conn, project_id, start, limit + 1)
        rows = found[-limit:]
        beyond = start is not None and store.project_has_event_between(
            conn, project_id, start, _TOP
        )
        return Page(rows, [str(i["sequence"]) for i in rows], beyond, len(found) > limit)
    found = [event_json(r) for r in store.event_rows_after(conn, project_id, start or 0, limit + 1)]
    rows = found[:limit]
    beyond = start is not None and store.project_has_event_between(conn, project_id, 0, start)
    return Page(rows, [str(i["sequence"]) for i in rows], len(found) > limit, beyond)


async def page_for_project(
    rt: Runtime, project_id: str, start: int | None, limit: int, backward: bool
) -> Page[dict[str, Any]]:
    return await rt.db.read(lambda conn: event_page(conn, project_id, start, limit, backward))


async def count_for_project(rt: Runtime, project_id: str) -> int:
    return await rt.db.read(lambda conn: count_events(conn, project_id))


def weighed_events_after(
    conn: sqlite3.Connection, after: int, count: int
) -> list[tuple[dict[str, Any], int]]:
    """Up to `count` events of every project after sequence `after`, oldest
    first, each with its weight (its data's stored JSON characters and its
    other fields'): what the live fan-out reads after each commit."""
    rows = store.event_rows_after_any_project(conn, after, count)
    return [(event_json(r), len(r["data"]) + _ENVELOPE) for r in rows]


# the characters of an event's fields but its data, about (ids, type, time)
_ENVELOPE = 200


def last_sequence(conn: sqlite3.Connection) -> int:
    """The newest event's sequence (0 for an empty log)."""
    return store.last_event_sequence(conn)


def subject_events(
    conn: sqlite3.Connection, project_id: str, after: int, subject_id: str, types: Sequence[str]
) -> list[dict[str, Any]]:
    """The project's events after `after` about `subject_id` of these types, oldest first."""
    rows = store.subject_event_rows(conn, project_id, after, subject_id, types)
    return [event_json(r) for r in rows]


def last_project_sequence(conn: sqlite3.Connection, project_id: str) -> int:
    """The project's newest event's sequence (0 for none)."""
    return store.last_project_sequence(conn, project_id)
