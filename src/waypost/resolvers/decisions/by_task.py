"""Every decision that ever affected a task (any generation), newest first.

Behind GraphQL's `Task.decisions`: a page of tasks asking for their decisions
costs one statement per distinct (limit, cursor, direction), whatever the
number of tasks, plus the one batch read of the decision objects.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from waypost.pagination import Page, check_limit, decode_cursor, encode_cursor
from waypost.resolvers.decisions import lists_store
from waypost.resolvers.decisions.views import load_decisions

# (task id, limit, cursor, backward)
ByTaskKey = tuple[str, int, str | None, bool]
# above every stored (created_at, id): the start of a walk in either direction
_TOP = ("\uffff", "")


def pages_sync(
    conn: sqlite3.Connection, keys: Sequence[ByTaskKey], now_at: str
) -> dict[ByTaskKey, Page[dict[str, Any]]]:
    groups: dict[tuple[int, str | None, bool], list[str]] = {}
    for task_id, limit, cursor, backward in keys:
        groups.setdefault((check_limit(limit), cursor, backward), []).append(task_id)
    rows_by_key: dict[ByTaskKey, list[sqlite3.Row]] = {}
    for (size, cursor, backward), task_ids in groups.items():
        if cursor:
            at, last = decode_cursor(cursor, str, str, field_name="before" if backward else "after")
        else:
            at, last = ("", "") if backward else _TOP
        start = (str(at), str(last))
        rows = lists_store.by_task_rows(conn, task_ids, start, size + 1, backward)
        for row in rows:
            rows_by_key.setdefault((row["task_id"], size, cursor, backward), []).append(row)
    found = load_decisions(
        conn, sorted({r["id"] for rows in rows_by_key.values() for r in rows}), now_at
    )
    result: dict[ByTaskKey, Page[dict[str, Any]]] = {}
    for key in keys:
        task_id, limit, cursor, backward = key
        size = check_limit(limit)
        page = Page.from_rows(
            rows_by_key.get((task_id, size, cursor, backward), []),
            size,
            lambda r: encode_cursor(r["created_at"], r["id"]),
            backward=backward,
            cursor=cursor,
        )
        result[key] = page.with_items([found[r["id"]] for r in page.items])
    return result


def counts_sync(conn: sqlite3.Connection, task_ids: Sequence[str]) -> dict[str, int]:
    """How many decisions ever affected each task (`Task.decisions.totalCount`)."""
    found = lists_store.counts_by_task(conn, task_ids)
    return {i: found.get(i, 0) for i in task_ids}
