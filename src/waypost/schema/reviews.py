"""The review outcome mutation: GraphQL's form of `POST /api/v1/reviews/{request_id}/outcome`.

Section 12 asks a GraphQL mutation of every REST mutation, with the same rules:
both call `resolvers.lifecycle.reviews.record_outcome`.
"""

from __future__ import annotations

import enum
from typing import Any

import strawberry

from waypost.decoding import convert
from waypost.resolvers.core.receipts import Outcome
from waypost.resolvers.lifecycle import reviews
from waypost.resolvers.lifecycle.model import OutcomeBody
from waypost.schema.context import Info
from waypost.schema.errors import UserError, mutate, split_input
from waypost.schema.relay import DateTime


@strawberry.enum(description="A human reviewer's disposition on a lifecycle review request.")
class ReviewDisposition(enum.Enum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    CHANGES_REQUESTED = "changes_requested"


@strawberry.input(description="A named human reviewer's outcome on a review request.")
class ReviewOutcomeInput:
    idempotency_key: str
    request_id: str = strawberry.field(description="The review request (`rr_...`).")
    disposition: ReviewDisposition = strawberry.field(
        description="ACCEPTED, REJECTED or CHANGES_REQUESTED."
    )
    rationale: str = strawberry.field(description="Why (1-4,000 characters, no secrets).")


@strawberry.type(description="An outcome recorded on a review request (the REST answer).")
class ReviewOutcome:
    request_id: str = strawberry.field(description="The review request (`rr_...`).")
    reviewer_id: str = strawberry.field(description="The reviewer's principal id.")
    disposition: ReviewDisposition = strawberry.field(
        description="ACCEPTED, REJECTED or CHANGES_REQUESTED."
    )
    rationale: str = strawberry.field(description="The reviewer's rationale.")
    at: DateTime
    memo_id: str = strawberry.field(description="The memo the request reviews.")
    version: int = strawberry.field(description="The memo version the request reviews.")
    event_id: int = strawberry.field(description="The lifecycle event that records it.")

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ReviewOutcome:
        return cls(
            request_id=d["request_id"],
            reviewer_id=d["reviewer"],
            disposition=ReviewDisposition(d["disposition"]),
            rationale=d["rationale"],
            at=d["at"],
            memo_id=d["memo_id"],
            version=d["version"],
            event_id=d["event_id"],
        )


@strawberry.type(description="The outcome recorded, or why not.")
class ReviewOutcomePayload:
    outcome: ReviewOutcome | None = strawberry.field(
        description="The outcome recorded (null when refused: see userErrors)."
    )
    user_errors: list[UserError]
    replayed: bool


@strawberry.type
class ReviewMutations:
    @strawberry.mutation(
        description="Record a named human reviewer's outcome on a lifecycle review request"
        " (REST: `POST /api/v1/reviews/{request_id}/outcome`)."
    )
    async def review_outcome(self, info: Info, input: ReviewOutcomeInput) -> ReviewOutcomePayload:
        async def run() -> Outcome:
            idem, body = split_input("reviewOutcome", input)
            request_id = body.pop("request_id")
            outcome = convert(body, OutcomeBody)
            ctx = info.context
            return await reviews.record_outcome(ctx.rt, ctx.actor, idem, request_id, outcome)

        outcome, errors = await mutate(run)
        return ReviewOutcomePayload(
            outcome=ReviewOutcome.from_json(outcome.body) if outcome else None,
            user_errors=errors,
            replayed=bool(outcome and outcome.replayed),
        )
