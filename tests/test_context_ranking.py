"""The window-first ranking returns exactly what one filtered ORDER BY over both
tables returns: same items, same order, same ranks, on seeded files with two
projects, shared records, every scope dimension, common words and ties."""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.corpus import INSERT_KNOWLEDGE
from tests.conftest import copy_database
from waypost.resolvers.access import principals
from waypost.resolvers.context import ranking_store as ranking
from waypost.resolvers.context.search import SCOPE_SQL, Scope, escape_fts
from waypost.resolvers.projects.models import ProjectCreate
from waypost.resolvers.projects.operations import insert_project
from waypost.storage.db import connect_sync, run_write

AT = "2026-11-30T00:00:00.000Z"
# A few very common words and a tail, so that some terms match most rows
WORDS = ["deploy", "the", "rollback", "cache", "lease", "owner"] + [f"w{i}" for i in range(60)]
WEIGHTS = [40, 30, 12, 8, 5, 4] + [1] * 60
COMPONENTS = ["api", "web", "db"]


def _oracle(
    conn: sqlite3.Connection, project: str, match: str, scope: Scope, shared: bool, n: int
) -> list[tuple[str, str, float]]:
    """The single statement the packet used before: filter, rank every passing
    match of both tables, one ORDER BY rank, id, type, one LIMIT."""
    own = "k.project_id = :project"
    visible = f"({own} OR k.collection = 'shared')" if shared else own
    rows = conn.execute(
        "SELECT 'task' AS type, t.id AS id, f.rank AS rank"
        " FROM tasks_fts f JOIN tasks t ON t.rowid = f.rowid"
        " WHERE tasks_fts MATCH :match AND t.project_id = :project"
        " UNION ALL"
        " SELECT 'knowledge' AS type, k.id AS id, f.rank AS rank"
        " FROM knowledge_fts f JOIN knowledge k ON k.rowid = f.rowid"
        f" WHERE knowledge_fts MATCH :match AND {visible} AND {SCOPE_SQL}"
        " ORDER BY rank, id, type LIMIT :n",
        {"match": match, "project": project, "n": n, "task_id": scope.task_id,
         "component": scope.component, "environment": scope.environment,
         "version": scope.version},
    ).fetchall()  # fmt: skip
    return [(r["type"], r["id"], r["rank"]) for r in rows]


def _new(
    conn: sqlite3.Connection, project: str, match: str, scope: Scope, shared: bool, n: int
) -> list[tuple[str, str, float]]:
    return [(h.type, h.id, h.rank) for h in ranking.ranked(conn, project, match, scope, shared, n)]


def _text(r: random.Random, low: int, high: int) -> str:
    return " ".join(r.choices(WORDS, WEIGHTS, k=r.randint(low, high)))


def _some(r: random.Random, values: list[str]) -> str:
    return json.dumps(r.sample(values, r.choice([0, 0, 1, 2])))


def _knowledge(r: random.Random, project: str, i: int, actor: str) -> tuple[Any, ...]:
    if i % 7 == 0:  # the same general record again and again: equal ranks
        return (
            f"kn_{project}_{i:05d}", project, "lesson", "project", 0, "rollback owner",
            "rollback owner lease", "observed", "[]", "[]", "[]", "[]", "[]", "", "seeded",
            actor, AT, 1, AT, AT,
        )  # fmt: skip
    shared = r.random() < 0.2
    return (
        f"kn_{project}_{i:05d}", project, "lesson", "shared" if shared else "project",
        int(shared), _text(r, 1, 6), _text(r, 3, 40), "observed",
        _some(r, [f"task_{project}_00001", f"task_{project}_00002"]), _some(r, COMPONENTS),
        _some(r, ["prod", "staging"]), _some(r, ["1.0", "2.0"]), json.dumps(_text(r, 0, 2).split()),
        _text(r, 0, 5), "seeded", actor, AT, 1, AT, AT,
    )  # fmt: skip


