"""How many rows of each searched table each project holds (migration 0041),
which the packet's search reads to decide whether to ask for a project's
rows alone (resolvers/context/ranking_store.py): kept by triggers in the
transaction of every write, and counted from the rows when a file of an
earlier build migrates."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path

from tests.conftest import Caller, Service, earlier_builds_file
from tests.knowledge_support import create, make_task
from tests.test_context_ranking import AT, INSERT_GENERAL, _plain_db, seed_projects, traced
from waypost.maintenance import verify
from waypost.resolvers.context.search import escape_fts
from waypost.storage.db import connect_sync
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
    actor = seed_projects(conn)
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
    assert migrate(conn)[0] == "0041_search_owner_rows.sql"  # and any after it
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


async def test_a_unit_that_fails_after_writing_leaves_the_counts_of_its_batch(
    service: Service, human: Caller, project: str
) -> None:
    """storage/writer.py: each unit runs in its own savepoint; one that inserts
    a task and a shared record and then fails is rolled back with the counts
    its triggers wrote, and the units batched with it keep theirs."""
    actor = human.principal_id

    def task(i: int) -> Callable[[sqlite3.Connection], None]:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO tasks (id, project_id, title, description, acceptance_criteria,"
                " kind, priority, status, revision, judged_revision, created_by, created_at,"
                " updated_at) VALUES (?, ?, 't', '', '[]', 'feature', 0, 'open', 1, 1, ?, ?, ?)",
                (f"task_batch_{i}", project, actor, AT, AT),
            )

        return run

    def fails(conn: sqlite3.Connection) -> None:
        task(99)(conn)
        conn.execute(INSERT_GENERAL, ("kn_batch", project, "t", "b", actor, AT, AT, AT))
        conn.execute(
            "UPDATE knowledge SET collection = 'shared', share_across_projects = 1"
            " WHERE id = 'kn_batch'"
        )
        raise RuntimeError("the unit fails after its writes")

    units = [service.rt.db.write(task(i)) for i in range(3)]
    units.insert(1, service.rt.db.write(fails))
    done = await asyncio.gather(*units, return_exceptions=True)
    assert [isinstance(d, RuntimeError) for d in done] == [False, True, False, False], done
    assert _stored(service.db_path) == _counted(service.db_path)
    assert _stored(service.db_path)[("tasks", project)] == 3
    assert verify(service.db_path)["checks"]["owner_rows"]["ok"] is True


def _counted(db: Path) -> dict[tuple[str, str], int]:
    conn = sqlite3.connect(db)
    try:
        return {(c, o): n for c, o, n in conn.execute(COUNTED) if n}
    finally:
        conn.close()


def test_the_triggers_follow_a_task_that_moves_or_goes(
    tmp_path: Path, migrated_template: Path
) -> None:
    """As `test_the_triggers_follow_a_row_that_moves_or_goes`, for tasks; and
    a project left with no rows is no problem for `owner_rows`."""
    db = tmp_path / "tasks.db"
    conn = _plain_db(db, migrated_template, [])
    actor = conn.execute("SELECT id FROM principals").fetchone()[0]
    conn.executemany(
        "INSERT INTO tasks (id, project_id, title, description, acceptance_criteria, kind,"
        " priority, status, revision, judged_revision, created_by, created_at, updated_at)"
        " VALUES (?, ?, 't', '', '[]', 'feature', 0, 'open', 1, 1, ?, ?, ?)",
        [("task_1", "demo", actor, AT, AT), ("task_2", "demo", actor, AT, AT),
         ("task_3", "other", actor, AT, AT)],
    )  # fmt: skip
    conn.execute("UPDATE tasks SET project_id = 'other' WHERE id = 'task_1'")
    conn.execute("UPDATE tasks SET title = 'u' WHERE id = 'task_2'")  # not an owner's change
    conn.execute("DELETE FROM tasks WHERE id = 'task_2'")  # demo holds none now
    conn.close()
    assert {k: n for k, n in _stored(db).items() if k[0] == "tasks"} == {
        ("tasks", "other"): 2, ("tasks", "*"): 2,
    }  # fmt: skip
    assert verify(db)["checks"]["owner_rows"] == {"ok": True, "problems": 0, "shown": []}


def _searched_owned(conn: sqlite3.Connection, project: str, include_shared: bool) -> bool:
    """Whether the packet's search of `project` asked FTS5 for its own rows
    (the owner word in the MATCH), and found what the oracle finds."""
    seen = traced(conn, project, escape_fts(["cache"]), include_shared)
    return any("knowledge_fts MATCH" in s and 'owner : "x' in s for s in seen)


def test_a_project_holding_exactly_half_is_searched_for_its_own_rows(
    tmp_path: Path, migrated_template: Path
) -> None:
    """docs/context.md: a project that holds at most half of a table's rows,
    and not all of them, is searched for its own rows alone; one more row
    of its own and it is searched whole."""
    rows = [(f"kn_d{i}", "demo", f"cache {i}", "b") for i in range(6)]
    rows += [(f"kn_o{i}", "other", f"cache {i}", "b") for i in range(6)]
    conn = _plain_db(tmp_path / "half.db", migrated_template, rows)
    try:
        assert _searched_owned(conn, "demo", False)
        actor = conn.execute("SELECT id FROM principals").fetchone()[0]
        conn.execute(INSERT_GENERAL, ("kn_d6", "demo", "cache", "b", actor, AT, AT, AT))
        assert not _searched_owned(conn, "demo", False)  # 7 of 13
        assert _searched_owned(conn, "other", False)  # 6 of 13
    finally:
        conn.close()


def test_other_projects_shared_records_count_with_include_shared(
    tmp_path: Path, migrated_template: Path
) -> None:
    """docs/context.md: the rows a search with `include_shared` may keep are
    the project's and every shared record: demo's 3 of 12 records with
    other's 6 shared ones are 9, past half, so the index is searched whole;
    without the shared records, demo's 3 are asked for alone."""
    rows = [(f"kn_d{i}", "demo", f"cache {i}", "b") for i in range(3)]
    rows += [(f"kn_o{i}", "other", f"cache {i}", "b") for i in range(9)]
    conn = _plain_db(tmp_path / "shared.db", migrated_template, rows)
    try:
        conn.execute(
            "UPDATE knowledge SET collection = 'shared', share_across_projects = 1"
            " WHERE id IN ('kn_o0', 'kn_o1', 'kn_o2', 'kn_o3', 'kn_o4', 'kn_o5')"
        )
        assert _searched_owned(conn, "demo", False)
        assert not _searched_owned(conn, "demo", True)
    finally:
        conn.close()


