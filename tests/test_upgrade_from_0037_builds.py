"""Files from the builds that shipped the first two texts of 0037 open.

0037_words_keep_their_marks.sql was edited in place twice on 2026-12-05
(d7776ab shipped it at 17:33, 7681c9f changed its separators at 17:43 and
4606c06 at 18:13). A file a service of either earlier build migrated
records that earlier text: today's build must accept it (as it accepts
0022's, 0023's, 0030's and 0031's earlier texts, docs/operations.md,
"Migrations"), and 0038 brings its full-text indexes level, so that the marks
today's tokenizer splits on (U+0329 below a Yoruba vowel) split the
indexed words of such a file too (docs/context.md).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from waypost.storage import migrate as migrations
from waypost.storage.db import connect_sync
from waypost.storage.migrate import Migration, available, migrate, recorded

EDITED = Path(__file__).parent / "data" / "earlier_migrations"


@pytest.mark.parametrize("build", ["d7776ab", "7681c9f"])
def test_a_file_migrated_by_an_earlier_0037_build_opens_and_searches_as_today(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, build: str
) -> None:
    conn = connect_sync(tmp_path / "then.db")
    text = (EDITED / build / "0037_words_keep_their_marks.sql").read_text()
    then = [
        Migration(m.name, text) if m.name == "0037_words_keep_their_marks.sql" else m
        for m in available()
        if m.name[:4] <= "0037"
    ]
    with monkeypatch.context() as patched:
        patched.setattr(migrations, "available", lambda: then)
        migrate(conn)
    # today's build on that file: refused before (0037 "changed"); 0038
    # makes the indexes again with today's tokenizer (and 0039 with their
    # owner words)
    assert migrate(conn)[:2] == ["0038_bidi_controls_end_words.sql", "0039_search_owner.sql"]
    # the file's own index tokenizes as today's: `ile` finds `ile` + U+0329
    conn.execute(
        "INSERT INTO lifecycle_search (rowid, title, question, context) VALUES (1, ?, '', '')",
        ("ile\u0329 oja",),
    )
    found = conn.execute("SELECT rowid FROM lifecycle_search WHERE lifecycle_search MATCH 'ile'")
    assert [r[0] for r in found] == [1]
    assert (
        recorded(conn)["0037_words_keep_their_marks.sql"]
        == hashlib.sha256(text.encode()).hexdigest()
    )  # the file's history as it was written
    conn.close()
