"""Numbered SQL migrations, each applied once, in one transaction with its checksum."""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from importlib import resources

from waypost.storage.connection import refuse_foreign
from waypost.storage.statistics import complete_statistics


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


class MigrationError(RuntimeError):
    pass


# Texts of a shipped migration that were later edited in place, by checksum.
# A file that recorded one of them was migrated by an earlier build and is
# accepted: `0004_decisions.sql` gained the `decisions_reversible` index
# (1f7398b), then a comment changed (b33e347); migration 0019 adds that index
# where it is missing. Never edit a shipped migration again: add a numbered
# one (tests/test_migrations_pinned.py fails otherwise).
EARLIER_TEXTS: dict[str, frozenset[str]] = {
    "0004_decisions.sql": frozenset({
        "070e8caf210bb8c11254fff1083552371724c7173d7add9f720aeb03934de808",
        "05ee6c968f1c0f5107526c5e70487d46d14c1ff67fb130293b0b72254f6c7bd9",
    }),
}  # fmt: skip


def _same(migration: Migration, recorded: str) -> bool:
    """The recorded checksum is this migration's text, today's or an accepted earlier one."""
    return recorded == migration.checksum or recorded in EARLIER_TEXTS.get(
        migration.name, frozenset()
    )


def available() -> list[Migration]:
    folder = resources.files("waypost.storage").joinpath("migrations")
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [Migration(f.name, f.read_text(encoding="utf-8")) for f in files]


def _recorded_checksum(conn: sqlite3.Connection, migration: Migration) -> str | None:
    """The recorded checksum of `migration`, refusing one that differs."""
    row = conn.execute(
        "SELECT checksum FROM schema_migrations WHERE name = ?", (migration.name,)
    ).fetchone()
    if row is None:
        return None
    if not _same(migration, row[0]):
        raise MigrationError(f"migration {migration.name} changed after it was applied")
    return str(row[0])


def recorded(conn: sqlite3.Connection) -> dict[str, str]:
    """The migrations a database records as applied: name -> checksum."""
    rows = conn.execute("SELECT name, checksum FROM schema_migrations")
    return {row[0]: row[1] for row in rows}


def refusals(applied: dict[str, str], known: list[Migration]) -> list[str]:
    """Why this build cannot run on a database that recorded `applied`: the
    migrations it does not have (a newer build's), then those whose text
    changed. Empty when it can (`admin verify` reports these too)."""
    found: list[str] = []
    unknown = sorted(set(applied) - {m.name for m in known})
    if unknown:
        found.append(
            f"the database records migrations this build does not have ({', '.join(unknown)}):"
            " it was written by a newer Waypost; run that version, or restore a backup"
        )
    found += [
        f"migration {m.name} changed after it was applied"
        for m in known
        if m.name in applied and not _same(m, applied[m.name])
    ]
    return found


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply every migration not yet recorded; returns the names applied.

    A recorded migration whose file changed is refused: history must not be
    rewritten under a live database. So is a file with tables of its own and
    no schema_migrations (another application's), and a database that records a
    migration this build does not have: a newer build wrote it, and this one
    would run on a schema it does not know (its first write failed with a
    500).

    When it applies any, the indexes a file's planner statistics leave out
    are analyzed (storage/statistics.py): a file analyzed before them would
    otherwise be planned with two kinds of estimate at once.
    """
    refuse_foreign(conn)  # another application's file: never add our tables to it
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " name TEXT PRIMARY KEY, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    applied = recorded(conn)
    known = available()
    found = refusals(applied, known)
    if found:
        raise MigrationError(found[0])
    done: list[str] = []
    for migration in known:
        if migration.name in applied:
            continue
        # executescript commits any open transaction first, so the transaction is
        # part of the script: DDL and its record commit together or not at all.
        # The record is inserted first: when another process applied the same
        # migration between our read and our lock, its primary key stops us.
        script = (
            "BEGIN IMMEDIATE;\n"
            "INSERT INTO schema_migrations (name, checksum, applied_at) VALUES "
            f"('{migration.name}', '{migration.checksum}', strftime('%Y-%m-%dT%H:%M:%fZ','now'));\n"
            f"{migration.sql}\n;"
            "COMMIT;"
        )
        try:
            conn.executescript(script)
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if _recorded_checksum(conn, migration) is None:
                raise
            continue  # applied meanwhile by another process, with this checksum
        done.append(migration.name)
    if done:
        complete_statistics(conn)  # the new indexes on a file analyzed before them
    return done
