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
one object per event of the hub's: `shared_payload`; `projectEventBatches`
one per run of them that a wake hands out: `shared_batch`), and each sends
its own copy of the answer.

Only answers without errors are shared (an error's `locations` point into
the document it was executed for): a subscriber handed an answer with
errors runs its own execution, as before. The execution runs in the context
of the subscriber that asked first; it is shielded, so that one closing its
socket leaves the others' answer alone; once finished, the answer is kept
and its task, which holds that context, let go.

Answers are kept for the subscribers woken with the same events, so the
memory is short: the latest MOST answers and at most MOST_TEXT characters of
their text, the oldest let go first (a larger answer is not kept at all).
By count alone it kept 4,096 answers however large, after every subscriber
had gone: 100 MB for 1,600 events of a task's 64 KiB description
(liveaudit), more for a richer selection.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

from graphql import ExecutionResult, FieldNode, OperationDefinitionNode, print_ast


@runtime_checkable
class Batch(Protocol):
    """A payload of several events (`projectEventBatches`). Its answer is
    delivered whole or not at all: an answer with errors (past the execution
    limits, which apply to the whole message) would drop every event it
    holds, so the subscription ends instead, saying where to resume
    (execution.py)."""

    def resume_after(self) -> int:
        """The sequence a subscriber resumes after, when this batch cannot be
        delivered: just before its first event."""
        ...


# whether a payload's type is a Batch, per type: a runtime Protocol check
# takes 8 µs, paid per subscriber per event of `projectEvents`
_BATCH_TYPES: dict[type, bool] = {}


def is_batch(payload: object) -> bool:
    """Whether `payload` is a `Batch` (its type checked once)."""
    kind = type(payload)
    found = _BATCH_TYPES.get(kind)
    if found is None:
        found = _BATCH_TYPES[kind] = isinstance(payload, Batch)
    return found


_VARIABLE = re.compile(r"\$([_A-Za-z][_0-9A-Za-z]*)")
Item = TypeVar("Item")
T = TypeVar("T")

# Recent (event, operation) answers. Subscribers handed the same event are
# answered within one wake of the hub, so a short memory serves them all.
MOST: int = 4096
# ... and at most this many characters of their text (**Choice**: 256
# answers of 64 Ki); an answer may hold 32 Mi (budget.MAX_TEXT)
MOST_TEXT: int = 16 * 1024 * 1024
Kept = ExecutionResult | asyncio.Future[ExecutionResult]


@dataclass
class _Answers:
    """The answers kept, oldest first, each with its payload and the size of
    its text (0 while it runs)."""

    entries: OrderedDict[Hashable, tuple[object, Kept]] = field(default_factory=OrderedDict)
    sizes: dict[Hashable, int] = field(default_factory=dict)
    total: int = 0

    def get(self, key: Hashable) -> tuple[object, Kept] | None:
        return self.entries.get(key)

    def put(self, key: Hashable, payload: object, kept: Kept) -> None:
        self.drop(key)
        size = text_size(kept.data) if isinstance(kept, ExecutionResult) else 0
        if size > MOST_TEXT:
            return  # not kept, and the others stay (it flushed them all: review67)
        self.entries[key] = (payload, kept)
        self.sizes[key] = size
        self.total += size
        while len(self.entries) > MOST or self.total > MOST_TEXT:
            self.drop(next(iter(self.entries)))

    def drop(self, key: Hashable) -> None:
        if self.entries.pop(key, None) is not None:
            self.total -= self.sizes.pop(key, 0)


_ANSWERS = _Answers()
# Payload objects handed to several subscriptions: by the hub items they were
# made from (kept with them, so that an id is never reused while remembered),
# and by their own id (what the per-event executor is handed).
_PAYLOADS: OrderedDict[Hashable, tuple[tuple[object, ...], object]] = OrderedDict()
_SHARED: dict[int, object] = {}


def shared_payload(item: Item, make: Callable[[Item], T]) -> T:
    """One payload object per hub item, so that its answers can be shared."""
    return _shared(id(item), (item,), lambda: make(item))


