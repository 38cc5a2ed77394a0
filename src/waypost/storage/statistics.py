"""The query planner's statistics stay whole when a migration adds an index.

Waypost never runs `ANALYZE` itself, so most files have no `sqlite_stat1`
and SQLite plans every statement with its default estimates, which is what
the tests check (`tests/test_query_plans.py`). An operator (or a benchmark's
seeding, `PRAGMA optimize`) may have analyzed the file, though. An index
added by a later migration then has no statistics while the older ones do,
and SQLite weighs the two kinds of estimate against each other: on a file
analyzed before migration 0020, `knowledge_by_status (project_id, status,
...)` looked ten thousand times more selective for `project_id = ?` than
`knowledge_by_project`, and every unfiltered knowledge list (and, after 0021,
every task list) sorted the whole project for one page: 37 ms at 100,000
records instead of 0.3 (tasks: 2.3 ms at 10,000 instead of 0.24).

So when `migrate` applies a migration to a file that has statistics, every
table with an index left without them is analyzed, once, in the transaction
of the last migration it applies (a kill between the two cannot leave them
so). A file without statistics is left as it is.
"""

from __future__ import annotations

import logging
import sqlite3

log = logging.getLogger("waypost.storage")


def unanalyzed_tables(conn: sqlite3.Connection) -> list[str]:
    """Tables with an index `sqlite_stat1` has no row for, when the file has
    statistics at all. A `WITHOUT ROWID` table's primary key is the table
    itself (its row is under the table's name, and `sqlite_master` lists no
    index for it), so such a table without a row of its own is listed too.
    (An index with no entries never gets a row: its table is listed again
    at each migration, and analyzed again, which costs what it holds.)"""
    has_statistics = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_stat1'"
    ).fetchone()
    if has_statistics is None:
        return []
    rows = conn.execute(
        "SELECT DISTINCT tbl_name FROM sqlite_master WHERE type = 'index'"
        " AND name NOT IN (SELECT idx FROM sqlite_stat1 WHERE idx IS NOT NULL)"
        " UNION SELECT name FROM sqlite_master WHERE type = 'table'"
        " AND sql LIKE '%WITHOUT ROWID%'"
        " AND name NOT IN (SELECT idx FROM sqlite_stat1 WHERE idx IS NOT NULL)"
        " ORDER BY 1"
    ).fetchall()
    return [str(row[0]) for row in rows]


def analyze_unanalyzed(conn: sqlite3.Connection) -> list[str]:
    """Analyze the tables `unanalyzed_tables` names, in the transaction open
    on `conn` (the last migration's); returns their names.

    A whole table, not the one index: the table's row count lives in the
    row of each of its indexes, and a `WITHOUT ROWID` table's key has no
    index name to analyze by.
    """
    names = unanalyzed_tables(conn)
    for name in names:
        conn.execute(f"ANALYZE {_quoted(name)}")
    if names:
        log.info("analyzed %s: the planner statistics cover the new indexes", ", ".join(names))
    return names


def _quoted(name: str) -> str:
    """An SQL identifier (names come from sqlite_master, not from users)."""
    return '"' + name.replace('"', '""') + '"'
