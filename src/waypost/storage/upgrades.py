"""A newer build's migrations applied under a running service.

A newer build's `waypost admin migrate` (or its `serve`) may migrate the file
while an older `serve` still runs on it. SQLite prepares the older build's
statements again against the new schema and they run on: its writes would
go on, past rules and columns it does not know, into a file whose meaning
the newer build may have changed. So the writer counts the migrations the
file records at the start of every batch, inside its write transaction (one
small statement, a few microseconds; not the schema's version, which a
migration that only changes rows, a backfill, leaves as it was:
upgradeaudit4); when the count moved, it reads them, and once one is not
this build's (or one changed) every read and write answers 503 and
`/healthz` says `database_upgraded`, until the service is started again with
the newer build. A schema change that records no migration (an `ANALYZE`,
an index made by hand) changes nothing.
"""

from __future__ import annotations

import logging
import sqlite3

from waypost.errors import Unavailable
from waypost.storage.connection import STORAGE_RETRY_AFTER
from waypost.storage.schema_guard import Migration, recorded, refusals

log = logging.getLogger("waypost.storage")


def upgraded_refusal() -> Unavailable:
    """The answer to every read and write once another build migrated the file."""
    return Unavailable(
        "the database was migrated by another Waypost build; an operator must start the"
        " service again with that build",
        {"reason": "database_upgraded"},
        retry_after=STORAGE_RETRY_AFTER,
    )


class SchemaWatch:
    """Whether the file still holds only this build's migrations."""

    def __init__(self, known: list[Migration]) -> None:
        self._known = known
        self._count: int | None = None  # the migrations recorded when last found all ours
        # once set, never cleared: this build cannot vouch for the file again
        self.upgraded: str | None = None

    def check(self, conn: sqlite3.Connection) -> str | None:
        """Why this build can no longer write the file, or None. Called inside
        the writer's transaction, so no migration is half applied."""
        if self.upgraded is not None:
            return self.upgraded
        count = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
        if count == self._count:
            return None
        found = refusals(recorded(conn), self._known)
        if not found:
            self._count = count
            return None
        self.upgraded = found[0]
        log.error(
            "%s; every read and write now answers 503: stop this serve and start the build"
            " that migrated the file (docs/operations.md, 'Upgrading')",
            self.upgraded,
        )
        return self.upgraded
