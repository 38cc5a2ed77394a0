"""One execution per event for every subscription that asks the same thing.

graphql-core answers each event of each subscription with an execution of
its own: with 100 dashboards subscribed to one project's `projectEvents`,
every write cost the event loop 100 executions (about 100 µs each), and 16
writers fell from 1,750 to 120 writes a second (`python -m bench --suite
fanout`). The answer to an event depends only on the event and the
operation: every principal reads every project (service contract, section
2) and no field reachable from a subscription's root depends on who asks
(only the root `Query` fields `me`, `mySession` and `node` do, and a
subscription's selection cannot reach them). So subscriptions whose
selections print the same, with the same variables, share one execution of
each event they are handed as the same object (`projectEvents` hands out
the hub's own events: `shared_payload`), and each sends its own copy of the
answer.

Errors are shared with the answer: the same operation fails the same way
(an object limit, a search limit), and each subscriber's transport reports
it as before. The execution runs in the context of the subscriber that
asked first; it is shielded, so that one closing its socket leaves the
others' answer alone.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar, cast

from graphql import ExecutionResult, FieldNode, OperationDefinitionNode, print_ast

_VARIABLE = re.compile(r"\$([_A-Za-z][_0-9A-Za-z]*)")
Item = TypeVar("Item")
T = TypeVar("T")

# Recent (event, operation) answers. Subscribers handed the same event are
# answered within one wake of the hub, so a short memory serves them all.
MOST: int = 4096
_ANSWERS: OrderedDict[Hashable, tuple[object, asyncio.Future[ExecutionResult]]] = OrderedDict()
# Payload objects handed to several subscriptions: by the hub item they were
# made from (kept with it, so that an id is never reused while remembered),
# and by their own id (what the per-event executor is handed).
_PAYLOADS: OrderedDict[int, tuple[object, object]] = OrderedDict()
_SHARED: dict[int, object] = {}


def shared_payload(item: Item, make: Callable[[Item], T]) -> T:
    """One payload object per hub item, so that its answers can be shared."""
    found = _PAYLOADS.get(id(item))
    if found is not None and found[0] is item:
        return cast(T, found[1])
    payload = make(item)
    _PAYLOADS[id(item)] = (item, payload)
    _SHARED[id(payload)] = payload
    if len(_PAYLOADS) > MOST:
        _, (_, dropped) = _PAYLOADS.popitem(last=False)
        del _SHARED[id(dropped)]
    return payload


def is_shared(payload: object) -> bool:
    """Whether `payload` was made by `shared_payload` (and is remembered)."""
    return _SHARED.get(id(payload)) is payload


def operation_key(
    operation: OperationDefinitionNode, fragments: dict[str, Any], variables: dict[str, Any]
) -> Hashable:
    """What the operation asks of each event, whoever sent it and however it
    was spaced: the root field's name, response key and selection, and the
    variables and fragments that selection reads. The root field's arguments
    (`projectId`, `after`) choose which events come, not what an event's
    answer holds, so dashboards resuming from different places share too."""
    roots = operation.selection_set.selections
    root = roots[0] if len(roots) == 1 else None
    if (
        isinstance(root, FieldNode) and root.selection_set is not None
        and not root.directives and not operation.directives
    ):  # fmt: skip
        key = (root.alias or root.name).value
        asked = f"{root.name.value} {key} {print_ast(root.selection_set)}"
    else:  # a shape the subscriptions here never take: all of it counts
        asked = print_ast(operation)
    printed = [asked, *(print_ast(fragments[name]) for name in sorted(fragments))]
    text = "\n".join(printed)
    # a `$name` inside a string literal only narrows the sharing
    read = {name: variables[name] for name in _VARIABLE.findall(text) if name in variables}
    return (text, json.dumps(read, sort_keys=True, default=repr))


def answer(
    payload: object, operation: Hashable, run: Callable[[], Any]
) -> ExecutionResult | Awaitable[ExecutionResult]:
    """`run()`'s answer to `payload` for `operation`, run once for all who ask."""
    key = (id(payload), operation)
    found = _ANSWERS.get(key)
    if found is None or found[0] is not payload:
        outcome = run()
        future: asyncio.Future[ExecutionResult]
        if inspect.isawaitable(outcome):
            future = asyncio.ensure_future(outcome)
        else:
            future = asyncio.get_running_loop().create_future()
            future.set_result(outcome)
        _ANSWERS[key] = (payload, future)
        if len(_ANSWERS) > MOST:
            _ANSWERS.popitem(last=False)
    else:
        future = found[1]
    if future.done() and not future.cancelled() and future.exception() is None:
        return future.result()
    return _shielded(future)


async def _shielded(future: asyncio.Future[ExecutionResult]) -> ExecutionResult:
    return await asyncio.shield(future)
