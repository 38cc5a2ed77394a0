"""The GraphQL HTTP endpoint: Strawberry's ASGI view with our context and error shape."""

from __future__ import annotations

import logging
from typing import Any

from graphql import GraphQLError
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.http import GraphQLHTTPResponse
from strawberry.types import ExecutionResult

from waypost.errors import WaypostError
from waypost.schema import schema
from waypost.schema.context import Context

log = logging.getLogger("waypost.graphql")


def shape_error(error: GraphQLError) -> dict[str, Any]:
    """Top-level errors carry `extensions.code`; unexpected faults are masked."""
    original = error.original_error
    formatted = error.formatted
    if isinstance(original, WaypostError):
        formatted["message"] = original.message
        formatted["extensions"] = {"code": original.code, **original.details}
    elif original is None:
        # parse and validation errors, the query limits among them
        formatted["extensions"] = {"code": "invalid_request"}
    else:
        log.error("unhandled GraphQL error", exc_info=original)
        formatted["message"] = "Unexpected error."
        formatted["extensions"] = {"code": "internal"}
    return dict(formatted)


class WaypostGraphQL(GraphQL[Context, None]):
    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> Context:
        return Context(rt=request.app.state.runtime, actor=request.state.actor)

    async def process_result(
        self, request: Request | WebSocket, result: ExecutionResult
    ) -> GraphQLHTTPResponse:
        data: GraphQLHTTPResponse = {"data": result.data}
        if result.errors:
            data["errors"] = [shape_error(e) for e in result.errors]
        return data


def graphql_view(graphiql: bool) -> WaypostGraphQL:
    return WaypostGraphQL(
        schema,
        graphql_ide="graphiql" if graphiql else None,
        allow_queries_via_get=False,
    )
