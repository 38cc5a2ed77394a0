"""Project rows and the policy history (all of this domain's SQL).

The policy projection lives on the `projects` row; every change copies the
new projection into `policy_revisions` (immutable, triggers refuse edits), so
both writes below read the projection back instead of repeating its values.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from waypost.pagination import keyset
from waypost.resolvers.projects.models import POLICY_FIELDS

DEFAULT_POLICY: dict[str, Any] = {
    "rules": "",
    "agent_rule_editing": False,
    "allow_relayed_human_answers": False,
    "integration_owner": None,
    "lease_seconds": 900,
    "review_mode": "human",
}

# Copies the projection on the project row into the next history row.
_SNAPSHOT_POLICY = (
    "INSERT INTO policy_revisions (project_id, revision, rules, agent_rule_editing,"
    " allow_relayed_human_answers, integration_owner, lease_seconds, review_mode,"
    " actor_id, actor_kind, actor_session_id, at, provenance)"
    " SELECT id, policy_revision, rules, agent_rule_editing, allow_relayed_human_answers,"
    " integration_owner, lease_seconds, review_mode, ?, ?, ?, ?, ?"
    " FROM projects WHERE id = ?"
)


def project_json(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "created_at": row["created_at"],
        "created_by": row["created_by"],
    }


def _settings(row: sqlite3.Row) -> dict[str, Any]:
    """The policy fields proper, shared by the projection and each history row."""
    return {
        "rules": row["rules"],
        "agent_rule_editing": bool(row["agent_rule_editing"]),
        "allow_relayed_human_answers": bool(row["allow_relayed_human_answers"]),
        "integration_owner": row["integration_owner"],
        "lease_seconds": row["lease_seconds"],
        "review_mode": row["review_mode"],
    }


def policy_json(row: sqlite3.Row) -> dict[str, Any]:
    """The projection, from a `projects` row."""
    return {
        "project_id": row["id"],
        "revision": row["policy_revision"],
        **_settings(row),
        "updated_at": row["policy_updated_at"],
        "updated_by": row["policy_updated_by"],
    }


def policy_revision_json(row: sqlite3.Row) -> dict[str, Any]:
    """One immutable history entry, from a `policy_revisions` row."""
    return {
        "project_id": row["project_id"],
        "revision": row["revision"],
        **_settings(row),
        "actor_id": row["actor_id"],
        "actor_kind": row["actor_kind"],
        "actor_session_id": row["actor_session_id"],
        "at": row["at"],
        "provenance": row["provenance"],
    }


def project_row(conn: sqlite3.Connection, project_id: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM projects WHERE id = ?", (project_id,)
    ).fetchone()
    return row


def project_exists(conn: sqlite3.Connection, project_id: str) -> bool:
    found = conn.execute("SELECT 1 FROM projects WHERE id = ?", (project_id,)).fetchone()
    return found is not None


def project_rows_after(
    conn: sqlite3.Connection, after: str | None, count: int, backward: bool = False
) -> list[sqlite3.Row]:
    """Up to `count` projects whose id sorts after `after`, in id order; backward
    (GraphQL `last`), those before it, in reverse order."""
    cmp, order = keyset(False, backward)
    where, args = ("", [])
    if after is not None:
        where, args = f"WHERE id {cmp} ?", [after]
    return conn.execute(
        f"SELECT * FROM projects {where} ORDER BY id {order} LIMIT ?", (*args, count)
    ).fetchall()


def count_projects(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM projects").fetchone()[0])


def projects_by_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, sqlite3.Row]:
    """Project rows by id in one statement (GraphQL's per-request loaders of
    projects and policies)."""
    rows = conn.execute(
        "SELECT * FROM projects WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(sorted(set(ids))),),
    ).fetchall()
    return {r["id"]: r for r in rows}


def policy_revisions_by_keys(
    conn: sqlite3.Connection, keys: Sequence[tuple[str, int]]
) -> dict[tuple[str, int], sqlite3.Row]:
    """History rows by (project id, revision) in one statement (the events'
    `subject` of a policy change)."""
    rows = conn.execute(
        "SELECT * FROM policy_revisions WHERE (project_id, revision) IN"
        " (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))",
        (json.dumps(sorted(set(keys))),),
    ).fetchall()
    return {(r["project_id"], r["revision"]): r for r in rows}


def insert_project(
    conn: sqlite3.Connection, project_id: str, name: str, actor_id: str, actor_kind: str, at: str
) -> None:
    """The project with the default policy as revision 1, and that revision's history row."""
    p = DEFAULT_POLICY
    conn.execute(
        "INSERT INTO projects (id, name, created_at, created_by, policy_revision, rules,"
        " rules_revision, agent_rule_editing, allow_relayed_human_answers, integration_owner,"
        " lease_seconds, review_mode, policy_updated_at, policy_updated_by)"
        " VALUES (?, ?, ?, ?, 1, ?, 1, ?, ?, ?, ?, ?, ?, ?)",
        (project_id, name, at, actor_id, p["rules"], p["agent_rule_editing"],
         p["allow_relayed_human_answers"], p["integration_owner"], p["lease_seconds"],
         p["review_mode"], at, actor_id),
    )  # fmt: skip
    conn.execute(_SNAPSHOT_POLICY, (actor_id, actor_kind, None, at, "", project_id))


def update_policy(
    conn: sqlite3.Connection,
    project_id: str,
    changes: Mapping[str, Any],
    revision: int,
    rules_revision: int,
    at: str,
    actor: tuple[str, str, str | None],
    provenance: str,
) -> None:
    """Write policy revision `revision` onto the project row and into the history.

    `actor` is (principal id, kind, session id) as the history row records it.
    """
    for name in changes:  # names become SQL: only the known policy columns
        assert name in POLICY_FIELDS, name
    sets = ", ".join(f"{name} = ?" for name in changes)
    actor_id, actor_kind, session_id = actor
    conn.execute(
        f"UPDATE projects SET {sets}, policy_revision = ?, rules_revision = ?,"
        " policy_updated_at = ?, policy_updated_by = ? WHERE id = ?",
        (*changes.values(), revision, rules_revision, at, actor_id, project_id),
    )
    conn.execute(_SNAPSHOT_POLICY, (actor_id, actor_kind, session_id, at, provenance, project_id))


def policy_revision_rows(
    conn: sqlite3.Connection, project_id: str, before: int, count: int, backward: bool = False
) -> list[sqlite3.Row]:
    """Up to `count` history rows below revision `before`, newest first; backward
    (GraphQL `last`), those above it, oldest first."""
    cmp, order = keyset(True, backward)
    return conn.execute(
        f"SELECT * FROM policy_revisions WHERE project_id = ? AND revision {cmp} ?"
        f" ORDER BY revision {order} LIMIT ?",
        (project_id, before, count),
    ).fetchall()
