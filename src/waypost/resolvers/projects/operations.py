"""Projects: create (humans), list, get."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from waypost.errors import Forbidden, NotFound, StateConflict
from waypost.pagination import Page, check_limit, decode_cursor, encode_cursor
from waypost.resolvers.core import events
from waypost.resolvers.core.receipts import Idempotency, Outcome, Tx, run_mutation
from waypost.resolvers.core.secret_markers import refuse_credential
from waypost.resolvers.core.text import require_name
from waypost.resolvers.projects import store
from waypost.resolvers.projects.models import ProjectCreate
from waypost.resolvers.projects.store import project_json
from waypost.runtime import Actor, Runtime

__all__ = [
    "ProjectCreate",  # the REST route table, GraphQL and the admin CLI decode into it
    "create",
    "create_as_admin",
    "get",
    "insert_project",
    "list_projects",
    "list_projects_sync",
    "project_json",
    "require_project",
]


def require_project(conn: sqlite3.Connection, project_id: str) -> sqlite3.Row:
    row = store.project_row(conn, project_id)
    if row is None:
        raise NotFound("no such project", {"project_id": project_id})
    return row


def insert_project(
    conn: sqlite3.Connection, body: ProjectCreate, actor_id: str, actor_kind: str, at: str
) -> dict[str, Any]:
    """Insert a project and its policy revision 1 (shared by the API and the admin CLI)."""
    require_name(body.name, "name")
    refuse_credential(body.name, "name")  # project.created keeps it
    if store.project_exists(conn, body.id):
        raise StateConflict("a project with this id exists", {"field": "id", "reason": "exists"})
    store.insert_project(conn, body.id, body.name, actor_id, actor_kind, at)
    return project_json(require_project(conn, body.id))


async def create(rt: Runtime, actor: Actor, idem: Idempotency, body: ProjectCreate) -> Outcome:
    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        if not actor.is_human:
            raise Forbidden.reason("humans_only", "only humans create projects")
        project = insert_project(tx.conn, body, actor.principal_id, actor.kind, tx.at)
        tx.event(body.id, "project.created", "project", body.id, {"name": body.name})
        return 201, project

    return await run_mutation(rt, actor, idem, unit)


def create_as_admin(
    conn: sqlite3.Connection, body: ProjectCreate, owner_id: str, at: str
) -> dict[str, Any]:
    """`waypost admin project create`: the project and its event, written as
    `owner_id` (a human) in the admin command's own transaction."""
    project = insert_project(conn, body, owner_id, "human", at)
    events.append(
        conn, project_id=body.id, type="project.created", subject_type="project",
        subject_id=body.id, actor_id=owner_id, actor_session_id=None, at=at,
        data={"name": body.name, "via": "admin"},
    )  # fmt: skip
    return project


async def get(rt: Runtime, project_id: str) -> dict[str, Any]:
    return await rt.db.read(lambda conn: project_json(require_project(conn, project_id)))


def list_projects_sync(
    conn: sqlite3.Connection, cursor: str | None, limit: int | None, backward: bool = False
) -> Page[dict[str, Any]]:
    size = check_limit(limit)
    after = str(decode_cursor(cursor, str)[0]) if cursor else None
    rows = store.project_rows_after(conn, after, size + 1, backward)
    page = Page.from_rows(
        rows, size, lambda r: encode_cursor(r["id"]), backward=backward, cursor=cursor
    )
    return page.with_items([project_json(r) for r in page.items])


async def list_projects(
    rt: Runtime, cursor: str | None, limit: int | None, backward: bool = False
) -> Page[dict[str, Any]]:
    return await rt.db.read(lambda conn: list_projects_sync(conn, cursor, limit, backward))


def count_projects_sync(conn: sqlite3.Connection) -> int:
    return store.count_projects(conn)


async def count_projects(rt: Runtime) -> int:
    return await rt.db.read(count_projects_sync)


def projects_by_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> list[dict[str, Any] | None]:
    """The projects of `ids` in that order (None for an unknown id)."""
    rows = store.projects_by_ids(conn, ids)
    return [project_json(r) if (r := rows.get(i)) else None for i in ids]
