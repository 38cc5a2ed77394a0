"""The roots and projects on the fast path: `Query.project(s)`, a project's
lists (decisions, tasks, knowledge, events), its policy, policy history and
digest (the console's inbox), and principals."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from waypost.resolvers.decisions import digest
from waypost.resolvers.decisions import operations as decisions
from waypost.resolvers.projects import operations as project_ops
from waypost.resolvers.tasks import reads as task_reads
from waypost.schema.fastpath import events, knowledge
from waypost.schema.fastpath.reads import ConnectionValue, Fallback, Json, Reads
from waypost.schema.fastpath.registry import (
    Read,
    Resolver,
    connection,
    global_id_of,
    key,
    once_per_project,
    read_decisions,
    read_policies,
    read_principals,
    read_projects,
    read_tasks,
    ref,
    register,
)
from waypost.schema.relay import window

# --- roots and projects -----------------------------------------------------------


def _project_by_id(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    return [r.records("project", [a["id"]], read_projects)[0] for _ in parents]


def _project_list(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Query.projects`: the resolver's window check and list read
    (`projects.list_projects_sync`, what `projects.list_projects` runs). The
    console's inbox of every project asks for it every few seconds; through
    graphql-core it cost 3.1 times the one-project inbox for the same bytes
    (408 ms against 132 at 50,000 records, scaleaudit2)."""
    w = window(a.get("first"), a.get("after"), a.get("last"), a.get("before"))
    page = project_ops.list_projects_sync(r.conn, w.cursor, w.limit, w.backward)
    found = ConnectionValue.of(page, lambda r: project_ops.count_projects_sync(r.conn))
    return [found for _ in parents]


