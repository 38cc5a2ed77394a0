"""REST routes: knowledge records, corrections and usefulness feedback."""

from __future__ import annotations

from typing import Any

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
from waypost.rest.queries import ListQuery
from waypost.rest.routing import Call, RouteTable

table = RouteTable("knowledge")
BASE = "/api/v1/projects/{project}/knowledge"


@table.post(BASE, body=KnowledgeCreate, status=201)
async def create_knowledge(call: Call) -> Outcome:
    """Create a knowledge record (revision 1); the server fills actor, session and time."""
    assert call.idem
    return await knowledge.create(call.rt, call.actor, call.idem, call.params["project"], call.body)


@table.get(BASE, query=KnowledgeListQuery)
async def list_knowledge(call: Call) -> Page[Any]:
    """Records newest first; shared records of other projects only with include_shared=true."""
    return await knowledge.list_knowledge(call.rt, call.params["project"], call.query)


@table.get(BASE + "/{id}", query=ListQuery)
async def get_knowledge(call: Call) -> dict[str, Any]:
    """One record with its revision history (newest first) and feedback totals."""
    return await knowledge.detail(
        call.rt, call.params["project"], call.params["id"], call.query.cursor, call.query.limit
    )


@table.patch(BASE + "/{id}", body=KnowledgeCorrect)
async def correct_knowledge(call: Call) -> Outcome:
    """Correct a record: the complete new content under expected_revision."""
    assert call.idem
    return await knowledge.correct(
        call.rt, call.actor, call.idem, call.params["project"], call.params["id"], call.body
    )


@table.post(BASE + "/{id}/feedback", body=FeedbackInput, status=201)
async def knowledge_feedback_route(call: Call) -> Outcome:
    """Record usefulness feedback on the revision the caller read (expected_revision)."""
    assert call.idem
    return await knowledge_feedback.record(
        call.rt, call.actor, call.idem, call.params["project"], call.params["id"], call.body
    )
