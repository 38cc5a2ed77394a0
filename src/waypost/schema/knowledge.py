"""GraphQL: knowledge records, their revisions and feedback (the mutations are
knowledge_mutations.py).

Types are built from the REST JSON of the same resolvers. References are
objects (`project`, `supersededBy`, `sourceTask`, `provenance.actor`,
`provenance.sourceSubmission`), read
through per-request DataLoaders so a list of records costs a few queries.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import strawberry

from waypost.decoding import convert
from waypost.pagination import Page
from waypost.resolvers.context.params import search_terms
from waypost.resolvers.knowledge import operations as knowledge
from waypost.resolvers.knowledge.models import KnowledgeListQuery
from waypost.resolvers.knowledge.rules import visible_to
from waypost.schema.context import Info
from waypost.schema.errors import graphql_field_names
from waypost.schema.mutation_arguments import checked_before_mutations
from waypost.schema.principals import Principal, load_principal
from waypost.schema.relay import (
    NODE_RESOLVERS,
    Connection,
    DateTime,
    Node,
    global_id,
    known_count,
    position_page,
    window,
)
from waypost.schema.searches import start_search
from waypost.schema.tasks import Submission, Task, load_task, load_tasks

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
    recorded_at: DateTime

    @strawberry.field
    async def actor(self, info: Info) -> Principal | None:
        return await load_principal(info, self.actor_id)

    @strawberry.field
    async def source_task(self, info: Info) -> Task | None:
        if self.source_task_id is None:
            return None
        return await load_task(info, self.source_task_id)

    @strawberry.field
    async def source_submission(self, info: Info) -> Submission | None:
        if self.source_submission_id is None:
            return None
        found = await info.context.loaders.submission.load(self.source_submission_id)
        return Submission.from_json(found) if found else None

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
    # The project this object was reached through (a list, `knowledgeItem`, a
    # packet), or None when by id alone (`node`). A shared record may name a
    # project-only replacement: through another project that replacement is
    # as unreadable as it is by REST (404), so `supersededBy` is null there.
    viewed_from: strawberry.Private[str | None] = None

    @strawberry.field(
        description="The replacement record, when superseded; null when the project this"
        " record was reached through cannot read it (a project-only record of another project)."
    )
    async def superseded_by(self, info: Info) -> Knowledge | None:
        if self.superseded_by_id is None:
            return None
        return await load_knowledge(info, self.superseded_by_id, self.viewed_from)


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
    def from_json(cls, d: dict[str, Any], viewed_from: str | None = None) -> KnowledgeRevision:
        return cls(
            knowledge_id=d["knowledge_id"],
            revision=d["revision"],
            feedback=FeedbackTotals(**d["feedback"]),
            viewed_from=viewed_from,
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
    created_at: DateTime
    updated_at: DateTime

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
        return FeedbackTotals(**await info.context.loaders.knowledge_feedback.load(self.rest_id))

    @strawberry.field(description="Immutable revisions, newest first, each with its feedback.")
    async def revisions(
        self,
        info: Info,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> Connection[KnowledgeRevision]:
        page = await position_page(
            info.context.loaders.knowledge_revisions.load, self.rest_id, self.revision,
            window(first, after, last, before),
        )  # fmt: skip
        # revisions are numbered 1..n: the record's revision is their count
        return Connection.of(
            page,
            lambda d: KnowledgeRevision.from_json(d, self.viewed_from),
            known_count(self.revision),
        )

    @classmethod
    def from_json(cls, d: dict[str, Any], viewed_from: str | None = None) -> Knowledge:
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
            viewed_from=viewed_from,
            **_content(d),
        )


async def load_knowledge(
    info: Info, knowledge_id: str, viewed_from: str | None = None
) -> Knowledge | None:
    """A record by REST id, batched per request: whatever its project when
    `viewed_from` is None, else only one readable through that project."""
    found = await info.context.loaders.knowledge.load(knowledge_id)
    if found is None or (viewed_from is not None and not visible_to(found, viewed_from)):
        return None
    return Knowledge.from_json(found, viewed_from)


async def _load_by_id(info: Info, knowledge_id: str) -> Knowledge | None:
    return await load_knowledge(info, knowledge_id)


NODE_RESOLVERS["Knowledge"] = _load_by_id


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
    at: DateTime
    viewed_from: strawberry.Private[str | None] = None  # as on KnowledgeContent

    @strawberry.field
    async def knowledge(self, info: Info) -> Knowledge | None:
        return await load_knowledge(info, self.knowledge_id, self.viewed_from)

    @strawberry.field
    async def actor(self, info: Info) -> Principal | None:
        return await load_principal(info, self.actor_id)

    @classmethod
    def from_json(cls, d: dict[str, Any], viewed_from: str | None = None) -> KnowledgeFeedback:
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
            viewed_from=viewed_from,
        )


@strawberry.type
class ProjectKnowledgeFields:
    """`Project.knowledge` and `Project.knowledgeItem` (a base class of Project)."""

    if TYPE_CHECKING:
        rest_id: str

    @strawberry.field(
        description="Knowledge, most recently changed first (updatedAt, then id), optionally"
        " only records matching the full-text"
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
        last: int | None = None,
        before: str | None = None,
        q: str | None = None,
    ) -> Connection[Knowledge]:
        w = window(first, after, last, before)
        query = list_query(q, kind, status, tag, include_shared, w.cursor, w.limit)
        rt, project_id = info.context.rt, self.rest_id
        loaders = info.context.loaders

        async def page() -> Page[dict[str, Any]]:
            if q is not None:
                start_search(loaders)  # a search this operation has not run yet
            return await knowledge.list_knowledge(rt, project_id, query, w.backward)

        return await loaders.connection(
            ("Project.knowledge", project_id, msgspec.json.encode(query), w.backward),
            page,
            lambda d: Knowledge.from_json(d, project_id),
            lambda: knowledge.count_knowledge(rt, project_id, query),
        )

    @strawberry.field(
        description="A record by REST id: this project's, or one shared by another project."
    )
    async def knowledge_item(self, info: Info, id: str) -> Knowledge | None:
        return await load_knowledge(info, id, self.rest_id)


def list_query(
    q: str | None,
    kind: KnowledgeKind | None,
    status: KnowledgeStatus | None,
    tag: str | None,
    include_shared: bool,
    cursor: str | None = None,
    limit: int | None = None,
) -> KnowledgeListQuery:
    # through the REST query model, so the same bounds apply (e.g. tag length)
    return convert(
        {"q": q, "kind": kind.value if kind else None,
         "status": status.value if status else None, "tag": tag,
         "include_shared": include_shared, "cursor": cursor, "limit": limit},
        KnowledgeListQuery,
    )  # fmt: skip


@checked_before_mutations("Project", "knowledge")
def _check_list(arguments: dict[str, Any]) -> None:
    """The list's refusals that need no data, before a mutation whose selection holds it
    (kind and status are enums, which GraphQL itself checks)."""
    with graphql_field_names():  # an explicit null includeShared is `includeShared`
        query = list_query(arguments["q"], None, None, arguments["tag"], arguments["includeShared"])
        if query.q is not None:
            search_terms(query.q)
