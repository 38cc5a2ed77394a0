"""A file as a deployed one looks at an upgrade: migrated up to a given
migration, holding another file's rows (their derived state rebuilt by that
schema's triggers as the rows go in), for testing a migration's backfill."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from waypost.storage import migrate

# The tables whose rows a backfill derives from; the rest follows from them.
TABLES = ("principals", "projects", "tasks", "task_dependencies", "decisions",
          "decision_generations", "decision_affected", "decision_answers")  # fmt: skip


def migration(prefix: str) -> migrate.Migration:
    return next(m for m in migrate.available() if m.name.startswith(prefix))


def copy_before(source: Path, dest: Path, prefix: str) -> sqlite3.Connection:
    """A file at `dest` migrated up to (not including) migration `prefix`,
    holding `source`'s rows of TABLES."""
    conn = sqlite3.connect(dest, isolation_level=None)
    conn.row_factory = sqlite3.Row
    for m in migrate.available():
        if m.name < prefix:
            conn.executescript(m.sql)
    conn.execute("ATTACH DATABASE ? AS old", (str(source),))
    conn.execute("PRAGMA foreign_keys = OFF")
    for table in TABLES:
        columns = ", ".join(r["name"] for r in conn.execute(f"PRAGMA main.table_info({table})"))
        conn.execute(f"INSERT INTO main.{table} ({columns}) SELECT {columns} FROM old.{table}")
    conn.execute("DETACH DATABASE old")
    return conn
