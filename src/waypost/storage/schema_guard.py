"""Which files this build can run on, decided before a connection changes anything.

A file with tables of its own and no `schema_migrations` is another
application's (a mistyped `--db`); one that records a migration this build
does not have was written by a newer Waypost; one whose recorded migration
text differs had its history rewritten. Each is refused when a connection
opens (storage/connection.py), before WAL mode is set: the switch rewrites
the file's header and leaves `-wal` and `-shm` files beside it.
"""

from __future__ import annotations

import functools
import hashlib
import sqlite3
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str

    @functools.cached_property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


class MigrationError(RuntimeError):
    pass


# Texts of a shipped migration that were later edited in place, by checksum.
# A file that recorded one of them was migrated by an earlier build and is
# accepted: `0004_decisions.sql` gained the `decisions_reversible` index
# (1f7398b), then a comment changed (b33e347); migration 0019 adds that index
# where it is missing. Never edit a shipped migration again: add a numbered
# one (tests/test_migrations_pinned.py fails otherwise). It happened again to
# 0030 and 0031, for a few minutes of 2026-12-03 on main (9c1fb04 to c32aa15):
# their first texts are back, and migration 0032 does what the edits did.
# And, found later, to 0022 (760d789 to 838d556, 2026-12-01/02: the same
# schema, its indexes built before the rows) and to 0023 (42e651c, whose
# judged-edit trigger migration 0035 makes again, then ac0ace9 and 329a8a4,
# whose text differs in comments only). tests/data/earlier_migrations holds
# each text under the build that shipped it. And to 0037 (d7776ab, then
# 7681c9f, 2026-12-05: fewer marks were separators), whose indexes 0038
# makes again with today's tokenizer.
EARLIER_TEXTS: dict[str, frozenset[str]] = {
    "0004_decisions.sql": frozenset({
        "070e8caf210bb8c11254fff1083552371724c7173d7add9f720aeb03934de808",
        "05ee6c968f1c0f5107526c5e70487d46d14c1ff67fb130293b0b72254f6c7bd9",
    }),
    "0022_knowledge_tags_in_list_order.sql": frozenset({
        "9ee44c22fb8d2ed7ab61f9503eeccf531b29bb72411114f6c2920e765d24852d",
    }),
    "0023_decision_stale.sql": frozenset({
        "a051566cfc06673593a43cd6e2df52ebacb88ddc64bde867005a30b374e416f3",
        "82e24b2b426c95b48445f9e1e75198c4ad9cbce760c126358a439b2dd357cf12",
    }),
    "0030_timed_out_events_index.sql": frozenset({
        "8d9d8f3471ed7ff6906a54b572cb6ab9f765ae3041d8ddeac65b223de40332b1",
    }),
    "0031_task_decisions.sql": frozenset({
        "ab3de4b93e2d866f26ef20f4ba19e8e1f20a5ef144fc27aa616d78247191622c",
    }),
    "0037_words_keep_their_marks.sql": frozenset({
        "fa138522512cf765be0c9d58ea0abf6703f7db5ae8cd2b45d3fe32778259cac5",
        "b0c92c381b46904b2140407067e751a687efcd8da3d467175eee4dd3b6dcf9e1",
    }),
}  # fmt: skip


def matches_recorded(migration: Migration, recorded: str) -> bool:
    """The recorded checksum is this migration's text, today's or an accepted earlier one."""
    return recorded == migration.checksum or recorded in EARLIER_TEXTS.get(
        migration.name, frozenset()
    )


def available() -> list[Migration]:
    """This build's migrations, in order."""
    return list(_shipped())


@functools.cache
def _shipped() -> tuple[Migration, ...]:
    """Read once a process: the files ship with the package, and every
    connection checks them (reading and hashing the 31 files took ~1 ms a
    connection, eight connections a start)."""
    folder = resources.files("waypost.storage").joinpath("migrations")
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return tuple(Migration(f.name, f.read_text(encoding="utf-8")) for f in files)


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
        if m.name in applied and not matches_recorded(m, applied[m.name])
    ]
    return found


class NotWaypostDatabase(sqlite3.DatabaseError):
    """The file is another application's SQLite database (a mistyped --db)."""


def refuse_foreign(conn: sqlite3.Connection) -> None:
    """Refuse a file with tables of its own and no `schema_migrations`, before
    anything is changed in it: neither our tables nor WAL mode (the switch
    rewrites its header and leaves -wal and -shm files beside it, which the
    other application may not expect)."""
    tables = {
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    }
    if tables and "schema_migrations" not in tables:
        raise NotWaypostDatabase(
            "the file holds tables but no schema_migrations: it is not a Waypost database;"
            " point --db at a Waypost database or at a new file"
        )


def refuse_unrunnable(conn: sqlite3.Connection) -> None:
    """Refuse another application's file, or a Waypost file this build
    cannot run on, before anything is changed in it."""
    refuse_foreign(conn)
    has_history = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if has_history:
        found = refusals(recorded(conn), available())
        if found:
            raise MigrationError(found[0])
