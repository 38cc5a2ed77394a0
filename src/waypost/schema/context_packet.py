"""GraphQL: `Project.context(...)`, the bounded context packet.

The same resolver as `GET /api/v1/projects/{project}/context` builds the
packet; the limit and budget bounds are checked by the same request model,
so errors name the same (camelCase) fields. The budget counts the REST JSON
of each item (docs/context.md), whatever fields a GraphQL query selects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import strawberry

from waypost.decoding import convert
from waypost.reranker.reasons import REASONS
from waypost.resolvers.context import packet
from waypost.resolvers.context.params import (
    BUDGET_DEFAULT,
    LIMIT_DEFAULT,
    ContextQuery,
    search_terms,
)
from waypost.schema.context import Info
from waypost.schema.decisions import Decision
from waypost.schema.errors import graphql_field_names
from waypost.schema.knowledge import Knowledge
from waypost.schema.mutation_arguments import checked_before_mutations, python_names
from waypost.schema.searches import start_search
from waypost.schema.tasks import Task


def _arg(description: str) -> Any:
    return strawberry.argument(description=description)


ContextItem = Annotated[
    Decision | Task | Knowledge,
    strawberry.union(
        "ContextItem",
        description="A packet item: an open decision, a matching task or a knowledge record.",
    ),
]


@strawberry.type(description="The project's binding rules, complete, at their revision.")
class ContextPolicy:
    revision: int = strawberry.field(description="The policy revision.")
    rules: str = strawberry.field(description="The complete rules text, never truncated.")


@strawberry.type(description="Whether the provider reordered the items, and why (not).")
class ContextRerank:
    applied: bool = strawberry.field(description="True when the provider's order was applied.")
    reason: str = strawberry.field(description=f"{', '.join(REASONS[:-1])} or {REASONS[-1]}.")


@strawberry.type(description="Policy, open decisions, then ranked matches within limit and budget.")
class ContextPacket:
    policy: ContextPolicy = strawberry.field(description="The binding policy, always whole.")
    items: list[ContextItem] = strawberry.field(
        description="Open decisions first, then task and knowledge matches by rank."
    )
    instructions_complete: bool = strawberry.field(
        description="False when the budget was smaller than the policy; then items is empty."
    )
    truncated: bool = strawberry.field(
        description="True when a matching item was left out (limit, budget or time limit),"
        " and whenever instructionsComplete is false."
    )
    next_actions: list[str] = strawberry.field(
        description="Concrete advice; non-empty whenever items is empty or truncated is true."
    )
    rerank: ContextRerank = strawberry.field(description="What the reranker did.")

    @classmethod
    def from_json(cls, d: dict[str, Any], project_id: str) -> ContextPacket:
        return cls(
            policy=ContextPolicy(revision=d["policy"]["revision"], rules=d["policy"]["rules"]),
            items=[_item(i, project_id) for i in d["items"]],
            instructions_complete=d["instructions_complete"],
            truncated=d["truncated"],
            next_actions=list(d["next_actions"]),
            rerank=ContextRerank(applied=d["rerank"]["applied"], reason=d["rerank"]["reason"]),
        )


def _query(raw: dict[str, Any]) -> ContextQuery:
    """The arguments as the REST route's query, refused as the route refuses them."""
    query = convert(raw, ContextQuery)
    search_terms(query.q)
    return query


@checked_before_mutations("Project", "context")
def _check(arguments: dict[str, Any]) -> None:
    """Refusals that need no data, before a mutation whose selection holds the packet."""
    with graphql_field_names():
        _query(python_names(arguments))


def _item(item: dict[str, Any], project_id: str) -> Decision | Task | Knowledge:
    body = {k: v for k, v in item.items() if k != "type"}
    if item["type"] == "decision":
        return Decision.from_json(body)
    if item["type"] == "task":
        return Task.from_json(body)
    return Knowledge.from_json(body, viewed_from=project_id)


@strawberry.type
class ProjectContextFields:
    """`Project.context` (a base class of Project)."""

    if TYPE_CHECKING:
        rest_id: str

    @strawberry.field(
        description="The bounded context packet: policy, pending or invalidated decisions,"
        " then task and knowledge matches for `q` by rank (docs/context.md)."
    )
    async def context(
        self,
        info: Info,
        q: Annotated[str, _arg("The search: 1-1,024 bytes, 1-32 terms, all required.")],
        limit: Annotated[int, _arg("Most items, decisions included (1-100).")] = LIMIT_DEFAULT,
        budget: Annotated[
            int, _arg("Most bytes of policy plus items as compact JSON (1,024-131,072).")
        ] = BUDGET_DEFAULT,
        include_shared: Annotated[bool, _arg("Also knowledge that other projects share.")] = False,
        task_id: Annotated[
            str | None, _arg("Decisions of this task only; knowledge scoped to it or to none.")
        ] = None,
        component: Annotated[str | None, _arg("Knowledge-scope filter.")] = None,
        environment: Annotated[str | None, _arg("Knowledge-scope filter.")] = None,
        version: Annotated[str | None, _arg("Knowledge-scope filter.")] = None,
    ) -> ContextPacket:
        raw = {
            "q": q, "limit": limit, "budget": budget, "include_shared": include_shared,
            "task_id": task_id, "component": component, "environment": environment,
            "version": version,
        }  # fmt: skip
        with graphql_field_names():
            query = _query(raw)
            start_search(info.context.loaders)
            rt = info.context.rt
            # not in the query's pinned snapshot, which ends here: no read
            # transaction stays open while the packet calls the reranking
            # provider (the query's other reads wait, then see a newer one)
            async with rt.db.unpinned():
                built = await packet.build(rt, self.rest_id, query, words=packet.GRAPHQL_WORDS)
        return ContextPacket.from_json(built, self.rest_id)
