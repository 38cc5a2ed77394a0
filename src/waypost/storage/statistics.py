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
table with an index left without them is analyzed, in one transaction, once.
A file without statistics is left as it is.
"""

from __future__ import annotations

import logging
import sqlite3

from waypost.storage.connection import rollback_if_open

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


def complete_statistics(conn: sqlite3.Connection) -> list[str]:
    """Analyze the tables `unanalyzed_tables` names; returns their names.

    A whole table, not the one index: the table's row count lives in the
    row of each of its indexes, and a `WITHOUT ROWID` table's key has no
    index name to analyze by. Best effort: the statistics only steer plans,
    so a lock held elsewhere (or any other refusal) leaves them as they were
    rather than failing the start, with a warning; the next migration tries
    again (so does `ANALYZE` run by hand).
    """
    names = unanalyzed_tables(conn)
    if not names:
        return []
    analyze = "".join(f"ANALYZE {_quoted(name)};\n" for name in names)
    try:
        conn.executescript(f"BEGIN IMMEDIATE;\n{analyze}COMMIT;")
    except sqlite3.OperationalError as error:
        rollback_if_open(conn)
        log.warning(
            "the planner statistics of %s were not completed (%s): plans may be slow"
            " until ANALYZE runs", ", ".join(names), error,
        )  # fmt: skip
        return []
    return names


def _quoted(name: str) -> str:
    """An SQL identifier (names come from sqlite_master, not from users)."""
    return '"' + name.replace('"', '""') + '"'
