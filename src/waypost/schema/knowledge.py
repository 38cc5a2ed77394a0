"""GraphQL: knowledge records, their revisions and feedback, and their mutations.

Types are built from the REST JSON of the same resolvers. References are
objects (`project`, `supersededBy`, `sourceTask`, `provenance.actor`), read
through per-request DataLoaders so a list of records costs a few queries.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Annotated, Any

import strawberry

from waypost.errors import NotFound
from waypost.http.decoding import convert
from waypost.pagination import Page
from waypost.resolvers.core.receipts import Outcome
from waypost.resolvers.knowledge import feedback as knowledge_feedback
from waypost.resolvers.knowledge import operations as knowledge
from waypost.resolvers.knowledge.models import (
    FeedbackInput,
    KnowledgeCorrect,
    KnowledgeCreate,
    KnowledgeListQuery,
)
from waypost.schema.context import Info
from waypost.schema.errors import UserError, mutate, split_input
from waypost.schema.principals import Principal, load_principal
from waypost.schema.relay import NODE_RESOLVERS, Connection, Node, first_to_limit, global_id
from waypost.schema.tasks import Task, load_task, load_tasks

if TYPE_CHECKING:
    from waypost.schema.projects import Project

LazyProject = Annotated["Project", strawberry.lazy("waypost.schema.projects")]


@strawberry.enum
class KnowledgeKind(enum.Enum):
    LESSON = "lesson"
    FACT = "fact"
    REJECTED_APPROACH = "rejected_approach"
    CHECKPOINT = "checkpoint"


@strawberry.enum(description="Evidence status; only the project's rules are binding policy.")
class KnowledgeStatus(enum.Enum):
    OBSERVED = "observed"
    VALIDATED = "validated"
    DEPRECATED = "deprecated"
    SUPERSEDED = "superseded"


@strawberry.enum
class KnowledgeCollection(enum.Enum):
    PROJECT = "project"
    SHARED = "shared"


@strawberry.type(description="Where a record applies; an empty dimension applies generally.")
class KnowledgeScope:
    task_ids: list[str]
    components: list[str]
    environments: list[str]
    versions: list[str]

    @strawberry.field(description="The scoped tasks, in the order listed.")
    async def tasks(self, info: Info) -> list[Task]:
        return await load_tasks(info, self.task_ids)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> KnowledgeScope:
        return cls(
            task_ids=d["task_ids"],
            components=d["components"],
            environments=d["environments"],
            versions=d["versions"],
        )


@strawberry.type(description="Origin of one revision; actor and time are the service's.")
class KnowledgeProvenance:
    summary: str
    source_uri: str | None
    source_task_id: str | None
    source_submission_id: str | None
    actor_id: str
    actor_session_id: str | None
    recorded_at: str

    @strawberry.field
    async def actor(self, info: Info) -> Principal | None:
        return await load_principal(info, self.actor_id)

    @strawberry.field
    async def source_task(self, info: Info) -> Task | None:
        if self.source_task_id is None:
            return None
        return await load_task(info, self.source_task_id)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> KnowledgeProvenance:
        return cls(
            summary=d["summary"],
            source_uri=d["source_uri"],
            source_task_id=d["source_task_id"],
            source_submission_id=d["source_submission_id"],
            actor_id=d["actor_id"],
            actor_session_id=d["actor_session_id"],
            recorded_at=d["recorded_at"],
        )


@strawberry.type
class FeedbackTotals:
    useful: int
    not_useful: int


@strawberry.type
class KnowledgeContent:
    """The revisioned fields a record and each of its revisions share (a base class)."""

    title: str
    body: str
    status: KnowledgeStatus
    scope: KnowledgeScope
    tags: list[str]
    applicability: str
    provenance: KnowledgeProvenance
    superseded_by_id: str | None

    @strawberry.field(description="The replacement record, when superseded.")
    async def superseded_by(self, info: Info) -> Knowledge | None:
        if self.superseded_by_id is None:
            return None
        return await load_knowledge(info, self.superseded_by_id)


def _content(d: dict[str, Any]) -> dict[str, Any]:
    """KnowledgeContent's fields from a record's or a revision's REST JSON."""
    return {
        "title": d["title"],
        "body": d["body"],
        "status": KnowledgeStatus(d["status"]),
        "scope": KnowledgeScope.from_json(d["scope"]),
        "tags": d["tags"],
        "applicability": d["applicability"],
        "provenance": KnowledgeProvenance.from_json(d["provenance"]),
        "superseded_by_id": d["superseded_by_id"],
    }


@strawberry.type(description="One immutable revision of a knowledge record.")
class KnowledgeRevision(KnowledgeContent):
    knowledge_id: str
    revision: int
    feedback: FeedbackTotals = strawberry.field(description="Feedback bound to this revision.")

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> KnowledgeRevision:
        return cls(
            knowledge_id=d["knowledge_id"],
            revision=d["revision"],
            feedback=FeedbackTotals(**d["feedback"]),
            **_content(d),
        )


