"""Knowledge on the fast path: a project's list (without `q`) and
`knowledgeItem`, each record's revisions, feedback totals and replacement.

A record is readable through its own project, and through any other when
shared (`rules.visible_to`); what the normal path calls `viewed_from` (the
project a record was reached through, which decides whether its
`supersededBy` may be shown) travels here as the `VIEWED` key of a copy of
the record's JSON, so that the records cache keeps the plain records.
Through graphql-core a dashboard's fifty records with their scope,
provenance, feedback and latest revisions cost several times what they cost
here (docs/graphql.md, "The fast path", measures both).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from waypost.pagination import Page
from waypost.resolvers.knowledge import feedback
from waypost.resolvers.knowledge import operations as knowledge
from waypost.resolvers.knowledge.rules import visible_to
from waypost.schema.fastpath.positions import PageKey, position_pages
from waypost.schema.fastpath.reads import ConnectionValue, Fallback, Json, Reads
from waypost.schema.fastpath.registry import (
    Resolver,
    connection,
    global_id_of,
    key,
    once_per_project,
    read_principals,
    read_projects,
    read_submissions,
    read_tasks,
    ref,
    refs,
    register,
)
from waypost.schema.knowledge import list_query
from waypost.schema.relay import window

VIEWED = "viewed_from"  # never a key of the REST JSON


def records(r: Reads, ids: list[str]) -> list[Json | None]:
    found = knowledge.get_many_sync(r.conn, ids)
    return [found.get(i) for i in ids]


def seen_from(record: Json | None, project_id: str) -> Json | None:
    """The record as reached through `project_id`, or None when that project
    cannot read it (as `schema.knowledge.load_knowledge`)."""
    if record is None or not visible_to(record, project_id):
        return None
    return {**record, VIEWED: project_id}


def project_list(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Project.knowledge`: the resolver's own checks and list read
    (`operations.list_sync`, what `list_knowledge` runs); a text filter runs
    on the search readers under the search time limit, through graphql-core."""
    if a.get("q") is not None:
        raise Fallback
    w = window(a.get("first"), a.get("after"), a.get("last"), a.get("before"))
    query = list_query(None, a.get("kind"), a.get("status"), a.get("tag"),
                       a.get("includeShared", False), w.cursor, w.limit)  # fmt: skip

    def read(project_id: str) -> ConnectionValue:
        page = knowledge.list_sync(r.conn, project_id, query, w.backward)

        def count(r: Reads) -> int:
            return knowledge.count_sync(r.conn, project_id, query)

        seen = page.with_items([{**d, VIEWED: project_id} for d in page.items])
        return ConnectionValue.of(seen, count)

    return once_per_project(parents, read)


def project_item(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Project.knowledgeItem(id)`: the record, if the project can read it."""
    found = r.records("knowledge", [a["id"]], records)[0]
    return [seen_from(found, p["id"]) for p in parents]


def superseded_by(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """The replacement, as the project the record was reached through sees it."""
    ids = [p["superseded_by_id"] for p in parents]
    found = iter(r.records("knowledge", [i for i in ids if i is not None], records))
    return [None if i is None else seen_from(next(found), p[VIEWED])
            for p, i in zip(parents, ids, strict=True)]  # fmt: skip


def feedback_totals(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    def read(r: Reads, ids: list[str]) -> list[Json | None]:
        return list(feedback.totals_sync(r.conn, ids))

    return r.records("feedback totals", [p["id"] for p in parents], read)


def _revision_pages(r: Reads, keys: Sequence[PageKey]) -> dict[PageKey, Page[Json]]:
    return dict(zip(keys, knowledge.history_pages_sync(r.conn, keys), strict=True))


def revisions(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Knowledge.revisions`, numbered 1..n, n the record's `revision`, in
    either direction (`positions.py`), each seen from where its record was."""
    pages = position_pages(r, parents, a, _revision_pages)
    for p, page in zip(parents, pages, strict=True):
        page.items = [{**d, VIEWED: p[VIEWED]} for d in page.items]
    return pages


# --- registrations ------------------------------------------------------------------

_source_task = ref("task", read_tasks, "source_task_id")  # of a provenance
connection("Knowledge")
connection("KnowledgeRevision")
# the revisioned fields a record and each of its revisions share
# (schema.knowledge.KnowledgeContent)
_CONTENT: dict[str, Resolver] = {
    "title": key("title"),
    "body": key("body"),
    "status": key("status"),
    "scope": key("scope"),
    "tags": key("tags"),
    "applicability": key("applicability"),
    "provenance": key("provenance"),
    "supersededById": key("superseded_by_id"),
    "supersededBy": superseded_by,
}
register("Knowledge", {
    **_CONTENT,
    "id": global_id_of("Knowledge"),
    "restId": key("id"),
    "projectId": key("project_id"),
    "kind": key("kind"),
    "collection": key("collection"),
    "shareAcrossProjects": key("share_across_projects"),
    "revision": key("revision"),
    "createdAt": key("created_at"),
    "updatedAt": key("updated_at"),
    "project": ref("project", read_projects, "project_id"),
    "sourceTask": lambda r, ps, a: _source_task(r, [p["provenance"] for p in ps], a),
    "feedbackTotals": feedback_totals,
    "revisions": revisions,
})  # fmt: skip
register("KnowledgeRevision", {
    **_CONTENT,
    "knowledgeId": key("knowledge_id"),
    "revision": key("revision"),
    "feedback": key("feedback"),
})  # fmt: skip
register("KnowledgeScope", {
    "taskIds": key("task_ids"),
    "components": key("components"),
    "environments": key("environments"),
    "versions": key("versions"),
    "tasks": refs("task", read_tasks, "task_ids"),
})  # fmt: skip
register("KnowledgeProvenance", {
    "summary": key("summary"),
    "sourceUri": key("source_uri"),
    "sourceTaskId": key("source_task_id"),
    "sourceSubmissionId": key("source_submission_id"),
    "actorId": key("actor_id"),
    "actorSessionId": key("actor_session_id"),
    "recordedAt": key("recorded_at"),
    "actor": ref("principal", read_principals, "actor_id"),
    "sourceTask": _source_task,
    "sourceSubmission": ref("submission", read_submissions, "source_submission_id"),
})  # fmt: skip
register("FeedbackTotals", {"useful": key("useful"), "notUseful": key("not_useful")})
