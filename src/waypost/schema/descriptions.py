"""Descriptions for the schema's types, fields, arguments and enum values.

A description written next to a field (`strawberry.field(description=...)`)
wins. The many fields that mean the same thing wherever they appear
(`idempotencyKey`, `userErrors`, `restId`, `at`, the paging arguments, ...)
are described once here by name, and the rest by `Type.field`, so the schema
text stays readable. `describe` fills them in when the schema is built, and
a test checks that nothing in the schema is left without one.
"""

from __future__ import annotations

from graphql import (
    GraphQLEnumType,
    GraphQLInputObjectType,
    GraphQLInterfaceType,
    GraphQLObjectType,
    GraphQLSchema,
)

TYPES = {
    "Query": "Read the service: the caller, projects and any record by global id.",
    "Mutation": "Every REST mutation, object-first, each with one `input` and userErrors.",
    "Subscription": "Live updates over WebSocket (`graphql-transport-ws`), from committed"
    " events only.",
    "Principal": "A human or an agent that holds tokens.",
    "PrincipalKind": "Whether a principal is a human or an agent.",
    "Session": "An agent's working session: it lives 15 minutes from its start or latest"
    " heartbeat.",
    "Project": "A project: its policy, tasks, knowledge, decisions and event log.",
    "Policy": "A project's binding policy: its latest revision.",
    "PolicyRevision": "One immutable revision of a project's policy.",
    "ReviewMode": "Who may complete submitted work.",
    "Event": "One committed change (one per mutation), in the project's event log.",
    "FeedbackTotals": "Useful / not-useful feedback counts.",
    "KnowledgeKind": "What a knowledge record is.",
    "KnowledgeCollection": "Where a knowledge record lives.",
    "DecisionStatus": "A decision's status, computed at read time.",
    "Disposition": "The answer's verdict.",
    "RequiredActor": "Who may answer a decision.",
    "DigestTruncated": "Which digest lists were cut at their limit.",
    "TaskStatus": "Where a task is in its life.",
    "PublicationOutcome": "How a publication attempt ended.",
    "PublicationResult": "The recorded result of a publication attempt.",
    "RelayInput": "What an agent showed a human and the human's reply, verbatim.",
}

ENUM_VALUES = {
    "DecisionStatus.PENDING": "The current generation has no answer yet.",
    "DecisionStatus.ALLOWED": "Answered allow: the affected work may proceed.",
    "DecisionStatus.DENIED": "Answered deny: the affected work stays blocked.",
    "DecisionStatus.DEFERRED": "Answered defer: the affected work waits.",
    "DecisionStatus.EXPIRED": "Its `expiresAt` has passed; reopen to ask again.",
    "DecisionStatus.STALE": "A pinned task revision or the rules changed; reopen to ask again.",
    "ReviewDisposition.ACCEPTED": "The reviewer accepts the memo version as it stands.",
    "ReviewDisposition.REJECTED": "The reviewer rejects the memo version.",
    "ReviewDisposition.CHANGES_REQUESTED": "The reviewer asks for a revised version.",
    "Disposition.ALLOW": "The work may proceed.",
    "Disposition.DENY": "The work may not proceed.",
    "Disposition.DEFER": "Not now: the work waits.",
    "KnowledgeCollection.PROJECT": "Visible in its own project only.",
    "KnowledgeCollection.SHARED": "Also readable from other projects that ask for shared records.",
    "KnowledgeKind.LESSON": "Something learned while working.",
    "KnowledgeKind.FACT": "A fact about the system or its environment.",
    "KnowledgeKind.REJECTED_APPROACH": "An approach tried and rejected, and why.",
    "KnowledgeKind.CHECKPOINT": "Where a piece of work stood at a moment.",
    "KnowledgeStatus.OBSERVED": "Seen, not yet confirmed.",
    "KnowledgeStatus.VALIDATED": "Confirmed by someone.",
    "KnowledgeStatus.DEPRECATED": "No longer to be relied on.",
    "KnowledgeStatus.SUPERSEDED": "Replaced by the record `supersededBy` names.",
    "PrincipalKind.HUMAN": "A person.",
    "PrincipalKind.AGENT": "An AI agent; its mutations need a live session.",
    "PublicationOutcome.SUCCEEDED": "The publication went out.",
    "PublicationOutcome.FAILED": "The publication failed.",
    "RequiredActor.HUMAN": "Only a human may answer (or an agent relaying, when allowed).",
    "RequiredActor.AGENT": "Only an agent may answer.",
    "RequiredActor.EITHER": "A human or an agent may answer.",
    "ReviewMode.NONE": "Only the principal that made the latest submission completes it"
    " (anyone else, a human included, is refused).",
    "ReviewMode.HUMAN": "Only a human may complete submitted work.",
    "ReviewMode.ANY": "Any principal other than the submitter may complete it.",
    "TaskStatus.OPEN": "Waiting to be claimed.",
    "TaskStatus.CLAIMED": "Held under a lease.",
    "TaskStatus.SUBMITTED": "Work submitted, awaiting completion.",
    "TaskStatus.DONE": "Completed.",
    "TaskStatus.CANCELLED": "Cancelled; it can be reopened with taskUpdate.",
}