def shared_batch(items: list[Item], make: Callable[[list[Item]], T]) -> T:
    """One payload object per run of hub items (`projectEventBatches`).

    Subscribers woken together are handed the same run of the hub's own
    events: the same first and last event, and the same events between them
    (the hub's window only grows at its end and drops from its start). A run
    read from the log itself is made of fresh objects and is not shared."""
    return _shared((id(items[0]), id(items[-1]), len(items)), (items[0], items[-1]),
                   lambda: make(items))  # fmt: skip


def _shared(key: Hashable, anchors: tuple[object, ...], make: Callable[[], T]) -> T:
    found = _PAYLOADS.get(key)
    if found is not None and all(a is b for a, b in zip(found[0], anchors, strict=True)):
        return cast(T, found[1])
    payload = make()
    _PAYLOADS[key] = (anchors, payload)
    _SHARED[id(payload)] = payload
    if len(_PAYLOADS) > MOST:
        _, (_, dropped) = _PAYLOADS.popitem(last=False)
        del _SHARED[id(dropped)]
    return payload


def is_shared(payload: object) -> bool:
    """Whether `payload` was made by `shared_payload` or `shared_batch` (and
    is remembered)."""
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
    # the executor holds each fragment with its variables' signatures
    printed = [asked, *(print_ast(fragments[name].definition) for name in sorted(fragments))]
    text = "\n".join(printed)
    # a `$name` inside a string literal only narrows the sharing
    read = {name: variables[name] for name in _VARIABLE.findall(text) if name in variables}
    return (text, json.dumps(read, sort_keys=True, default=repr))


def answer(
    payload: object, operation: Hashable, run: Callable[[], Any]
) -> ExecutionResult | Awaitable[ExecutionResult]:
    """`run()`'s answer to `payload` for `operation`, run once for all who ask.

    Only an answer without errors is shared: an error's `locations` point into
    the document of the subscriber whose execution made it, so each
    subscriber whose answer has errors runs its own (the same operation fails
    the same way: that is rare and costs what it did before)."""
    key = (id(payload), operation)
    found = _ANSWERS.get(key)
    if found is None or found[0] is not payload:
        outcome = run()
        if not inspect.isawaitable(outcome):
            _keep(key, payload, outcome)
            return cast(ExecutionResult, outcome)
        running = asyncio.ensure_future(outcome)
        _ANSWERS.put(key, payload, running)
        running.add_done_callback(functools.partial(_settled, key))
        return _shielded(running)
    kept = found[1]
    if isinstance(kept, ExecutionResult):
        return kept
    return _shared_or_own(kept, run)


def _keep(key: Hashable, payload: object, result: ExecutionResult) -> None:
    if not result.errors:
        _ANSWERS.put(key, payload, result)


def text_size(data: object) -> int:
    """About the text an answer holds: its strings' lengths in characters,
    and a few for every other value (iterative: answers nest deep)."""
    size, stack = 0, [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            size += len(item)
        elif isinstance(item, dict):
            size += 8 * len(item) + sum(map(len, item))
            stack.extend(item.values())
        elif isinstance(item, list):
            size += 8 * len(item)
            stack.extend(item)
        else:
            size += 8
    return size


def _settled(key: Hashable, running: asyncio.Future[ExecutionResult]) -> None:
    """Keep the finished answer, not its task: a task keeps the context it ran
    in (the first subscriber's loaders and token) for as long as it is held."""
    entry = _ANSWERS.get(key)
    if entry is None or entry[1] is not running:
        return
    if running.cancelled() or running.exception() is not None or running.result().errors:
        _ANSWERS.drop(key)
    else:
        _ANSWERS.put(key, entry[0], running.result())


async def _shielded(running: asyncio.Future[ExecutionResult]) -> ExecutionResult:
    return await asyncio.shield(running)


async def _shared_or_own(
    running: asyncio.Future[ExecutionResult], run: Callable[[], Any]
) -> ExecutionResult:
    try:
        result: ExecutionResult | None = await asyncio.shield(running)
    except Exception:  # the first subscriber's execution failed: run our own
        result = None
    if result is not None and not result.errors:
        return result
    own = run()
    return cast(ExecutionResult, await own if inspect.isawaitable(own) else own)
