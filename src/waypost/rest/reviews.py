"""REST route: the protected review route where human reviewers record the
outcome of a lifecycle review request (lifecycle-model.md, "Review handoff")."""

from __future__ import annotations

from waypost.resolvers.core.receipts import Outcome
from waypost.resolvers.lifecycle import reviews
from waypost.resolvers.lifecycle.model import OutcomeBody
from waypost.rest.routing import Call, RouteTable

table = RouteTable("reviews")


@table.post("/api/v1/reviews/{request_id}/outcome", body=OutcomeBody, status=201)
async def record_outcome(call: Call) -> Outcome:
    """Record a named human reviewer's disposition on a lifecycle review request."""
    assert call.idem
    return await reviews.record_outcome(
        call.rt, call.actor, call.idem, call.params["request_id"], call.body
    )