# Arguments and fields that mean the same thing wherever they appear.
ARGS_BY_NAME = {
    "input": "The mutation's input, with its `idempotencyKey`.",
    "first": "Page forward: this many items (1-100, default 50).",
    "after": "Page forward from this cursor (exclusive).",
    "last": "Page backward: this many items (1-100); not with `first`.",
    "before": "Page backward from this cursor (exclusive).",
    "id": "The record's REST id (`node` takes a global id).",
    "status": "Only items with this status.",
    "ready": "Only tasks that are (true) or are not (false) ready to claim.",
    "kind": "Only records of this kind.",
    "tag": "Only records with this tag.",
    "includeShared": "Also list records other projects share.",
    "projectId": "The project's REST id.",
    "q": "Full-text search terms (1-1,024 bytes, 1-32 whitespace-separated terms).",
    "limit": "At most this many items.",
    "budget": "At most this many bytes of policy plus items (compact JSON).",
    "taskId": "Put decisions affecting this task first; match knowledge scoped to it.",
    "component": "Only knowledge whose scope lists this component (or none).",
    "environment": "Only knowledge whose scope lists this environment (or none).",
    "version": "Only knowledge whose scope lists this version (or none).",
}

ARGS = {
    "Subscription.projectEvents.after": "Start after this event sequence (a resume);"
    " omitted: from the next new event.",
    "Subscription.projectEvents.projectId": "The project's REST id.",
    "Subscription.projectEventBatches.after": "Start after this event sequence (a resume);"
    " omitted: from the next new event.",
    "Subscription.projectEventBatches.projectId": "The project's REST id.",
    "Subscription.decisionChanged.id": "The decision's REST id.",
}

