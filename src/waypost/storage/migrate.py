"""Numbered SQL migrations, each applied once, in one transaction with its checksum."""

from __future__ import annotations

import logging
import sqlite3
import time

from waypost.storage.connection import rollback_if_open
from waypost.storage.schema_guard import (
    EARLIER_TEXTS,
    Migration,
    MigrationError,
    available,
    matches_recorded,
    recorded,
    refusals,
    refuse_foreign,
)
from waypost.storage.statistics import analyze_unanalyzed

# Importers of the migration names keep one place to import them from.
__all__ = [
    "EARLIER_TEXTS", "Migration", "MigrationError", "available", "migrate", "recorded", "refusals",
]  # fmt: skip

log = logging.getLogger("waypost.storage")


def _recorded_checksum(conn: sqlite3.Connection, migration: Migration) -> str | None:
    """The recorded checksum of `migration`, refusing one that differs."""
    row = conn.execute(
        "SELECT checksum FROM schema_migrations WHERE name = ?", (migration.name,)
    ).fetchone()
    if row is None:
        return None
    if not matches_recorded(migration, row[0]):
        raise MigrationError(f"migration {migration.name} changed after it was applied")
    return str(row[0])


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply every migration not yet recorded; returns the names applied.

    A recorded migration whose file changed is refused: history must not be
    rewritten under a live database. So is a file with tables of its own and
    no schema_migrations (another application's), and a database that records a
    migration this build does not have: a newer build wrote it, and this one
    would run on a schema it does not know (its first write failed with a
    500).

    When it applies any, the indexes a file's planner statistics leave out
    are analyzed (storage/statistics.py), in the transaction of the last
    migration applied: a file analyzed before them would otherwise be
    planned with two kinds of estimate at once. (In a transaction of its
    own after it, a process killed between the two left them so for good:
    the next start applied nothing, so analyzed nothing.)
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
    pending = [migration for migration in known if migration.name not in applied]
    # said before and after: most take milliseconds, but one that rebuilds
    # an index (0037: 53 s at a million records) held the start with no
    # line after `opening PATH`, and looked hung
    started = time.monotonic()
    if pending:
        log.info("applying %s", _named([migration.name for migration in pending]))
    for migration in pending:
        # executescript commits any open transaction first, so the transaction is
        # part of the script: DDL and its record commit together or not at all.
        # The record is inserted first: when another process applied the same
        # migration between our read and our lock, its primary key stops us.
        script = (
            "BEGIN IMMEDIATE;\n"
            "INSERT INTO schema_migrations (name, checksum, applied_at) VALUES "
            f"('{migration.name}', '{migration.checksum}', strftime('%Y-%m-%dT%H:%M:%fZ','now'));\n"
            f"{migration.sql}\n;"
        )
        try:
            conn.executescript(script)
            if migration is pending[-1]:
                analyze_unanalyzed(conn)  # the new indexes on a file analyzed before them
            conn.execute("COMMIT")
        except sqlite3.Error:
            rollback_if_open(conn)
            if _recorded_checksum(conn, migration) is None:
                _say_failed(migration, done, pending)
                raise
            # applied meanwhile by another process, with this checksum
            log.info("%s was applied meanwhile by another process", migration.name)
            continue
        except BaseException:
            rollback_if_open(conn)
            _say_failed(migration, done, pending)
            raise
        done.append(migration.name)
    if done:
        # the first and last named are this process's; any others of those
        # announced, applied by another process, are counted, not hidden
        others = len(pending) - len(done)
        besides = f"; {others} other(s) applied meanwhile by another process" if others else ""
        log.info("applied %s in %.1f s%s", _named(done), time.monotonic() - started, besides)
    return done


def _say_failed(failed: Migration, done: list[str], pending: list[Migration]) -> None:
    """Says where a start that failed midway left the file: each migration is
    applied whole or not at all, so the ones before `failed` stay applied and
    the next start resumes at it. (It said only the error, and "applying 12
    migrations" left the operator to guess how many had been.)"""
    before = f"after applying {_named(done)}" if done else "before applying any"
    left = len(pending) - pending.index(failed)
    log.error("migration %s failed %s; %d not applied", failed.name, before, left)


def _named(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{len(names)} migrations, {names[0]} to {names[-1]}"
