"""Operations that only introspect: answered from a memo or on a worker thread.

Introspection resolvers read the schema, which never changes while the
process runs, so the result of an operation whose root fields are all
`__schema`, `__type` or `__typename` depends on its text, its name and its
variables alone. graphql-core builds it field by field on the event loop:
the standard introspection query that GraphiQL and code generators send
took 93-173 ms a request, and while two clients sent thirty aliased
`__type` fields, other clients' new query texts waited 0.6 s (median; 39 ms
now: docs/graphql.md). Here the first answer to a text is built
on a worker thread (a lane of its own, so validation of other queries does
not queue behind it) and kept; the next request for the same text is
answered from the memo. An operation that also selects data fields runs
as every other query does (bounded by the execution limit).
"""

from __future__ import annotations

import asyncio
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

from waypost.cancelling import for_everyone
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
# Answers being built, by key: requests for a text that arrive together share
# one build (ten copies of a new text were built one after another, 120 ms
# each, the tenth answered after 1.65 s)
_BUILDING: dict[Hashable, asyncio.Future[ExecutionResult]] = {}


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


def _key(
    operation: OperationDefinitionNode, variables: dict[str, Any], max_objects: int
) -> Hashable | None:
    """Text, operation, variables, and the object limit the answer was built
    under (one past it is an error, which another limit would not give)."""
    variables_part = variables_key(variables)
    if operation.loc is None or variables_part is None:
        return None
    name = operation.name.value if operation.name else None
    return (operation.loc.source.body, name, variables_part, max_objects)


async def answer(
    operation: OperationDefinitionNode,
    variables: dict[str, Any],
    max_objects: int,
    run: Callable[[], Any],
    objects: Callable[[], int],
) -> ExecutionResult:
    """The memoized result, the one being built for the same key, or `run()`
    on the introspection lane (kept when its result, `objects()` objects, is
    small enough)."""
    key = _key(operation, variables, max_objects)
    if key is None:
        result: ExecutionResult = await off_loop(run, lane=INTROSPECTION)
        return result
    found = _RESULTS.get(key)
    if found is not None:
        return found
    building = _BUILDING.get(key)
    if building is None:
        # a task of its own: a caller that leaves stops waiting, the build
        # goes on for the others (and is kept for the next)
        building = _BUILDING[key] = for_everyone(_build(key, run, objects))
        building.add_done_callback(_seen)
    return await asyncio.shield(building)


async def _build(key: Hashable, run: Callable[[], Any], objects: Callable[[], int]) -> Any:
    try:
        result: ExecutionResult = await off_loop(run, lane=INTROSPECTION)
    finally:
        del _BUILDING[key]
    if objects() <= MAX_CACHED_OBJECTS:
        _RESULTS.put(key, result)
    return result


def _seen(task: asyncio.Future[ExecutionResult]) -> None:
    """Its error is its waiters' to raise; read here too, for when none is left."""
    if not task.cancelled():
        task.exception()
