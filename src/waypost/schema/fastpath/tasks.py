"""Tasks on the fast path: their fields (read through the stored gate state,
`registry.read_tasks`), lease, publication, what blocks them, activities
and histories (`task_histories.py`)."""

from __future__ import annotations

from typing import Any

from waypost.resolvers.tasks import reads as task_reads
from waypost.resolvers.tasks import stored_gate
from waypost.schema.fastpath import task_histories
from waypost.schema.fastpath.reads import Fallback, Reads
from waypost.schema.fastpath.registry import (
    connection,
    global_id_of,
    key,
    read_decisions,
    read_principals,
    read_projects,
    read_tasks,
    ref,
    refs,
    register,
)

# --- tasks ------------------------------------------------------------------------

connection("Task")


def _blocked_by(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Task.blockedBy`: the blocking decisions come from the history (the
    gate), read for the tasks the stored state holds, in one batch."""
    try:
        stored_gate.fill_blocked_by(r.conn, parents, r.now)
    except stored_gate.GateStateDrift:
        raise Fallback from None  # graphql-core answers wholly from the history
    return [p["blocked_by"] for p in parents]


def _activities(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Task.activities`, oldest first: one read for every task of the level,
    the loader's own (off this path, graphql-core built a nested result far
    past the object limit before refusing it, holding the event loop 5 s;
    taskgraphaudit)."""
    found = task_reads.activities_json(r.conn, [p["id"] for p in parents], r.now)
    return [found[p["id"]] for p in parents]


register("Task", {
    "id": global_id_of("Task"),
    "restId": key("id"),
    "projectId": key("project_id"),
    "title": key("title"),
    "description": key("description"),
    "acceptanceCriteria": key("acceptance_criteria"),
    "kind": key("kind"),
    "priority": key("priority"),
    "status": key("status"),
    "revision": key("revision"),
    "ready": key("ready"),
    "blockedBy": _blocked_by,
    "createdAt": key("created_at"),
    "updatedAt": key("updated_at"),
    "project": ref("project", read_projects, "project_id"),
    "dependsOn": refs("task", read_tasks, "depends_on"),
    "subject": ref("task", read_tasks, "subject_task_id"),
    "activities": _activities,
    "lease": key("lease"),
    "publication": key("publication"),
    "revisions": task_histories.revisions,
    "checkpoints": task_histories.history(task_reads.CHECKPOINTS),
    "submissions": task_histories.history(task_reads.SUBMISSIONS),
    "decisions": task_histories.decisions,
})  # fmt: skip
register("Lease", {
    "sessionId": key("session_id"),
    "expiresAt": key("expires_at"),
    "workflow": key("workflow"),
    # judged at the request's one instant, as `ready` is
    "expired": lambda r, ps, a: [p["expires_at"] <= r.now_at for p in ps],
    "owner": ref("principal", read_principals, "owner_id"),
})  # fmt: skip
register("Publication", {
    "holderSessionId": key("holder_session_id"),
    "preparedAt": key("prepared_at"),
    "result": key("result"),
    "holder": ref("principal", read_principals, "holder_id"),
})  # fmt: skip
register("PublicationResult", {
    "outcome": key("outcome"),
    "detail": key("detail"),
    "at": key("at"),
})  # fmt: skip
register("BlockedBy", {
    "decisionIds": key("decisions"),
    "decisionsTruncated": key("decisions_truncated"),
    "decisions": refs("decision", read_decisions, "decisions"),
    "dependencies": refs("task", read_tasks, "dependencies"),
})  # fmt: skip

# --- a task's histories (task_histories.py) --------------------------------------

connection("TaskRevision")
connection("TaskCheckpoint")
connection("Submission")
register("TaskRevision", {
    "revision": key("revision"),
    "title": key("title"),
    "description": key("description"),
    "acceptanceCriteria": key("acceptance_criteria"),
    "kind": key("kind"),
    "priority": key("priority"),
    "dependsOnIds": key("depends_on"),
    "changedFields": key("changed_fields"),
    "judgedChange": key("judged_change"),
    "dependsOn": refs("task", read_tasks, "depends_on"),
    "actor": ref("principal", read_principals, "actor_id"),
    "at": key("at"),
})  # fmt: skip
register("TaskCheckpoint", {
    "restId": key("id"),
    "note": key("note"),
    "actorSessionId": key("actor_session_id"),
    "actor": ref("principal", read_principals, "actor_id"),
    "at": key("at"),
})  # fmt: skip
register("Submission", {
    "restId": key("id"),
    "taskRevision": key("task_revision"),
    "summary": key("summary"),
    "actorSessionId": key("actor_session_id"),
    "task": ref("task", read_tasks, "task_id"),
    "actor": ref("principal", read_principals, "actor_id"),
    "at": key("at"),
})  # fmt: skip