FIELDS_BY_NAME = {
    "idempotencyKey": "1-256 characters from `!` to `~`; the same input with the same key"
    " replays the stored result.",
    "userErrors": "Business refusals, with the REST codes; empty on success.",
    "replayed": "True when this is the stored result of an earlier request with the same key.",
    "restId": "The REST id of the record.",
    "projectId": "The project's REST id.",
    "taskId": "The task's REST id.",
    "decisionId": "The decision's REST id.",
    "knowledgeId": "The knowledge record's REST id.",
    "sessionId": "The session's REST id.",
    "principalId": "The principal's REST id.",
    "actorId": "REST id of the principal who did it.",
    "actorSessionId": (
        "The agent session it was done in; null for humans, for an agent writing"
        " without a session, and for what the service did by itself (a timeout)."
    ),
    "actor": "The principal who did it.",
    "at": "When it was recorded (service time).",
    "createdAt": "When it was created (service time).",
    "updatedAt": "When it last changed (service time).",
    "createdById": "REST id of the principal who created it.",
    "createdBy": "The principal who created it.",
    "expectedRevision": "The revision you read: a stale one is refused with revision_conflict.",
    "expectedGeneration": "The generation you read: a stale one is refused.",
    "title": "Short title.",
    "description": "Longer description.",
    "body": "The record's text.",
    "summary": "A short summary.",
    "acceptanceCriteria": "What done means, one item each.",
    "kind": "Its kind.",
    "priority": "Higher numbers are claimed first; ties go to the oldest.",
    "status": "Its status.",
    "revision": "Its revision number (1 for the first).",
    "project": "The project it belongs to.",
    "task": "The task.",
    "taskIds": "REST ids of tasks.",
    "tags": "Free-form tags.",
    "scope": "Where it applies; an empty dimension applies generally.",
    "components": "Components it applies to.",
    "environments": "Environments it applies to.",
    "versions": "Versions it applies to.",
    "applicability": "When it applies, in words.",
    "provenance": "Where it came from.",
    "supersededById": "REST id of the record that replaces it, when superseded.",
    "sourceUri": "A URI the record came from.",
    "sourceTaskId": "REST id of the task it came from.",
    "sourceSubmissionId": "REST id of the submission it came from.",
    "collection": (
        "PROJECT, or SHARED to offer it to other projects' lists, search and context: a"
        " relevance choice, not an access grant (every principal can read every project)."
    ),
    "shareAcrossProjects": "Whether other projects' context packets may include it.",
    "useful": "Whether the record helped.",
    "comment": "An optional comment.",
    "rationale": "Why.",
    "question": "The narrow question asked.",
    "options": "The options offered.",
    "requiredActor": "Who may answer.",
    "recommendation": "The asker's recommendation, if any.",
    "reversible": "Whether a generation left unanswered for 24 hours is answered by the"
    " service: allow, with the recommendation (an agent may not open or reopen a reversible"
    " decision that requires a human).",
    "environment": "The environment the question is about.",
    "conditions": "Conditions the answer must confirm.",
    "expiresAt": "When it stops counting (null: never).",
    "answer": "The answer's text.",
    "disposition": "ALLOW, DENY or DEFER.",
    "conditionsConfirmed": "Whether the answerer confirmed the conditions.",
    "relay": "For a relayed answer: what the human was shown and replied.",
    "prompt": "What the agent showed the human.",
    "response": "The human's reply, verbatim.",
    "rules": "The project's rules text: the binding policy.",
    "agentRuleEditing": "Whether agents may edit the rules.",
    "allowRelayedHumanAnswers": "Whether agents may relay human answers to human-required"
    " decisions.",
    "integrationOwner": "The principal who holds integration publication authority, if any.",
    "integrationOwnerId": "REST id of the integration owner, if any.",
    "leaseSeconds": "How long a claim's lease lasts.",
    "reviewMode": "Who may complete submitted work.",
    "name": "Display name.",
    "note": "The checkpoint note.",
    "detail": "Free-form detail.",
    "outcome": "SUCCEEDED or FAILED.",
    "dependsOn": "REST ids of tasks this one depends on, in order.",
    "lessons": "Knowledge records written with the submission.",
    "lease": "The lease, when the task is claimed.",
    "decision": "The decision.",
    "knowledge": "The knowledge record.",
    "policy": "The policy.",
    "session": "The session.",
    "checkpoint": "The checkpoint written.",
    "checkpoints": "Checkpoint notes, newest first.",
    "submission": "The submission written.",
    "feedback": "The feedback written.",
    "previousLease": "The stale lease this recovery replaced.",
    "pendingDecisions": "Decisions whose current generation has no answer.",
    "proceededByTimeout": "Decisions whose work proceeded because an answer timed out.",
    "timingOutSoon": "Decisions that will time out soon.",
    "blockedTasks": "Tasks blocked by decisions.",
    "generation": "The generation number (1 for the first).",
    "code": "The REST error code (`invalid_request`, `forbidden`, `not_found`, ...).",
    "field": 'The input field at fault, as a camelCase path (`""` for the input as a'
    " whole, such as an edit that names no field to change); null when the refusal names"
    " no field.",
    "message": "A readable explanation.",
}

