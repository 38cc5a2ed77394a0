"""Compiling a query's selection sets into a plan the fast path can run.

The plan is made once per document and variables (memoized: a dashboard
sends the same query each time), after parsing, validation and the limits
of `schema/limits.py` have passed, from the same field collection graphql-core
uses (`collect_fields`/`collect_subfields`: aliases, fragments, inline
fragments, `@skip`/`@include` with their variables), with the arguments
coerced by graphql-core's own `get_argument_values`. A selection set is
compiled once per field of the document, not once per item, so a list of
fifty decisions costs one compilation of its selection.

Compilation says no (returns None) for anything the fast path does not
handle: a field not in the registry (introspection included), an interface,
`@defer`/`@stream`. The operation then runs on graphql-core unchanged. A
union (an event's `subject`) is compiled once for each of its object types,
with the fields each fragment selects on it; its resolver names the type of
each value it returns.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from graphql import (
    GraphQLError,
    GraphQLInterfaceType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLString,
    GraphQLUnionType,
    OperationDefinitionNode,
    OperationType,
    Undefined,
)
from graphql.execution.collect_fields import (
    CollectedFields,
    FieldDetails,
    GroupedFieldSet,
    collect_fields,
    collect_subfields,
)
from graphql.execution.executor import Executor
from graphql.execution.values import get_argument_values

from waypost.schema.fastpath.fields import FIELDS, Resolver, typename
from waypost.schema.limits import CACHED_QUERIES
from waypost.schema.memo import TOKENS_KEPT, Memo, tokens_kept, variables_key


@dataclass(frozen=True)
class FieldPlan:
    """One response key of a selection set."""

    key: str
    resolve: Resolver
    args: dict[str, Any]
    # the field's full return type (non-null and list wrappers included)
    type: GraphQLOutputType
    # the selection on the field's object type, None for scalars, enums and unions
    sub: SelectionPlan | None
    # the field's name in the schema (`key` may be an alias)
    name: str = ""
    # a union's: the selection on each of its object types (by type name)
    by_type: tuple[tuple[str, SelectionPlan], ...] | None = None


@dataclass(frozen=True)
class SelectionPlan:
    type_name: str
    fields: tuple[FieldPlan, ...]
    # on the operation's plan: every (type name, field name) selected anywhere
    # in it, so a read can take only what some selection shows (registry.py)
    selected: frozenset[tuple[str, str]] = frozenset()


class _NotEligible(Exception):
    """Some part of the operation needs graphql-core's own execution."""


def _grouped(collected: CollectedFields) -> GroupedFieldSet:
    """The collected fields, unless `@defer` or a directive the plan cannot
    honour was used: graphql-core executes those."""
    if collected.new_defer_usages or collected.forbidden_directive_instances:
        raise _NotEligible
    return collected.grouped_field_set


# (id of the operation node, variables) -> (that node, its plan). The plan
# depends on nothing else (the schema is one; fragments come with the node's
# document), and the parser cache hands back the same document for the same
# text. The node is kept in the entry, so its id cannot be reused while the
# entry lives, and is compared on every hit.
_PLANS: Memo[tuple[OperationDefinitionNode, SelectionPlan | None]] = Memo(
    CACHED_QUERIES, lambda found: tokens_kept(found[0]), TOKENS_KEPT
)


def compile_query(executor: Executor[Any]) -> SelectionPlan | None:
    """The plan of the executor's operation, or None when it must take the
    normal path (not a query, or a field the fast path does not know)."""
    # keyed by the variables as the request gave them: the coerced values
    # (and which ones came from defaults) follow from them and the document
    given = executor.variable_values.sources
    variables = variables_key(
        {name: v.value for name, v in given.items() if v.value is not Undefined}
    )
    if variables is None:
        return _compile(executor)
    key = (id(executor.operation), variables)
    found = _PLANS.get(key)
    if found is not None and found[0] is executor.operation:
        return found[1]
    plan = _compile(executor)
    _PLANS.put(key, (executor.operation, plan))
    return plan


def _compile(executor: Executor[Any]) -> SelectionPlan | None:
    operation = executor.operation
    if operation.operation is not OperationType.QUERY:
        return None
    root = executor.schema.query_type
    if root is None:
        return None
    try:
        collected = collect_fields(
            executor.schema,
            executor.fragments,
            executor.variable_values,
            root,
            operation,
            executor.hide_suggestions,
        )
        plan = _selection(executor, root, _grouped(collected))
    except (_NotEligible, GraphQLError, RecursionError):
        return None
    return replace(plan, selected=frozenset(_selected(plan)))


def _selected(plan: SelectionPlan) -> Iterator[tuple[str, str]]:
    for field in plan.fields:
        yield plan.type_name, field.name
        if field.sub is not None:
            yield from _selected(field.sub)
        for _, sub in field.by_type or ():
            yield from _selected(sub)


def _selection(
    executor: Executor[Any], parent: GraphQLObjectType, grouped: dict[str, list[FieldDetails]]
) -> SelectionPlan:
    fields = []
    for key, details in grouped.items():
        node = details[0].node
        name = node.name.value
        if name == "__typename":
            fields.append(FieldPlan(key, typename(parent.name), {}, _TYPENAME, None, name))
            continue
        resolve = FIELDS.get((parent.name, name))
        field_def = parent.fields.get(name)
        if resolve is None or field_def is None or any(d.defer_usage for d in details):
            raise _NotEligible
        # the first node's arguments, as graphql-core takes them (validation
        # made sure every node of one response key asks the same)
        args = get_argument_values(
            field_def,
            node,
            executor.variable_values,
            details[0].fragment_variable_values,
            executor.hide_suggestions,
        )
        named = _named_type(field_def.type)
        sub, by_type = None, None
        if isinstance(named, GraphQLObjectType):
            sub = _sub_selection(executor, named, details)
        elif isinstance(named, GraphQLUnionType):
            by_type = tuple(
                (possible.name, _sub_selection(executor, possible, details))
                for possible in executor.schema.get_possible_types(named)
            )
        fields.append(FieldPlan(key, resolve, args, field_def.type, sub, name, by_type))
    return SelectionPlan(parent.name, tuple(fields))


def _sub_selection(
    executor: Executor[Any], named: GraphQLObjectType, details: list[FieldDetails]
) -> SelectionPlan:
    """The selection of `details` on the object type `named` (for a union,
    one of its types: the fragments on it, `__typename`)."""
    collected = collect_subfields(
        executor.schema,
        executor.fragments,
        executor.variable_values,
        executor.operation,
        named,
        details,
        executor.hide_suggestions,
    )
    return _selection(executor, named, _grouped(collected))


def _named_type(t: GraphQLOutputType) -> GraphQLOutputType:
    """The type under the wrappers. Interfaces are not eligible (none of
    their fields is registered)."""
    while isinstance(t, GraphQLNonNull | GraphQLList):
        t = t.of_type
    if isinstance(t, GraphQLInterfaceType):
        raise _NotEligible
    return t


_TYPENAME = GraphQLNonNull(GraphQLString)
