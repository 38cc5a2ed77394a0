"""The search index's own migration: memos registered before it are found after it,
and each revision replaces its memo's one index row."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from waypost.storage import migrate as migrations

LATER = "0010_lifecycle_search.sql"
REVISION = "INSERT INTO lifecycle_revisions VALUES ('t', 'm1', ?, '{}', '', ?, 'q?', '', 'x', 'a')"


def test_memos_from_before_the_keyed_index_are_found_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    every = migrations.available()
    # a file of a build before it: the migrations after it (0037 rebuilds
    # this index from the keys) came later still
    monkeypatch.setattr(migrations, "available", lambda: [m for m in every if m.name < LATER])
    migrations.migrate(conn)
    conn.execute("INSERT INTO lifecycle_memos VALUES ('t', 'm1', 2, 'x', 'a', 'a')")
    for version, title in [(1, "first draft"), (2, "kafka partitions")]:
        conn.execute(REVISION, (version, title))
    monkeypatch.setattr(migrations, "available", lambda: every)
    assert migrations.migrate(conn) == [m.name for m in every if m.name >= LATER]

    def found(term: str) -> list[str]:
        return [
            r[0]
            for r in conn.execute(
                "SELECT k.memo_id FROM lifecycle_search s JOIN lifecycle_search_keys k"
                " ON k.rowid = s.rowid WHERE lifecycle_search MATCH ?",
                (term,),
            )
        ]

    assert found("kafka") == ["m1"] and found("draft") == []
    conn.execute(REVISION, (3, "ledger"))
    assert found("ledger") == ["m1"] and found("kafka") == []
    assert conn.execute("SELECT count(*) FROM lifecycle_search").fetchone() == (1,)