@strawberry.type(description="Advisory knowledge: a lesson, fact, rejected approach or checkpoint.")
class Knowledge(Node, KnowledgeContent):
    rest_id: str
    project_id: str
    kind: KnowledgeKind
    collection: KnowledgeCollection
    share_across_projects: bool
    revision: int
    created_at: str
    updated_at: str

    @strawberry.field(description="The record's source project.")
    async def project(self, info: Info) -> LazyProject | None:
        from waypost.schema.projects import load_project

        return await load_project(info, self.project_id)

    @strawberry.field(description="The task named by provenance.sourceTaskId.")
    async def source_task(self, info: Info) -> Task | None:
        if self.provenance.source_task_id is None:
            return None
        return await load_task(info, self.provenance.source_task_id)

    @strawberry.field(description="Useful / not-useful totals over every revision.")
    async def feedback_totals(self, info: Info) -> FeedbackTotals:
        async def batch(ids: Any) -> list[FeedbackTotals]:
            found = await knowledge_feedback.totals_many(info.context.rt, list(ids))
            return [FeedbackTotals(**found[i]) for i in ids]

        totals: FeedbackTotals = await info.context.loader("knowledge_feedback", batch).load(
            self.rest_id
        )
        return totals

    @strawberry.field(description="Immutable revisions, newest first, each with its feedback.")
    async def revisions(
        self, info: Info, first: int | None = None, after: str | None = None
    ) -> Connection[KnowledgeRevision]:
        key = (self.rest_id, after, first_to_limit(first))

        # one read for every record's revisions in the request (a list of
        # records asking for their revisions costs one thread hop, not one each)
        async def batch(keys: Any) -> list[Page[dict[str, Any]]]:
            return await info.context.rt.db.read(lambda c: knowledge.history_pages_sync(c, keys))

        page = await info.context.loader("knowledge_revisions", batch).load(key)
        return Connection.of(page, KnowledgeRevision.from_json)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Knowledge:
        return cls(
            id=global_id("Knowledge", d["id"]),
            rest_id=d["id"],
            project_id=d["project_id"],
            kind=KnowledgeKind(d["kind"]),
            collection=KnowledgeCollection(d["collection"]),
            share_across_projects=d["share_across_projects"],
            revision=d["revision"],
            created_at=d["created_at"],
            updated_at=d["updated_at"],
            **_content(d),
        )


async def load_knowledge(info: Info, knowledge_id: str) -> Knowledge | None:
    """A record by REST id, whatever its project, batched per request."""

    async def batch(ids: Any) -> list[Knowledge | None]:
        found = await info.context.rt.db.read(lambda c: knowledge.get_many_sync(c, list(ids)))
        return [Knowledge.from_json(found[i]) if i in found else None for i in ids]

    result: Knowledge | None = await info.context.loader("knowledge", batch).load(knowledge_id)
    return result


NODE_RESOLVERS["Knowledge"] = load_knowledge


@strawberry.type(description="Usefulness feedback, bound to one revision.")
class KnowledgeFeedback:
    rest_id: str
    knowledge_id: str
    project_id: str
    revision: int
    useful: bool
    comment: str | None
    actor_id: str
    actor_session_id: str | None
    at: str

    @strawberry.field
    async def knowledge(self, info: Info) -> Knowledge | None:
        return await load_knowledge(info, self.knowledge_id)

    @strawberry.field
    async def actor(self, info: Info) -> Principal | None:
        return await load_principal(info, self.actor_id)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> KnowledgeFeedback:
        return cls(
            rest_id=d["id"],
            knowledge_id=d["knowledge_id"],
            project_id=d["project_id"],
            revision=d["revision"],
            useful=d["useful"],
            comment=d["comment"],
            actor_id=d["actor_id"],
            actor_session_id=d["actor_session_id"],
            at=d["at"],
        )


@strawberry.type
class ProjectKnowledgeFields:
    """`Project.knowledge` and `Project.knowledgeItem` (a base class of Project)."""

    if TYPE_CHECKING:
        rest_id: str

    @strawberry.field(
        description="Knowledge newest first, optionally only records matching the full-text"
        " q; shared records of other projects only when includeShared is true. Statuses"
        " are evidence, never binding policy."
    )
    async def knowledge(
        self,
        info: Info,
        kind: KnowledgeKind | None = None,
        status: KnowledgeStatus | None = None,
        tag: str | None = None,
        include_shared: bool = False,
        first: int | None = None,
        after: str | None = None,
        q: str | None = None,
    ) -> Connection[Knowledge]:
        # through the REST query model, so the same bounds apply (e.g. tag length)
        query = convert(
            {"q": q, "kind": kind.value if kind else None,
             "status": status.value if status else None, "tag": tag,
             "include_shared": include_shared, "cursor": after, "limit": first_to_limit(first)},
            KnowledgeListQuery,
        )  # fmt: skip
        page = await knowledge.list_knowledge(info.context.rt, self.rest_id, query)
        return Connection.of(page, Knowledge.from_json)

    @strawberry.field(
        description="A record by REST id: this project's, or one shared by another project."
    )
    async def knowledge_item(self, info: Info, id: str) -> Knowledge | None:
        project_id = self.rest_id
        try:
            data = await info.context.rt.db.read(lambda c: knowledge.get_sync(c, project_id, id))
        except NotFound:
            return None
        return Knowledge.from_json(data)


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
    return KnowledgePayload(
        knowledge=Knowledge.from_json(outcome.body) if outcome else None,
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
        return KnowledgeFeedbackPayload(
            feedback=KnowledgeFeedback.from_json(outcome.body) if outcome else None,
            user_errors=errors,
            replayed=bool(outcome and outcome.replayed),
        )
