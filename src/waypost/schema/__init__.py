"""The Strawberry schema: types per domain, composed into one Query and Mutation.

Every field calls the same resolvers as the REST shim. Limits follow the
service contract: depth 12 (introspection ignored), 30 aliases counted through
fragments, 5,000 tokens; the HTTP layer bounds the body at 64 KiB.
"""

from __future__ import annotations

import strawberry
from graphql import GraphQLError
from graphql.validation import ASTValidationRule
from strawberry.extensions import (
    AddValidationRules,
    MaxTokensLimiter,
    ParserCache,
    ValidationCache,
)
from strawberry.extensions.max_aliases import create_validator as alias_rule
from strawberry.extensions.query_depth_limiter import create_validator as depth_rule
from strawberry.schema.config import StrawberryConfig
from strawberry.tools import merge_types
from strawberry.types import ExecutionContext

from waypost.schema.decisions import DecisionMutations
from waypost.schema.descriptions import describe
from waypost.schema.knowledge import KnowledgeMutations
from waypost.schema.node import NodeQueries
from waypost.schema.principals import PrincipalMutations, PrincipalQueries
from waypost.schema.projects import ProjectMutations, ProjectQueries
from waypost.schema.relay import DATETIME_SCALAR, DateTime
from waypost.schema.task_mutations import TaskMutations

MAX_DEPTH = 12
MAX_ALIASES = 30
MAX_TOKENS = 5000
# Distinct query texts whose parse and validation results are kept (bounded, so
# unique texts cannot grow memory); agents and dashboards repeat a few queries.
CACHED_QUERIES = 256

# The limit rules are built once: Strawberry's limiter extensions would build a
# new rule class per request, which defeats the validation cache (it keys on
# the rules). Depth ignores introspection fields, so introspection always passes.
LIMIT_RULES: list[type[ASTValidationRule]] = [
    depth_rule(MAX_DEPTH, None, None),
    alias_rule(MAX_ALIASES),
]

Query = merge_types("Query", (PrincipalQueries, ProjectQueries, NodeQueries))
Mutation = merge_types(
    "Mutation",
    (PrincipalMutations, ProjectMutations, KnowledgeMutations, TaskMutations, DecisionMutations),
)


class WaypostSchema(strawberry.Schema):
    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        """Log nothing here: syntax, validation and limit errors are answers to the
        client, not faults; `graphql_app.shape_error` logs the real faults."""


schema = WaypostSchema(
    query=Query,
    mutation=Mutation,
    config=StrawberryConfig(scalar_map={DateTime: DATETIME_SCALAR}),
    # factories: Strawberry builds fresh extensions for each request; the
    # order matters (limits are added before the cached validation runs)
    extensions=[
        lambda: MaxTokensLimiter(max_token_count=MAX_TOKENS),
        lambda: AddValidationRules(LIMIT_RULES),
        lambda: ParserCache(maxsize=CACHED_QUERIES),
        lambda: ValidationCache(maxsize=CACHED_QUERIES),
    ],
)
describe(schema._schema)
