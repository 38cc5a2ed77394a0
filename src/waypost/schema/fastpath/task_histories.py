"""A task's pages on the fast path: its revisions, checkpoints, submissions
and the decisions that ever affected it.

Each resolver reads one page per task for every task of a level at once,
with the DataLoaders' own batch reads (`task_reads.history_pages`,
`by_task.pages_sync`: one statement per distinct page asked), and the
lists' counts in one batch too, only when some `totalCount` is read. Off
this path, a dashboard's page of tasks with their recent revisions and
decisions paid graphql-core's per-field execution for every revision and
every decision (docs/graphql.md, "The fast path").
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from waypost.pagination import Page
from waypost.resolvers.decisions import by_task
from waypost.resolvers.tasks import reads as task_reads
from waypost.schema.fastpath.positions import PageKey, position_pages
from waypost.schema.fastpath.reads import ConnectionValue, Json, Reads
from waypost.schema.relay import check_cursor, window

CountAll = Callable[[sqlite3.Connection, Sequence[str]], dict[str, int]]


def _counted_together(task_ids: list[str], count_all: CountAll) -> list[Callable[[Reads], int]]:
    """One count per task, all read in one statement the first time any is
    asked (each task's connection counts alone on the normal path, batched by
    its DataLoader)."""
    found: dict[str, int] = {}

    def count(task_id: str) -> Callable[[Reads], int]:
        def read(r: Reads) -> int:
            if not found:
                found.update(count_all(r.conn, list(dict.fromkeys(task_ids))))
            return found[task_id]

        return read

    return [count(i) for i in task_ids]


def history(kind: task_reads.History) -> Callable[[Reads, list[Any], dict[str, Any]], list[Any]]:
    """`Task.checkpoints` and `Task.submissions`, as `tasks.load_history` pages
    them (either direction)."""

    def resolve(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
        w = window(a.get("first"), a.get("after"), a.get("last"), a.get("before"))
        check_cursor(w, int)
        ids = [p["id"] for p in parents]
        keys = [(i, w.limit, w.cursor, w.backward) for i in ids]
        pages = task_reads.history_pages(r.conn, kind, list(dict.fromkeys(keys)))

        def count_all(conn: sqlite3.Connection, task_ids: Sequence[str]) -> dict[str, int]:
            return task_reads.count_histories(conn, kind, task_ids)

        totals = _counted_together(ids, count_all)
        return [ConnectionValue.of(pages[k], total) for k, total in zip(keys, totals, strict=True)]

    return resolve


def _revision_pages(r: Reads, keys: Sequence[PageKey]) -> dict[PageKey, Page[Json]]:
    found = task_reads.history_pages(
        r.conn, task_reads.REVISIONS, [(i, limit, cursor, False) for i, cursor, limit in keys]
    )
    return {(i, cursor, limit): found[(i, limit, cursor, False)] for i, cursor, limit in keys}


def revisions(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Task.revisions`, numbered 1..n, n the task's `revision` (their count),
    in either direction (`positions.py`)."""
    return position_pages(r, parents, a, _revision_pages)


def decisions(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Task.decisions`: every decision that ever affected the task, newest
    first, either direction, as the resolver pages it (`by_task.pages_sync`)."""
    w = window(a.get("first"), a.get("after"), a.get("last"), a.get("before"))
    check_cursor(w, str, str)
    ids = [p["id"] for p in parents]
    keys = [(i, w.limit, w.cursor, w.backward) for i in ids]
    pages = by_task.pages_sync(r.conn, list(dict.fromkeys(keys)), r.now_at)
    totals = _counted_together(ids, by_task.counts_sync)
    return [ConnectionValue.of(pages[k], total) for k, total in zip(keys, totals, strict=True)]
