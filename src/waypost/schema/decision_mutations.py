"""GraphQL mutations for decisions: open, answer and reopen, the same
resolvers and rules as REST.

Each takes one `input` with an `idempotencyKey`; business errors come back
as `userErrors` with the REST codes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import strawberry

from waypost.decoding import convert
from waypost.resolvers.core.receipts import Idempotency, Outcome
from waypost.resolvers.decisions import answers as decision_answers
from waypost.resolvers.decisions import operations as decisions
from waypost.resolvers.decisions import reopen as decision_reopen
from waypost.runtime import Actor, Runtime
from waypost.schema.context import Info
from waypost.schema.decisions import Decision, Disposition, RequiredActor
from waypost.schema.errors import UserError, mutate, split_input
from waypost.schema.relay import DateTime


@strawberry.input
class DecisionOpenInput:
    idempotency_key: str
    project_id: str
    question: str
    options: list[str]
    rationale: str
    required_actor: RequiredActor
    task_ids: list[str]
    environment: str
    conditions: list[str] | None = strawberry.UNSET
    expires_at: DateTime | None = strawberry.UNSET
    recommendation: str | None = strawberry.UNSET
    reversible: bool | None = strawberry.UNSET


@strawberry.input
class RelayInput:
    prompt: str
    response: str


@strawberry.input(description="Answer the current generation; `relay` only from agent sessions.")
class DecisionAnswerInput:
    idempotency_key: str
    project_id: str
    decision_id: str
    expected_generation: int
    disposition: Disposition
    answer: str
    rationale: str
    conditions_confirmed: bool | None = strawberry.UNSET
    relay: RelayInput | None = strawberry.UNSET


@strawberry.input(description="Open the next generation; omitted pins carry over.")
class DecisionReopenInput:
    idempotency_key: str
    project_id: str
    decision_id: str
    expected_generation: int
    rationale: str
    environment: str | None = strawberry.UNSET
    conditions: list[str] | None = strawberry.UNSET
    expires_at: DateTime | None = strawberry.UNSET


@strawberry.type
class DecisionPayload:
    decision: Decision | None
    user_errors: list[UserError]
    replayed: bool


def _payload(outcome: Outcome | None, errors: list[UserError]) -> DecisionPayload:
    return DecisionPayload(
        decision=Decision.from_json(outcome.body) if outcome else None,
        user_errors=errors,
        replayed=bool(outcome and outcome.replayed),
    )


# The resolver behind answer and reopen: (rt, actor, idem, project, decision, body).
DecisionAction = Callable[[Runtime, Actor, Idempotency, str, str, Any], Awaitable[Outcome]]


async def _on_decision(
    info: Info, name: str, input: Any, model: type[Any], action: DecisionAction
) -> DecisionPayload:
    """Run a mutation on one decision: its input is the REST body plus the two ids."""

    async def run() -> Outcome:
        idem, body = split_input(name, input)
        project_id, decision_id = body.pop("project_id"), body.pop("decision_id")
        ctx = info.context
        return await action(ctx.rt, ctx.actor, idem, project_id, decision_id, convert(body, model))

    return _payload(*await mutate(run))


@strawberry.type
class DecisionMutations:
    @strawberry.mutation(description="Open a decision pinned to current revisions.")
    async def decision_open(self, info: Info, input: DecisionOpenInput) -> DecisionPayload:
        async def run() -> Outcome:
            idem, body = split_input("decisionOpen", input)
            project_id = body.pop("project_id")
            create = convert(body, decisions.DecisionCreate)
            ctx = info.context
            return await decisions.open_decision(ctx.rt, ctx.actor, idem, project_id, create)

        return _payload(*await mutate(run))

    @strawberry.mutation(description="Answer a decision's current generation.")
    async def decision_answer(self, info: Info, input: DecisionAnswerInput) -> DecisionPayload:
        return await _on_decision(
            info, "decisionAnswer", input, decision_answers.DecisionAnswer, decision_answers.answer
        )

    @strawberry.mutation(description="Reopen a decision against all current revisions.")
    async def decision_reopen(self, info: Info, input: DecisionReopenInput) -> DecisionPayload:
        return await _on_decision(
            info, "decisionReopen", input, decision_reopen.DecisionReopen, decision_reopen.reopen
        )
