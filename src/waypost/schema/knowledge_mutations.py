"""GraphQL mutations for knowledge: create, correct and feedback, the same
resolvers and rules as REST, and the lesson input a task's submission takes.

Each takes one `input` with an `idempotencyKey`; business errors come back
as `userErrors` with the REST codes.
"""

from __future__ import annotations

import strawberry

from waypost.decoding import convert
from waypost.resolvers.core.receipts import Outcome
from waypost.resolvers.knowledge import feedback as knowledge_feedback
from waypost.resolvers.knowledge import operations as knowledge
from waypost.resolvers.knowledge.models import (
    FeedbackInput,
    KnowledgeCorrect,
    KnowledgeCreate,
)
from waypost.schema.context import Info
from waypost.schema.errors import UserError, mutate, split_input
from waypost.schema.knowledge import (
    Knowledge,
    KnowledgeCollection,
    KnowledgeFeedback,
    KnowledgeKind,
    KnowledgeStatus,
)


@strawberry.input
class KnowledgeScopeInput:
    task_ids: list[str] | None = strawberry.UNSET
    components: list[str] | None = strawberry.UNSET
    environments: list[str] | None = strawberry.UNSET
    versions: list[str] | None = strawberry.UNSET


@strawberry.input(description="A correction's complete scope: every dimension, even when empty.")
class KnowledgeScopeContentInput:
    task_ids: list[str]
    components: list[str]
    environments: list[str]
    versions: list[str]


@strawberry.input(
    description="The server adds actor, session and time. In knowledgeCorrect every member"
    " must be given (null where there is none): an omitted one is a userError, never a"
    " silent clear."
)
class KnowledgeProvenanceInput:
    summary: str | None = strawberry.UNSET
    source_uri: str | None = strawberry.UNSET
    source_task_id: str | None = strawberry.UNSET
    source_submission_id: str | None = strawberry.UNSET


@strawberry.input
class KnowledgeCreateInput:
    idempotency_key: str
    project_id: str
    kind: KnowledgeKind
    title: str
    body: str
    status: KnowledgeStatus | None = strawberry.UNSET
    scope: KnowledgeScopeInput | None = strawberry.UNSET
    tags: list[str] | None = strawberry.UNSET
    applicability: str | None = strawberry.UNSET
    provenance: KnowledgeProvenanceInput | None = strawberry.UNSET
    collection: KnowledgeCollection | None = strawberry.UNSET
    share_across_projects: bool | None = strawberry.UNSET


@strawberry.input(
    description="A lesson's provenance: the submission pins its source task and submission."
)
class LessonProvenanceInput:
    summary: str | None = strawberry.UNSET
    source_uri: str | None = strawberry.UNSET


@strawberry.input(
    description="A lesson recorded with a submission: the fields of KnowledgeCreateInput"
    " but idempotencyKey and projectId (the submission's), with a provenance that cannot"
    " name a source task or submission (the server pins both)."
)
class SubmissionLessonInput:
    kind: KnowledgeKind
    title: str
    body: str
    status: KnowledgeStatus | None = strawberry.UNSET
    scope: KnowledgeScopeInput | None = strawberry.UNSET
    tags: list[str] | None = strawberry.UNSET
    applicability: str | None = strawberry.UNSET
    provenance: LessonProvenanceInput | None = strawberry.UNSET
    collection: KnowledgeCollection | None = strawberry.UNSET
    share_across_projects: bool | None = strawberry.UNSET


@strawberry.input(description="The complete new content; kind and collection never change.")
class KnowledgeCorrectInput:
    idempotency_key: str
    project_id: str
    id: str
    expected_revision: int
    title: str
    body: str
    status: KnowledgeStatus
    scope: KnowledgeScopeContentInput
    tags: list[str]
    applicability: str
    provenance: KnowledgeProvenanceInput
    superseded_by_id: str | None = strawberry.UNSET


@strawberry.input
class KnowledgeFeedbackInput:
    idempotency_key: str
    project_id: str
    id: str
    expected_revision: int
    useful: bool
    comment: str | None = strawberry.UNSET


@strawberry.type
class KnowledgePayload:
    knowledge: Knowledge | None
    user_errors: list[UserError]
    replayed: bool


@strawberry.type
class KnowledgeFeedbackPayload:
    feedback: KnowledgeFeedback | None
    user_errors: list[UserError]
    replayed: bool


def _payload(outcome: Outcome | None, errors: list[UserError]) -> KnowledgePayload:
    # create and correct work through the record's own project only
    found = Knowledge.from_json(outcome.body, outcome.body["project_id"]) if outcome else None
    return KnowledgePayload(
        knowledge=found,
        user_errors=errors,
        replayed=bool(outcome and outcome.replayed),
    )


@strawberry.type
class KnowledgeMutations:
    @strawberry.mutation(description="Create a knowledge record (revision 1).")
    async def knowledge_create(self, info: Info, input: KnowledgeCreateInput) -> KnowledgePayload:
        async def run() -> Outcome:
            idem, body = split_input("knowledgeCreate", input)
            project_id = body.pop("project_id")
            create = convert(body, KnowledgeCreate)
            ctx = info.context
            return await knowledge.create(ctx.rt, ctx.actor, idem, project_id, create)

        return _payload(*await mutate(run))

    @strawberry.mutation(description="Correct a record: writes its next immutable revision.")
    async def knowledge_correct(self, info: Info, input: KnowledgeCorrectInput) -> KnowledgePayload:
        async def run() -> Outcome:
            idem, body = split_input("knowledgeCorrect", input)
            project_id, knowledge_id = body.pop("project_id"), body.pop("id")
            patch = convert(body, KnowledgeCorrect)
            ctx = info.context
            return await knowledge.correct(ctx.rt, ctx.actor, idem, project_id, knowledge_id, patch)

        return _payload(*await mutate(run))

    @strawberry.mutation(description="Record usefulness feedback on the revision you read.")
    async def knowledge_feedback(
        self, info: Info, input: KnowledgeFeedbackInput
    ) -> KnowledgeFeedbackPayload:
        async def run() -> Outcome:
            idem, body = split_input("knowledgeFeedback", input)
            project_id, knowledge_id = body.pop("project_id"), body.pop("id")
            feedback = convert(body, FeedbackInput)
            ctx = info.context
            return await knowledge_feedback.record(
                ctx.rt, ctx.actor, idem, project_id, knowledge_id, feedback
            )

        outcome, errors = await mutate(run)
        given = KnowledgeFeedback.from_json(outcome.body, input.project_id) if outcome else None
        return KnowledgeFeedbackPayload(
            feedback=given,
            user_errors=errors,
            replayed=bool(outcome and outcome.replayed),
        )
