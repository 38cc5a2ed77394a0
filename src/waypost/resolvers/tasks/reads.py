"""Reading tasks: get, lists, histories (revisions, checkpoints, submissions),
and the batch reads behind the GraphQL DataLoaders (tasks by id, activities by
subject, history pages by task), each a constant number of statements for any
number of keys."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from waypost.pagination import Page, check_limit, decode_cursor, encode_cursor
from waypost.resolvers.context.search import filtered_read, fts_query
from waypost.resolvers.projects.operations import require_project
from waypost.resolvers.tasks import store
from waypost.resolvers.tasks.operations import require_task
from waypost.resolvers.tasks.readiness import ready_params
from waypost.resolvers.tasks.views import (
    checkpoint_json,
    present_tasks,
    revision_json,
    submission_json,
    task_json,
)
from waypost.runtime import Runtime

NO_CURSOR = 2**62


async def get(rt: Runtime, project_id: str, task_id: str) -> dict[str, Any]:
    now = rt.now()

    def read(conn: sqlite3.Connection) -> dict[str, Any]:
        require_project(conn, project_id)
        return task_json(conn, require_task(conn, project_id, task_id), now)

    return await rt.db.read(read)


def list_tasks_sync(
    conn: sqlite3.Connection,
    project_id: str,
    now: datetime,
    *,
    status: str | None = None,
    ready: bool | None = None,
    cursor: str | None = None,
    limit: int | None = None,
    q: str | None = None,
    backward: bool = False,
) -> Page[dict[str, Any]]:
    """Tasks in creation order (`created_at`, then `id`), optionally filtered.

    `ready` is the readiness predicate in SQL (`ready_store.READY_SQL`), so a page reads
    `limit + 1` rows whatever blocked work lies between them. The task JSON
    computes readiness again in Python; a row whose `ready` disagrees with the
    filter is left out rather than shown under the wrong filter (the page may
    then be short, its cursor still right).
    """
    size = check_limit(limit)
    require_project(conn, project_id)
    after = None
    if cursor:
        parts = decode_cursor(cursor, str, str)
        after = (str(parts[0]), str(parts[1]))
    params = ready_params(project_id, now) if ready is not None else None
    rows = store.list_rows(
        conn,
        project_id,
        after,
        size + 1,
        status=status,
        match=None if q is None else fts_query(q),
        ready=ready,
        ready_params=params,
        backward=backward,
    )
    page = Page.from_rows(
        rows,
        size,
        lambda r: encode_cursor(r["created_at"], r["id"]),
        backward=backward,
        cursor=cursor,
    )
    items = present_tasks(conn, project_id, page.items, now)
    if ready is None:
        return page.with_items(items)
    kept = [(t, c) for t, c in zip(items, page.cursors, strict=True) if t["ready"] is ready]
    return Page([t for t, _ in kept], [c for _, c in kept], page.has_next, page.has_previous)


def count_tasks_sync(
    conn: sqlite3.Connection,
    project_id: str,
    now: datetime,
    *,
    status: str | None = None,
    ready: bool | None = None,
    q: str | None = None,
) -> int:
    """How many tasks a list with these filters holds (GraphQL `totalCount`)."""
    return store.count_rows(
        conn,
        project_id,
        status=status,
        match=None if q is None else fts_query(q),
        ready=ready,
        ready_params=ready_params(project_id, now) if ready is not None else None,
    )


async def list_tasks(
    rt: Runtime,
    project_id: str,
    *,
    status: str | None = None,
    ready: bool | None = None,
    cursor: str | None = None,
    limit: int | None = None,
    q: str | None = None,
    backward: bool = False,
) -> Page[dict[str, Any]]:
    now = rt.now()

    def read(conn: sqlite3.Connection) -> Page[dict[str, Any]]:
        return list_tasks_sync(
            conn,
            project_id,
            now,
            status=status,
            ready=ready,
            cursor=cursor,
            limit=limit,
            q=q,
            backward=backward,
        )

    return await (rt.db.read(read) if q is None else filtered_read(rt, read))


async def count_tasks(
    rt: Runtime,
    project_id: str,
    *,
    status: str | None = None,
    ready: bool | None = None,
    q: str | None = None,
) -> int:
    now = rt.now()

    def read(conn: sqlite3.Connection) -> int:
        return count_tasks_sync(conn, project_id, now, status=status, ready=ready, q=q)

    return await (rt.db.read(read) if q is None else filtered_read(rt, read))


@dataclass(frozen=True)
class History:
    """An append-only table of a task's history, read newest first in pages."""

    table: str  # a page walks down its position (store.HISTORY_POSITIONS)
    shape: Callable[[sqlite3.Row], dict[str, Any]]


