"""The Strawberry schema: types per domain, composed into one Query and Mutation.

Every field calls the same resolvers as the REST shim. The query limits of
the service contract live in `waypost.schema.limits`.
"""

from __future__ import annotations

import strawberry
from graphql import GraphQLError
from strawberry.schema.config import StrawberryConfig
from strawberry.tools import merge_types
from strawberry.types import ExecutionContext

from waypost.observe.graphql import GraphQLObserver
from waypost.schema.decision_mutations import DecisionMutations
from waypost.schema.descriptions import describe
from waypost.schema.documents import ParsedDocument
from waypost.schema.execution import PlainFieldExecutor
from waypost.schema.knowledge_mutations import KnowledgeMutations
from waypost.schema.limits import QueryLimits
from waypost.schema.node import NodeQueries
from waypost.schema.principals import PrincipalMutations, PrincipalQueries
from waypost.schema.projects import ProjectMutations, ProjectQueries
from waypost.schema.relay import DATETIME_SCALAR, DateTime
from waypost.schema.reviews import ReviewMutations
from waypost.schema.snapshot import QuerySnapshot
from waypost.schema.subscriptions import Subscription
from waypost.schema.task_mutations import TaskMutations

Query = merge_types("Query", (PrincipalQueries, ProjectQueries, NodeQueries))
Mutation = merge_types(
    "Mutation",
    (
        PrincipalMutations,
        ProjectMutations,
        KnowledgeMutations,
        TaskMutations,
        DecisionMutations,
        ReviewMutations,
    ),
)


class WaypostSchema(strawberry.Schema):
    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        """Log nothing here: syntax, validation and limit errors are answers to the
        client, not faults; `schema.view.shape_error` logs the real faults."""


schema = WaypostSchema(
    query=Query,
    mutation=Mutation,
    subscription=Subscription,
    execution_context_class=PlainFieldExecutor,
    config=StrawberryConfig(scalar_map={DateTime: DATETIME_SCALAR}),
    # factories: Strawberry builds fresh extensions for each request;
    # ParsedDocument replaces the parsing step (one memo, heavy documents off
    # the loop) and QueryLimits the validation step (limits, then
    # graphql-core's rules)
    extensions=[
        ParsedDocument,
        QueryLimits,
        QuerySnapshot,
        GraphQLObserver,
    ],
)
describe(schema._schema)