FIELDS = {
    "Query.project": "A project by REST id; null when there is none.",
    "Project.digest": "What awaits a human, what proceeded by timeout, what will soon.",
    "Project.name": "The project's display name.",
    "Principal.kind": "HUMAN or AGENT.",
    "Principal.name": "The principal's display name.",
    "Session.startedAt": "When the session started.",
    "Session.expiresAt": "When the session ends unless a heartbeat extends it.",
    "Session.endedAt": "When the session was ended; null while it is live.",
    "Policy.revision": "The policy's revision: each update writes the next one.",
    "Policy.updatedBy": "Who wrote the latest revision.",
    "PolicyRevision.actorKind": "Whether a human or an agent wrote it.",
    "PolicyRevision.provenance": "Why the revision was written.",
    "PolicyUpdateInput.provenance": "Why the revision is written.",
    "PolicyUpdateInput.integrationOwner": "REST id of the new integration owner; null clears it.",
    "Event.sequence": "The event's position in the log (global, increasing).",
    "Event.type": "`subject.verb`, such as `decision.answered`.",
    "Event.subjectType": "What kind of record changed (`task`, `decision`, ...).",
    "Event.subjectId": "REST id of the record that changed.",
    "Event.data": "The change's details; never credentials or headers.",
    "FeedbackTotals.notUseful": "How many said it did not help.",
    "FeedbackTotals.useful": "How many said it helped.",
    "Knowledge.revision": "The current revision.",
    "Knowledge.kind": "LESSON, FACT, REJECTED_APPROACH or CHECKPOINT.",
    "Knowledge.status": "Evidence status; never binding policy.",
    "KnowledgeRevision.status": "Evidence status at this revision.",
    "KnowledgeRevision.revision": "This revision's number.",
    "KnowledgeCreateInput.status": (
        "Its status, OBSERVED when omitted. SUPERSEDED is refused (invalid_request): a"
        " record becomes superseded when a correction names the record that replaces it."
    ),
    "KnowledgeCorrectInput.id": "The record's REST id.",
    "KnowledgeFeedbackInput.id": "The record's REST id.",
    "KnowledgeFeedbackInput.expectedRevision": "The revision you read (feedback binds to it).",
    "KnowledgeFeedback.revision": "The revision the feedback is about.",
    "KnowledgeFeedback.knowledge": "The record the feedback is about.",
    "KnowledgeProvenance.recordedAt": "When the service recorded this revision.",
    "KnowledgeProvenance.actor": "Who wrote this revision.",
    "KnowledgeProvenance.sourceTask": "The task it came from, if any.",
    "KnowledgeProvenance.sourceSubmission": "The submission that recorded it, if any.",
    "ProjectCreateInput.id": "The new project's REST id.",
    "ProjectCreateInput.name": "The new project's display name.",
    "ProjectCreatePayload.project": "The project created.",
    "Decision.status": "PENDING, ALLOWED, DENIED, DEFERRED, EXPIRED or STALE (computed now).",
    "Decision.workAllowed": "Whether the affected work may proceed now.",
    "Decision.generation": "The current generation's number.",
    "Decision.current": "The current generation, with its pins and answer.",
    "Decision.rationale": "Why the question is asked.",
    "Decision.project": "The project the decision belongs to.",
    "DecisionAffected.taskId": "The task's REST id.",
    "DecisionAffected.pinnedRevision": "The task revision this generation pinned.",
    "DecisionAffected.task": "The task.",
    "DecisionAnswer.rationale": "Why this answer.",
    "DecisionAnswer.relayed": "Whether an agent relayed a human's answer.",
    "DecisionAnswer.relayPolicyRevision": "For a relayed answer: the policy revision that"
    " enabled relaying.",
    "DecisionAnswer.timedOut": "Whether the answer was recorded by a timeout.",
    "DecisionAnswer.actor": "Who answered.",
    "DecisionAnswerInput.rationale": "Why this answer.",
    "DecisionGeneration.generation": "This generation's number.",
    "DecisionGeneration.affected": "The tasks this generation affects, as pinned.",
    "DecisionGeneration.policyRevision": "The policy revision this generation pinned.",
    "DecisionGeneration.reopenRationale": "Why it was reopened; null for the first.",
    "DecisionGeneration.answer": "Its answer; null while none.",
    "DecisionGeneration.expiresAt": "When this generation stops counting (null: never).",
    "DecisionOpenInput.taskIds": "REST ids of the tasks the decision affects.",
    "DecisionOpenInput.rationale": "Why the question is asked.",
    "DecisionReopenInput.rationale": "Why it is reopened.",
    "DecisionReopenInput.environment": "The new environment; omitted carries over.",
    "DecisionReopenInput.conditions": "The new conditions; omitted carries over.",
    "DecisionReopenInput.expiresAt": "The new expiry; omitted carries over.",
    "Digest.projectId": "The project's REST id.",
    "Digest.generatedAt": "When the digest was computed.",
    "Digest.readyTaskCount": "How many tasks are ready to claim.",
    "Digest.truncated": "Which lists were cut at their limit.",
    "Lease.expiresAt": "When the lease runs out unless renewed.",
    "Lease.owner": "The principal holding the lease.",
    "Lease.sessionId": "The owner's agent session; null for humans.",
    "Publication.holder": "The principal holding publication authority.",
    "Publication.holderSessionId": "The holder's agent session; null for humans.",
    "Publication.preparedAt": "When authority was taken.",
    "Publication.result": "The recorded result; null until recorded.",
    "PublicationResult.at": "When the result was recorded.",
    "Submission.taskRevision": "The task revision the submission answers.",
    "Submission.task": "The task submitted.",
    "Submission.actor": "Who submitted.",
    "Task.status": "OPEN, CLAIMED, SUBMITTED, DONE or CANCELLED.",
    "Task.revision": "The current revision (judged edits stale decisions pinned earlier).",
    "Task.ready": "Whether it can be claimed now.",
    "Task.blockedBy": "What keeps it from being ready.",
    "Task.publication": "Publication authority over it, when held.",
    "Task.kind": "1-64 of `a-z0-9_-`, such as `review`.",
    "TaskRevision.kind": "The kind at this revision.",
    "TaskRevision.revision": "This revision's number.",
    "TaskRevision.dependsOnIds": "REST ids of the dependencies this revision named.",
    "TaskRevision.changedFields": (
        "The fields this revision changed, by their REST names as the task.updated event"
        " gives them (`acceptance_criteria`, `depends_on`: acceptanceCriteria and dependsOnIds"
        " here); empty for an edit that changed nothing."
    ),
    "TaskRevision.actor": "Who wrote the revision.",
    "TaskCheckpoint.actor": "Who wrote the note.",
    "TaskCreateInput.subjectTaskId": "For an activity: REST id of the task it works on.",
    "TaskUpdateInput.status": "OPEN or CANCELLED.",
    "TaskClaimInput.taskId": "The task to claim; omitted claims the next ready one.",
    "TaskSubmitInput.lessons": "Knowledge records to write with the submission.",
    "TaskPublicationResultInput.detail": "Free-form detail of the attempt.",
    "TaskRecoverPayload.checkpoints": "The latest checkpoint notes of the previous holder.",
    "BlockedBy.decisionsTruncated": "More than 20 decisions block it.",
    "DigestTruncated.pendingDecisions": "The pending list was cut.",
    "DigestTruncated.proceededByTimeout": "The proceeded-by-timeout list was cut.",
    "DigestTruncated.timingOutSoon": "The timing-out-soon list was cut.",
    "DigestTruncated.blockedTasks": "The blocked-tasks list was cut.",
    "ContextPacket.items": "Open decisions first, then matching tasks and knowledge by rank.",
    "ContextPacket.rerank": "Whether the reranking provider reordered the matches, and why not.",
    "ContextRerank.applied": "True when the provider's scores ordered the matches.",
}


