"""`waypost admin verify`: the `history` and `events` checks cover every
table docs/operations.md names for them, not only the tasks' (review88: a
check that stopped looking at one of them went unnoticed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Caller, Service
from tests.test_backup_verify import populate
from tests.test_verify_each_check import tampered
from waypost.maintenance import verify

# (history table, the column its rows' instant is in)
HISTORY_INSTANTS = [
    ("policy_revisions", "at"),
    ("task_revisions", "at"),
    ("knowledge_revisions", "provenance_recorded_at"),
    ("decision_generations", "at"),
]


@pytest.mark.parametrize(("history", "at_column"), HISTORY_INSTANTS)
async def test_verify_finds_a_row_of_each_history_written_without_its_event(
    service: Service, human: Caller, project: str, tmp_path: Path, history: str, at_column: str
) -> None:
    """operations.md, `events`: "every history row (policy and task revisions,
    knowledge revisions, decision generations) has the event its transaction
    wrote"."""
    copy, conn = await tampered(service, human, tmp_path)
    (at,) = conn.execute(
        f"SELECT {at_column} FROM {history} ORDER BY {at_column} DESC LIMIT 1"
    ).fetchone()
    conn.execute("DROP TRIGGER events_no_delete")  # written around the service
    conn.execute("DELETE FROM events WHERE at = ?", (at,))
    conn.close()
    events = verify(copy)["checks"]["events"]
    assert events["ok"] is False, events
    assert any(
        s.startswith(f"{history}: a row of project demo written at {at}") for s in events["shown"]
    ), events


@pytest.mark.parametrize(
    ("table", "column"),
    [("projects", "policy_revision"), ("knowledge", "revision"), ("decisions", "generation")],
)
async def test_verify_finds_each_records_counter_ahead_of_its_history(
    service: Service, human: Caller, project: str, tmp_path: Path, table: str, column: str
) -> None:
    """operations.md, `history`: "every project's policy revision number, task
    revision number, knowledge revision number and decision generation number
    equals the number of its last history row"."""
    copy, conn = await tampered(service, human, tmp_path)
    (record_id,) = conn.execute(f"SELECT id FROM {table} LIMIT 1").fetchone()
    for (trigger,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?", (table,)
    ).fetchall():
        conn.execute(f"DROP TRIGGER {trigger}")  # written around the service
    conn.execute(f"UPDATE {table} SET {column} = {column} + 1 WHERE id = ?", (record_id,))
    conn.close()
    history = verify(copy)["checks"]["history"]
    assert history["ok"] is False, history
    assert any(s.startswith(f"{table} {record_id}: {column} ") for s in history["shown"]), history


@pytest.mark.parametrize("column", ["title", "description", "acceptance_criteria"])
async def test_verify_finds_each_text_of_a_task_changed_around_its_history(
    service: Service, human: Caller, project: str, tmp_path: Path, column: str
) -> None:
    """operations.md, `history`: the current text the last history row holds
    is the current row's: "a task's title, description and acceptance
    criteria"."""
    copy, conn = await tampered(service, human, tmp_path)
    (task_id,) = conn.execute("SELECT id FROM tasks LIMIT 1").fetchone()
    forged = '["forged"]' if column == "acceptance_criteria" else "forged"  # a JSON list
    conn.execute(f"UPDATE tasks SET {column} = ? WHERE id = ?", (forged, task_id))
    conn.close()
    history = verify(copy)["checks"]["history"]
    assert history["shown"] == [
        f"tasks {task_id}: its current title, description, acceptance_criteria differ from"
        " its task_revisions row revision"
    ], history


async def test_verify_finds_a_receipt_whose_stored_answer_is_json_but_no_object(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    """operations.md, `receipts`: a stored answer "a replay can send: a 2xx
    status and a JSON object" (a JSON array is valid JSON, and no answer)."""
    copy, conn = await tampered(service, human, tmp_path)
    (key,) = conn.execute("SELECT key FROM receipts LIMIT 1").fetchone()
    conn.execute("UPDATE receipts SET body = '[1]' WHERE key = ?", (key,))
    conn.close()
    receipts = verify(copy)["checks"]["receipts"]
    assert receipts["problems"] == 1, receipts
    assert repr(key) in receipts["shown"][0] and receipts["shown"][0].endswith("could not send it)")


async def test_a_backup_is_written_in_rollback_journal_mode(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    """operations.md: a backup is "a self-contained file (no `-wal` beside
    it)", in "rollback-journal mode (a backup, as `admin backup` writes it)":
    a copy left in WAL mode (the live file's) gets a `-wal` and `-shm` at its
    first open, the files a restore must not leave behind."""
    from waypost.maintenance import backup

    await populate(service, human)
    target = tmp_path / "backup.db"
    backup(service.db_path, target)
    assert target.read_bytes()[18:20] == b"\x01\x01"  # 1, 1: rollback journal; 2, 2: WAL
