"""Operations that only introspect: answered from a memo or on a worker thread.

Introspection resolvers read the schema, which never changes while the
process runs, so the result of an operation whose root fields are all
`__schema`, `__type` or `__typename` depends on its text, its name and its
variables alone. graphql-core builds it field by field on the event loop:
the standard introspection query that GraphiQL and code generators send
took about 190 ms there, and thirty aliased `__type` fields up to 2.3 s,
while every other request waited. Here the first answer to a text is built
on a worker thread (a lane of its own, so validation of other queries does
not queue behind it) and kept; the next request for the same text is
answered from the memo. An operation that also selects data fields runs
as every other query does (bounded by the execution limit).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from graphql import (
    ExecutionResult,
    FieldNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
)
from graphql.execution.collect_fields import FragmentDetails

from waypost.schema.memo import Memo, variables_key
from waypost.schema.offload import INTROSPECTION, off_loop

_META = frozenset({"__schema", "__type"})
_TYPENAME = "__typename"
# Distinct introspection texts kept, and the largest result kept (objects, as
# the execution limit counts them): the standard query's result holds about
# 5,500 objects (190 KB of JSON, 0.55 MB in memory); a text built to reach
# the execution limit is answered, not kept. At most some 13 MB in all.
CACHED_RESULTS = 16
MAX_CACHED_OBJECTS = 8_000

_RESULTS: Memo[ExecutionResult] = Memo(CACHED_RESULTS)


def only_introspection(
    operation: OperationDefinitionNode, fragments: Mapping[str, FragmentDetails]
) -> bool:
    """Whether a query's root fields are all introspection, one at least `__schema`
    or `__type` (a bare `__typename` is cheaper on the loop than a thread hop)."""
    if operation.operation != OperationType.QUERY:
        return False
    meta = False
    seen: set[str] = set()
    pending: list[SelectionSetNode] = [operation.selection_set]
    while pending:
        for selection in pending.pop().selections:
            if isinstance(selection, FieldNode):
                name = selection.name.value
                if name in _META:
                    meta = True
                elif name != _TYPENAME:
                    return False
            elif isinstance(selection, InlineFragmentNode):
                pending.append(selection.selection_set)
            elif isinstance(selection, FragmentSpreadNode):
                spread = selection.name.value
                fragment = fragments.get(spread)
                if fragment is not None and spread not in seen:
                    seen.add(spread)
                    pending.append(fragment.definition.selection_set)
    return meta


def _key(operation: OperationDefinitionNode, variables: dict[str, Any]) -> Hashable | None:
    variables_part = variables_key(variables)
    if operation.loc is None or variables_part is None:
        return None
    name = operation.name.value if operation.name else None
    return (operation.loc.source.body, name, variables_part)


async def answer(
    operation: OperationDefinitionNode,
    variables: dict[str, Any],
    run: Callable[[], Any],
    objects: Callable[[], int],
) -> ExecutionResult:
    """The memoized result, or `run()` on the introspection lane (kept when
    its result, `objects()` objects, is small enough)."""
    key = _key(operation, variables)
    found = _RESULTS.get(key) if key is not None else None
    if found is not None:
        return found
    result: ExecutionResult = await off_loop(run, lane=INTROSPECTION)
    if key is not None and objects() <= MAX_CACHED_OBJECTS:
        _RESULTS.put(key, result)
    return result
