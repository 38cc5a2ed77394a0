"""`node(id)`: any record by its global id."""

from __future__ import annotations

from typing import Annotated

import strawberry

from waypost.schema.context import Info
from waypost.schema.relay import NODE_RESOLVERS, Node, parse_global_id


@strawberry.type
class NodeQueries:
    @strawberry.field(description="Any record by its global id; null when there is none.")
    async def node(
        self,
        info: Info,
        id: Annotated[
            strawberry.ID,
            strawberry.argument(description="The record's global id (`Type:rest-id`, base64)."),
        ],
    ) -> Node | None:
        type_name, rest_id = parse_global_id(id)
        resolver = NODE_RESOLVERS.get(type_name)
        if resolver is None:
            return None
        found: Node | None = await resolver(info, rest_id)
        return found
