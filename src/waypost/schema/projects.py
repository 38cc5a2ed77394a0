"""GraphQL: projects, their policy and history, and the event log."""

from __future__ import annotations

import enum
from typing import Annotated, Any, cast

import strawberry
from strawberry.scalars import JSON

from waypost.decoding import convert
from waypost.errors import InvalidRequest, NotFound
from waypost.pagination import MALFORMED_CURSOR
from waypost.resolvers.core import events
from waypost.resolvers.core.receipts import Outcome
from waypost.resolvers.projects import operations as projects
from waypost.resolvers.projects import policy
from waypost.schema.context import Info
from waypost.schema.context_packet import ProjectContextFields
from waypost.schema.decisions import Decision, ProjectDecisionFields, load_decision
from waypost.schema.errors import UserError, mutate, split_input
from waypost.schema.knowledge import Knowledge, ProjectKnowledgeFields, load_knowledge
from waypost.schema.principals import Principal, PrincipalKind, load_principal
from waypost.schema.relay import (
    NODE_RESOLVERS,
    Connection,
    DateTime,
    Node,
    event_sequence,
    global_id,
    window,
)
from waypost.schema.tasks import ProjectTaskFields, Task, load_task


@strawberry.enum
class ReviewMode(enum.Enum):
    NONE = "none"
    HUMAN = "human"
    ANY = "any"


@strawberry.type
class Policy:
    project_id: str
    revision: int
    rules: str
    agent_rule_editing: bool
    allow_relayed_human_answers: bool
    integration_owner_id: strawberry.Private[str | None]
    lease_seconds: int
    review_mode: ReviewMode
    updated_at: DateTime
    updated_by_id: strawberry.Private[str]

    @strawberry.field
    async def integration_owner(self, info: Info) -> Principal | None:
        if self.integration_owner_id is None:
            return None
        return await load_principal(info, self.integration_owner_id)

    @strawberry.field
    async def updated_by(self, info: Info) -> Principal | None:
        return await load_principal(info, self.updated_by_id)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Policy:
        return cls(
            project_id=d["project_id"],
            revision=d["revision"],
            rules=d["rules"],
            agent_rule_editing=d["agent_rule_editing"],
            allow_relayed_human_answers=d["allow_relayed_human_answers"],
            integration_owner_id=d["integration_owner"],
            lease_seconds=d["lease_seconds"],
            review_mode=ReviewMode(d["review_mode"]),
            updated_at=d["updated_at"],
            updated_by_id=d["updated_by"],
        )


@strawberry.type
class PolicyRevision:
    revision: int
    rules: str
    agent_rule_editing: bool
    allow_relayed_human_answers: bool
    integration_owner_id: str | None
    lease_seconds: int
    review_mode: ReviewMode
    actor_id: str
    actor_kind: PrincipalKind
    actor_session_id: str | None
    at: DateTime
    provenance: str

    @strawberry.field
    async def actor(self, info: Info) -> Principal | None:
        return await load_principal(info, self.actor_id)

    @strawberry.field(description="The integration owner this revision named, if any.")
    async def integration_owner(self, info: Info) -> Principal | None:
        if self.integration_owner_id is None:
            return None
        return await load_principal(info, self.integration_owner_id)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PolicyRevision:
        return cls(
            revision=d["revision"],
            rules=d["rules"],
            agent_rule_editing=d["agent_rule_editing"],
            allow_relayed_human_answers=d["allow_relayed_human_answers"],
            integration_owner_id=d["integration_owner"],
            lease_seconds=d["lease_seconds"],
            review_mode=ReviewMode(d["review_mode"]),
            actor_id=d["actor_id"],
            actor_kind=PrincipalKind(d["actor_kind"]),
            actor_session_id=d["actor_session_id"],
            at=d["at"],
            provenance=d["provenance"],
        )


