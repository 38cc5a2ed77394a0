"""The lists' `q` filter: how a task or knowledge list keeps the rows that
match a full-text query, without ranking (a list keeps its own order and
cursor). Escaping and the time limit are search.py's."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from waypost.resolvers.context.search import text_only

# Up to this many rows matching a list's `q`, a page starts from the
# matches (each read by rowid, then ordered for the page); with more, the
# list walks its own index in list order and keeps the matching rows, which
# stops after a page. A rare term made the walk cover the whole project: 8.5
# ms a page at 50,000 tasks or records (scaleaudit2, 2026-12-03).
FEW_MATCHES = 1000


@dataclass(frozen=True)
class ListMatch:
    """How a list keeps the rows matching its `q` (each term binds the FTS5
    query once): `walk_term`, a WHERE term that keeps them in any walk;
    `source`, a FROM clause that starts from them instead of the list's own
    walk (None when they are many), whose own WHERE term is `source_term`."""

    walk_term: str
    bound: str  # what the statement binds as the query (its text columns alone)
    source: str | None = None
    source_term: str = ""


def list_match(
    conn: sqlite3.Connection, table: str, alias: str, match: str, param: str
) -> ListMatch:
    """The lists' `q` filter over `table` (aliased `alias`) for the FTS5
    query `match` (already escaped); the statement binds `bound` as `param`:
    no ranking, a list keeps its own order and cursor. The matches are
    counted first, up to FEW_MATCHES + 1, in every project (the index holds
    them all)."""
    assert table in ("tasks", "knowledge")
    index = f"{table}_fts"
    bound = text_only(match)
    # `+` keeps the rowid from driving the plan: on a file with planner
    # statistics SQLite gathered every match by rowid and sorted them for a
    # page (330 ms for `the` at 100,000 records, against 13 ms walking the
    # list's index; scaleaudit); without statistics it walked already
    walk_term = f"+{alias}.rowid IN (SELECT rowid FROM {index} WHERE {index} MATCH {param})"
    found = conn.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM {index} WHERE {index} MATCH ? LIMIT ?)",
        (bound, FEW_MATCHES + 1),
    ).fetchone()[0]
    if found > FEW_MATCHES:
        return ListMatch(walk_term, bound)
    # CROSS JOIN keeps the index's matches the outer loop
    return ListMatch(
        walk_term,
        bound,
        f"{index} CROSS JOIN {table} {alias} ON {alias}.rowid = {index}.rowid",
        f"{index} MATCH {param}",
    )
