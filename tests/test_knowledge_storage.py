"""Knowledge storage: immutable history, constraints, tag table and FTS kept current."""

from __future__ import annotations

import sqlite3

import pytest

from tests.conftest import Caller, Service
from tests.knowledge_support import correction, create, kpath, raw


async def test_revision_and_feedback_rows_refuse_update_and_delete(
    service: Service, human: Caller, project: str
) -> None:
    record = await create(human, project)
    await human.post(
        kpath(project, record["id"], "feedback"), {"expected_revision": 1, "useful": True}
    )
    statements = [
        "UPDATE knowledge_revisions SET title = 'rewritten'",
        "UPDATE knowledge_revisions SET provenance_actor_id = 'someone'",
        "DELETE FROM knowledge_revisions",
        "UPDATE knowledge_feedback SET useful = 0",
        "UPDATE knowledge_feedback SET revision = 2",
        "DELETE FROM knowledge_feedback",
    ]
    with raw(service.db_path) as conn:
        for sql in statements:
            with pytest.raises(sqlite3.IntegrityError, match="immutable"):
                conn.execute(sql)
        title = conn.execute("SELECT title FROM knowledge_revisions").fetchone()[0]
        assert title == record["title"]
        assert conn.execute("SELECT useful FROM knowledge_feedback").fetchone()[0] == 1


async def test_feedback_cannot_name_a_revision_that_does_not_exist(
    service: Service, human: Caller, project: str
) -> None:
    record = await create(human, project)
    with raw(service.db_path) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(
                "INSERT INTO knowledge_feedback (id, knowledge_id, revision, useful, actor_id, at)"
                " VALUES ('f', ?, 7, 1, ?, 'now')",
                (record["id"], human.principal_id),
            )


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE knowledge SET collection = 'shared'",  # shared without the opt-in
        "UPDATE knowledge SET share_across_projects = 1",  # opt-in on a project record
        "UPDATE knowledge SET status = 'superseded'",  # superseded without a replacement
        "UPDATE knowledge SET superseded_by_id = id, status = 'superseded'",  # itself
        "UPDATE knowledge SET kind = 'opinion'",
    ],
)
async def test_projection_constraints_hold_even_for_raw_sql(
    service: Service, human: Caller, project: str, sql: str
) -> None:
    await create(human, project)
    with raw(service.db_path) as conn, pytest.raises(sqlite3.IntegrityError):
        conn.execute(sql)


async def test_fts_searches_only_the_current_text(
    service: Service, human: Caller, project: str
) -> None:
    record = await create(
        human, project, title="flaky zebra", tags=["giraffe"], applicability="on walrus hosts"
    )

    def matches(term: str) -> list[str]:
        with raw(service.db_path) as conn:
            rows = conn.execute(
                "SELECT k.id FROM knowledge_fts f JOIN knowledge k ON k.rowid = f.rowid"
                " WHERE knowledge_fts MATCH ?",
                (term,),
            ).fetchall()
        return [r[0] for r in rows]

    assert matches("zebra") == matches("giraffe") == matches("walrus") == [record["id"]]
    await human.patch(
        kpath(project, record["id"]),
        correction(record, title="steady okapi", tags=["lemur"], applicability=""),
    )
    assert matches("zebra") == matches("giraffe") == matches("walrus") == []
    assert matches("okapi") == matches("lemur") == [record["id"]]
    with raw(service.db_path) as conn:
        check = conn.execute(
            "INSERT INTO knowledge_fts (knowledge_fts, rank) VALUES ('integrity-check', 1)"
        )
        assert check is not None


async def test_tag_table_follows_the_current_tags(
    service: Service, human: Caller, project: str
) -> None:
    record = await create(human, project, tags=["a", "b"])
    await human.patch(kpath(project, record["id"]), correction(record, tags=["b", "c"]))
    with raw(service.db_path) as conn:
        tags = conn.execute("SELECT tag FROM knowledge_tags ORDER BY tag").fetchall()
    assert [t[0] for t in tags] == ["b", "c"]