def test_a_shared_record_that_goes_leaves_the_shared_count(
    tmp_path: Path, migrated_template: Path
) -> None:
    """The delete trigger counts a shared record out of `*shared` too."""
    db = tmp_path / "gone.db"
    conn = _plain_db(
        db, migrated_template, [("kn_1", "demo", "a", "b"), ("kn_2", "other", "a", "b")]
    )
    conn.execute(
        "UPDATE knowledge SET collection = 'shared', share_across_projects = 1"
        " WHERE id IN ('kn_1', 'kn_2')"
    )
    conn.execute("DELETE FROM knowledge WHERE id = 'kn_1'")
    conn.close()
    assert {k: n for k, n in _stored(db).items() if k[0] == "knowledge"} == {
        ("knowledge", "other"): 1, ("knowledge", "*"): 1, ("knowledge", "*shared"): 1,
    }  # fmt: skip
    assert verify(db)["checks"]["owner_rows"]["ok"] is True


def _asked(conn: sqlite3.Connection, word: str) -> tuple[bool, list[str]]:
    """(whether demo's search for `word` asked FTS5 for its own rows, the
    statements that counted the text's matches), the answer the oracle's."""
    seen = traced(conn, "demo", escape_fts([word]))
    owned = any("knowledge_fts MATCH" in s and 'owner : "x' in s for s in seen)
    return owned, [s for s in seen if "SELECT count(*)" in s and "knowledge_fts" in s]


def test_the_owner_word_is_asked_for_past_the_documented_count_of_matches(
    tmp_path: Path, migrated_template: Path
) -> None:
    """docs/context.md ("Ranking less"): a project is searched for its own
    rows when its text matches more than `kept * total / (others * 100)`
    rows, the count stopped one past that. demo's 300 records of 1,000: more
    than 4 (300,000 / 70,000 = 4.3); 80 of 200: more than 1 (16,000 / 12,000)."""
    for name, demo, other, enough in (("a", 300, 700, 4), ("b", 80, 120, 1)):
        rows = [(f"kn_d{i}", "demo", f"plain {i}", "b") for i in range(demo)]
        rows += [(f"kn_o{i}", "other", f"plain {i}", "b") for i in range(other)]
        # `atmost`: `enough` matches (half demo's); `past`: one more
        for word, n in (("atmost", enough), ("past", enough + 1)):
            for i in range(n):
                owner, at = ("demo", 2 * i) if i % 2 == 0 else ("other", 2 * i + 1)
                index = next(k for k, r in enumerate(rows) if r[0] == f"kn_{owner[0]}{at}")
                rows[index] = (rows[index][0], owner, f"{word} {rows[index][2]}", "b")
        conn = _plain_db(tmp_path / f"{name}.db", migrated_template, rows)
        try:
            owned, probes = _asked(conn, "atmost")
            assert not owned, (name, "atmost")
            assert len(probes) == 1 and probes[0].endswith(f"LIMIT {enough + 1})"), probes
            owned, probes = _asked(conn, "past")
            assert owned, (name, "past")
        finally:
            conn.close()
