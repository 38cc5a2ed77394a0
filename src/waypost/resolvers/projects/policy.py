"""Policy: the binding projection on the project row, and its immutable history.

A human may change any field. An agent may change `rules` only, and only while
`agent_rule_editing` is already true; it can never touch the delegation, the
relay switch or the integration owner.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from waypost.errors import Forbidden, InvalidRequest, RevisionConflict
from waypost.pagination import Page, check_limit, decode_cursor, encode_cursor
from waypost.resolvers.access.store import principal_exists
from waypost.resolvers.core.receipts import Idempotency, Outcome, Tx, run_mutation
from waypost.resolvers.projects import store
from waypost.resolvers.projects.models import PolicyPatch
from waypost.resolvers.projects.operations import require_project
from waypost.resolvers.projects.store import policy_json, policy_revision_json
from waypost.runtime import Actor, Runtime

__all__ = [
    "PROVENANCE_MAX_BYTES",
    "RULES_MAX_BYTES",
    "PolicyPatch",  # the REST route table and GraphQL decode into it
    "get",
    "history",
    "history_sync",
    "policy_json",
    "update",
]

RULES_MAX_BYTES = 64 * 1024
PROVENANCE_MAX_BYTES = 4 * 1024


def _validate(patch: PolicyPatch, changes: dict[str, Any]) -> None:
    """The values' own rules, checked once the actor may change those fields
    (an agent refused its field learns nothing of its values)."""
    if "rules" in changes and len(changes["rules"].encode()) > RULES_MAX_BYTES:
        raise InvalidRequest.field("rules", "rules may hold at most 64 KiB")
    if isinstance(patch.provenance, str) and len(patch.provenance.encode()) > PROVENANCE_MAX_BYTES:
        raise InvalidRequest.field("provenance", "provenance may hold at most 4 KiB")


def _check_owner(conn: sqlite3.Connection, changes: dict[str, Any]) -> None:
    """The integration owner named is a principal: judged against what is
    stored now, so after the revision check (as a task edit's checks are): a
    caller who read an older policy is told to read again first."""
    owner = changes.get("integration_owner")
    if owner is not None and not principal_exists(conn, owner):
        raise InvalidRequest.unknown("integration_owner", "no such principal", owner, "Principal")


def _authorize(actor: Actor, project: sqlite3.Row, changes: dict[str, Any]) -> None:
    if actor.is_human:
        return
    refused = set(changes) - {"rules"}
    if refused or not changes:
        # the fields an agent may not name: `rules` beside them is not one
        raise Forbidden(
            "agents may change the rules only",
            {"reason": "agent_rules_only", "fields": sorted(refused)},
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
        if not changes:
            raise InvalidRequest.field("", "the patch names no policy field to change")
        _authorize(actor, project, changes)
        _validate(patch, changes)
        if patch.expected_revision != project["policy_revision"]:
            raise RevisionConflict.behind(
                "policy", patch.expected_revision, project["policy_revision"]
            )
        _check_owner(tx.conn, changes)
        revision = project["policy_revision"] + 1
        rules_changed = "rules" in changes and changes["rules"] != project["rules"]
        provenance = patch.provenance if isinstance(patch.provenance, str) else ""
        store.update_policy(
            tx.conn,
            project_id,
            changes,
            revision,
            revision if rules_changed else project["rules_revision"],
            tx.at,
            (actor.principal_id, actor.kind, actor.session_id),
            provenance,
        )
        policy = policy_json(require_project(tx.conn, project_id))
        tx.event(project_id, "policy.updated", "policy", project_id, _event_data(
            revision, changes, project, rules_changed
        ))  # fmt: skip
        return 200, policy

    return await run_mutation(rt, actor, idem, unit)


def _event_data(
    revision: int, changes: dict[str, Any], before: sqlite3.Row, rules_changed: bool
) -> dict[str, Any]:
    """`fields`: what the patch named; `changed_fields`: those whose value
    changed, with each new value but the rules' (up to 64 KiB: `rules_changed`
    says, the revision holds them), so that a follower of the event stream
    knows what changed without reading the history (it had to compare two
    revisions to learn whether a named field changed at all)."""
    changed = sorted(f for f, value in changes.items() if value != before[f])
    return {
        "revision": revision,
        "fields": sorted(changes),
        "changed_fields": changed,
        "values": {f: changes[f] for f in changed if f != "rules"},
        "rules_changed": rules_changed,
    }


async def get(rt: Runtime, project_id: str) -> dict[str, Any]:
    # one statement, by primary key: a point read on the event loop's own
    # connection, where the hop to a reader thread and back cost more than
    # the read (storage/db.py)
    return await rt.db.read_point(lambda conn: policy_json(require_project(conn, project_id)))


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
    start = 0 if backward else 2**62
    if cursor:
        start = int(decode_cursor(cursor, int)[0])  # type: ignore[call-overload]
    rows = store.policy_revision_rows(conn, project_id, start, size + 1, backward)
    page = Page.from_rows(
        rows, size, lambda r: encode_cursor(r["revision"]), backward=backward, cursor=cursor
    )
    return page.with_items([policy_revision_json(r) for r in page.items])


async def history(
    rt: Runtime, project_id: str, cursor: str | None, limit: int | None, backward: bool = False
) -> Page[dict[str, Any]]:
    return await rt.db.read(lambda conn: history_sync(conn, project_id, cursor, limit, backward))


def revisions_by_keys(
    conn: sqlite3.Connection, keys: Sequence[tuple[str, int]]
) -> list[dict[str, Any] | None]:
    """The history entries named by (project id, revision), None where there is none."""
    rows = store.policy_revisions_by_keys(conn, keys)
    return [policy_revision_json(r) if (r := rows.get(k)) else None for k in keys]


def policies_by_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> list[dict[str, Any] | None]:
    """The current policy of each project of `ids` (None for an unknown id)."""
    rows = store.projects_by_ids(conn, ids)
    return [store.policy_json(r) if (r := rows.get(i)) else None for i in ids]
