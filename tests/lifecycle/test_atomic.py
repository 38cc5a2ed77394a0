"""A write that fails inside the transaction leaves nothing behind.

The failure is a real SQLite one: a temporary trigger on the writer's
connection RAISEs when a later row of the unit of work is inserted, after the
memo row went in.
"""

from __future__ import annotations

import pytest

from tests.lifecycle.support import TABLES, Lifecycle, Member, memo, with_docs


async def fail_on(lifecycle: Lifecycle, table: str) -> None:
    await lifecycle.service.rt.db.write(
        lambda c: c.execute(
            f"CREATE TEMP TRIGGER injected_failure BEFORE INSERT ON main.{table}"
            " BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
        )
    )


async def heal(lifecycle: Lifecycle) -> None:
    await lifecycle.service.rt.db.write(lambda c: c.execute("DROP TRIGGER temp.injected_failure"))


@pytest.mark.parametrize(
    "table",
    [
        "lifecycle_revisions",
        "lifecycle_documents",
        "lifecycle_events",
        "lifecycle_deliveries",
        "lifecycle_receipts",
    ],
)
async def test_a_failure_after_the_memo_insert_rolls_back_registration(
    lifecycle: Lifecycle, author: Member, table: str
) -> None:
    m, docs = with_docs(memo(), b"bytes")
    await fail_on(lifecycle, table)
    r = await author.register(m, docs)
    assert (r.status_code, r.json()) == (500, {"error": "internal"})
    assert "injected" not in r.text
    assert [await lifecycle.count(t) for t in TABLES] == [0] * len(TABLES)
    await heal(lifecycle)
    # the same request (same key) then succeeds: the failure left no receipt
    assert (await author.register(m, docs)).status_code == 200


@pytest.mark.parametrize("table", ["lifecycle_documents", "lifecycle_events", "lifecycle_receipts"])
async def test_a_failure_inside_a_revision_leaves_version_one_current(
    lifecycle: Lifecycle, author: Member, table: str
) -> None:
    m, docs = with_docs(memo(), b"one")
    await author.register(m, docs)
    counts = [await lifecycle.count(t) for t in TABLES]
    m2, docs2 = with_docs(memo(version=2), b"one", b"two")
    await fail_on(lifecycle, table)
    r = await author.revise(m2, expected=1, docs=docs2[1:])
    assert r.status_code == 500
    await heal(lifecycle)
    assert [await lifecycle.count(t) for t in TABLES] == counts
    assert (await author.get("/v1/decisions/adr.payments-retry")).json()["version"] == 1


async def test_history_rows_are_immutable(lifecycle: Lifecycle, author: Member) -> None:
    import sqlite3

    m, docs = with_docs(memo(), b"doc")
    await author.register(m, docs)
    for sql in [
        "UPDATE lifecycle_revisions SET title = 'x'",
        "DELETE FROM lifecycle_revisions",
        "UPDATE lifecycle_documents SET media_type = 'text/plain'",
        "DELETE FROM lifecycle_documents",
        "UPDATE lifecycle_events SET type = 'x'",
        "DELETE FROM lifecycle_events",
    ]:
        with pytest.raises(sqlite3.IntegrityError, match="immutable"):
            await lifecycle.service.rt.db.write(lambda c, sql=sql: c.execute(sql))
