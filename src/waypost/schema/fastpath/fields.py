"""The fields the fast path resolves: (type, field) -> a batch resolver.

A resolver takes every parent at one level of the result at once (all fifty
decisions of a page, all their generations, ...) and returns one value per
parent, as REST JSON, so each relation costs one batch of reads per level,
exactly as the DataLoaders make it, whatever the number of parents.

Only fields whose normal resolver does nothing but read are here, and their
reads are the same functions (`loaders.*_sync`, the decisions list and
count, a task's histories and decisions in `task_histories.py`), except
tasks by id: those come from `tasks.stored_gate`, the same
task JSON with `ready` read from the stored gate state and `blocked_by`
derived from the history only when `blockedBy` is selected (a dashboard
asks every task whether it is ready, rarely why not). The caller's
authority is bearer authentication's for all of them. Fields with their
own authority rules (`Session`, `mySession`), anything that writes, and
anything not listed take graphql-core's path.
The getters mirror the types' `from_json` (JSON key -> field); the
equality tests compare both paths on every field listed here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from operator import itemgetter
from typing import Any

from waypost.pagination import decode_cursor, encode_cursor
from waypost.resolvers.decisions import digest
from waypost.resolvers.decisions import operations as decisions
from waypost.resolvers.decisions import views as decision_views
from waypost.resolvers.projects import operations as project_ops
from waypost.resolvers.projects import policy
from waypost.resolvers.tasks import reads as task_reads
from waypost.resolvers.tasks import stored_gate
from waypost.schema import budget, loaders
from waypost.schema.fastpath import events, knowledge, task_histories
from waypost.schema.fastpath.reads import Conn, Fallback, Json, Reads
from waypost.schema.relay import global_id, window

Resolver = Callable[[Reads, list[Any], dict[str, Any]], list[Any]]
Read = Callable[[Reads, list[str]], list[Json | None]]

FIELDS: dict[tuple[str, str], Resolver] = {}


def typename(name: str) -> Resolver:
    return lambda r, parents, a: [name] * len(parents)


def key(name: str) -> Resolver:
    get = itemgetter(name)
    return lambda r, parents, a: list(map(get, parents))


def _global_id(type_name: str) -> Resolver:
    return lambda r, parents, a: [global_id(type_name, p["id"]) for p in parents]


def _principals(r: Reads, ids: list[str]) -> list[Json | None]:
    return loaders.principals_sync(r.conn, ids)


def _projects(r: Reads, ids: list[str]) -> list[Json | None]:
    return loaders.projects_sync(r.conn, ids)


def _tasks(r: Reads, ids: list[str]) -> list[Json | None]:
    # `ready` from the stored gate state; `blocked_by` derived only if selected
    # (`_blocked_by`): the loader's task JSON derives it for every task. Only
    # the keys some selection of the operation reads (each column costs).
    found = stored_gate.tasks_by_ids(r.conn, ids, r.now, _task_keys(r.selected))
    return [found.get(i) for i in ids]


# The task JSON key each field of the fast path reads from a task record
# (`id`, `project_id`, `subject_task_id` are always there: `Task.id`,
# `restId`, `projectId`, `project`, `subject`, `activities`, `Project.task`;
# a test checks that every registered Task field is covered).
TASK_KEYS: dict[tuple[str, str], str] = {
    ("Task", "title"): "title",
    ("Task", "description"): "description",
    ("Task", "acceptanceCriteria"): "acceptance_criteria",
    ("Task", "kind"): "kind",
    ("Task", "priority"): "priority",
    ("Task", "status"): "status",
    ("Task", "revision"): "revision",
    ("Task", "ready"): "ready",
    ("Task", "blockedBy"): "blocked_by",
    ("Task", "createdAt"): "created_at",
    ("Task", "updatedAt"): "updated_at",
    ("Task", "dependsOn"): "depends_on",
    ("Task", "revisions"): "revision",  # revisions are numbered 1..revision
    ("Task", "lease"): "lease",
    ("Task", "publication"): "publication",
    ("DecisionAffected", "currentRevision"): "revision",
}


@lru_cache(maxsize=256)
def _task_keys(selected: frozenset[tuple[str, str]]) -> frozenset[str]:
    return frozenset(TASK_KEYS[s] for s in selected if s in TASK_KEYS)


def _decisions(r: Reads, ids: list[str]) -> list[Json | None]:
    return loaders.decisions_sync(r.conn, ids, r.now_at)


def ref(kind: str, read: Read, attribute: str) -> Resolver:
    """A reference by id (null when the id is null or names no record)."""

    def resolve(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
        ids = [p[attribute] for p in parents]
        found = r.records(kind, [i for i in ids if i is not None], read)
        it = iter(found)
        return [None if i is None else next(it) for i in ids]

    return resolve


def refs(kind: str, read: Read, attribute: str) -> Resolver:
    """A list of references by ids; ids naming no record are left out (as
    `load_tasks` does)."""

    def resolve(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
        lists = [p[attribute] for p in parents]
        # every id becomes an object of the next level: past the limit, refuse
        # before reading them (graphql-core counts these lists whole as they
        # start too: schema/execution.py `_ID_LISTS`)
        if r.objects + sum(map(len, lists)) > r.max_objects:
            raise budget.ObjectsExceeded
        found = iter(r.records(kind, [i for ids in lists for i in ids], read))
        return [[x for x in (next(found) for _ in ids) if x is not None] for ids in lists]

    return resolve


def _register(type_name: str, fields: dict[str, Resolver]) -> None:
    for name, resolver in fields.items():
        FIELDS[(type_name, name)] = resolver


def _connection(type_name: str) -> None:
    """`XConnection` and `XEdge` (relay.Connection.of: nodes zipped with cursors)."""
    _register(f"{type_name}Connection", {
        "edges": lambda r, ps, a: [list(zip(c.cursors, c.items, strict=True)) for c in ps],
        "nodes": lambda r, ps, a: [c.items for c in ps],
        "pageInfo": lambda r, ps, a: ps,
        "totalCount": lambda r, ps, a: [c.total(r) for c in ps],
    })  # fmt: skip
    _register(f"{type_name}Edge", {
        "cursor": lambda r, ps, a: [e[0] for e in ps],
        "node": lambda r, ps, a: [e[1] for e in ps],
    })  # fmt: skip


# the parent of a PageInfo is its Conn
_register("PageInfo", {
    "hasNextPage": lambda r, ps, a: [p.has_next for p in ps],
    "hasPreviousPage": lambda r, ps, a: [p.has_previous for p in ps],
    "startCursor": lambda r, ps, a: [p.cursors[0] if p.cursors else None for p in ps],
    "endCursor": lambda r, ps, a: [p.cursors[-1] if p.cursors else None for p in ps],
})  # fmt: skip


# --- roots and projects -----------------------------------------------------------


def _project_by_id(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    return [r.records("project", [a["id"]], _projects)[0] for _ in parents]


def _project_list(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Query.projects`: the resolver's window check and list read
    (`projects.list_projects_sync`, what `projects.list_projects` runs). The
    console's inbox of every project asks for it every few seconds; through
    graphql-core it cost 3.1 times the one-project inbox for the same bytes
    (408 ms against 132 at 50,000 records, scaleaudit2)."""
    w = window(a.get("first"), a.get("after"), a.get("last"), a.get("before"))
    page = project_ops.list_projects_sync(r.conn, w.cursor, w.limit, w.backward)
    found = Conn.of(page, lambda r: project_ops.count_projects_sync(r.conn))
    return [found for _ in parents]


