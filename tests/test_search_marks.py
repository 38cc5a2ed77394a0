"""Words keep their combining marks, and a Latin letter's marks all fold
(migration 0037): `كَتَبَ` was indexed as `ك ت ب` and `ฉันกินข้าว` as
`ฉ นก นข าว`, so a single letter found them, and `tieng` did not find
`tiếng` written composed."""

from __future__ import annotations

import sqlite3
import unicodedata
from pathlib import Path

import pytest

from tests.conftest import Caller, MovableClock, Service, serving
from tests.knowledge_support import kpath, new_body
from waypost.resolvers.context.search import escape_fts
from waypost.resolvers.context.words_store import (
    FOLDED_ACCENTS,
    GENERIC_MARKS,
    TOKENIZER,
    words_of,
)
from waypost.settings import Settings
from waypost.storage import migrate as migrations

TASKS = "/api/v1/projects/demo/tasks"
CONTEXT = "/api/v1/projects/demo/context"
MIGRATION = "0037_words_keep_their_marks.sql"

ARABIC = "كَتَبَ الطالبُ الدرسَ"  # "the student wrote the lesson", vowel marks written
THAI = "ฉันกินข้าว"  # "I eat rice": a run without spaces, with vowel and tone marks
VIETNAMESE = "Tiếng Việt rollback"


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


async def found(caller: Caller, q: str) -> tuple[set[str], set[str], set[str]]:
    """What the task list, the knowledge list and the packet find for `q`."""
    tasks = await caller.get(TASKS, q=q)
    records = await caller.get(kpath("demo"), q=q)
    packet = await caller.get(CONTEXT, q=q)
    assert tasks.status_code == records.status_code == packet.status_code == 200, q
    return (
        {t["id"] for t in tasks.json()["items"]},
        {r["id"] for r in records.json()["items"]},
        {i["id"] for i in packet.json()["items"]},
    )


async def make(caller: Caller, text: str) -> tuple[str, str]:
    """A task titled `text` and a record whose body is `text`."""
    task = await caller.post(TASKS, {"title": text})
    record = await caller.post(kpath("demo"), new_body(title="a record", body=text))
    assert task.status_code == record.status_code == 201, (task.text, record.text)
    return task.json()["id"], record.json()["id"]


def by(ids: tuple[str, str]) -> tuple[set[str], set[str], set[str]]:
    return {ids[0]}, {ids[1]}, set(ids)


NOTHING: tuple[set[str], set[str], set[str]] = (set(), set(), set())


async def test_a_word_with_marks_is_whole(human: Caller, project: str) -> None:
    arabic, thai = await make(human, ARABIC), await make(human, THAI)
    assert await found(human, "كَتَبَ") == by(arabic)
    assert await found(human, "الطالبُ كَتَبَ") == by(arabic)
    assert await found(human, THAI) == by(thai)
    # a single letter, or letters the marks used to split off, find nothing
    for q in ("ك", "ت", "ك ت ب", "ฉ", "นก", "าว"):
        assert await found(human, q) == NOTHING, q


async def test_a_latin_letters_marks_all_fold(human: Caller, project: str) -> None:
    composed, decomposed = await make(human, VIETNAMESE), await make(human, nfd(VIETNAMESE))
    both = ({composed[0], decomposed[0]}, {composed[1], decomposed[1]}, {*composed, *decomposed})
    for q in ("tieng", "TIENG viet", "tiếng", nfd("tiếng"), "Việt rollback"):
        assert await found(human, q) == both, q


async def test_a_variation_selector_is_no_letter(human: Caller, project: str) -> None:
    """U+FE0F is a combining mark to Unicode (Mn): as a word character it
    glued `⚠️` to the word after it and made every such emoji one word."""
    warning = await make(human, "⚠️Warning: the disk fills ✔️")
    await make(human, "❤️ thanks")
    assert await found(human, "warning") == by(warning)
    assert await found(human, "✔️") == NOTHING  # no word in it, as before
    assert words_of(["⚠️Warning", "1️⃣"]) == [("warning",), ("1",)]


async def test_a_mark_sqlite_does_not_fold_splits_its_word(human: Caller, project: str) -> None:
    """A script-neutral mark that SQLite does not fold (U+0329 below a
    Yoruba vowel, a stroke U+0336) split its word before 0037; as a word
    character it glued to it, and `ile` no longer found `ile` + U+0329
    (review56). It splits again; the accents SQLite folds still fold. So
    does a mark newer than SQLite's Unicode tables (U+1AB0), which was a
    word character before 0037 (review58)."""
    yoruba = await make(human, "ile\u0329 wa")
    struck = await make(human, "a\u0336b plan")
    newer = await make(human, "ab\u1ab0cd")
    assert await found(human, "ile") == by(yoruba)
    assert await found(human, "b plan") == by(struck)
    assert await found(human, "ab") == await found(human, "cd") == by(newer)
    assert words_of(["ile\u0329", "e\u0301\u0302"]) == [("ile",), ("e",)]


async def test_polytonic_greek_written_decomposed_stays_whole(human: Caller, project: str) -> None:
    """The breathings and the perispomeni sit in the script-neutral block;
    as separators they split Greek written decomposed into letters (`ἀλλά`
    into its first letter and the rest, and that letter alone found it;
    review57)."""
    decomposed = await make(human, nfd("ἀλλά τῷ λόγῳ"))
    assert words_of([nfd("ἀλλά")]) == [(nfd("ἀλλα"),)]  # the breathing kept, the accent not
    assert await found(human, "ἀλλά") == by(decomposed)  # its NFD form is ORed in
    for q in ("\u03b1", "λλ\u03b1", "\u03b9"):  # alpha, the rest, iota
        assert await found(human, q) == NOTHING, q


