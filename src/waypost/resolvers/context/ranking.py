"""The ranked search of the packet: the best matches of each table, ranking less.

Ranking is what costs: BM25 for one matching row takes about 40 times as
long as finding it, and a common word matches most rows. There are two
exact ways to get a table's best `count` rows that pass the project and
scope filters, and each is cheap where the other is not:

- **window first** (the usual case): rank every match from the index
  alone and keep the best `WINDOW_FACTOR * count` of them in a bounded
  sorter, then read only those rows from the content table to apply the
  filters. It never reads the content row of a match that is not near the
  top. Any row outside the window ranks at least as badly as the window's
  worst, so the passing rows ranked strictly better than that edge are
  exactly the best passing rows of the whole table; when `count` of them
  are there, the answer is exact.
- **filter first** (the fallback): read the content row of every match,
  filter, and rank only the rows that pass, which is cheaper when most
  matches belong to other projects or scopes. It runs only when the window
  held fewer than `count` passing rows strictly inside its edge.

Both rank with `bm25(table)`, FTS5's default `rank` function called by
name: the same value, but ordered by SQLite's bounded sorter, which keeps
only the window, where FTS5's own `ORDER BY rank` sorts every match before
the LIMIT applies (0.6-0.7x the time of that canonical query at p90 on the
bench corpus; see docs/context.md). Ties are broken by the item id, then
its type, as before, so the order is the one the single UNION ALL query
gave: tests compare the two on seeded files.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from waypost.resolvers.context.search import SCOPE_SQL, Scope

# How many ranked matches per wanted row the window looks at. The bounded
# sorter makes a wide window almost free (the cost is ranking, not keeping);
# the content rows read are `WINDOW_FACTOR * count` at most. 8 leaves room
# for a scope filter that drops most general-purpose rows before the
# fallback has to run.
WINDOW_FACTOR = 8


@dataclass(frozen=True)
class Hit:
    type: str  # "task" | "knowledge"
    id: str
    rank: float


@dataclass(frozen=True)
class _Table:
    """How one FTS5 index is searched: its type name and its two statements."""

    type: str
    window_sql: str  # (id, rank, passes) of the best `:w` matches, any order
    filtered_sql: str  # (id, rank) of the best `:n` passing matches, in order


def _table(kind: str, content: str, alias: str, passes: str) -> _Table:
    fts = f"{content}_fts"
    return _Table(
        type=kind,
        window_sql=(
            f"WITH w AS (SELECT rowid AS rid, bm25({fts}) AS rank FROM {fts}"
            f" WHERE {fts} MATCH :match ORDER BY rank LIMIT :w)"
            f" SELECT {alias}.id AS id, w.rank AS rank, ({passes}) AS passes"
            f" FROM w JOIN {content} {alias} ON {alias}.rowid = w.rid"
        ),
        filtered_sql=(
            f"SELECT {alias}.id AS id, bm25({fts}) AS rank"
            f" FROM {fts} JOIN {content} {alias} ON {alias}.rowid = {fts}.rowid"
            f" WHERE {fts} MATCH :match AND {passes} ORDER BY rank, id LIMIT :n"
        ),
    )


_TASKS = _table("task", "tasks", "t", "t.project_id = :project")
_OWN = "k.project_id = :project"
_KNOWLEDGE = _table("knowledge", "knowledge", "k", f"{_OWN} AND {SCOPE_SQL}")
_KNOWLEDGE_SHARED = _table(
    "knowledge", "knowledge", "k", f"({_OWN} OR k.collection = 'shared') AND {SCOPE_SQL}"
)


def _best(conn: sqlite3.Connection, table: _Table, params: dict[str, Any], count: int) -> list[Hit]:
    """The best `count` passing rows of one table, best first (rank, then id)."""
    window = WINDOW_FACTOR * count
    rows = conn.execute(table.window_sql, {**params, "w": window}).fetchall()
    passing = [(r["rank"], r["id"]) for r in rows if r["passes"]]
    if len(rows) == window:
        # The window may have cut through a run of equal ranks at its edge:
        # only rows strictly better than the edge are known to be the best.
        edge = max(r["rank"] for r in rows)
        passing = [p for p in passing if p[0] < edge]
        if len(passing) < count:
            found = conn.execute(table.filtered_sql, {**params, "n": count}).fetchall()
            return [Hit(table.type, r["id"], r["rank"]) for r in found]
    passing.sort()
    return [Hit(table.type, item_id, rank) for rank, item_id in passing[:count]]


def ranked(
    conn: sqlite3.Connection,
    project_id: str,
    match: str,
    scope: Scope,
    include_shared: bool,
    count: int,
) -> list[Hit]:
    """The best `count` task and knowledge matches, best first.

    Tasks of the project and knowledge of the project (plus records shared by
    other projects when asked) that pass the scope filters. Both tables are
    ranked by the same BM25 function over their own statistics; the best
    `count` of each are merged by (rank, id, type), which is the order and
    the cut of one ORDER BY over both.
    """
    params: dict[str, Any] = {
        "match": match,
        "project": project_id,
        "task_id": scope.task_id,
        "component": scope.component,
        "environment": scope.environment,
        "version": scope.version,
    }
    knowledge = _KNOWLEDGE_SHARED if include_shared else _KNOWLEDGE
    hits = [*_best(conn, _TASKS, params, count), *_best(conn, knowledge, params, count)]
    hits.sort(key=lambda h: (h.rank, h.id, h.type))
    return hits[:count]
