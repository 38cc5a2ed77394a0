"""Shipped migrations never change, and files migrated by earlier builds open.

A database records each migration's checksum, and a build refuses a file
whose recorded text differs from its own (storage/migrate.py). Editing a
shipped migration therefore strands every database it was applied to: that
happened once, to 0004_decisions.sql, whose earlier texts are now accepted
(`EARLIER_TEXTS`) and whose missing index migration 0019 adds, and again to
0030 and 0031 for a few minutes, whose edits migration 0032 makes, and to
0022 and 0023, whose first texts migration 0035 brings level.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from waypost.storage import migrate as migrations
from waypost.storage.db import connect_sync
from waypost.storage.migrate import EARLIER_TEXTS, Migration, MigrationError, available, migrate

# Every shipped migration's checksum (its first 32 hex digits). A change
# here means a shipped migration was edited: add a new numbered migration
# instead (a file that applied the old text would be refused).
SHIPPED = {
    "0001_core.sql": "11ce4eef82ac591c8090cf6592a0f76f",
    "0002_tasks.sql": "6a63562beb69c1e13da072cd3e620fc5",
    "0003_knowledge.sql": "9db0e5ac89606a6ff7900c2f876b7af0",
    "0004_decisions.sql": "5479ac2fc7ed46e9115a7efab2e71026",
    "0010_lifecycle.sql": "55e4b9d9f0e4d43dbcbbea67e8b21e46",
    "0010_lifecycle_search.sql": "bc25c836c8f8601a99b6d6c917e32a92",
    "0013_metrics_audience.sql": "7670a992a6a0b6c3f3e951ae9a8bfddc",
    "0014_gate_holds.sql": "97445735e203be905127a4624cde6b43",
    "0015_gate_blocked_index.sql": "fe7f6e335beb2fd64048977aa89d2df8",
    "0016_task_search_text.sql": "dcda6ff1a8f0ca3508903ce9a13afa7e",
    "0017_history_no_replace.sql": "8b871740b045cc2056e3c06d4a1c9759",
    "0018_history_no_replace_rowid.sql": "9cc88d4772d3a54f497406f172088662",
    "0019_decisions_reversible_index.sql": "2181dc2b64e0e660573e43881a17aa8e",
    "0020_knowledge_status_index.sql": "aaea8f6fcab20d7f8575f74e8aad408a",
    "0021_task_status_index.sql": "8be36a67d196d5e1f3a71fe0701d977d",
    "0022_knowledge_tags_in_list_order.sql": "1aa8dc8bd4687fc27b29fd22eb6dc8fc",
    "0023_decision_stale.sql": "2a003710289746887d47da88e39b7359",
    "0024_lifecycle_delivery_id.sql": "cf7c3b5d08a17fe1049357d261c1c53a",
    "0025_decision_answered.sql": "cf1843ff085378c233dcfb23ec92099f",
    "0026_history_pages_by_rowid.sql": "b8e95fb9605f0b69de203f49e72a513d",
    "0027_decision_status_indexes.sql": "dde1552280834c141988a20fd1eb0e45",
    "0028_knowledge_kind_index.sql": "cfd96f6917c72c59c5ff4b63fd16ae0b",
    "0029_decision_timeouts_index.sql": "e05efe7ce6325b3a36328f6aedb3bd36",
    "0030_timed_out_events_index.sql": "288a35600d608aecd904b46bd264a83b",
    "0031_task_decisions.sql": "d4d105e4f1d3b366b7bcd850416953f4",
    "0032_decision_migrations_completed.sql": "f48954492546fde1a6c571ce522234cf",
    "0033_decision_expiry_index.sql": "05d18f8cea6e8a59e7f4b4c2835da641",
    "0034_task_lease_expiry_index.sql": "f540c44925e9d776aa75c6daa1e9bb56",
    "0035_decision_stale_judged_edit.sql": "d821e38245d2286f069f283290a9997b",
    "0036_knowledge_shared_status_indexes.sql": "32a3563d04b730c36ee9d82b9ce1eee2",
    "0037_words_keep_their_marks.sql": "d8d9e95293f8e62b1418013feaea4395",
    "0038_bidi_controls_end_words.sql": "af36c4f60f298e68c39324668f6b0184",
    "0039_search_owner.sql": "317cc7e1c0ce4ecd0a787b6150ee4742",
    "0040_live_sessions_by_principal.sql": "d4ae10722bcb959e29a5a3a1f9f6ca7a",
    "0041_search_owner_rows.sql": "f2278402c8bb2296b88ccac0d4617abb",
    "0042_lifecycle_delivery_skipped.sql": "d42e1a878028e9f8782cca42dde1b15d",
}

_INDEX_LINES = (
    "-- the sweep and the digest look only at reversible decisions\n"
    "CREATE INDEX decisions_reversible ON decisions (id) WHERE reversible = 1;\n"
)


def earlier_0004_texts() -> list[str]:
    """0004_decisions.sql as 862d468 shipped it, then as 1f7398b did."""
    today = next(m.sql for m in available() if m.name == "0004_decisions.sql")
    with_index = today.replace("resolvers/decisions/status.py", "resolvers/decision_status.py")
    assert _INDEX_LINES in with_index
    return [with_index.replace(_INDEX_LINES, ""), with_index]


def schema(conn: sqlite3.Connection) -> list[tuple[str, str, str | None]]:
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
    return [(r[0], r[1], r[2]) for r in rows]


def test_no_shipped_migration_changed() -> None:
    shipped = {m.name: m.checksum[:32] for m in available()}
    changed = sorted(name for name in SHIPPED if shipped.get(name) != SHIPPED[name])
    assert not changed, f"shipped migrations edited (add a new one instead): {changed}"
    unpinned = {name: shipped[name] for name in sorted(set(shipped) - set(SHIPPED))}
    assert not unpinned, "pin the new migrations in SHIPPED: " + ", ".join(
        f'"{name}": "{checksum}"' for name, checksum in unpinned.items()
    )


def test_the_accepted_earlier_texts_are_those_of_0004() -> None:
    checksums = {hashlib.sha256(t.encode()).hexdigest() for t in earlier_0004_texts()}
    assert checksums == EARLIER_TEXTS["0004_decisions.sql"]


@pytest.mark.parametrize("text", [0, 1], ids=["862d468", "1f7398b"])
def test_a_file_migrated_by_an_earlier_build_opens_with_todays_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: int
) -> None:
    old = tmp_path / "old.db"
    conn = connect_sync(old)
    first_four = [*available()[:3], Migration("0004_decisions.sql", earlier_0004_texts()[text])]
    with monkeypatch.context() as patched:
        patched.setattr(migrations, "available", lambda: first_four)
        migrate(conn)
    applied = migrate(conn)  # today's build on that file
    assert applied == [m.name for m in available()[4:]]
    fresh = connect_sync(tmp_path / "fresh.db")
    migrate(fresh)
    assert schema(conn) == schema(fresh)  # the index 0004 lacked included
    conn.close()
    fresh.close()


# texts main held for a while, each under the build that shipped it (with
# the other texts of that build that differ from today's)
EDITED = Path(__file__).parent / "data" / "earlier_migrations"
# each build and its last migration
BUILDS = {"760d789": "0022", "42e651c": "0023", "ac0ace9": "0023",
          "9c1fb04": "0030", "c32aa15": "0031",
          # 0037 was edited in place twice on 2026-12-05 (7681c9f at 17:43,
          # 4606c06 at 18:13): its tokenizer's separators grew each time
          "d7776ab": "0037", "7681c9f": "0037"}  # fmt: skip


def test_the_accepted_earlier_texts_are_those_main_held() -> None:
    held: dict[str, set[str]] = {}
    for path in sorted(EDITED.glob("*/*.sql")):
        held.setdefault(path.name, set()).add(hashlib.sha256(path.read_bytes()).hexdigest())
    assert {build.name for build in EDITED.iterdir()} == set(BUILDS)
    assert held == {name: set(texts) for name, texts in EARLIER_TEXTS.items() if name[:4] > "0004"}


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_a_file_that_applied_an_edited_text_opens_with_todays_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, build: str
) -> None:
    """Migrated by a build that shipped an earlier text (0022's indexes
    before its rows, 0023's row-value trigger, 0030 and 0031 edited): today's
    build accepts the recorded texts and 0032 and 0035 bring the schema level."""
    conn = connect_sync(tmp_path / "then.db")
    upto, texts = BUILDS[build], EDITED / build
    then = [
        Migration(m.name, (texts / m.name).read_text()) if (texts / m.name).exists() else m
        for m in available()
        if m.name[:4] <= upto
    ]
    with monkeypatch.context() as patched:
        patched.setattr(migrations, "available", lambda: then)
        migrate(conn)
    applied = migrate(conn)  # today's build on that file
    assert applied == [m.name for m in available() if m.name[:4] > upto]
    fresh = connect_sync(tmp_path / "fresh.db")
    migrate(fresh)
    assert schema(conn) == schema(fresh)
    conn.close()
    fresh.close()


def test_an_unknown_text_of_0004_is_still_refused(tmp_path: Path) -> None:
    conn = connect_sync(tmp_path / "m.db")
    migrate(conn)
    conn.execute(
        "UPDATE schema_migrations SET checksum = ? WHERE name = '0004_decisions.sql'",
        (hashlib.sha256(b"something else").hexdigest(),),
    )
    with pytest.raises(MigrationError, match=r"0004_decisions\.sql changed"):
        migrate(conn)
    conn.close()
