"""GraphQL: projects, their policy and history, and the event log."""

from __future__ import annotations

import enum
import json
from typing import Any

import strawberry
from strawberry.scalars import JSON

from waypost.http.decoding import convert
from waypost.pagination import Page
from waypost.resolvers.core import events
from waypost.resolvers.core.receipts import Outcome
from waypost.resolvers.projects import operations as projects
from waypost.resolvers.projects import policy
from waypost.schema.context import Info
from waypost.schema.context_packet import ProjectContextFields
from waypost.schema.decisions import ProjectDecisionFields
from waypost.schema.errors import UserError, mutate, split_input
from waypost.schema.knowledge import ProjectKnowledgeFields
from waypost.schema.principals import Principal, load_principal
from waypost.schema.relay import NODE_RESOLVERS, Connection, Node, first_to_limit, global_id
from waypost.schema.tasks import ProjectTaskFields


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
    updated_at: str
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
    actor_kind: str
    actor_session_id: str | None
    at: str
    provenance: str

    @strawberry.field
    async def actor(self, info: Info) -> Principal | None:
        return await load_principal(info, self.actor_id)

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
            actor_kind=d["actor_kind"],
            actor_session_id=d["actor_session_id"],
            at=d["at"],
            provenance=d["provenance"],
        )


@strawberry.type
class Event:
    sequence: int
    type: str
    subject_type: str
    subject_id: str
    actor_id: str | None
    actor_session_id: str | None
    at: str
    data: JSON

    @strawberry.field(description="The principal who made the change; null for the system.")
    async def actor(self, info: Info) -> Principal | None:
        if self.actor_id is None:
            return None
        return await load_principal(info, self.actor_id)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Event:
        return cls(
            sequence=d["sequence"],
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
    created_at: str
    created_by_id: str

    @strawberry.field
    async def policy(self, info: Info) -> Policy:
        return Policy.from_json(await policy.get(info.context.rt, self.rest_id))

    @strawberry.field(description="Immutable policy revisions, newest first.")
    async def policy_history(
        self, info: Info, first: int | None = None, after: str | None = None
    ) -> Connection[PolicyRevision]:
        page = await policy.history(info.context.rt, self.rest_id, after, first_to_limit(first))
        return Connection.of(page, PolicyRevision.from_json)

    @strawberry.field(description="Events oldest first; the cursor is the event sequence.")
    async def events(
        self, info: Info, first: int | None = None, after: str | None = None
    ) -> Connection[Event]:
        start = _sequence_cursor(after)
        limit = first_to_limit(first)
        # one extra event tells whether another page follows
        data = await events.for_project(info.context.rt, self.rest_id, start, limit + 1)
        items = data["items"][:limit]
        page = Page(items, [str(i["sequence"]) for i in items], len(data["items"]) > limit)
        return Connection.of(page, Event.from_json)

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


def _sequence_cursor(after: str | None) -> int | None:
    if after is None:
        return None
    try:
        value = json.loads(after)
    except (ValueError, RecursionError):
        value = None
    if type(value) is not int or not 0 <= value < 2**63:
        from waypost.errors import InvalidRequest

        raise InvalidRequest.field("after", "malformed cursor")
    return value


async def load_project(info: Info, project_id: str) -> Project | None:
    from waypost.errors import NotFound

    try:
        return Project.from_json(await projects.get(info.context.rt, project_id))
    except NotFound:
        return None


NODE_RESOLVERS["Project"] = load_project


@strawberry.type
class ProjectQueries:
    @strawberry.field
    async def projects(
        self, info: Info, first: int | None = None, after: str | None = None
    ) -> Connection[Project]:
        page = await projects.list_projects(info.context.rt, after, first_to_limit(first))
        return Connection.of(page, Project.from_json)

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