def _project_decisions(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Project.decisions`: the resolver's own window check and list read
    (`decisions.list_sync` is what `decisions.list_decisions` runs), every
    project's page of ids first, then all their decisions in one batch: the
    console's inbox reads three such lists for each of fifty projects."""
    w = window(a.get("first"), a.get("after"), a.get("last"), a.get("before"))
    status = a["status"].value if a.get("status") is not None else None

    def counter(project_id: str) -> Callable[[Reads], int]:
        return lambda r: decisions.count_sync(r.conn, project_id, r.now_at, status)

    pages = {
        project_id: decisions.id_page_sync(
            r.conn, project_id, r.now_at, status, w.cursor, w.limit, w.backward
        )
        for project_id in dict.fromkeys(p["id"] for p in parents)
    }
    found = r.records(
        "decision", [i for page in pages.values() for i in page.items], read_decisions
    )
    values: dict[str, ConnectionValue] = {}
    start = 0
    for project_id, page in pages.items():
        mine = found[start : start + len(page.items)]
        start += len(page.items)
        # as `decisions_in_order` leaves out an id it does not find
        items = [o for o in mine if o is not None]
        values[project_id] = ConnectionValue.of(page.with_items(items), counter(project_id))
    return [values[p["id"]] for p in parents]


def _project_tasks(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Project.tasks`: the resolver's window check and `task_reads.list_tasks_sync`
    (what `task_reads.list_tasks` runs), its count only when selected."""
    ready, q = a.get("ready"), a.get("q")
    if q is not None:
        # a text filter runs on a search reader under the search time limit
        # (`task_reads.list_tasks`), not on this request's plain reader
        raise Fallback
    w = window(a.get("first"), a.get("after"), a.get("last"), a.get("before"))
    status = a["status"].value if a.get("status") is not None else None

    def counter(project_id: str) -> Callable[[Reads], int]:
        return lambda r: task_reads.count_tasks_sync(
            r.conn, project_id, r.now, status=status, ready=ready, q=q
        )

    def read(project_id: str) -> ConnectionValue:
        page = task_reads.list_tasks_sync(
            r.conn,
            project_id,
            r.now,
            status=status,
            ready=ready,
            cursor=w.cursor,
            limit=w.limit,
            q=q,
            backward=w.backward,
        )
        return ConnectionValue.of(page, counter(project_id))

    return once_per_project(parents, read)


def _own(kind: str, read: Read) -> Resolver:
    """`Project.task(id)`, `Project.decision(id)`: the record by id, null
    unless it is this project's."""

    def resolve(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
        found = r.records(kind, [a["id"]], read)[0]
        return [found if found is not None and found["project_id"] == p["id"] else None
                for p in parents]  # fmt: skip

    return resolve


# --- policy and digest (the console's inbox) ---------------------------------------


def _project_policy(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    found = r.records("policy", [p["id"] for p in parents], read_policies)
    if None in found:
        raise Fallback  # `Project.policy` raises NotFound: graphql-core renders it
    return found


# The digest part each `Digest` field reads (digest.PARTS).
_DIGEST_PARTS: dict[tuple[str, str], str] = {
    ("Digest", "pendingDecisions"): "pending_decisions",
    ("Digest", "proceededByTimeout"): "proceeded_by_timeout",
    ("Digest", "timingOutSoon"): "timing_out_soon",
    ("Digest", "blockedTasks"): "blocked_tasks",
    ("Digest", "readyTaskCount"): "ready_task_count",
}


def _digests(r: Reads, ids: list[str]) -> list[Json | None]:
    # once per project per request, as the loader reads it, every project in
    # one batch, and only the parts some selection reads: the console's inbox
    # never shows the pending list, whose decisions were a third of its work.
    # The projects are the parents', read on this snapshot.
    parts = frozenset(part for field, part in _DIGEST_PARTS.items() if field in r.selected)
    return list(digest.digests_of_projects(r.conn, ids, r.now, parts))


def _project_digest(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    return r.records("digest", [p["id"] for p in parents], _digests)


register("Policy", {
    "projectId": key("project_id"),
    "revision": key("revision"),
    "rules": key("rules"),
    "agentRuleEditing": key("agent_rule_editing"),
    "allowRelayedHumanAnswers": key("allow_relayed_human_answers"),
    "integrationOwner": ref("principal", read_principals, "integration_owner"),
    "leaseSeconds": key("lease_seconds"),
    "reviewMode": key("review_mode"),
    "updatedAt": key("updated_at"),
    "updatedBy": ref("principal", read_principals, "updated_by"),
})  # fmt: skip
# The digest's decisions and tasks are the JSON the other fields read (the
# decision loader's, and tasks with `ready` and `blocked_by` already in them).
register("Digest", {
    "projectId": key("project_id"),
    "generatedAt": key("generated_at"),
    "pendingDecisions": key("pending_decisions"),
    "proceededByTimeout": key("proceeded_by_timeout"),
    "timingOutSoon": key("timing_out_soon"),
    "blockedTasks": key("blocked_tasks"),
    "readyTaskCount": key("ready_task_count"),
    "truncated": key("truncated"),
})  # fmt: skip
register("DigestTruncated", {
    "pendingDecisions": key("pending_decisions"),
    "proceededByTimeout": key("proceeded_by_timeout"),
    "timingOutSoon": key("timing_out_soon"),
    "blockedTasks": key("blocked_tasks"),
})  # fmt: skip


def _me(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Query.me`: the caller's principal, as `sessions.me` reads it. A
    dashboard's home query with `me { name }` left the fast path whole:
    19.5 -> 34.6 ms at a few hundred records (dashjourney)."""
    found = r.records("principal", [r.principal_id], read_principals)[0] if r.principal_id else None
    if found is None:
        raise Fallback  # no caller here (a socket's), or one gone: the normal path says
    return [found for _ in parents]


register("Query", {"project": _project_by_id, "projects": _project_list, "me": _me})
connection("Project")
register("Project", {
    "id": global_id_of("Project"),
    "restId": key("id"),
    "name": key("name"),
    "createdAt": key("created_at"),
    "createdById": key("created_by"),
    "createdBy": ref("principal", read_principals, "created_by"),
    "decisions": _project_decisions,
    "tasks": _project_tasks,
    "task": _own("task", read_tasks),
    "decision": _own("decision", read_decisions),
    "policy": _project_policy,
    "digest": _project_digest,
    "knowledge": knowledge.project_list,
    "knowledgeItem": knowledge.project_item,
    "events": events.project_events,
    "policyHistory": events.policy_history,
})  # fmt: skip
register("Principal", {
    "id": global_id_of("Principal"),
    "restId": key("id"),
    "kind": key("kind"),
    "name": key("name"),
})  # fmt: skip
