"""The packet's knowledge objects, built by SQLite, are the objects of the
knowledge routes: equal key for key, in the same key order, with the same
compact JSON bytes (which the budget counts), for every kind of value."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import msgspec

from tests.conftest import copy_database
from waypost.resolvers.access import principals
from waypost.resolvers.context.store import knowledge_objects
from waypost.resolvers.knowledge.store import knowledge_json
from waypost.resolvers.projects.models import ProjectCreate
from waypost.resolvers.projects.operations import insert_project
from waypost.storage.db import connect_sync, run_write

AT = "2026-11-30T00:00:00.000Z"
ODD_TEXT = 'quote " backslash \\ newline \n tab \t bell \x07 é 東京 🚀 \u2028 </script>'


def _insert(conn: sqlite3.Connection, values: dict[str, object]) -> None:
    columns = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    conn.execute(f"INSERT INTO knowledge ({columns}) VALUES ({marks})", list(values.values()))


def test_sql_built_objects_equal_knowledge_json(tmp_path: Path, migrated_template: Path) -> None:
    conn = connect_sync(copy_database(migrated_template, tmp_path / "objects.db"))
    conn.row_factory = sqlite3.Row
    human = run_write(conn, lambda c: principals.create_principal(c, "human", "seed", AT))
    actor = human["principal_id"]
    run_write(
        conn, lambda c: insert_project(c, ProjectCreate(id="demo", name="D"), actor, "human", AT)
    )
    conn.execute(
        "INSERT INTO tasks (id, project_id, title, description, acceptance_criteria, kind,"
        " priority, status, revision, judged_revision, created_by, created_at, updated_at)"
        " VALUES ('task_1', 'demo', 't', 'd', '[]', 'feature', 0, 'open', 1, 1, ?, ?, ?)",
        (actor, AT, AT),
    )
    base: dict[str, object] = {
        "project_id": "demo", "kind": "lesson", "collection": "project",
        "share_across_projects": 0, "title": "plain", "body": "plain body", "status": "observed",
        "scope_task_ids": "[]", "scope_components": "[]", "scope_environments": "[]",
        "scope_versions": "[]", "tags": "[]", "applicability": "", "provenance_summary": "",
        "provenance_actor_id": actor, "provenance_recorded_at": AT, "revision": 1,
        "created_at": AT, "updated_at": AT,
    }  # fmt: skip
    _insert(conn, {**base, "id": "kn_plain"})
    _insert(
        conn,
        {
            **base, "id": "kn_full", "kind": "rejected_approach", "collection": "shared",
            "share_across_projects": 1, "title": ODD_TEXT, "body": ODD_TEXT * 40,
            "status": "validated",
            "scope_task_ids": json.dumps(["task_1"]),
            "scope_components": json.dumps(["api", "wé\"b"], ensure_ascii=False),
            "scope_environments": json.dumps(["prod"]), "scope_versions": json.dumps(["1.0"]),
            "tags": json.dumps(["a", ODD_TEXT], separators=(",", ":"), ensure_ascii=False),
            "applicability": ODD_TEXT, "provenance_summary": "from a run",
            "provenance_source_uri": "https://example.test/x?y=1&z=\"2\"",
            "provenance_source_task_id": "task_1",
            "provenance_actor_session_id": "sess_1", "revision": 7,
        },
    )  # fmt: skip
    _insert(
        conn,
        {**base, "id": "kn_old", "status": "superseded", "superseded_by_id": "kn_full"},
    )
    conn.commit()
    try:
        rows = conn.execute("SELECT * FROM knowledge ORDER BY id").fetchall()
        built = knowledge_objects(conn, [row["id"] for row in rows])
        assert sorted(built) == ["kn_full", "kn_old", "kn_plain"]
        encode = msgspec.json.encode
        for row in rows:
            expected = knowledge_json(row)
            assert built[row["id"]] == expected
            assert list(built[row["id"]]) == list(expected)  # key order: the same bytes
            assert encode(built[row["id"]]) == encode(expected)
        assert knowledge_objects(conn, []) == {}
        assert knowledge_objects(conn, ["kn_missing"]) == {}
    finally:
        conn.close()