def describe(schema: GraphQLSchema) -> None:
    """Fill in every description the code leaves out (those in the code win)."""
    for name, t in schema.type_map.items():
        if name.startswith("__"):
            continue
        if not t.description:
            t.description = TYPES.get(name) or _generic_type_description(name)
        if isinstance(t, GraphQLObjectType | GraphQLInterfaceType | GraphQLInputObjectType):
            for field_name, f in t.fields.items():
                if not f.description:
                    f.description = FIELDS.get(f"{name}.{field_name}") or FIELDS_BY_NAME.get(
                        field_name
                    )
                for arg_name, arg in getattr(f, "args", {}).items():
                    if not arg.description:
                        arg.description = ARGS.get(f"{name}.{field_name}.{arg_name}")
                        arg.description = arg.description or ARGS_BY_NAME.get(arg_name)
        if isinstance(t, GraphQLEnumType):
            for value_name, value in t.values.items():
                if not value.description:
                    value.description = ENUM_VALUES.get(f"{name}.{value_name}")


def _generic_type_description(name: str) -> str | None:
    if name.endswith("Payload"):
        return "A mutation's result: the record (null when refused), userErrors and replayed."
    if name.endswith("Input"):
        return (
            "Input fields in camelCase; an omitted optional field takes its default, except"
            " on an edit, which leaves it unchanged."
        )
    return None
