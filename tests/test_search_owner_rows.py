"""How many rows of each searched table each project holds (migration 0041),
which the packet's search reads to decide whether to ask for a project's
rows alone (resolvers/context/ranking_store.py): kept by triggers in the
transaction of every write, and counted from the rows when a file of an
earlier build migrates."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.conftest import Caller, Service, earlier_builds_file
from tests.knowledge_support import create, make_task
from tests.test_context_ranking import AT, INSERT_GENERAL, _plain_db
from waypost.maintenance import verify
from waypost.resolvers.access import principals
from waypost.resolvers.projects.models import ProjectCreate
from waypost.resolvers.projects.operations import insert_project
from waypost.storage.db import connect_sync, run_write
from waypost.storage.migrate import migrate

COUNTED = (
    "SELECT 'tasks', project_id, count(*) FROM tasks GROUP BY project_id"
    " UNION ALL SELECT 'tasks', '*', count(*) FROM tasks"
    " UNION ALL SELECT 'knowledge', project_id, count(*) FROM knowledge GROUP BY project_id"
    " UNION ALL SELECT 'knowledge', '*', count(*) FROM knowledge"
    " UNION ALL SELECT 'knowledge', '*shared', count(*) FROM knowledge"
    " WHERE collection = 'shared'"
)


def _stored(db: Path) -> dict[tuple[str, str], int]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT content, owner, row_count FROM search_owner_rows")
        return {(c, o): n for c, o, n in rows if n}
    finally:
        conn.close()


async def test_every_create_counts_its_row_for_its_project_and_the_table(
    service: Service, human: Caller, project: str
) -> None:
    r = await human.post("/api/v1/projects", {"id": "ops", "name": "Ops"})
    assert r.status_code == 201, r.text
    for title in ("one", "two", "three"):
        await make_task(human, project, title)
    await make_task(human, "ops", "elsewhere")
    await create(human, project, title="private")
    await create(human, project, title="private too")
    await create(human, "ops", title="for all", collection="shared", share_across_projects=True)
    assert _stored(service.db_path) == {
        ("tasks", "demo"): 3, ("tasks", "ops"): 1, ("tasks", "*"): 4,
        ("knowledge", "demo"): 2, ("knowledge", "ops"): 1, ("knowledge", "*"): 3,
        ("knowledge", "*shared"): 1,
    }  # fmt: skip
    assert verify(service.db_path)["checks"]["owner_rows"]["ok"] is True


def test_migration_0041_counts_the_rows_a_file_of_an_earlier_build_holds(tmp_path: Path) -> None:
    db = tmp_path / "then.db"
    earlier_builds_file(db, before="0041")
    conn = connect_sync(db)
    human = run_write(conn, lambda c: principals.create_principal(c, "human", "seed", AT))
    actor = human["principal_id"]
    for p in ("demo", "other"):
        run_write(
            conn,
            lambda c, p=p: insert_project(  # type: ignore[misc]
                c, ProjectCreate(id=p, name=p), actor, "human", AT
            ),
        )
    rows = [(f"kn_d{i}", "demo", "title", "body") for i in range(5)]
    rows += [(f"kn_o{i}", "other", "title", "body") for i in range(2)]
    conn.executemany(INSERT_GENERAL, [(*row, actor, AT, AT, AT) for row in rows])
    conn.execute(
        "UPDATE knowledge SET collection = 'shared', share_across_projects = 1"
        " WHERE id IN ('kn_d0', 'kn_o1')"
    )
    conn.executemany(
        "INSERT INTO tasks (id, project_id, title, description, acceptance_criteria, kind,"
        " priority, status, revision, judged_revision, created_by, created_at, updated_at)"
        " VALUES (?, 'other', 't', '', '[]', 'feature', 0, 'open', 1, 1, ?, ?, ?)",
        [(f"task_{i}", actor, AT, AT) for i in range(4)],
    )
    assert migrate(conn) == ["0041_search_owner_rows.sql"]
    conn.close()
    assert _stored(db) == {
        ("tasks", "other"): 4, ("tasks", "*"): 4,
        ("knowledge", "demo"): 5, ("knowledge", "other"): 2, ("knowledge", "*"): 7,
        ("knowledge", "*shared"): 2,
    }  # fmt: skip


def test_the_triggers_follow_a_row_that_moves_or_goes(
    tmp_path: Path, migrated_template: Path
) -> None:
    """No write moves or deletes a row today; the counts would follow one that
    did, as the search indexes do."""
    conn = _plain_db(tmp_path / "moves.db", migrated_template, [
        ("kn_1", "demo", "a", "b"), ("kn_2", "demo", "a", "b"), ("kn_3", "other", "a", "b"),
    ])  # fmt: skip
    conn.execute(
        "UPDATE knowledge SET collection = 'shared', share_across_projects = 1 WHERE id = 'kn_1'"
    )
    conn.execute("UPDATE knowledge SET project_id = 'other' WHERE id = 'kn_1'")
    conn.execute("UPDATE knowledge SET title = 'c' WHERE id = 'kn_2'")  # not an owner's change
    conn.execute("DELETE FROM knowledge WHERE id = 'kn_3'")
    stored = {
        (c, o): n for c, o, n in conn.execute("SELECT * FROM search_owner_rows") if c == "knowledge"
    }
    conn.close()
    assert stored == {
        ("knowledge", "demo"): 1, ("knowledge", "other"): 1, ("knowledge", "*"): 2,
        ("knowledge", "*shared"): 1,
    }, stored  # fmt: skip
