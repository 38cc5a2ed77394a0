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
from waypost.schema.fastpath import knowledge
from waypost.schema.fastpath.reads import ConnectionValue, Fallback, Json, Reads
from waypost.schema.fastpath.registry import (
    Read,
    connection,
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
from waypost.schema.projects import sequence_cursor
from waypost.schema.relay import window


def project_events(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Project.events`, oldest first, either direction; the cursor is a
    sequence, checked as the resolver checks it."""
    w = window(a.get("first"), a.get("after"), a.get("last"), a.get("before"))
    start = sequence_cursor(w.cursor, "before" if w.backward else "after")

    def read(project_id: str) -> ConnectionValue:
        page = events.event_page(r.conn, project_id, start, w.limit, w.backward)
        return ConnectionValue.of(page, lambda r: events.count_events(r.conn, project_id))

    return once_per_project(parents, read)


def policy_history(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Project.policyHistory`, newest first, either direction; its count is
    the policy's revision (revisions are numbered 1..n), read only when asked."""
    w = window(a.get("first"), a.get("after"), a.get("last"), a.get("before"))

    def read(project_id: str) -> ConnectionValue:
        page = policy.history_sync(r.conn, project_id, w.cursor, w.limit, w.backward)

        def count(r: Reads) -> int:
            found = r.records("policy", [project_id], read_policies)[0]
            if found is None:
                raise Fallback  # `Project.policy` raises NotFound: graphql-core renders it
            return int(found["revision"])

        return ConnectionValue.of(page, count)

    return once_per_project(parents, read)


# --- registrations ------------------------------------------------------------------

connection("Event")
connection("PolicyRevision")


def _subjects(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Event.subject`: (type name, record) pairs for the union, each kind
    read in one batch, as `schema.projects._load_subject` reads them: a
    knowledge record as its event's project sees it, a policy revision by
    the revision the event's data names."""
    kinds: dict[str, list[Any]] = {}
    for p in parents:
        kinds.setdefault(p["subject_type"], []).append(p)

    def of(kind: str, read: Read) -> dict[str, Json | None]:
        ids = [p["subject_id"] for p in kinds.get(kind, ())]
        return dict(zip(ids, r.records(kind, ids, read), strict=True))

    projects, tasks = of("project", read_projects), of("task", read_tasks)
    decisions, records = of("decision", read_decisions), of("knowledge", knowledge.records)
    keys = [(p["subject_id"], p["data"]["revision"]) for p in kinds.get("policy", ())]
    revisions = dict(zip(keys, policy.revisions_by_keys(r.conn, keys) if keys else [], strict=True))
    result: list[Any] = []
    for p in parents:
        kind, subject_id = p["subject_type"], p["subject_id"]
        found: tuple[str, Json | None]
        if kind == "project":
            found = ("Project", projects[subject_id])
        elif kind == "policy":
            found = ("PolicyRevision", revisions[(subject_id, p["data"]["revision"])])
        elif kind == "task":
            found = ("Task", tasks[subject_id])
        elif kind == "knowledge":
            found = ("Knowledge", knowledge.seen_from(records[subject_id], p["project_id"]))
        elif kind == "decision":
            found = ("Decision", decisions[subject_id])
        else:
            found = ("", None)
        result.append(None if found[1] is None else found)
    return result


register("Event", {
    "sequence": key("sequence"),
    "projectId": key("project_id"),
    "type": key("type"),
    "subjectType": key("subject_type"),
    "subjectId": key("subject_id"),
    "actorId": key("actor_id"),
    "actorSessionId": key("actor_session_id"),
    "at": key("at"),
    "data": key("data"),
    "actor": ref("principal", read_principals, "actor_id"),
    "project": ref("project", read_projects, "project_id"),
    "subject": _subjects,
})  # fmt: skip
register("PolicyRevision", {
    "revision": key("revision"),
    "rules": key("rules"),
    "agentRuleEditing": key("agent_rule_editing"),
    "allowRelayedHumanAnswers": key("allow_relayed_human_answers"),
    "integrationOwnerId": key("integration_owner"),
    "leaseSeconds": key("lease_seconds"),
    "reviewMode": key("review_mode"),
    "actorId": key("actor_id"),
    "actorKind": key("actor_kind"),
    "actorSessionId": key("actor_session_id"),
    "at": key("at"),
    "provenance": key("provenance"),
    "actor": ref("principal", read_principals, "actor_id"),
    "integrationOwner": ref("principal", read_principals, "integration_owner"),
})  # fmt: skip