REVISIONS = History("task_revisions", revision_json)
CHECKPOINTS = History("task_checkpoints", checkpoint_json)
SUBMISSIONS = History("submissions", submission_json)
HistoryKey = tuple[str, int, str | None, bool]  # (task id, limit, cursor, backward)


def history_pages(
    conn: sqlite3.Connection, history: History, keys: Sequence[HistoryKey]
) -> dict[HistoryKey, Page[dict[str, Any]]]:
    """Pages of one history for many tasks: one statement per distinct
    (limit, cursor, direction), which is one for a list asking the same page of
    each. Backward pages (GraphQL `last`) walk toward the newest."""
    groups: dict[tuple[int, int, bool], list[HistoryKey]] = {}
    for key in keys:
        backward = key[3]
        start = 0 if backward else NO_CURSOR
        if key[2]:
            start = int(str(decode_cursor(key[2], int)[0]))
        groups.setdefault((key[1], start, backward), []).append(key)
    result: dict[HistoryKey, Page[dict[str, Any]]] = {}
    for (size, start, backward), members in groups.items():
        task_ids = [k[0] for k in members]
        rows = store.history_rows(conn, history.table, task_ids, start, size + 1, backward)
        by_task: dict[str, list[sqlite3.Row]] = {}
        for row in rows:
            by_task.setdefault(row["task_id"], []).append(row)
        for key in members:
            page = Page.from_rows(
                by_task.get(key[0], []),
                size,
                lambda r: encode_cursor(r["position"]),
                backward=backward,
                cursor=key[2],
            )
            result[key] = page.with_items([history.shape(r) for r in page.items])
    return result


def count_histories(
    conn: sqlite3.Connection, history: History, task_ids: Sequence[str]
) -> dict[str, int]:
    """How many records of one history each task has (GraphQL `totalCount`)."""
    return store.history_counts(conn, history.table, task_ids)


def history_page(
    conn: sqlite3.Connection,
    history: History,
    project_id: str,
    task_id: str,
    cursor: str | None,
    limit: int | None,
) -> Page[dict[str, Any]]:
    key = (task_id, check_limit(limit), cursor, False)
    require_project(conn, project_id)
    require_task(conn, project_id, task_id)
    return history_pages(conn, history, [key])[key]


async def history_of(
    rt: Runtime,
    history: History,
    project_id: str,
    task_id: str,
    cursor: str | None,
    limit: int | None,
) -> Page[dict[str, Any]]:
    """A page of a task's revisions, checkpoints or submissions, newest first."""
    return await rt.db.read(
        lambda conn: history_page(conn, history, project_id, task_id, cursor, limit)
    )


# ---------------------------------------------------------------- batch reads


def _present_grouped(
    conn: sqlite3.Connection, rows: Sequence[sqlite3.Row], now: datetime
) -> dict[str, dict[str, Any]]:
    """Task JSON by id for rows of any projects (one batch per project)."""
    by_project: dict[str, list[sqlite3.Row]] = {}
    for row in rows:
        by_project.setdefault(row["project_id"], []).append(row)
    found: dict[str, dict[str, Any]] = {}
    for project_id, group in by_project.items():
        for task in present_tasks(conn, project_id, group, now):
            found[task["id"]] = task
    return found


def tasks_json_by_ids(
    conn: sqlite3.Connection, task_ids: Sequence[str], now: datetime
) -> dict[str, dict[str, Any]]:
    """Task JSON for each id that names a task (any project)."""
    rows = store.task_rows_by_ids(conn, list(task_ids))
    return _present_grouped(conn, list(rows.values()), now)


def submissions_json_by_ids(
    conn: sqlite3.Connection, ids: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Submission JSON for each id that names one (any project): what a
    knowledge record's provenance refers to."""
    return {row["id"]: submission_json(row) for row in store.submission_rows_by_ids(conn, ids)}


def activities_json(
    conn: sqlite3.Connection, subject_ids: Sequence[str], now: datetime
) -> dict[str, list[dict[str, Any]]]:
    """For each subject task, its activities (tasks naming it as subject), oldest first."""
    rows = store.activity_rows(conn, subject_ids)
    shaped = _present_grouped(conn, rows, now)
    result: dict[str, list[dict[str, Any]]] = {subject: [] for subject in subject_ids}
    for row in rows:
        result[row["subject_task_id"]].append(shaped[row["id"]])
    return result
