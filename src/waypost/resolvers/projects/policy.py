"""Policy: the binding projection on the project row, and its immutable history.

A human may change any field. An agent may change `rules` only, and only while
`agent_rule_editing` is already true; it can never touch the delegation, the
relay switch or the integration owner.
"""

from __future__ import annotations

import sqlite3
from typing import Annotated, Any, Literal

import msgspec

from waypost.errors import Forbidden, InvalidRequest, RevisionConflict
from waypost.pagination import Page, check_limit, decode_cursor, encode_cursor, keyset
from waypost.resolvers.core.receipts import Idempotency, Outcome, Tx, run_mutation
from waypost.resolvers.projects.operations import require_project
from waypost.runtime import Actor, Runtime

RULES_MAX_BYTES = 64 * 1024
PROVENANCE_MAX_BYTES = 4 * 1024
FIELDS = (
    "rules",
    "agent_rule_editing",
    "allow_relayed_human_answers",
    "integration_owner",
    "lease_seconds",
    "review_mode",
)
ReviewMode = Literal["none", "human", "any"]


class PolicyPatch(msgspec.Struct, forbid_unknown_fields=True):
    expected_revision: Annotated[int, msgspec.Meta(ge=1)]
    rules: str | msgspec.UnsetType = msgspec.UNSET
    agent_rule_editing: bool | msgspec.UnsetType = msgspec.UNSET
    allow_relayed_human_answers: bool | msgspec.UnsetType = msgspec.UNSET
    integration_owner: str | msgspec.UnsetType | None = msgspec.UNSET
    lease_seconds: Annotated[int, msgspec.Meta(ge=30, le=86400)] | msgspec.UnsetType = msgspec.UNSET
    review_mode: ReviewMode | msgspec.UnsetType = msgspec.UNSET
    provenance: str | msgspec.UnsetType = msgspec.UNSET

    def changes(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in FIELDS if getattr(self, f) is not msgspec.UNSET}


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


def revision_json(row: sqlite3.Row) -> dict[str, Any]:
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


def _validate(conn: sqlite3.Connection, patch: PolicyPatch, changes: dict[str, Any]) -> None:
    if not changes:
        raise InvalidRequest.field("", "the patch names no policy field to change")
    if "rules" in changes and len(changes["rules"].encode()) > RULES_MAX_BYTES:
        raise InvalidRequest.field("rules", "rules may hold at most 64 KiB")
    if isinstance(patch.provenance, str) and len(patch.provenance.encode()) > PROVENANCE_MAX_BYTES:
        raise InvalidRequest.field("provenance", "provenance may hold at most 4 KiB")
    owner = changes.get("integration_owner")
    if (
        owner is not None
        and not conn.execute("SELECT 1 FROM principals WHERE id = ?", (owner,)).fetchone()
    ):
        raise InvalidRequest.field("integration_owner", "no such principal")


def _authorize(actor: Actor, project: sqlite3.Row, changes: dict[str, Any]) -> None:
    if actor.is_human:
        return
    if set(changes) != {"rules"}:
        raise Forbidden(
            "agents may change the rules only",
            {"reason": "agent_rules_only", "fields": sorted(changes)},
        )
    if not project["agent_rule_editing"]:
        raise Forbidden.reason(
            "agent_rule_editing_off", "agent rule editing is not delegated in this project"
        )


async def update(
    rt: Runtime, actor: Actor, idem: Idempotency, project_id: str, patch: PolicyPatch
) -> Outcome:
    changes = patch.changes()

    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        project = require_project(tx.conn, project_id)
        _validate(tx.conn, patch, changes)
        _authorize(actor, project, changes)
        if patch.expected_revision != project["policy_revision"]:
            raise RevisionConflict(
                "the policy changed since that revision",
                {"expected_revision": patch.expected_revision,
                 "current_revision": project["policy_revision"]},
            )  # fmt: skip
        revision = project["policy_revision"] + 1
        rules_changed = "rules" in changes and changes["rules"] != project["rules"]
        sets = ", ".join(f"{name} = ?" for name in changes)
        tx.conn.execute(
            f"UPDATE projects SET {sets}, policy_revision = ?, rules_revision = ?,"
            " policy_updated_at = ?, policy_updated_by = ? WHERE id = ?",
            (*changes.values(), revision,
             revision if rules_changed else project["rules_revision"],
             tx.at, actor.principal_id, project_id),
        )  # fmt: skip
        provenance = patch.provenance if isinstance(patch.provenance, str) else ""
        tx.conn.execute(
            "INSERT INTO policy_revisions (project_id, revision, rules, agent_rule_editing,"
            " allow_relayed_human_answers, integration_owner, lease_seconds, review_mode,"
            " actor_id, actor_kind, actor_session_id, at, provenance)"
            " SELECT id, policy_revision, rules, agent_rule_editing, allow_relayed_human_answers,"
            " integration_owner, lease_seconds, review_mode, ?, ?, ?, ?, ?"
            " FROM projects WHERE id = ?",
            (actor.principal_id, actor.kind, actor.session_id, tx.at, provenance, project_id),
        )
        policy = policy_json(require_project(tx.conn, project_id))
        tx.event(
            project_id,
            "policy.updated",
            "policy",
            project_id,
            {"revision": revision, "fields": sorted(changes), "rules_changed": rules_changed},
        )
        return 200, policy

    return await run_mutation(rt, actor, idem, unit)


async def get(rt: Runtime, project_id: str) -> dict[str, Any]:
    return await rt.db.read(lambda conn: policy_json(require_project(conn, project_id)))


def history_sync(
    conn: sqlite3.Connection,
    project_id: str,
    cursor: str | None,
    limit: int | None,
    backward: bool = False,
) -> Page[dict[str, Any]]:
    """Revisions newest first; `backward` walks toward the newest (GraphQL `last`)."""
    size = check_limit(limit)
    require_project(conn, project_id)
    cmp, order = keyset(True, backward)
    start = 0 if backward else 2**62
    if cursor:
        start = int(decode_cursor(cursor, int)[0])  # type: ignore[call-overload]
    rows = conn.execute(
        f"SELECT * FROM policy_revisions WHERE project_id = ? AND revision {cmp} ?"
        f" ORDER BY revision {order} LIMIT ?",
        (project_id, start, size + 1),
    ).fetchall()
    page = Page.from_rows(
        rows, size, lambda r: encode_cursor(r["revision"]), backward=backward, cursor=cursor
    )
    return page.with_items([revision_json(r) for r in page.items])


async def history(
    rt: Runtime, project_id: str, cursor: str | None, limit: int | None, backward: bool = False
) -> Page[dict[str, Any]]:
    return await rt.db.read(lambda conn: history_sync(conn, project_id, cursor, limit, backward))
