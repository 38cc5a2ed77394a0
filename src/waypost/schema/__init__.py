"""The Strawberry schema: types per domain, composed into one Query and Mutation.

Every field calls the same resolvers as the REST shim. Limits follow the
service contract: depth 12 (introspection ignored), 30 aliases counted through
fragments, 5,000 tokens; the HTTP layer bounds the body at 64 KiB.
"""

from __future__ import annotations

import strawberry
from strawberry.extensions import MaxAliasesLimiter, MaxTokensLimiter, QueryDepthLimiter
from strawberry.tools import merge_types

from waypost.schema.decisions import DecisionMutations
from waypost.schema.knowledge import KnowledgeMutations
from waypost.schema.node import NodeQueries
from waypost.schema.principals import PrincipalMutations, PrincipalQueries
from waypost.schema.projects import ProjectMutations, ProjectQueries
from waypost.schema.task_mutations import TaskMutations

MAX_DEPTH = 12
MAX_ALIASES = 30
MAX_TOKENS = 5000

Query = merge_types("Query", (PrincipalQueries, ProjectQueries, NodeQueries))
Mutation = merge_types(
    "Mutation",
    (PrincipalMutations, ProjectMutations, KnowledgeMutations, TaskMutations, DecisionMutations),
)

schema = strawberry.Schema(
    query=Query,
    mutation=Mutation,
    # factories: Strawberry builds fresh extensions for each request
    extensions=[
        lambda: QueryDepthLimiter(max_depth=MAX_DEPTH),
        lambda: MaxAliasesLimiter(max_alias_count=MAX_ALIASES),
        lambda: MaxTokensLimiter(max_token_count=MAX_TOKENS),
    ],
)