@strawberry.type
class Event:
    sequence: int
    project_id: str
    type: str
    subject_type: str
    subject_id: str
    actor_id: str | None
    actor_session_id: str | None
    at: DateTime
    data: JSON

    @strawberry.field(description="The principal who made the change; null for the system.")
    async def actor(self, info: Info) -> Principal | None:
        if self.actor_id is None:
            return None
        return await load_principal(info, self.actor_id)

    @strawberry.field(description="The project whose log holds the event.")
    async def project(self, info: Info) -> Project | None:
        return await load_project(info, self.project_id)

    @strawberry.field(
        description="The record that changed, as it is now; for a policy change, the"
        " revision the change wrote (the record as it was then)."
    )
    async def subject(self, info: Info) -> EventSubject | None:
        return await _load_subject(info, self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Event:
        return cls(
            sequence=d["sequence"],
            project_id=d["project_id"],
            type=d["type"],
            subject_type=d["subject_type"],
            subject_id=d["subject_id"],
            actor_id=d["actor_id"],
            actor_session_id=d["actor_session_id"],
            at=d["at"],
            data=d["data"],
        )


@strawberry.type
class Project(
    ProjectKnowledgeFields, ProjectTaskFields, ProjectDecisionFields, ProjectContextFields, Node
):
    rest_id: str
    name: str
    created_at: DateTime
    created_by_id: str

    @strawberry.field(description="The project's policy: its latest revision.")
    async def policy(self, info: Info) -> Policy:
        found = await info.context.loaders.policy.load(self.rest_id)
        if found is None:
            raise NotFound("no such project", {"project_id": self.rest_id})
        return Policy.from_json(found)

    @strawberry.field(description="Immutable policy revisions, newest first.")
    async def policy_history(
        self,
        info: Info,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> Connection[PolicyRevision]:
        w = window(first, after, last, before)
        page = await policy.history(info.context.rt, self.rest_id, w.cursor, w.limit, w.backward)

        async def count() -> int:
            # revisions are numbered 1..n: the policy's revision is their count
            current: Policy = await self.policy(info)
            return current.revision

        return Connection.of(page, PolicyRevision.from_json, count)

    @strawberry.field(description="Events oldest first; the cursor is the event sequence.")
    async def events(
        self,
        info: Info,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> Connection[Event]:
        w = window(first, after, last, before)
        start = sequence_cursor(w.cursor, "before" if w.backward else "after")
        rt, project_id = info.context.rt, self.rest_id
        page = await events.page_for_project(rt, project_id, start, w.limit, w.backward)
        return Connection.of(
            page, Event.from_json, lambda: events.count_for_project(rt, project_id)
        )

    @strawberry.field(description="The principal who created the project.")
    async def created_by(self, info: Info) -> Principal | None:
        return await load_principal(info, self.created_by_id)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Project:
        return cls(
            id=global_id("Project", d["id"]),
            rest_id=d["id"],
            name=d["name"],
            created_at=d["created_at"],
            created_by_id=d["created_by"],
        )


def sequence_cursor(cursor: str | None, name: str) -> int | None:
    if cursor is None:
        return None
    sequence = event_sequence(cursor)
    if sequence is None:
        raise InvalidRequest.field(name, MALFORMED_CURSOR)
    return sequence


async def load_project(info: Info, project_id: str) -> Project | None:
    """A project by REST id, batched per request."""
    found = await info.context.loaders.project.load(project_id)
    return Project.from_json(found) if found else None


NODE_RESOLVERS["Project"] = load_project

EventSubject = Annotated[
    Project | PolicyRevision | Task | Knowledge | Decision,
    strawberry.union("EventSubject", description="The record an event is about."),
]


async def _load_subject(info: Info, event: Event) -> EventSubject | None:
    """The event's record by its `subjectType`: every type a project's log
    holds (sessions' events have no project, so no project's log shows them)."""
    kind, subject_id = event.subject_type, event.subject_id
    if kind == "project":
        return await load_project(info, subject_id)
    if kind == "policy":
        data = cast(dict[str, Any], event.data)  # the JSON scalar holds an object here
        key = (subject_id, data["revision"])
        found = await info.context.loaders.policy_revision.load(key)
        return PolicyRevision.from_json(found) if found else None
    if kind == "task":
        return await load_task(info, subject_id)
    if kind == "knowledge":
        # a record's events, feedback given through sharing too, are logged
        # in its own project: shown as that project sees it
        return await load_knowledge(info, subject_id, viewed_from=event.project_id)
    if kind == "decision":
        return await load_decision(info, subject_id)
    return None


@strawberry.type
class ProjectQueries:
    @strawberry.field(description="Every project, by id.")
    async def projects(
        self,
        info: Info,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> Connection[Project]:
        w = window(first, after, last, before)
        rt = info.context.rt
        page = await projects.list_projects(rt, w.cursor, w.limit, w.backward)
        return Connection.of(page, Project.from_json, lambda: projects.count_projects(rt))

    @strawberry.field
    async def project(self, info: Info, id: str) -> Project | None:
        return await load_project(info, id)


@strawberry.input
class ProjectCreateInput:
    idempotency_key: str
    id: str
    name: str


@strawberry.type
class ProjectCreatePayload:
    project: Project | None
    user_errors: list[UserError]
    replayed: bool


@strawberry.input
class PolicyUpdateInput:
    idempotency_key: str
    project_id: str
    expected_revision: int
    rules: str | None = strawberry.UNSET
    agent_rule_editing: bool | None = strawberry.UNSET
    allow_relayed_human_answers: bool | None = strawberry.UNSET
    integration_owner: str | None = strawberry.UNSET
    lease_seconds: int | None = strawberry.UNSET
    review_mode: ReviewMode | None = strawberry.UNSET
    provenance: str | None = strawberry.UNSET


@strawberry.type
class PolicyUpdatePayload:
    policy: Policy | None
    user_errors: list[UserError]
    replayed: bool


@strawberry.type
class ProjectMutations:
    @strawberry.mutation(description="Create a project (humans only).")
    async def project_create(self, info: Info, input: ProjectCreateInput) -> ProjectCreatePayload:
        async def run() -> Outcome:
            idem, body = split_input("projectCreate", input)
            create = convert(body, projects.ProjectCreate)
            return await projects.create(info.context.rt, info.context.actor, idem, create)

        outcome, errors = await mutate(run)
        return ProjectCreatePayload(
            project=Project.from_json(outcome.body) if outcome else None,
            user_errors=errors,
            replayed=bool(outcome and outcome.replayed),
        )

    @strawberry.mutation(description="Write the next policy revision under the authority rules.")
    async def policy_update(self, info: Info, input: PolicyUpdateInput) -> PolicyUpdatePayload:
        async def run() -> Outcome:
            idem, body = split_input("policyUpdate", input)
            project_id = body.pop("project_id")
            patch = convert(body, policy.PolicyPatch)
            return await policy.update(info.context.rt, info.context.actor, idem, project_id, patch)

        outcome, errors = await mutate(run)
        return PolicyUpdatePayload(
            policy=Policy.from_json(outcome.body) if outcome else None,
            user_errors=errors,
            replayed=bool(outcome and outcome.replayed),
        )
