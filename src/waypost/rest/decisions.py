"""REST routes: decisions, their answers and reopenings, and the project digest."""

from __future__ import annotations

from typing import Any

from waypost.pagination import Page
from waypost.resolvers.core.receipts import Outcome
from waypost.resolvers.decisions import answers as decision_answers
from waypost.resolvers.decisions import digest
from waypost.resolvers.decisions import operations as decisions
from waypost.resolvers.decisions import reopen as decision_reopen
from waypost.resolvers.decisions.models import DecisionListQuery
from waypost.rest.queries import ListQuery
from waypost.rest.routing import Call, RouteTable

table = RouteTable("decisions")
DECISIONS = "/api/v1/projects/{project}/decisions"
DECISION = DECISIONS + "/{decision}"


@table.post(DECISIONS, body=decisions.DecisionCreate, status=201)
async def open_decision(call: Call) -> Outcome:
    """Open a decision pinned to the current revisions of its tasks and policy."""
    assert call.idem
    return await decisions.open_decision(
        call.rt, call.actor, call.idem, call.params["project"], call.body
    )


@table.get(DECISIONS, query=DecisionListQuery)
async def list_decisions(call: Call) -> Page[Any]:
    """Decisions by creation time; filter by computed `status`."""
    q = call.query
    return await decisions.list_decisions(
        call.rt, call.params["project"], q.status, q.cursor, q.limit
    )


@table.get(DECISION, query=ListQuery)
async def get_decision(call: Call) -> dict[str, Any]:
    """One decision with `history`: its generations, newest first, each with its answer."""
    p, q = call.params, call.query
    return await decisions.get(call.rt, p["project"], p["decision"], q.cursor, q.limit)


@table.post(f"{DECISION}/answer", body=decision_answers.DecisionAnswer)
async def answer_decision(call: Call) -> Outcome:
    """Answer the current generation (allow, deny or defer), directly or relayed."""
    assert call.idem
    p = call.params
    return await decision_answers.answer(
        call.rt, call.actor, call.idem, p["project"], p["decision"], call.body
    )


@table.post(f"{DECISION}/reopen", body=decision_reopen.DecisionReopen)
async def reopen_decision(call: Call) -> Outcome:
    """Open the next generation, pinned to all current revisions."""
    assert call.idem
    p = call.params
    return await decision_reopen.reopen(
        call.rt, call.actor, call.idem, p["project"], p["decision"], call.body
    )


@table.get("/api/v1/projects/{project}/digest")
async def project_digest(call: Call) -> dict[str, Any]:
    """Pending decisions, what proceeded by timeout, what will soon, and blocked work."""
    return await digest.digest(call.rt, call.params["project"], call.actor.principal_id)
