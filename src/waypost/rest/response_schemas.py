"""JSON Schemas (2020-12) of the REST routes' success bodies.

Each shape is written once, as the resolvers build it and as the docs
(docs/api.md, tasks.md, knowledge.md, decisions.md, context.md) and the
service contract describe it. `openapi.py` lists `SCHEMAS` under
`#/components/schemas` and points each operation's success response at the
schema `RESPONSES` names for its operationId.

The bounds of lists come from the request models and the lists that make
them (`tasks.CRITERIA_MAX`, `MAX_IDS`, `DIGEST_LIMIT`, ...), so a limit is
changed in one place.

Every key the server sends is `required`, and every object the server
shapes itself is closed (`additionalProperties: false`); only an event's
`data` is open. Times are RFC 3339 UTC with milliseconds, as the service
clock writes them (`2026-11-29T18:00:00.000Z`).
"""

from __future__ import annotations

import copy
from typing import Any, get_args

from waypost.ids import ID_CHARS, SLUG_CHARS
from waypost.pagination import LIMIT_MAX as PAGE_MAX
from waypost.reranker.reasons import REASONS
from waypost.resolvers.context.params import LIMIT_MAX as PACKET_MAX
from waypost.resolvers.decisions import models as decisions
from waypost.resolvers.decisions.digest import DIGEST_LIMIT
from waypost.resolvers.decisions.gate import MAX_IDS
from waypost.resolvers.knowledge.models import MAX_SUBMISSION_LESSONS, SCOPE_ENTRIES_MAX, TAGS_MAX
from waypost.resolvers.tasks import models as tasks
from waypost.resolvers.tasks.leases import RECOVER_CHECKPOINTS

Schema = dict[str, Any]


