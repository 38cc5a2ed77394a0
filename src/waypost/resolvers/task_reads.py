"""Reading tasks: get, lists, revision history, and the batch reads behind the
GraphQL DataLoaders (tasks by id, activities by subject, revision pages by
task), each a constant number of statements for any number of keys."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from waypost.pagination import Page, check_limit, decode_cursor, encode_cursor
from waypost.resolvers.projects import require_project
from waypost.resolvers.readiness import STATE_READY_SQL, ids_param, readiness
from waypost.resolvers.runtime import Runtime
from waypost.resolvers.tasks import (
    present_tasks,
    require_task,
    revision_json,
    task_json,
    tasks_by_ids,
)

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
) -> Page[dict[str, Any]]:
    """Tasks in creation order (`created_at`, then `id`), optionally filtered.

    `ready` is decided by the readiness predicate: SQL narrows the candidates,
    the decision gate decides the rest, so a page may scan more rows than it
    returns; it keeps scanning until it has `limit + 1` matches or runs out.
    """
    size = check_limit(limit)
    require_project(conn, project_id)
    created, last_id = "", ""
    if cursor is not None:
        parts = decode_cursor(cursor, str, str)
        created, last_id = str(parts[0]), str(parts[1])
    where = ["t.project_id = ?"]
    params: list[Any] = [project_id]
    if status is not None:
        where.append("t.status = ?")
        params.append(status)
    if ready is True:
        where.append(STATE_READY_SQL)
    sql = (
        f"SELECT t.* FROM tasks t WHERE {' AND '.join(where)}"
        " AND (t.created_at > ? OR (t.created_at = ? AND t.id > ?))"
        " ORDER BY t.created_at, t.id LIMIT ?"
    )
    matches: list[sqlite3.Row] = []
    while len(matches) <= size:
        rows = conn.execute(sql, (*params, created, created, last_id, size + 1)).fetchall()
        if ready is None:
            matches.extend(rows)
        else:
            found = readiness(conn, project_id, rows, now)
            matches.extend(r for r in rows if found[r["id"]].ready == ready)
        if len(rows) <= size:
            break
        created, last_id = rows[-1]["created_at"], rows[-1]["id"]
    page = Page.from_rows(matches, size, lambda r: encode_cursor(r["created_at"], r["id"]))
    return Page(present_tasks(conn, project_id, page.items, now), page.cursors, page.has_next)


async def list_tasks(
    rt: Runtime,
    project_id: str,
    *,
    status: str | None = None,
    ready: bool | None = None,
    cursor: str | None = None,
    limit: int | None = None,
) -> Page[dict[str, Any]]:
    now = rt.now()
    return await rt.db.read(
        lambda conn: list_tasks_sync(
            conn, project_id, now, status=status, ready=ready, cursor=cursor, limit=limit
        )
    )


def revision_cursor(cursor: str | None) -> int:
    """The revision a history page starts below (cursor of the last item seen)."""
    return int(str(decode_cursor(cursor, int)[0])) if cursor else NO_CURSOR


def revisions_sync(
    conn: sqlite3.Connection, project_id: str, task_id: str, cursor: str | None, limit: int | None
) -> Page[dict[str, Any]]:
    size = check_limit(limit)
    require_project(conn, project_id)
    require_task(conn, project_id, task_id)
    before = revision_cursor(cursor)
    rows = conn.execute(
        "SELECT * FROM task_revisions WHERE task_id = ? AND revision < ?"
        " ORDER BY revision DESC LIMIT ?",
        (task_id, before, size + 1),
    ).fetchall()
    page = Page.from_rows(rows, size, lambda r: encode_cursor(r["revision"]))
    return Page([revision_json(r) for r in page.items], page.cursors, page.has_next)


async def revisions(
    rt: Runtime, project_id: str, task_id: str, cursor: str | None, limit: int | None
) -> Page[dict[str, Any]]:
    return await rt.db.read(lambda conn: revisions_sync(conn, project_id, task_id, cursor, limit))


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
    return _present_grouped(conn, list(tasks_by_ids(conn, list(task_ids)).values()), now)


def activities_json(
    conn: sqlite3.Connection, subject_ids: Sequence[str], now: datetime
) -> dict[str, list[dict[str, Any]]]:
    """For each subject task, its activities (tasks naming it as subject), oldest first."""
    rows = conn.execute(
        "SELECT * FROM tasks WHERE subject_task_id IN (SELECT value FROM json_each(?))"
        " ORDER BY created_at, id",
        (ids_param(subject_ids),),
    ).fetchall()
    shaped = _present_grouped(conn, rows, now)
    result: dict[str, list[dict[str, Any]]] = {subject: [] for subject in subject_ids}
    for row in rows:
        result[row["subject_task_id"]].append(shaped[row["id"]])
    return result


RevisionKey = tuple[str, int, str | None]  # (task id, limit, cursor)


def revision_pages(
    conn: sqlite3.Connection, keys: Sequence[RevisionKey]
) -> dict[RevisionKey, Page[dict[str, Any]]]:
    """Revision pages (newest first) for many tasks: one statement per distinct
    (limit, cursor) pair, which is one for a list asking the same page of each."""
    groups: dict[tuple[int, int], list[RevisionKey]] = {}
    for key in keys:
        groups.setdefault((key[1], revision_cursor(key[2])), []).append(key)
    result: dict[RevisionKey, Page[dict[str, Any]]] = {}
    for (size, before), members in groups.items():
        rows = conn.execute(
            "SELECT * FROM (SELECT r.*, ROW_NUMBER() OVER"
            " (PARTITION BY r.task_id ORDER BY r.revision DESC) AS n"
            " FROM task_revisions r WHERE r.task_id IN (SELECT value FROM json_each(?))"
            " AND r.revision < ?) WHERE n <= ? ORDER BY task_id, revision DESC",
            (ids_param(sorted({k[0] for k in members})), before, size + 1),
        ).fetchall()
        by_task: dict[str, list[sqlite3.Row]] = {}
        for row in rows:
            by_task.setdefault(row["task_id"], []).append(row)
        for key in members:
            page = Page.from_rows(
                by_task.get(key[0], []), size, lambda r: encode_cursor(r["revision"])
            )
            result[key] = Page([revision_json(r) for r in page.items], page.cursors, page.has_next)
    return result
