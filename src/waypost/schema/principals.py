"""GraphQL: principals, the caller and agent sessions."""

from __future__ import annotations

import enum
from typing import Any

import strawberry

from waypost.resolvers.access import sessions
from waypost.resolvers.core.receipts import Outcome
from waypost.schema.context import Info
from waypost.schema.errors import UserError, mutate, split_input
from waypost.schema.relay import NODE_RESOLVERS, DateTime, Node, global_id


@strawberry.enum
class PrincipalKind(enum.Enum):
    HUMAN = "human"
    AGENT = "agent"


@strawberry.type
class Principal(Node):
    rest_id: str
    kind: PrincipalKind
    name: str

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Principal:
        return cls(
            id=global_id("Principal", d["id"]),
            rest_id=d["id"],
            kind=PrincipalKind(d["kind"]),
            name=d["name"],
        )


@strawberry.type
class Session(Node):
    rest_id: str
    principal_id: str
    started_at: DateTime
    expires_at: DateTime
    ended_at: DateTime | None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Session:
        return cls(
            id=global_id("Session", d["id"]),
            rest_id=d["id"],
            principal_id=d["principal_id"],
            started_at=d["started_at"],
            expires_at=d["expires_at"],
            ended_at=d.get("ended_at"),
        )

    @strawberry.field(description="The agent whose session it is.")
    async def principal(self, info: Info) -> Principal | None:
        return await load_principal(info, self.principal_id)


async def load_principal(info: Info, principal_id: str) -> Principal | None:
    """A principal by REST id, batched per request."""
    found = await info.context.loaders.principal.load(principal_id)
    return Principal.from_json(found) if found else None


NODE_RESOLVERS["Principal"] = load_principal


async def load_own_session(info: Info, session_id: str) -> Session | None:
    found = await sessions.get_own(info.context.rt, info.context.actor, session_id)
    return Session.from_json(found) if found else None


NODE_RESOLVERS["Session"] = load_own_session


@strawberry.type
class PrincipalQueries:
    @strawberry.field(description="The caller.")
    async def me(self, info: Info) -> Principal:
        data = await sessions.me(info.context.rt, info.context.actor)
        return Principal.from_json(data["principal"])

    @strawberry.field(
        description="The caller's live session: the one named by `Waypost-Session`, else"
        " the caller's live session that expires last (of several that expire together, the"
        " one started last); null for a human or when none is live."
    )
    async def my_session(self, info: Info) -> Session | None:
        data = await sessions.me(info.context.rt, info.context.actor)
        return Session.from_json(data["session"]) if data["session"] else None


@strawberry.input
class SessionStartInput:
    idempotency_key: str


@strawberry.input
class SessionActionInput:
    idempotency_key: str
    session_id: str


@strawberry.type
class SessionPayload:
    session: Session | None
    user_errors: list[UserError]
    replayed: bool


def _payload(outcome: Outcome | None, errors: list[UserError]) -> SessionPayload:
    return SessionPayload(
        session=Session.from_json(outcome.body) if outcome else None,
        user_errors=errors,
        replayed=bool(outcome and outcome.replayed),
    )


@strawberry.type
class PrincipalMutations:
    @strawberry.mutation(description="Start an agent session (agents only).")
    async def session_start(self, info: Info, input: SessionStartInput) -> SessionPayload:
        async def run() -> Outcome:
            idem, _ = split_input("sessionStart", input)
            return await sessions.start(info.context.rt, info.context.actor, idem)

        return _payload(*await mutate(run))

    @strawberry.mutation(
        description="Extend a live session to 15 minutes from now (never shortens it)."
    )
    async def session_heartbeat(self, info: Info, input: SessionActionInput) -> SessionPayload:
        async def run() -> Outcome:
            idem, body = split_input("sessionHeartbeat", input)
            ctx = info.context
            return await sessions.heartbeat(ctx.rt, ctx.actor, idem, body["session_id"])

        return _payload(*await mutate(run))

    @strawberry.mutation(description="End a live session.")
    async def session_end(self, info: Info, input: SessionActionInput) -> SessionPayload:
        async def run() -> Outcome:
            idem, body = split_input("sessionEnd", input)
            return await sessions.end(info.context.rt, info.context.actor, idem, body["session_id"])

        return _payload(*await mutate(run))
