"""Batch reads by a list of ids are one statement text whatever the list's
length (storage/key_lists.py): with `IN (?, ?, ...)` each length was its own
prepared statement, and a hundred lengths of four look-ups filled the
connection's cache of 256 (review26)."""

from __future__ import annotations

import sqlite3

from tests.conftest import Caller, Service
from tests.context_support import knowledge, task
from tests.test_coalesced import _Recording
from waypost.resolvers.context import store as context_store
from waypost.resolvers.knowledge import store as knowledge_store
from waypost.resolvers.tasks import store as task_store


async def test_a_batch_of_any_length_reads_by_one_statement_text(
    service: Service, human: Caller, project: str
) -> None:
    record = await knowledge(human, "one record")
    made = await task(human, "one task")
    others = [f"missing_{n}" for n in range(100)]
    conn = _Recording(sqlite3.connect(service.db_path))
    try:
        for length in range(1, 101):
            records = [record["id"], *others[: length - 1]]
            tasks = [made["id"], *others[: length - 1]]
            assert list(knowledge_store.get_rows(conn, records)) == [record["id"]]  # type: ignore[arg-type]
            totals = knowledge_store.feedback_totals(conn, records)  # type: ignore[arg-type]
            assert totals[record["id"]] == {"useful": 0, "not_useful": 0}
            assert len(totals) == length
            objects = context_store.knowledge_objects(conn, records)  # type: ignore[arg-type]
            assert list(objects) == [record["id"]]
            rows = task_store.task_rows_by_ids(conn, tasks)  # type: ignore[arg-type]
            assert list(rows) == [made["id"]]
    finally:
        conn.close()
    assert len(conn.texts) == 4, sorted(conn.texts)
