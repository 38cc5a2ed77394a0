"""Projects: create (humans), list, get."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Annotated, Any

import msgspec

from waypost.errors import Forbidden, NotFound, StateConflict
from waypost.pagination import Page, check_limit, decode_cursor, encode_cursor, keyset
from waypost.resolvers.core.receipts import Idempotency, Outcome, Tx, run_mutation
from waypost.runtime import Actor, Runtime

# msgspec matches with re.search, where `$` also matches before a final newline
# ("demo\n" would pass); the lookahead ends the match at the true end of the
# text, in Python and in the JSON Schema the OpenAPI document publishes.
ProjectId = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9][a-z0-9-]{0,62}(?![\s\S])")]
ProjectName = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]

DEFAULT_POLICY: dict[str, Any] = {
    "rules": "",
    "agent_rule_editing": False,
    "allow_relayed_human_answers": False,
    "integration_owner": None,
    "lease_seconds": 900,
    "review_mode": "human",
}


class ProjectCreate(msgspec.Struct, forbid_unknown_fields=True):
    id: ProjectId
    name: ProjectName


def project_json(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "created_at": row["created_at"],
        "created_by": row["created_by"],
    }


def require_project(conn: sqlite3.Connection, project_id: str) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM projects WHERE id = ?", (project_id,)).fetchone()
    if row is None:
        raise NotFound("no such project", {"project_id": project_id})
    result: sqlite3.Row = row
    return result


def insert_project(
    conn: sqlite3.Connection, body: ProjectCreate, actor_id: str, actor_kind: str, at: str
) -> dict[str, Any]:
    """Insert a project and its policy revision 1 (shared by the API and the admin CLI)."""
    if conn.execute("SELECT 1 FROM projects WHERE id = ?", (body.id,)).fetchone():
        raise StateConflict("a project with this id exists", {"field": "id", "reason": "exists"})
    p = DEFAULT_POLICY
    conn.execute(
        "INSERT INTO projects (id, name, created_at, created_by, policy_revision, rules,"
        " rules_revision, agent_rule_editing, allow_relayed_human_answers, integration_owner,"
        " lease_seconds, review_mode, policy_updated_at, policy_updated_by)"
        " VALUES (?, ?, ?, ?, 1, ?, 1, ?, ?, ?, ?, ?, ?, ?)",
        (body.id, body.name, at, actor_id, p["rules"], p["agent_rule_editing"],
         p["allow_relayed_human_answers"], p["integration_owner"], p["lease_seconds"],
         p["review_mode"], at, actor_id),
    )  # fmt: skip
    conn.execute(
        "INSERT INTO policy_revisions (project_id, revision, rules, agent_rule_editing,"
        " allow_relayed_human_answers, integration_owner, lease_seconds, review_mode,"
        " actor_id, actor_kind, actor_session_id, at, provenance)"
        " SELECT id, policy_revision, rules, agent_rule_editing, allow_relayed_human_answers,"
        " integration_owner, lease_seconds, review_mode, ?, ?, NULL, ?, ''"
        " FROM projects WHERE id = ?",
        (actor_id, actor_kind, at, body.id),
    )
    return project_json(require_project(conn, body.id))


async def create(rt: Runtime, actor: Actor, idem: Idempotency, body: ProjectCreate) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        if not actor.is_human:
            raise Forbidden.reason("humans_only", "only humans create projects")
        project = insert_project(tx.conn, body, actor.principal_id, actor.kind, tx.at)
        tx.event(body.id, "project.created", "project", body.id, {"name": body.name})
        return 201, project

    return await run_mutation(rt, actor, idem, unit)


async def get(rt: Runtime, project_id: str) -> dict[str, Any]:
    return await rt.db.read(lambda conn: project_json(require_project(conn, project_id)))


def list_projects_sync(
    conn: sqlite3.Connection, cursor: str | None, limit: int | None, backward: bool = False
) -> Page[dict[str, Any]]:
    size = check_limit(limit)
    cmp, order = keyset(False, backward)
    where, args = (
        ("WHERE id " + cmp + " ?", [decode_cursor(cursor, str)[0]]) if cursor else ("", [])
    )
    rows = conn.execute(
        f"SELECT * FROM projects {where} ORDER BY id {order} LIMIT ?", (*args, size + 1)
    ).fetchall()
    page = Page.from_rows(
        rows, size, lambda r: encode_cursor(r["id"]), backward=backward, cursor=cursor
    )
    return page.with_items([project_json(r) for r in page.items])


async def list_projects(
    rt: Runtime, cursor: str | None, limit: int | None, backward: bool = False
) -> Page[dict[str, Any]]:
    return await rt.db.read(lambda conn: list_projects_sync(conn, cursor, limit, backward))


async def count_projects(rt: Runtime) -> int:
    return await rt.db.read(
        lambda conn: int(conn.execute("SELECT count(*) FROM projects").fetchone()[0])
    )


def projects_by_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, sqlite3.Row]:
    """Project rows by id in one statement (GraphQL's per-request loaders of
    projects and policies)."""
    rows = conn.execute(
        "SELECT * FROM projects WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(sorted(set(ids))),),
    ).fetchall()
    return {r["id"]: r for r in rows}