# --- building blocks -------------------------------------------------------------


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: Schema) -> Schema:
    """`schema` or `null`."""
    if isinstance(schema.get("type"), str) and not {"enum", "const"} & set(schema):
        return {**schema, "type": [schema["type"], "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def enum(*values: str) -> Schema:
    return {"type": "string", "enum": list(values)}


def const(value: Any) -> Schema:
    return {"const": value}


def array(items: Schema, **bounds: Any) -> Schema:
    return {"type": "array", "items": items, **bounds}


def distinct(items: Schema, **bounds: Any) -> Schema:
    """An array whose items the server keeps distinct (it refuses repeats)."""
    return array(items, uniqueItems=True, **bounds)


def obj(properties: Schema, **rules: Any) -> Schema:
    """A closed object: every property present, no other."""
    return {
        "type": "object",
        "required": list(properties),
        "properties": properties,
        "additionalProperties": False,
        **rules,
    }


def page(item: str) -> Schema:
    """A list page: `{"items": [...], "next_cursor": "..." | null}` (limit 1-200)."""
    return obj({"items": array(ref(item), maxItems=PAGE_MAX), "next_cursor": nullable(STRING)})


def either(condition: Schema, then: Schema, otherwise: Schema) -> Schema:
    """`then` holds for the object's properties when `condition` does, else `otherwise`."""
    return {
        "if": {"properties": condition, "required": list(condition)},
        "then": {"properties": then},
        "else": {"properties": otherwise},
    }


STRING: Schema = {"type": "string"}
BOOL: Schema = {"type": "boolean"}
INTEGER: Schema = {"type": "integer"}
COUNT: Schema = {"type": "integer", "minimum": 0}
# revisions, generations and sequences start at 1
NUMBER: Schema = {"type": "integer", "minimum": 1}
TIME: Schema = {
    "type": "string",
    "format": "date-time",
    "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$",
}
ID: Schema = {"type": "string", "pattern": f"^{ID_CHARS}$"}
PROJECT_ID: Schema = {"type": "string", "pattern": f"^{SLUG_CHARS}$"}
# the lifecycle adapter's ids (docs/lifecycle.md, "Request rules")
LIFECYCLE_ID: Schema = {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,256}$"}
PRINCIPAL_KIND = enum("human", "agent")


# --- principals, sessions, projects, policy, events -----------------------------

PRINCIPAL = obj({"id": ID, "kind": PRINCIPAL_KIND, "name": STRING})
SESSION = obj(
    {
        "id": ID,
        "principal_id": ID,
        "started_at": TIME,
        "expires_at": TIME,
        "ended_at": nullable(TIME),
    }
)
ME = obj({"principal": ref("Principal"), "session": nullable(ref("Session"))})
PROJECT = obj({"id": PROJECT_ID, "name": STRING, "created_at": TIME, "created_by": ID})

POLICY_SETTINGS: Schema = {
    "rules": STRING,
    "agent_rule_editing": BOOL,
    "allow_relayed_human_answers": BOOL,
    "integration_owner": nullable(ID),
    "lease_seconds": {"type": "integer", "minimum": 30, "maximum": 86400},
    "review_mode": enum("none", "human", "any"),
}
POLICY = obj(
    {
        "project_id": PROJECT_ID,
        "revision": NUMBER,
        **POLICY_SETTINGS,
        "updated_at": TIME,
        "updated_by": ID,
    }
)
POLICY_REVISION = obj(
    {
        "project_id": PROJECT_ID,
        "revision": NUMBER,
        **POLICY_SETTINGS,
        "actor_id": ID,
        "actor_kind": PRINCIPAL_KIND,
        "actor_session_id": nullable(ID),
        "at": TIME,
        "provenance": STRING,
    }
)

# What a project's event list can hold: one type per mutation (the session
# events belong to no project).
EVENT_TYPES = (
    "project.created",
    "policy.updated",
    "task.created",
    "task.updated",
    "task.claimed",
    "task.renewed",
    "task.checkpointed",
    "task.released",
    "task.recovered",
    "task.submitted",
    "task.completed",
    "task.publication_prepared",
    "task.publication_result_recorded",
    "task.publication_finalized",
    "knowledge.created",
    "knowledge.corrected",
    "knowledge.feedback_recorded",
    "decision.opened",
    "decision.answered",
    "decision.reopened",
    "decision.timed_out",
)
EVENT = obj(
    {
        "sequence": NUMBER,
        "project_id": PROJECT_ID,
        "type": enum(*EVENT_TYPES),
        "subject_type": enum("project", "policy", "task", "knowledge", "decision"),
        "subject_id": ID,
        "actor_id": ID,
        "actor_session_id": nullable(ID),
        "at": TIME,
        "data": {"type": "object"},
    }
)
EVENT_PAGE = obj({"items": array(ref("Event"), maxItems=PAGE_MAX), "next_after": COUNT})


# --- tasks ------------------------------------------------------------------------

TASK_CONTENT: Schema = {
    "title": STRING,
    "description": STRING,
    "acceptance_criteria": array(STRING, maxItems=tasks.CRITERIA_MAX),
    "kind": {"type": "string", "pattern": "^[a-z0-9_-]{1,64}$"},
    "priority": INTEGER,
    "depends_on": distinct(ID, maxItems=tasks.DEPENDENCIES_MAX),
}
TASK_FIELDS: Schema = {
    "id": ID,
    "project_id": PROJECT_ID,
    **TASK_CONTENT,
    "subject_task_id": nullable(ID),
    "status": enum(*get_args(tasks.Status)),
    "revision": NUMBER,
    "ready": BOOL,
    "blocked_by": ref("BlockedBy"),
    "lease": nullable(ref("Lease")),
    "publication": nullable(ref("Publication")),
    "created_at": TIME,
    "updated_at": TIME,
}
BLOCKED_BY = obj(
    {
        "decisions": distinct(ID, maxItems=MAX_IDS),
        "decisions_truncated": BOOL,
        "dependencies": distinct(ID),
    }
)
LEASE = obj({"owner_id": ID, "session_id": nullable(ID), "expires_at": TIME, "workflow": BOOL})
PUBLICATION = obj(
    {
        "holder_id": ID,
        "holder_session_id": nullable(ID),
        "prepared_at": TIME,
        "result": nullable(ref("PublicationResult")),
    }
)
PUBLICATION_RESULT = obj({"outcome": enum("succeeded", "failed"), "detail": STRING, "at": TIME})
TASK_REVISION = obj(
    {
        "revision": NUMBER,
        **TASK_CONTENT,
        "changed_fields": distinct(enum(*TASK_CONTENT, "status")),
        "judged_change": BOOL,
        "actor_id": ID,
        "at": TIME,
    }
)
CHECKPOINT = obj(
    {
        "id": ID,
        "task_id": ID,
        "note": STRING,
        "actor_id": ID,
        "actor_session_id": nullable(ID),
        "at": TIME,
    }
)
SUBMISSION = obj(
    {
        "id": ID,
        "task_id": ID,
        "task_revision": NUMBER,
        "summary": STRING,
        "actor_id": ID,
        "actor_session_id": nullable(ID),
        "at": TIME,
    }
)
# the answers of the lease and submission actions
TASK_LEASE = obj({"task": ref("Task"), "lease": ref("Lease")})
TASK_CHECKPOINT = obj({"checkpoint": ref("Checkpoint"), "task": ref("Task")})
TASK_RECOVERY = obj(
    {
        "task": ref("Task"),
        "lease": ref("Lease"),
        "previous_lease": ref("Lease"),
        "checkpoints": array(ref("Checkpoint"), maxItems=RECOVER_CHECKPOINTS),
    }
)
TASK_SUBMISSION = obj(
    {
        "submission": ref("Submission"),
        "task": ref("Task"),
        "lessons": array(ref("Knowledge"), maxItems=MAX_SUBMISSION_LESSONS),
    }
)


# --- knowledge --------------------------------------------------------------------

KNOWLEDGE_STATUS = enum("observed", "validated", "deprecated", "superseded")
KNOWLEDGE_CONTENT: Schema = {
    "title": STRING,
    "body": STRING,
    "status": KNOWLEDGE_STATUS,
    "scope": ref("KnowledgeScope"),
    "tags": distinct(STRING, maxItems=TAGS_MAX),
    "applicability": STRING,
    "provenance": ref("KnowledgeProvenance"),
    "superseded_by_id": nullable(ID),
}
KNOWLEDGE_FIELDS: Schema = {
    "id": ID,
    "project_id": PROJECT_ID,
    "kind": enum("lesson", "fact", "rejected_approach", "checkpoint"),
    **KNOWLEDGE_CONTENT,
    "collection": enum("project", "shared"),
    "share_across_projects": BOOL,
    "revision": NUMBER,
    "created_at": TIME,
    "updated_at": TIME,
}
# `superseded` exactly with a replacement; `shared` exactly with the opt-in
SUPERSEDED = either(
    {"status": const("superseded")},
    {"superseded_by_id": ID},
    {"superseded_by_id": {"type": "null"}},
)
SHARED = either(
    {"collection": const("shared")},
    {"share_across_projects": const(True)},
    {"share_across_projects": const(False)},
)
KNOWLEDGE_RULES: Schema = {"allOf": [SUPERSEDED, SHARED]}

SCOPE_VALUES = distinct(STRING, maxItems=SCOPE_ENTRIES_MAX)
KNOWLEDGE_SCOPE = obj(
    {
        "task_ids": distinct(ID, maxItems=SCOPE_ENTRIES_MAX),
        "components": SCOPE_VALUES,
        "environments": SCOPE_VALUES,
        "versions": SCOPE_VALUES,
    }
)
KNOWLEDGE_PROVENANCE = obj(
    {
        "summary": STRING,
        "source_uri": nullable(STRING),
        "source_task_id": nullable(ID),
        "source_submission_id": nullable(ID),
        "actor_id": ID,
        "actor_session_id": nullable(ID),
        "recorded_at": TIME,
    }
)
FEEDBACK_TOTALS = obj({"useful": COUNT, "not_useful": COUNT})
KNOWLEDGE = obj(KNOWLEDGE_FIELDS, **KNOWLEDGE_RULES)
KNOWLEDGE_REVISION = obj(
    {
        "knowledge_id": ID,
        "revision": NUMBER,
        **KNOWLEDGE_CONTENT,
        "feedback": ref("FeedbackTotals"),  # the feedback bound to this revision
    },
    allOf=[SUPERSEDED],
)
KNOWLEDGE_DETAIL = obj(
    {
        **KNOWLEDGE_FIELDS,
        "history": ref("KnowledgeRevisionPage"),
        "feedback": ref("FeedbackTotals"),  # over every revision
    },
    **KNOWLEDGE_RULES,
)
KNOWLEDGE_FEEDBACK = obj(
    {
        "id": ID,
        "knowledge_id": ID,
        "project_id": PROJECT_ID,  # the record's source project
        "revision": NUMBER,
        "useful": BOOL,
        "comment": nullable(STRING),
        "actor_id": ID,
        "actor_session_id": nullable(ID),
        "at": TIME,
    }
)


# --- decisions and the digest ---------------------------------------------------

DECISION_STATUS = ("pending", "allowed", "denied", "deferred", "expired", "stale")
DECISION_FIELDS: Schema = {
    "id": ID,
    "project_id": PROJECT_ID,
    "question": STRING,
    "options": distinct(STRING, minItems=decisions.OPTIONS_MIN, maxItems=decisions.OPTIONS_MAX),
    "rationale": STRING,
    "required_actor": enum("human", "agent", "either"),
    "recommendation": nullable(STRING),
    "reversible": BOOL,
    "status": enum(*DECISION_STATUS),
    "work_allowed": BOOL,
    "generation": NUMBER,
    "current": ref("DecisionGeneration"),
    "created_at": TIME,
    "created_by": ID,
}
# only `allowed` lets work go on
DECISION_RULES = either(
    {"status": const("allowed")}, {"work_allowed": const(True)}, {"work_allowed": const(False)}
)
DECISION = obj(DECISION_FIELDS, **DECISION_RULES)
DECISION_DETAIL = obj(
    {**DECISION_FIELDS, "history": ref("DecisionGenerationPage")}, **DECISION_RULES
)
DECISION_GENERATION = obj(
    {
        "generation": NUMBER,
        "affected": array(ref("AffectedTask"), minItems=1, maxItems=decisions.AFFECTED_MAX),
        "policy_revision": NUMBER,
        "environment": STRING,
        "conditions": array(STRING, maxItems=decisions.CONDITIONS_MAX),
        "expires_at": nullable(TIME),
        "reopen_rationale": nullable(STRING),
        "actor_id": ID,
        "actor_session_id": nullable(ID),
        "at": TIME,
        "answer": nullable(ref("Answer")),
    }
)
AFFECTED_TASK = obj({"task_id": ID, "task_revision": NUMBER})
ANSWER = obj(
    {
        "disposition": enum("allow", "deny", "defer"),
        "answer": STRING,
        "rationale": STRING,
        "conditions_confirmed": BOOL,
        "actor_id": ID,
        "actor_session_id": nullable(ID),
        "relayed": BOOL,
        "relay": nullable(ref("AnswerRelay")),
        "authorized_by": nullable(ID),
        "relay_policy_revision": nullable(NUMBER),
        "timed_out": BOOL,
        "at": TIME,
    }
)
ANSWER_RELAY = obj({"prompt": STRING, "response": STRING})

DIGEST_LISTS = ("pending_decisions", "proceeded_by_timeout", "timing_out_soon", "blocked_tasks")
DIGEST = obj(
    {
        "project_id": PROJECT_ID,
        "generated_at": TIME,
        **{name: array(ref("Decision"), maxItems=DIGEST_LIMIT) for name in DIGEST_LISTS[:3]},
        "blocked_tasks": array(ref("Task"), maxItems=DIGEST_LIMIT),
        "ready_task_count": COUNT,
        "truncated": obj({name: BOOL for name in DIGEST_LISTS}),
    }
)


# --- the context packet ---------------------------------------------------------

RERANK_REASONS = REASONS
CONTEXT_ITEMS = {
    "decision": "ContextDecision",
    "task": "ContextTask",
    "knowledge": "ContextKnowledge",
}
# `next_actions` is never empty when `items` is empty or `truncated` is true
ADVISED: Schema = {"properties": {"next_actions": {"minItems": 1}}}
CONTEXT_PACKET = obj(
    {
        "policy": obj({"revision": NUMBER, "rules": STRING}),
        "items": array(
            {
                "oneOf": [ref(name) for name in CONTEXT_ITEMS.values()],
                "discriminator": {
                    "propertyName": "type",
                    "mapping": {t: ref(name)["$ref"] for t, name in CONTEXT_ITEMS.items()},
                },
            },
            maxItems=PACKET_MAX,
        ),
        "instructions_complete": BOOL,
        "truncated": BOOL,
        "next_actions": array(STRING),
        "rerank": obj({"applied": BOOL, "reason": enum(*RERANK_REASONS)}),
    },
    allOf=[
        {"if": {"properties": {"truncated": const(True)}}, "then": ADVISED},
        {"if": {"properties": {"items": {"maxItems": 0}}}, "then": ADVISED},
    ],
)
# Each item is the record's usual object with `type` in front; the packet's
# decisions are the pending or invalidated ones.
CONTEXT_DECISION = obj(
    {"type": const("decision"), **DECISION_FIELDS, "status": enum("pending", "stale", "expired")},
    **DECISION_RULES,
)
CONTEXT_TASK = obj({"type": const("task"), **TASK_FIELDS})
CONTEXT_KNOWLEDGE = obj({"type": const("knowledge"), **KNOWLEDGE_FIELDS}, **KNOWLEDGE_RULES)


# --- the review outcome (lifecycle handoff, on the public listener) --------------

REVIEW_OUTCOME = obj(
    {
        "request_id": LIFECYCLE_ID,
        "reviewer": ID,
        "disposition": enum("accepted", "rejected", "changes_requested"),
        "rationale": STRING,
        "at": TIME,
        "event_id": NUMBER,
        "memo_id": LIFECYCLE_ID,
        "version": NUMBER,
    }
)


# --- the components and which operation answers which ----------------------------

SCHEMAS: dict[str, Schema] = {
    "Principal": PRINCIPAL,
    "Session": SESSION,
    "Me": ME,
    "Project": PROJECT,
    "ProjectPage": page("Project"),
    "Policy": POLICY,
    "PolicyRevision": POLICY_REVISION,
    "PolicyRevisionPage": page("PolicyRevision"),
    "Event": EVENT,
    "EventPage": EVENT_PAGE,
    "Task": obj(TASK_FIELDS),
    "TaskPage": page("Task"),
    "BlockedBy": BLOCKED_BY,
    "Lease": LEASE,
    "Publication": PUBLICATION,
    "PublicationResult": PUBLICATION_RESULT,
    "TaskRevision": TASK_REVISION,
    "TaskRevisionPage": page("TaskRevision"),
    "Checkpoint": CHECKPOINT,
    "CheckpointPage": page("Checkpoint"),
    "Submission": SUBMISSION,
    "SubmissionPage": page("Submission"),
    "TaskLease": TASK_LEASE,
    "TaskCheckpoint": TASK_CHECKPOINT,
    "TaskRecovery": TASK_RECOVERY,
    "TaskSubmission": TASK_SUBMISSION,
    "Knowledge": KNOWLEDGE,
    "KnowledgePage": page("Knowledge"),
    "KnowledgeScope": KNOWLEDGE_SCOPE,
    "KnowledgeProvenance": KNOWLEDGE_PROVENANCE,
    "KnowledgeRevision": KNOWLEDGE_REVISION,
    "KnowledgeRevisionPage": page("KnowledgeRevision"),
    "KnowledgeDetail": KNOWLEDGE_DETAIL,
    "KnowledgeFeedback": KNOWLEDGE_FEEDBACK,
    "FeedbackTotals": FEEDBACK_TOTALS,
    "Decision": DECISION,
    "DecisionPage": page("Decision"),
    "DecisionDetail": DECISION_DETAIL,
    "DecisionGeneration": DECISION_GENERATION,
    "DecisionGenerationPage": page("DecisionGeneration"),
    "AffectedTask": AFFECTED_TASK,
    "Answer": ANSWER,
    "AnswerRelay": ANSWER_RELAY,
    "Digest": DIGEST,
    "ContextPacket": CONTEXT_PACKET,
    "ContextDecision": CONTEXT_DECISION,
    "ContextTask": CONTEXT_TASK,
    "ContextKnowledge": CONTEXT_KNOWLEDGE,
    "ReviewOutcome": REVIEW_OUTCOME,
}

# operationId (the handler's name) -> the schema of its success body
RESPONSES: dict[str, str] = {
    "get_me": "Me",
    "start_session": "Session",
    "heartbeat_session": "Session",
    "end_session": "Session",
    "create_project": "Project",
    "list_projects": "ProjectPage",
    "get_project": "Project",
    "get_policy": "Policy",
    "update_policy": "Policy",
    "policy_history": "PolicyRevisionPage",
    "list_events": "EventPage",
    "create_knowledge": "Knowledge",
    "list_knowledge": "KnowledgePage",
    "get_knowledge": "KnowledgeDetail",
    "correct_knowledge": "Knowledge",
    "knowledge_feedback_route": "KnowledgeFeedback",
    "create_task": "Task",
    "list_tasks": "TaskPage",
    "get_task": "Task",
    "update_task": "Task",
    "task_revisions": "TaskRevisionPage",
    "task_checkpoints": "CheckpointPage",
    "task_submissions": "SubmissionPage",
    "claim_task": "TaskLease",
    "renew_lease": "TaskLease",
    "checkpoint_task": "TaskCheckpoint",
    "release_lease": "Task",
    "recover_lease": "TaskRecovery",
    "submit_task": "TaskSubmission",
    "complete_task": "Task",
    "prepare_publication": "Task",
    "publication_result": "Task",
    "finalize_publication": "Task",
    "open_decision": "Decision",
    "list_decisions": "DecisionPage",
    "get_decision": "DecisionDetail",
    "answer_decision": "Decision",
    "reopen_decision": "Decision",
    "project_digest": "Digest",
    "get_context": "ContextPacket",
    "record_outcome": "ReviewOutcome",
}


def components() -> dict[str, Schema]:
    """The schemas for `#/components/schemas`, each titled with its name (a copy:
    the document is built per request and must not share these dicts)."""
    return {name: {"title": name, **copy.deepcopy(schema)} for name, schema in SCHEMAS.items()}
