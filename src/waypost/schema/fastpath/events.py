"""A project's event log and policy history on the fast path.

`Project.events` pages the log as the resolver does (`events.event_page`);
each event's `subject` is a union, answered by the run's union completion
(`run._complete_union`) from the (type name, record) pairs `fields._subjects`
reads. `Project.policyHistory` pages the policy's revisions
(`policy.history_sync`), counted by the policy's own revision. Through
graphql-core, a dashboard's activity feed (thirty aliased `events(first:
100)` with their subjects) held the event loop 3.1-3.9 s (gqlscaleaudit).
"""

from __future__ import annotations

from typing import Any

from waypost.resolvers.core import events
from waypost.resolvers.projects import policy
from waypost.schema.fastpath.reads import Conn, Fallback, Json, Reads
from waypost.schema.projects import sequence_cursor
from waypost.schema.relay import window


def project_events(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Project.events`, oldest first, either direction; the cursor is a
    sequence, checked as the resolver checks it."""
    w = window(a.get("first"), a.get("after"), a.get("last"), a.get("before"))
    start = sequence_cursor(w.cursor, "before" if w.backward else "after")
    pages: dict[str, Conn] = {}  # one page per distinct project, as once_per_project
    for p in parents:
        project_id = p["id"]
        if project_id not in pages:
            page = events.event_page(r.conn, project_id, start, w.limit, w.backward)

            def count(r: Reads, project_id: str = project_id) -> int:
                return events.count_events(r.conn, project_id)

            pages[project_id] = Conn.of(page, count)
    return [pages[p["id"]] for p in parents]


def policies(r: Reads, ids: list[str]) -> list[Json | None]:
    """The projects' policies (their latest revisions), by project id."""
    return policy.policies_by_ids(r.conn, ids)


def policy_history(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Project.policyHistory`, newest first, either direction; its count is
    the policy's revision (revisions are numbered 1..n), read only when asked."""
    w = window(a.get("first"), a.get("after"), a.get("last"), a.get("before"))
    pages: dict[str, Conn] = {}
    for p in parents:
        project_id = p["id"]
        if project_id not in pages:
            page = policy.history_sync(r.conn, project_id, w.cursor, w.limit, w.backward)

            def count(r: Reads, project_id: str = project_id) -> int:
                found = r.records("policy", [project_id], policies)[0]
                if found is None:
                    raise Fallback  # `Project.policy` raises NotFound: graphql-core renders it
                return int(found["revision"])

            pages[project_id] = Conn.of(page, count)
    return [pages[p["id"]] for p in parents]