def test_the_accents_named_folded_are_those_sqlite_folds() -> None:
    """The separators leave out the accents `remove_diacritics 2` drops: were
    one of them a separator, `tiếng` written decomposed would split in two."""
    conn = sqlite3.connect(":memory:")
    conn.execute('CREATE VIRTUAL TABLE t USING fts5(x, tokenize = "unicode61 remove_diacritics 2")')
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    folded = set()
    for point in range(0x300, 0x370):
        conn.execute("DELETE FROM t")
        conn.execute("INSERT INTO t (x) VALUES (?)", (f"a{chr(point)}b",))
        if [row[0] for row in conn.execute("SELECT term FROM v")] == ["ab"]:
            folded.add(point)
    conn.close()
    assert folded == set(FOLDED_ACCENTS)
    assert not folded & {ord(ch) for ch in GENERIC_MARKS}


def test_the_indexes_and_the_terms_share_one_tokenizer(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "w.db", isolation_level=None)
    migrations.migrate(conn)
    made = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE sql LIKE '%USING fts5%'"))
    assert set(made) == {"tasks_fts", "knowledge_fts", "lifecycle_search"}
    for name, sql in made.items():
        assert f'tokenize = "{TOKENIZER}"' in sql, name
    conn.close()


LIFECYCLE_MEMO = "INSERT INTO lifecycle_memos VALUES ('t', 'm1', 1, 'x', 'a', 'a')"
LIFECYCLE_REVISION = (
    "INSERT INTO lifecycle_revisions VALUES ('t', 'm1', 1, '{}', '', ?, 'q?', '', 'x', 'a')"
)


def indexed(path: Path, q: str) -> tuple[set[str], set[str]]:
    """The tasks and records the indexes of a file hold for `q`, read there:
    this build's lists and packets ask for today's index columns (migration
    0039's `owner`), which a file migrated only so far does not have."""
    conn = sqlite3.connect(path)
    try:
        match = escape_fts(q.split())
        return tuple(
            {
                r[0]
                for r in conn.execute(
                    f"SELECT c.id FROM {table}_fts f JOIN {table} c ON c.rowid = f.rowid"
                    f" WHERE {table}_fts MATCH ?",
                    (match,),
                )
            }
            for table in ("tasks", "knowledge")
        )  # type: ignore[return-value]
    finally:
        conn.close()


def memos(path: Path, q: str) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT k.memo_id FROM lifecycle_search s JOIN lifecycle_search_keys k"
            " ON k.rowid = s.rowid WHERE lifecycle_search MATCH ?",
            (escape_fts(q.split()),),
        )
        return [r[0] for r in rows]
    finally:
        conn.close()


async def test_the_migration_reindexes_what_was_written_before_it(
    tmp_path: Path, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file of the build before 0037, with records, tasks and a memo:
    after the migration they are found under the new words, and no longer
    by a letter the marks split off."""
    path = tmp_path / "then.db"
    settings = Settings(db_path=path, sweep_interval=3600)
    every = migrations.available()
    before = [m for m in every if m.name < MIGRATION]
    assert every[len(before)].name == MIGRATION
    monkeypatch.setattr(migrations, "available", lambda: before)
    async with serving(settings, clock) as then:
        human = await then.principal("human", "alice")
        assert (await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})).is_success
        made = [await make(human, text) for text in (ARABIC, THAI, VIETNAMESE)]
        arabic, thai, vietnamese = made
        # the old words: a letter finds the marked text, `tieng` misses `tiếng`
        assert indexed(path, "ك") == by(arabic)[:2]
        assert indexed(path, "ฉ") == by(thai)[:2]
        assert indexed(path, "tieng") == NOTHING[:2]
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(LIFECYCLE_MEMO)
    conn.execute(LIFECYCLE_REVISION, (f"{ARABIC} {VIETNAMESE}",))
    conn.close()
    assert memos(path, "ك") == ["m1"] and memos(path, "tieng") == []

    monkeypatch.setattr(migrations, "available", lambda: every)
    async with serving(settings, clock) as now:
        assert isinstance(now, Service)
        human = await now.principal("human", "bob")
        assert await found(human, "كَتَبَ") == by(arabic)
        assert await found(human, THAI) == by(thai)
        assert await found(human, "tieng") == by(vietnamese)
        for q in ("ك", "ฉ", "นก"):
            assert await found(human, q) == NOTHING, q
        # the triggers kept their index: an edit is searched under the new words
        task_id = vietnamese[0]
        edited = await human.patch(
            f"{TASKS}/{task_id}", {"expected_revision": 1, "title": "ผู้ใหญ่ plan"}
        )
        assert edited.status_code == 200, edited.text
        assert (await found(human, "ผู้ใหญ่"))[0] == {task_id}
        assert (await found(human, "ผ"))[0] == set()
        assert (await found(human, "tieng"))[0] == set()
    assert memos(path, "ك") == [] and memos(path, "tieng viet كَتَبَ") == ["m1"]
    conn = sqlite3.connect(path)
    for index in ("tasks_fts", "knowledge_fts", "lifecycle_search"):
        conn.execute(f"INSERT INTO {index} ({index}) VALUES ('integrity-check')")
    conn.close()
