"""REST route: the bounded context packet."""

from __future__ import annotations

from typing import Any

from waypost.resolvers.context import packet
from waypost.resolvers.context.params import ContextQuery
from waypost.rest.routing import Call, RouteTable

table = RouteTable("context")


@table.get("/api/v1/projects/{project}/context", query=ContextQuery)
async def get_context(call: Call) -> dict[str, Any]:
    """Policy, open decisions, then ranked task and knowledge matches, within limit and budget."""
    # a HEAD sends no body: no item text goes to the provider for it
    return await packet.build(call.rt, call.params["project"], call.query, rerank=not call.head)
