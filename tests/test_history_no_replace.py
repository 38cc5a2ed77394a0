"""History rows cannot be replaced (migration 0017): UPDATE and DELETE were
refused, but `INSERT OR REPLACE` of an existing key rewrote a history row,
since SQLite fires no delete trigger for a REPLACE by default."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.conftest import Caller, Service
from tests.knowledge_support import correction, create
from tests.tasks_support import make_task, open_decision, set_policy


def _history_tables(conn: sqlite3.Connection, suffix: str) -> set[str]:
    rows = conn.execute(
        "SELECT tbl_name FROM sqlite_master WHERE type = 'trigger' AND name LIKE ?",
        (f"%{suffix}",),
    )
    return {r[0] for r in rows}


def test_every_table_that_refuses_delete_refuses_replace(tmp_path: Path) -> None:
    from waypost.storage.db import connect_sync
    from waypost.storage.migrate import migrate

    conn = connect_sync(tmp_path / "w.db")
    migrate(conn)
    refusing_delete = _history_tables(conn, "_no_delete")
    assert len(refusing_delete) >= 16
    unguarded = refusing_delete - _history_tables(conn, "_no_replace")
    assert not unguarded, (
        f"{sorted(unguarded)}: add a BEFORE INSERT trigger <table>_no_replace that raises when"
        " the new row's key exists (and, for a table with a rowid, its rowid: migrations"
        " 0017 and 0018)"
    )
    assert _history_tables(conn, "_no_replace") == refusing_delete
    conn.close()


@pytest.mark.parametrize(
    ("table", "key", "column"),
    [
        ("policy_revisions", "project_id = 'demo' AND revision = 2", "rules"),
        ("knowledge_revisions", "revision = 2", "title"),
        ("task_revisions", "revision = 1", "title"),
        ("decision_generations", "generation = 1", "environment"),
        ("events", "sequence = 1", "type"),
    ],
)
async def test_insert_or_replace_of_a_history_row_is_refused(
    service: Service, human: Caller, project: str, table: str, key: str, column: str
) -> None:
    await set_policy(human, rules="kept")
    task = await make_task(human, "Migrate")
    await open_decision(human, task["id"])
    record = await create(human, "demo")
    r = await human.patch(
        f"/api/v1/projects/demo/knowledge/{record['id']}", correction(record, title="Better")
    )
    assert r.status_code == 200, r.text
    conn = sqlite3.connect(service.db_path)
    conn.row_factory = sqlite3.Row
    try:
        row = dict(conn.execute(f"SELECT * FROM {table} WHERE {key}").fetchone())
        forged = {**row, column: "FORGED"}
        names = ", ".join(forged)
        marks = ", ".join("?" for _ in forged)
        for verb in ("INSERT OR REPLACE", "REPLACE", "INSERT"):
            with pytest.raises(sqlite3.IntegrityError, match="immutable"):
                conn.execute(
                    f"{verb} INTO {table} ({names}) VALUES ({marks})", list(forged.values())
                )
        assert dict(conn.execute(f"SELECT * FROM {table} WHERE {key}").fetchone()) == row
    finally:
        conn.close()


async def test_a_replace_through_the_hidden_rowid_is_refused(
    service: Service, human: Caller, project: str
) -> None:
    """Tables with a TEXT key keep a rowid: a REPLACE naming a taken rowid with a
    new id rewrote the row past 0017's id check (migration 0018)."""
    from tests.tasks_support import claimed_by_agent, submit

    task, agent = await claimed_by_agent(service, human)
    await submit(agent, task["id"])
    await open_decision(human, (await make_task(human, "Other"))["id"])
    conn = sqlite3.connect(service.db_path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    try:
        for table in ("submissions", "decisions"):
            row = dict(conn.execute(f"SELECT rowid AS rid, * FROM {table} LIMIT 1").fetchone())
            rid = row.pop("rid")
            forged = {**row, "id": "forged_id"}
            names = ", ".join(["rowid", *forged])
            marks = ", ".join("?" for _ in range(len(forged) + 1))
            with pytest.raises(sqlite3.IntegrityError, match="immutable"):
                conn.execute(
                    f"INSERT OR REPLACE INTO {table} ({names}) VALUES ({marks})",
                    [rid, *forged.values()],
                )
            kept = dict(conn.execute(f"SELECT * FROM {table} WHERE rowid = ?", (rid,)).fetchone())
            assert kept == row, table
    finally:
        conn.close()