def _seed(conn: sqlite3.Connection, actor: str, per_project: int, rng: random.Random) -> None:
    for project in ("demo", "other"):
        conn.execute("BEGIN")
        conn.executemany(
            INSERT_KNOWLEDGE,
            # in shuffled order, so that rowid order tells nothing about id order
            rng.sample(
                [_knowledge(rng, project, i, actor) for i in range(per_project)], per_project
            ),
        )
        conn.executemany(
            "INSERT INTO tasks (id, project_id, title, description, acceptance_criteria, kind,"
            " priority, status, revision, judged_revision, created_by, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, 'feature', 0, 'open', 1, 1, ?, ?, ?)",
            [
                (
                    f"task_{project}_{i:05d}",
                    project,
                    _text(rng, 1, 6),
                    _text(rng, 3, 30),
                    json.dumps([_text(rng, 2, 6)]),
                    actor,
                    AT,
                    AT,
                )
                for i in range(per_project // 5)
            ],
        )
        conn.execute("COMMIT")


@pytest.fixture(scope="module")
def seeded_template(tmp_path_factory: pytest.TempPathFactory, migrated_template: Path) -> Path:
    """The seeded file, built once per module (1,500 records a project cost
    seconds on a loaded machine); each test reads and writes a copy of its own."""
    path = copy_database(migrated_template, tmp_path_factory.mktemp("ranking") / "seeded.db")
    conn = connect_sync(path)
    try:
        human = run_write(conn, lambda c: principals.create_principal(c, "human", "seed", AT))
        for project in ("demo", "other"):
            run_write(
                conn,
                lambda c, p=project: insert_project(  # type: ignore[misc]
                    c, ProjectCreate(id=p, name=p), human["principal_id"], "human", AT
                ),
            )
        _seed(conn, human["principal_id"], 1500, random.Random(14))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file
    finally:
        conn.close()
    return path


@pytest.fixture
def seeded(tmp_path: Path, seeded_template: Path) -> Iterator[sqlite3.Connection]:
    conn = connect_sync(copy_database(seeded_template, tmp_path / "ranking.db"))
    try:
        yield conn
    finally:
        conn.close()


SCOPES = [
    Scope(),
    Scope(component="api"),
    Scope(task_id="task_demo_00001", environment="prod"),
    Scope(component="db", environment="staging", version="2.0"),
]
# An OWNED_SHARE no project reaches: every table is searched whole
WHOLE_INDEX = 10**9
QUERIES = ["deploy", "the", "rollback owner", "the deploy cache", "w3", "lease w7", "w59 w58",
           "owner lease rollback", "nothing-here", "cache"]  # fmt: skip


@pytest.mark.parametrize("owned", [False, True])
@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("count", [1, 6, 21, 101])
def test_window_first_ranking_equals_one_filtered_order_by(
    seeded: sqlite3.Connection,
    shared: bool,
    count: int,
    owned: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same rows and the same ranks, to the bit, whether the index is
    searched whole or for the project's own rows (`owned`: the owner words'
    weight is 0, and adds exactly nothing)."""
    # demo holds half the rows: asked for alone (with the shared records too,
    # whatever the text matches) or searched over the whole index, whichever
    # the share and the text would choose
    monkeypatch.setattr(ranking, "OWNED_SHARE", 1 if owned else WHOLE_INDEX)
    monkeypatch.setattr(ranking, "MATCH_TO_WALK", 10**9)
    compared = 0
    for q in QUERIES:
        match = escape_fts(q.split())
        for scope in SCOPES:
            expected = _oracle(seeded, "demo", match, scope, shared, count)
            assert _new(seeded, "demo", match, scope, shared, count) == expected, (q, scope)
            compared += len(expected)
    assert compared > 0  # the seeded file does match


def _statements(conn: sqlite3.Connection, run: Any, *marks: str) -> list[str]:
    """The ranking statements `run` executes (not FTS5's own nested ones):
    those that rank, or hold any of `marks`."""
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        run()
    finally:
        conn.set_trace_callback(None)
    return [s for s in seen if "bm25(" in s or any(m in s for m in marks)]


def test_equal_ranks_across_the_window_edge_fall_back_and_keep_id_order(
    seeded: sqlite3.Connection,
) -> None:
    """Every seventh record has the same text, so `rollback owner lease` ties
    far more rows than the window holds: the edge cuts through the tie, and
    the exact statement decides (by id), as the single ORDER BY did."""
    match = escape_fts(["rollback", "owner", "lease"])
    expected = _oracle(seeded, "demo", match, Scope(), False, 3)
    ran = _statements(seeded, lambda: _new(seeded, "demo", match, Scope(), False, 3))
    assert _new(seeded, "demo", match, Scope(), False, 3) == expected
    assert any(" ORDER BY rank, id LIMIT" in s for s in ran)


INSERT_GENERAL = (
    "INSERT INTO knowledge (id, project_id, kind, collection, share_across_projects,"
    " title, body, status, scope_task_ids, scope_components, scope_environments,"
    " scope_versions, tags, applicability, provenance_summary, provenance_actor_id,"
    " provenance_recorded_at, revision, created_at, updated_at)"
    " VALUES (?, ?, 'lesson', 'project', 0, ?, ?, 'observed', '[]', '[]', '[]', '[]', '[]',"
    " '', 'seeded', ?, ?, 1, ?, ?)"
)


def _plain_db(
    path: Path, template: Path, rows: list[tuple[str, str, str, str]]
) -> sqlite3.Connection:
    """Projects demo and other, and general records (id, project, title, body)."""
    conn = connect_sync(copy_database(template, path))
    actor = seed_projects(conn)
    conn.executemany(INSERT_GENERAL, [(*row, actor, AT, AT, AT) for row in rows])
    return conn


def seed_projects(conn: sqlite3.Connection) -> str:
    """A human and projects demo and other, written as the service writes
    them; the human's id (the actor of seeded records)."""
    human = run_write(conn, lambda c: principals.create_principal(c, "human", "seed", AT))
    actor: str = human["principal_id"]
    for p in ("demo", "other"):
        run_write(
            conn,
            lambda c, p=p: insert_project(  # type: ignore[misc]
                c, ProjectCreate(id=p, name=p), actor, "human", AT
            ),
        )
    return actor


def test_a_common_word_reads_only_the_window_of_its_own_project(
    tmp_path: Path, migrated_template: Path
) -> None:
    """The usual case (the project's general records) ranks from the index and
    reads only the first part of the window's rows, best first: the statement
    that reads every match's row never runs."""
    rng = random.Random(5)
    rows = [
        (f"kn_{i:04d}", "demo", _text(rng, 2, 6), f"the {_text(rng, 5, 40)}") for i in range(400)
    ]
    conn = _plain_db(tmp_path / "plain.db", migrated_template, rows)
    try:
        match = escape_fts(["the"])
        ran = _statements(conn, lambda: _new(conn, "demo", match, Scope(), False, 5), "json_each")
        windows = [s for s in ran if " ORDER BY rank LIMIT 40" in s]
        reads = [s for s in ran if "json_each(" in s and "bm25(" not in s]
        assert len(windows) == 2 and len(ran) == 3  # no task matched: one content read
        # the first read takes FIRST_READ * count of the window's 40 rows
        (read,) = reads
        rids = json.loads(read.split("json_each('")[1].split("')")[0])
        assert len(rids) == ranking.FIRST_READ * 5
        assert _new(conn, "demo", match, Scope(), False, 5) == _oracle(
            conn, "demo", match, Scope(), False, 5
        )
    finally:
        conn.close()


# demo's best four rows for `cache` in _outranked_db, best first
DEMO_BEST = ["kn_d0000", "kn_d0005", "kn_d0001", "kn_d0006"]


def _outranked_db(path: Path, template: Path, others: int) -> sqlite3.Connection:
    """`others` rows of project `other` that outrank all of `demo`'s ten rows
    for `cache`."""
    rows = [(f"kn_o{i:04d}", "other", "cache cache cache", "cache cache") for i in range(others)]
    rows += [
        (f"kn_d{i:04d}", "demo", f"cache and {i} more words", "a long body " * (i % 5 + 1))
        for i in range(10)
    ]
    return _plain_db(path, template, rows)


def test_a_project_outranked_by_another_falls_back_to_filtering_first(
    tmp_path: Path, migrated_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When other projects' rows fill the whole window, the filtered statement
    finds the project's own best rows: none is lost. (The window over the
    whole index: a project this small is otherwise asked for alone.)"""
    monkeypatch.setattr(ranking, "OWNED_SHARE", WHOLE_INDEX)
    conn = _outranked_db(tmp_path / "outranked.db", migrated_template, 200)
    try:
        match = escape_fts(["cache"])
        expected = _oracle(conn, "demo", match, Scope(), False, 4)
        assert [i for _, i, _ in expected] == DEMO_BEST
        ran = _statements(conn, lambda: _new(conn, "demo", match, Scope(), False, 4))
        assert _new(conn, "demo", match, Scope(), False, 4) == expected
        assert any(" ORDER BY rank, id LIMIT" in s for s in ran)
    finally:
        conn.close()


def test_a_small_project_among_many_ranks_its_own_matches_alone(
    tmp_path: Path, migrated_template: Path
) -> None:
    """demo's ten rows among 200 of another project's, all matching: only
    demo's matches are ranked (FTS5 reads each ranked row's size), and the
    answer is the one statement's over the whole index (scalejourney: a
    project of 100 records read 2,974 sizes at 20,000 records, 293 at 2,000)."""
    conn = _outranked_db(tmp_path / "owned.db", migrated_template, 200)
    try:
        seen = traced(conn, "demo", escape_fts(["cache"]))
        sizes = [s for s in seen if "SELECT sz FROM" in s]
        assert 0 < len(sizes) <= 10, len(sizes)
        # a word of the owner column is no user's term
        owner = ranking.owned("x", "demo", False).split('"')[1]
        assert _new(conn, "demo", escape_fts([owner]), Scope(), False, 4) == []
    finally:
        conn.close()


def traced(conn: sqlite3.Connection, project: str, match: str, shared: bool = False) -> list[str]:
    """Every statement the packet's search of `project` for its best four ran
    (FTS5's nested ones too), its answer checked against the oracle's."""
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        found = _new(conn, project, match, Scope(), shared, 4)
    finally:
        conn.set_trace_callback(None)
    assert found == _oracle(conn, project, match, Scope(), shared, 4)
    return seen


def _asked_for_owned(seen: list[str]) -> bool:
    return any('owner : "x' in s for s in seen)


def test_a_mid_sized_project_among_larger_ones_ranks_its_own_matches_alone(
    tmp_path: Path, migrated_template: Path
) -> None:
    """demo's 1,100 rows (a fifth of the table) among 4,400 of another
    project's, all matching `cache`: only demo's matches are ranked. (A
    project past 1,000 rows had the whole index ranked, whatever its share:
    3,000 tasks among 53,000 took 946 ms for `billing` against 156 ms for its
    own rows alone, scalejourney.) A rare word is ranked over the whole
    index: asking for the owner word walks all 1,100 of demo's entries
    (BM25 counts each phrase's rows), more than its few matches cost
    (50,000 tasks: 12.5 ms against 0.13, tenantsjourney)."""
    rows = [(f"kn_o{i:05d}", "other", "cache cache cache", "cache cache") for i in range(4400)]
    rows += [(f"kn_d{i:05d}", "demo", f"cache and {i} more", "a body") for i in range(1100)]
    rows += [("kn_dz1", "demo", "zebra", "x"), ("kn_oz1", "other", "zebra crossing", "x")]
    conn = _plain_db(tmp_path / "mid.db", migrated_template, rows)
    try:
        for word, owned, ranked_most in (("cache", True, 2 * 1100), ("zebra", False, 2)):
            match = escape_fts([word])
            assert _oracle(conn, "demo", match, Scope(), False, 4)
            seen = traced(conn, "demo", match)
            assert _asked_for_owned(seen) is owned, word
            # each of demo's `cache` rows is ranked twice at most: their equal
            # ranks cut across the window's edge, and the exact statement
            # ranks them again (the whole index: 6,600)
            sizes = [s for s in seen if "SELECT sz FROM" in s]
            assert 0 < len(sizes) <= ranked_most, (word, len(sizes))
    finally:
        conn.close()


def test_a_file_of_one_projects_rows_is_searched_whole_without_counting(
    tmp_path: Path, migrated_template: Path
) -> None:
    """Nothing to leave out: the packet of the only project with rows pays
    one probe of the counts, not a count of its rows (180 us a table at
    2,000, on every packet of the bench's one project, when they were
    counted through the index up to a bound)."""
    rows = [(f"kn_d{i:04d}", "demo", f"cache {i}", "a body") for i in range(40)]
    conn = _plain_db(tmp_path / "alone.db", migrated_template, rows)
    try:
        seen = traced(conn, "demo", escape_fts(["cache"]))
        assert not [s for s in seen if "SELECT count(*)" in s], seen
        assert not _asked_for_owned(seen), seen
    finally:
        conn.close()


def test_a_first_read_without_enough_passing_rows_reads_the_rest_of_the_window(
    tmp_path: Path, migrated_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another project's rows outrank the first read (`FIRST_READ * count`
    rows) but not the whole window: the second read finds the project's own
    best rows inside the window, without the statement that reads every
    match's row."""
    monkeypatch.setattr(ranking, "OWNED_SHARE", WHOLE_INDEX)  # the window over the whole index
    count = 4
    others = ranking.FIRST_READ * count + 3  # past the first read, inside the window
    conn = _outranked_db(tmp_path / "second.db", migrated_template, others)
    try:
        match = escape_fts(["cache"])
        expected = _oracle(conn, "demo", match, Scope(), False, count)
        assert [i for _, i, _ in expected] == DEMO_BEST
        ran = _statements(
            conn, lambda: _new(conn, "demo", match, Scope(), False, count), "json_each"
        )
        assert _new(conn, "demo", match, Scope(), False, count) == expected
        reads = [s for s in ran if "json_each(" in s and "bm25(" not in s]
        assert len(reads) == 2
        assert not any(" ORDER BY rank, id LIMIT" in s for s in ran)
    finally:
        conn.close()