def _project_decisions(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Project.decisions`: the resolver's own window check and list read
    (`decisions.list_sync` is what `decisions.list_decisions` runs)."""
    w = window(a.get("first"), a.get("after"), a.get("last"), a.get("before"))
    status = a["status"].value if a.get("status") is not None else None

    def counter(project_id: str) -> Callable[[Reads], int]:
        return lambda r: decisions.count_sync(r.conn, project_id, r.now_at, status)

    def read(project_id: str) -> Conn:
        page = decisions.list_sync(r.conn, project_id, r.now_at, status, w.cursor, w.limit,
                                   w.backward)  # fmt: skip
        return Conn.of(page, counter(project_id))

    return once_per_project(parents, read)


def once_per_project(parents: list[Any], read: Callable[[str], Conn]) -> list[Conn]:
    """One page per distinct project among `parents`: a project reached through
    each of 2,000 affected tasks read its `decisions(first: 100)` 2,000 times
    (34 s) before the object limit refused the answer."""
    pages: dict[str, Conn] = {}
    result = []
    for p in parents:
        page = pages.get(p["id"])
        if page is None:
            page = pages[p["id"]] = read(p["id"])
        result.append(page)
    return result


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

    def read(project_id: str) -> Conn:
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
        return Conn.of(page, counter(project_id))

    return once_per_project(parents, read)


def _project_task(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Project.task(id)`: the task by id, null unless it is this project's."""
    found = r.records("task", [a["id"]], _tasks)[0]
    return [found if found is not None and found["project_id"] == p["id"] else None
            for p in parents]  # fmt: skip


# --- policy and digest (the console's inbox) ---------------------------------------


def _project_policy(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    found = r.records("policy", [p["id"] for p in parents], events.policies)
    if None in found:
        raise Fallback  # `Project.policy` raises NotFound: graphql-core renders it
    return found


def _digests(r: Reads, ids: list[str]) -> list[Json | None]:
    # once per project per request, as the loader reads it; a missing project
    # raises NotFound, which hands the operation to graphql-core
    return [digest.digest_sync(r.conn, project_id, r.now) for project_id in ids]


def _project_digest(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    return r.records("digest", [p["id"] for p in parents], _digests)


_register("Policy", {
    "projectId": key("project_id"),
    "revision": key("revision"),
    "rules": key("rules"),
    "agentRuleEditing": key("agent_rule_editing"),
    "allowRelayedHumanAnswers": key("allow_relayed_human_answers"),
    "integrationOwner": ref("principal", _principals, "integration_owner"),
    "leaseSeconds": key("lease_seconds"),
    "reviewMode": key("review_mode"),
    "updatedAt": key("updated_at"),
    "updatedBy": ref("principal", _principals, "updated_by"),
})  # fmt: skip
# The digest's decisions and tasks are the JSON the other fields read (the
# decision loader's, and tasks with `ready` and `blocked_by` already in them).
_register("Digest", {
    "projectId": key("project_id"),
    "generatedAt": key("generated_at"),
    "pendingDecisions": key("pending_decisions"),
    "proceededByTimeout": key("proceeded_by_timeout"),
    "timingOutSoon": key("timing_out_soon"),
    "blockedTasks": key("blocked_tasks"),
    "readyTaskCount": key("ready_task_count"),
    "truncated": key("truncated"),
})  # fmt: skip
_register("DigestTruncated", {
    "pendingDecisions": key("pending_decisions"),
    "proceededByTimeout": key("proceeded_by_timeout"),
    "timingOutSoon": key("timing_out_soon"),
    "blockedTasks": key("blocked_tasks"),
})  # fmt: skip


_register("Query", {"project": _project_by_id, "projects": _project_list})
_connection("Project")
_register("Project", {
    "id": _global_id("Project"),
    "restId": key("id"),
    "name": key("name"),
    "createdAt": key("created_at"),
    "createdById": key("created_by"),
    "createdBy": ref("principal", _principals, "created_by"),
    "decisions": _project_decisions,
    "tasks": _project_tasks,
    "task": _project_task,
    "policy": _project_policy,
    "digest": _project_digest,
    "knowledge": knowledge.project_list,
    "knowledgeItem": knowledge.project_item,
    "events": events.project_events,
    "policyHistory": events.policy_history,
})  # fmt: skip
_register("Principal", {
    "id": _global_id("Principal"),
    "restId": key("id"),
    "kind": key("kind"),
    "name": key("name"),
})  # fmt: skip


# --- decisions --------------------------------------------------------------------


def _generations(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Decision.generations`, forward (backward pages take the normal path,
    relay.position_page).

    Generations are numbered 1..n, n the decision's `generation` (what
    `position_page` and `totalCount` rely on too), so a page's keys follow
    from the cursor without the loader's window statement, and the current
    generation is the one the decision came with (`load_decisions` built it
    with the same `load_generations`). The others are read in one batch, and
    the page is made as `history_pages` makes it.
    """
    w = window(a.get("first"), a.get("after"), a.get("last"), a.get("before"))
    if w.backward:
        raise Fallback
    before = 2**62 if w.cursor is None else decode_cursor(w.cursor, int)[0]
    assert isinstance(before, int)
    wanted = []
    for d in parents:
        top = min(before - 1, d["generation"])
        # up to limit + 1 keys: the extra one tells that another page follows
        wanted.append([(d["id"], g) for g in range(top, max(top - w.limit - 1, 0), -1)])
    older = {k for d, keys in zip(parents, wanted, strict=True) for k in keys
             if k[1] != d["generation"]}  # fmt: skip
    # only the keys some selection of the operation shows (each column costs)
    gen_keys, answer_keys = _generation_keys(r.selected)
    loaded = decision_views.load_generations_showing(r.conn, sorted(older), gen_keys, answer_keys)
    result = []
    for d, keys in zip(parents, wanted, strict=True):
        # Page.from_rows' rule (limit + 1 rows fetched: the extra one means more),
        # with the cursors (encode_cursor(generation)) made only if asked for
        shown = keys[: w.limit]
        items = [d["current"] if k[1] == d["generation"] else loaded[k] for k in shown]

        def cursors(shown: list[tuple[str, int]] = shown) -> list[str]:
            return [encode_cursor(k[1]) for k in shown]

        def count(r: Reads, n: int = d["generation"]) -> int:
            return n  # generations are numbered 1..n: the current one is their count

        # as relay.position_page: a forward page after a cursor has items before it
        result.append(Conn(items, cursors, len(keys) > w.limit, w.cursor is not None, count))
    return result


# The generation and answer JSON key each field of the fast path reads: the
# registrations below are made from these tables, and `_generation_keys`
# reads only the keys a query selects.
GENERATION_KEYS: dict[str, str] = {
    "generation": "generation",
    "affected": "affected",
    "policyRevision": "policy_revision",
    "environment": "environment",
    "conditions": "conditions",
    "expiresAt": "expires_at",
    "reopenRationale": "reopen_rationale",
    "actorId": "actor_id",
    "actorSessionId": "actor_session_id",
    "at": "at",
    "answer": "answer",
    "actor": "actor_id",
}
ANSWER_KEYS: dict[str, str] = {
    "disposition": "disposition",
    "answer": "answer",
    "rationale": "rationale",
    "conditionsConfirmed": "conditions_confirmed",
    "actorId": "actor_id",
    "actorSessionId": "actor_session_id",
    "relayed": "relayed",
    "relay": "relay",
    "relayPolicyRevision": "relay_policy_revision",
    "timedOut": "timed_out",
    "at": "at",
    "actor": "actor_id",
    "authorizedBy": "authorized_by",
}


@lru_cache(maxsize=256)
def _generation_keys(
    selected: frozenset[tuple[str, str]],
) -> tuple[frozenset[str], frozenset[str]]:
    generation = [f for t, f in selected if t == "DecisionGeneration" and f in GENERATION_KEYS]
    answer = [f for t, f in selected if t == "DecisionAnswer" and f in ANSWER_KEYS]
    return (
        frozenset(GENERATION_KEYS[f] for f in generation),
        frozenset(ANSWER_KEYS[f] for f in answer),
    )


_connection("Decision")
_connection("DecisionGeneration")
_register("Decision", {
    "id": _global_id("Decision"),
    "restId": key("id"),
    "projectId": key("project_id"),
    "question": key("question"),
    "options": key("options"),
    "rationale": key("rationale"),
    "requiredActor": key("required_actor"),
    "recommendation": key("recommendation"),
    "reversible": key("reversible"),
    "status": key("status"),
    "workAllowed": key("work_allowed"),
    "generation": key("generation"),
    "current": key("current"),
    "createdAt": key("created_at"),
    "affected": lambda r, ps, a: [p["current"]["affected"] for p in ps],
    "createdBy": ref("principal", _principals, "created_by"),
    "project": ref("project", _projects, "project_id"),
    "generations": _generations,
})  # fmt: skip
# each field reads its key; a principal's field reads the principal it names
_register("DecisionGeneration", {
    **{name: key(json_key) for name, json_key in GENERATION_KEYS.items()},
    "actor": ref("principal", _principals, "actor_id"),
})  # fmt: skip
_register("DecisionAnswer", {
    **{name: key(json_key) for name, json_key in ANSWER_KEYS.items()},
    "actor": ref("principal", _principals, "actor_id"),
    "authorizedBy": ref("principal", _principals, "authorized_by"),
})  # fmt: skip
_register("Relay", {"prompt": key("prompt"), "response": key("response")})


def _current_revision(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    tasks = r.records("task", [p["task_id"] for p in parents], _tasks)
    return [t["revision"] if t is not None else None for t in tasks]


_register("DecisionAffected", {
    "taskId": key("task_id"),
    "pinnedRevision": key("task_revision"),
    "task": ref("task", _tasks, "task_id"),
    "currentRevision": _current_revision,
})  # fmt: skip


# --- tasks ------------------------------------------------------------------------

_connection("Task")


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


_register("Task", {
    "id": _global_id("Task"),
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
    "project": ref("project", _projects, "project_id"),
    "dependsOn": refs("task", _tasks, "depends_on"),
    "subject": ref("task", _tasks, "subject_task_id"),
    "activities": _activities,
    "lease": key("lease"),
    "publication": key("publication"),
    "revisions": task_histories.revisions,
    "checkpoints": task_histories.history(task_reads.CHECKPOINTS),
    "submissions": task_histories.history(task_reads.SUBMISSIONS),
    "decisions": task_histories.decisions,
})  # fmt: skip
_register("Lease", {
    "sessionId": key("session_id"),
    "expiresAt": key("expires_at"),
    "workflow": key("workflow"),
    # judged at the request's one instant, as `ready` is
    "expired": lambda r, ps, a: [p["expires_at"] <= r.now_at for p in ps],
    "owner": ref("principal", _principals, "owner_id"),
})  # fmt: skip
_register("Publication", {
    "holderSessionId": key("holder_session_id"),
    "preparedAt": key("prepared_at"),
    "result": key("result"),
    "holder": ref("principal", _principals, "holder_id"),
})  # fmt: skip
_register("PublicationResult", {
    "outcome": key("outcome"),
    "detail": key("detail"),
    "at": key("at"),
})  # fmt: skip
_register("BlockedBy", {
    "decisionIds": key("decisions"),
    "decisionsTruncated": key("decisions_truncated"),
    "decisions": refs("decision", _decisions, "decisions"),
    "dependencies": refs("task", _tasks, "dependencies"),
})  # fmt: skip

# --- a task's histories (task_histories.py) --------------------------------------

_connection("TaskRevision")
_connection("TaskCheckpoint")
_connection("Submission")
_register("TaskRevision", {
    "revision": key("revision"),
    "title": key("title"),
    "description": key("description"),
    "acceptanceCriteria": key("acceptance_criteria"),
    "kind": key("kind"),
    "priority": key("priority"),
    "dependsOnIds": key("depends_on"),
    "changedFields": key("changed_fields"),
    "judgedChange": key("judged_change"),
    "dependsOn": refs("task", _tasks, "depends_on"),
    "actor": ref("principal", _principals, "actor_id"),
    "at": key("at"),
})  # fmt: skip
_register("TaskCheckpoint", {
    "restId": key("id"),
    "note": key("note"),
    "actorSessionId": key("actor_session_id"),
    "actor": ref("principal", _principals, "actor_id"),
    "at": key("at"),
})  # fmt: skip
_register("Submission", {
    "restId": key("id"),
    "taskRevision": key("task_revision"),
    "summary": key("summary"),
    "actorSessionId": key("actor_session_id"),
    "task": ref("task", _tasks, "task_id"),
    "actor": ref("principal", _principals, "actor_id"),
    "at": key("at"),
})  # fmt: skip


# --- knowledge (knowledge.py) ----------------------------------------------------

_source_task = ref("task", _tasks, "source_task_id")  # of a provenance
_connection("Knowledge")
_connection("KnowledgeRevision")
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
    "supersededBy": knowledge.superseded_by,
}
_register("Knowledge", {
    **_CONTENT,
    "id": _global_id("Knowledge"),
    "restId": key("id"),
    "projectId": key("project_id"),
    "kind": key("kind"),
    "collection": key("collection"),
    "shareAcrossProjects": key("share_across_projects"),
    "revision": key("revision"),
    "createdAt": key("created_at"),
    "updatedAt": key("updated_at"),
    "project": ref("project", _projects, "project_id"),
    "sourceTask": lambda r, ps, a: _source_task(r, [p["provenance"] for p in ps], a),
    "feedbackTotals": knowledge.feedback_totals,
    "revisions": knowledge.revisions,
})  # fmt: skip
_register("KnowledgeRevision", {
    **_CONTENT,
    "knowledgeId": key("knowledge_id"),
    "revision": key("revision"),
    "feedback": key("feedback"),
})  # fmt: skip
_register("KnowledgeScope", {
    "taskIds": key("task_ids"),
    "components": key("components"),
    "environments": key("environments"),
    "versions": key("versions"),
    "tasks": refs("task", _tasks, "task_ids"),
})  # fmt: skip
_register("KnowledgeProvenance", {
    "summary": key("summary"),
    "sourceUri": key("source_uri"),
    "sourceTaskId": key("source_task_id"),
    "sourceSubmissionId": key("source_submission_id"),
    "actorId": key("actor_id"),
    "actorSessionId": key("actor_session_id"),
    "recordedAt": key("recorded_at"),
    "actor": ref("principal", _principals, "actor_id"),
    "sourceTask": _source_task,
})  # fmt: skip
_register("FeedbackTotals", {"useful": key("useful"), "notUseful": key("not_useful")})


# --- events and policy history (events.py) -----------------------------------------

_connection("Event")
_connection("PolicyRevision")


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

    projects, tasks = of("project", _projects), of("task", _tasks)
    decisions, records = of("decision", _decisions), of("knowledge", knowledge.records)
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


_register("Event", {
    "sequence": key("sequence"),
    "projectId": key("project_id"),
    "type": key("type"),
    "subjectType": key("subject_type"),
    "subjectId": key("subject_id"),
    "actorId": key("actor_id"),
    "actorSessionId": key("actor_session_id"),
    "at": key("at"),
    "data": key("data"),
    "actor": ref("principal", _principals, "actor_id"),
    "project": ref("project", _projects, "project_id"),
    "subject": _subjects,
})  # fmt: skip
_register("PolicyRevision", {
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
    "actor": ref("principal", _principals, "actor_id"),
    "integrationOwner": ref("principal", _principals, "integration_owner"),
})  # fmt: skip
