"""The ranked search of the packet (its SQL and how it runs): the best matches
of each table, ranking less.

Ranking is what costs: BM25 for one matching row takes about 40 times as
long as finding it, and a common word matches most rows. There are two
exact ways to get a table's best `count` rows that pass the project and
scope filters, and each is cheap where the other is not:

- **window first** (the usual case): rank every match from the index
  alone and keep the best `WINDOW_FACTOR * count` of them in a bounded
  sorter, best first. Then read the content rows of that window, best
  first and in two steps (the first `FIRST_READ * count` rows, then the
  rest only if needed), to apply the filters. It never reads the content
  row of a match that is not near the top, and usually reads three eighths
  of the window: at a million records each content row read is a page of a
  large file that is rarely in any cache. Any row after the rows read
  ranks at least as badly as the first row not read (or the window's
  worst), so the passing rows ranked strictly better than that boundary
  are exactly the best passing rows of the whole table; when `count` of
  them are there, the answer is exact.
- **filter first** (the fallback): read the content row of every match,
  filter, and rank only the rows that pass, which is cheaper when most
  matches belong to other projects or scopes. It runs only when the whole
  window held fewer than `count` passing rows strictly inside its edge.

Either way, a project that holds at most half of a table's rows
(counted by migration 0041's triggers), whose search text matches enough
rows for it to pay (`_owned_pays`), is searched for its own rows alone: the
query also asks for its owner word
(migration 0039), so FTS5 finds and ranks no other project's matches (200
of another project's rows matching `cache` were each ranked for a project
of ten). The rows and ranks are the same to the bit; only the work differs.

Both rank with `bm25(table, 1, ..., 0)`, FTS5's default `rank` function
called by name with the owner column weighing nothing: the same value, but
ordered by SQLite's bounded sorter, which keeps only the window, where
FTS5's own `ORDER BY rank` sorts every match before the LIMIT applies
(0.6-0.7x the time of that canonical query at p90 on the bench corpus;
see docs/context.md). Ties are broken by the item id, then
its type, as before, so the order is the one the single UNION ALL query
gave: tests compare the two on seeded files.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass
from typing import Any

from waypost.resolvers.context.search import SCOPE_SQL, Scope, owned, text_only

# How many ranked matches per wanted row the window looks at. The bounded
# sorter makes a wide window almost free (the cost is ranking, not keeping);
# the content rows read are `WINDOW_FACTOR * count` at most. 8 leaves room
# for a scope filter that drops most general-purpose rows before the
# fallback has to run.
WINDOW_FACTOR = 8
# How many content rows per wanted row the first read takes. About half of
# a project's records are general (no scope), so 3 per wanted row usually
# holds `count` passing rows strictly inside the boundary; a narrower first
# read would often need the second.
FIRST_READ = 3


@dataclass(frozen=True)
class Hit:
    type: str  # "task" | "knowledge"
    id: str
    rank: float


@dataclass(frozen=True)
class _Table:
    """How one FTS5 index is searched: its type name and its three statements."""

    type: str
    content: str  # the table of its rows
    window_sql: str  # (rid, rank) of the best `:w` matches, best first
    passes_sql: str  # (rid, id, passes) of the content rows whose rowids are in `:rids`
    filtered_sql: str  # (id, rank) of the best `:n` passing matches, in order


def _table(kind: str, content: str, alias: str, passes: str, text_columns: int) -> _Table:
    fts = f"{content}_fts"
    # BM25 over the text columns: the owner column (migration 0039) weighs
    # nothing, so its words, which only an owned query asks for, add nothing
    bm25 = f"bm25({fts}, {', '.join(['1'] * text_columns)}, 0)"
    return _Table(
        type=kind,
        content=content,
        window_sql=(
            f"SELECT rowid AS rid, {bm25} AS rank FROM {fts}"
            f" WHERE {fts} MATCH :match ORDER BY rank LIMIT :w"
        ),
        passes_sql=(
            f"SELECT {alias}.rowid AS rid, {alias}.id AS id, ({passes}) AS passes"
            f" FROM {content} {alias} WHERE {alias}.rowid IN (SELECT value FROM json_each(:rids))"
        ),
        filtered_sql=(
            f"SELECT {alias}.id AS id, {bm25} AS rank"
            f" FROM {fts} JOIN {content} {alias} ON {alias}.rowid = {fts}.rowid"
            f" WHERE {fts} MATCH :match AND {passes} ORDER BY rank, id LIMIT :n"
        ),
    )


_TASKS = _table("task", "tasks", "t", "t.project_id = :project", 3)
_OWN = "k.project_id = :project"
_KNOWLEDGE = _table("knowledge", "knowledge", "k", f"{_OWN} AND {SCOPE_SQL}", 4)
_KNOWLEDGE_SHARED = _table(
    "knowledge", "knowledge", "k", f"({_OWN} OR k.collection = 'shared') AND {SCOPE_SQL}", 4
)

# A project whose rows (with the shared records, when asked for) are at
# most half of a table's may have its own matches asked for (`owned`),
# which FTS5 finds by the owner word before ranking any. Past half, walking
# the owner word's entries cost more than ranking the other projects'
# matches: on a 53,000-row file of 60 common words, 60 queries of 1-3
# words, the median of a table's search for a project holding 6% of it was
# 10-12 ms owned against 96-123 ms over the whole index; a half, 102-156
# against 130-206; 94%, 130-269 against 118-196 (docs/context.md, "Ranking
# less").
OWNED_SHARE = 2  # (a half)
# BM25 counts the rows of every phrase of its query to weigh it, the owner
# word's too (its weight 0 spares its score, not its count), so asking for a
# project's rows walks all of its entries on every search: 12.5 ms for
# 50,000 tasks, where a rare word's dozen matches over the whole index were
# ranked in 0.13 ms (tenantsjourney). A match over the whole index costs
# about this many times what walking one entry does (ranking it, and reading
# its row to filter it: a page of a large file that is rarely cached), so
# the owner word pays only when the text matches more rows of other projects
# than the project holds, over it. Where the two searches took as long, on
# a 200,000-row file of 28 projects: about 25 matches for a project of
# 2,500 tasks, about 120 for 8,333 (docs/context.md, "Ranking less").
MATCH_TO_WALK = 100


def _owned_pays(
    conn: sqlite3.Connection,
    table: _Table,
    project_id: str,
    include_shared: bool,
    text_match: str,
) -> bool:
    """Whether asking for the project's rows alone (and the shared ones when
    asked for) costs less than ranking the text's matches over the whole
    table: the rows the search may keep are few beside the table's (one
    probe of the counts the triggers of migration 0041 keep), and the text
    matches enough rows to rank for the owner word's walk to pay (a count of
    them, stopped there)."""
    shared = "*shared" if include_shared else project_id  # (IN is a set)
    kept, total = conn.execute(
        "SELECT coalesce(sum(row_count) FILTER (WHERE owner <> '*'), 0),"
        " coalesce(sum(row_count) FILTER (WHERE owner = '*'), 0)"
        " FROM search_owner_rows WHERE content = ? AND owner IN ('*', ?, ?)",
        (table.content, project_id, shared),
    ).fetchone()
    # the project's shared records, counted twice, only make it cautious;
    # a file of one project's rows has nothing to leave out
    if not (kept < total and kept * OWNED_SHARE <= total):
        return False
    # matches * (others / total) * MATCH_TO_WALK > kept: the others' matches
    # ranked for nothing cost more than the walk
    enough = kept * total // ((total - kept) * MATCH_TO_WALK)
    if enough == 0:
        return True  # a walk of a few entries
    fts = f"{table.content}_fts"
    found = conn.execute(
        f"SELECT count(*) FROM (SELECT rowid FROM {fts} WHERE {fts} MATCH ? LIMIT ?)",
        (text_match, enough + 1),
    ).fetchone()[0]
    return bool(found > enough)


def _hits(table: _Table, found: list[tuple[float, str]]) -> list[Hit]:
    return [Hit(table.type, item_id, rank) for rank, item_id in found]


def _best(conn: sqlite3.Connection, table: _Table, params: dict[str, Any], count: int) -> list[Hit]:
    """The best `count` passing rows of one table, best first (rank, then id)."""
    window = WINDOW_FACTOR * count
    ranked_rows = conn.execute(table.window_sql, {**params, "w": window}).fetchall()
    full = len(ranked_rows) == window
    passing: list[tuple[float, str]] = []
    read = 0
    for upto in sorted({min(FIRST_READ * count, len(ranked_rows)), len(ranked_rows)}):
        step = ranked_rows[read:upto]
        rids = json.dumps([r["rid"] for r in step])
        content = (
            {r["rid"]: r for r in conn.execute(table.passes_sql, {**params, "rids": rids})}
            if step
            else {}
        )
        passing += [
            (r["rank"], content[r["rid"]]["id"])
            for r in step
            if r["rid"] in content and content[r["rid"]]["passes"]
        ]
        read = upto
        # Every row not read yet ranks no better than the first of them, and
        # every row outside a full window no better than its edge; a row
        # equal to that boundary may still lose its place on the id order.
        if read < len(ranked_rows):
            boundary = ranked_rows[read]["rank"]
        else:
            boundary = ranked_rows[-1]["rank"] if full else math.inf
        known = sorted(p for p in passing if p[0] < boundary)
        if len(known) >= count or boundary == math.inf:
            return _hits(table, known[:count])
    # The whole (full) window was read and held too few rows known to be the best
    found = conn.execute(table.filtered_sql, {**params, "n": count}).fetchall()
    return [Hit(table.type, r["id"], r["rank"]) for r in found]


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
    hits: list[Hit] = []
    text = text_only(match)
    for table, shared in ((_TASKS, False), (knowledge, include_shared)):
        pays = _owned_pays(conn, table, project_id, shared, text)
        asked = owned(match, project_id, shared) if pays else text
        hits += _best(conn, table, {**params, "match": asked}, count)
    hits.sort(key=lambda h: (h.rank, h.id, h.type))
    return hits[:count]
