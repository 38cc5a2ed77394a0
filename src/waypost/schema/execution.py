"""Execution without a per-field toll where no field needs one.

graphql-core executes every field the same way: it builds a `ResolveInfo`,
calls the field's resolver (Strawberry's wrapper around `getattr`), and then
completes the value. For the plain data fields of this schema (an attribute
of an object the resolvers already built from their rows: `title`,
`status`, `createdAt`, a generation's `answer`, the `edges` of a page) that
machinery is the whole cost: a dashboard of 50 decisions has about 2,000 of
them. Here such a field is read and completed in one step: the attribute,
serialized by its scalar or enum type, or (for an object) its own selection
executed the same way. Fields with a resolver (every reference, every
connection, every loader), abstract types, `__typename` and anything
unexpected (a null where the type says non-null) take graphql-core's own
path, so errors, nullability, limits (checked before execution) and
authorization (in the resolvers) are exactly as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Hashable
from typing import Any

from graphql import (
    ExecutionResult,
    GraphQLEnumType,
    GraphQLError,
    GraphQLField,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLScalarType,
    OperationType,
)
from graphql.execution.collect_fields import collect_subfields
from graphql.pyutils import Path
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from strawberry.types.field import StrawberryField

from waypost.cancelling import CallerGone
from waypost.errors import WaypostError
from waypost.http.responses import graphql_extensions
from waypost.schema import budget, fastpath, introspection, loop_slice, shared_events
from waypost.schema.context import Context
from waypost.schema.loaders import Loaders
from waypost.schema.mutation_arguments import argument_value

log = logging.getLogger("waypost.graphql")
MASKED = {"code": "internal"}

# GraphQLField -> the attribute a plain field reads, or "" for any other field
_PLAIN: dict[int, str] = {}
_FIELDS: list[GraphQLField] = []  # keeps the keys of _PLAIN alive (ids stay unique)


class _NotPlain(Exception):
    """The value needs graphql-core's own completion (e.g. a null in a non-null)."""


def _plain_attribute(field_def: GraphQLField) -> str:
    found = _PLAIN.get(id(field_def))
    if found is None:
        definition = field_def.extensions.get("strawberry-definition")
        found = ""
        if (
            isinstance(definition, StrawberryField)
            and definition.base_resolver is None
            and not definition.permission_classes
            and not definition.extensions
            and _completable(field_def.type)
        ):
            found = definition.python_name
        _PLAIN[id(field_def)] = found
        _FIELDS.append(field_def)
    return found


def _completable(t: GraphQLOutputType) -> bool:
    while isinstance(t, GraphQLNonNull | GraphQLList):
        t = t.of_type
    return isinstance(t, GraphQLScalarType | GraphQLEnumType | GraphQLObjectType)


def shaped_error(
    exc: Exception, nodes: list[Any], path: list[str | int], variables: dict[str, Any] | None = None
) -> Exception:
    """A field's error with `extensions.code`: business errors keep their code
    and details; anything unexpected is masked (logged here, with its cause).
    Located (nodes and path), so graphql-core keeps it as it is."""
    if isinstance(exc, GraphQLError) and exc.path is not None and "code" in (exc.extensions or {}):
        # shaped where it arose, in a non-null child, and bubbling up to the
        # nearest nullable parent: it keeps the child's place (it was
        # re-placed on the parent, `path: ["project"]` for a bad `tasks` argument)
        return exc
    original = exc.original_error if isinstance(exc, GraphQLError) else exc
    if isinstance(original, WaypostError):
        extensions = graphql_extensions(original)
        if extensions.get("field") == "cursor":
            extensions["field"] = _cursor_argument(nodes, variables or {})
        return GraphQLError(original.message, nodes, path=path, original_error=original,
                            extensions=extensions)  # fmt: skip
    if isinstance(exc, GraphQLError) and (original is None or isinstance(original, GraphQLError)):
        return exc
    if isinstance(original, CallerGone):  # no fault: the view answers no one (schema/view.py)
        return GraphQLError("The caller has gone.", nodes, path=path, original_error=original)
    log.error("unhandled GraphQL error", exc_info=original)
    return GraphQLError("Unexpected error.", nodes, path=path, original_error=original,
                        extensions=MASKED)  # fmt: skip


def _cursor_argument(nodes: list[Any], variables: dict[str, Any]) -> str:
    """The connection argument that carried a cursor the resolver refused:
    REST's `cursor` is `after` or `before` here. The field's whole selection
    is searched (a field that reads a connection for its parent names the
    argument below it) for the ones given a cursor, a literal or a variable's
    value (a query written for both directions declares both, and sends one);
    "cursor" stays when that does not tell."""
    given: set[str] = set()
    pending = list(nodes)
    while pending:
        node = pending.pop()
        for argument in getattr(node, "arguments", None) or ():
            name = argument.name.value
            if name in ("after", "before") and argument_value(argument.value, variables):
                given.add(name)
        selection = getattr(node, "selection_set", None)
        if selection is not None:
            pending.extend(selection.selections)
    return given.pop() if len(given) == 1 else "cursor"


# Plain lists of task ids an object holds (type, field -> its attribute):
# counted whole as the field starts. Counted as their tasks completed, a
# revision page's dependencies had been built before the count passed the
# limit: 3,100 revisions of 100 dependencies each made 310,000 tasks first,
# held the event loop 3 s and were refused after 8 s (gqlloopaudit). The
# count is the one the items would make because every id names a task: tasks
# are never deleted, and dependency and scope ids are checked as written (the
# loader and the fast path leave out an id naming nothing).
_ID_LISTS = {
    ("Task", "dependsOn"): "depends_on_ids",
    ("TaskRevision", "dependsOn"): "depends_on_ids",
    ("KnowledgeScope", "tasks"): "task_ids",
}


def _fresh_loaders(context: Any, made: list[Loaders]) -> None:
    if isinstance(context, Context):
        made.append(context.start_operation())


class PlainFieldExecutor(StrawberryGraphQLCoreExecutionContext):
    # objects and characters of text completed so far, against the execution
    # limits (schema/budget.py)
    objects = 0
    text = 0
    max_objects = budget.MAX_OBJECTS  # `serve --graphql-max-objects` (execute_operation)
    # A mutation's answer is limited too, but past the limit its root fields
    # still run, one after another: stopping one would skip writes after
    # others were committed. (Unlimited, a replay of one `taskCreate` answered
    # 48 MB of `dependsOn { description }` per alias, writing nothing.)
    mutation = False

    # the paths of the id lists counted whole as they started (`_ID_LISTS`):
    # their items are not counted again as they complete
    _counted_lists: set[Path] | None = None

    # set on a subscription event's executor whose answer can be shared
    # (schema/shared_events.py): the event, and what the operation asks
    _shared_event: tuple[object, Hashable] | None = None
    _operation_key: Hashable | None = None

    # the loaders this execution made (one per root mutation field), let go
    # of as its answer is complete (`Loaders.release`)
    _loaders_made: list[Loaders] | None = None

    # set on the executor of a batch of events (shared_events.Batch)
    _batch: shared_events.Batch | None = None

    def execute_operation(self, serially: bool | None = None) -> Any:
        shared = self._shared_event
        if shared is not None:
            payload, operation = shared
            answer = shared_events.answer(
                payload, operation, lambda: self._execute_operation(serially)
            )
        else:
            answer = self._execute_operation(serially)
        if self._batch is not None:
            answer = self._whole(answer, self._batch)
        if self.is_awaitable(answer):
            return self._released(answer)
        self._release_loaders()
        return answer

    async def _released(self, answer: Awaitable[Any]) -> Any:
        try:
            return await answer
        finally:
            self._release_loaders()

    def _release_loaders(self) -> None:
        for loaders in self._loaders_made or ():
            loaders.release()
        self._loaders_made = None

    async def _whole(self, answer: Any, batch: shared_events.Batch) -> ExecutionResult:
        """The batch's answer, or the end of the subscription: raised here,
        Strawberry sends the error as the subscription's last message."""
        result: ExecutionResult = await answer if self.is_awaitable(answer) else answer
        if not result.errors:
            return result
        first, after = result.errors[0], batch.resume_after()
        # what a client needs first, as a message is cut at 200 characters
        message = f"this batch was not delivered; resume after {after}: {first.message}"
        raise GraphQLError(message, extensions={**(first.extensions or {}), "after": after})

    def _execute_operation(self, serially: bool | None) -> Any:
        # loaders for this execution alone: a WebSocket keeps one context for
        # all its operations and events, whose reads must not be cached across
        self._loaders_made = []
        _fresh_loaders(self.context_value, self._loaders_made)
        self.max_objects = budget.max_objects(getattr(self.context_value, "rt", None))
        self.mutation = self.operation.operation == OperationType.MUTATION
        if introspection.only_introspection(self.operation, self.fragments):
            return introspection.answer(
                self.operation,
                self.variable_values.coerced,
                self.max_objects,
                lambda: super(PlainFieldExecutor, self).execute_operation(serially),
                lambda: self.objects,
            )
        # a query of plain data is answered by the fast path (schema/fastpath/);
        # everything else, and anything it hands back, runs here as before
        fast = fastpath.answer(self)
        if fast is None:
            return super().execute_operation(serially)
        return self._fast_or_normal(fast, serially)

    async def _fast_or_normal(
        self, fast: Awaitable[dict[str, Any] | None], serially: bool | None
    ) -> Any:
        try:
            data = await fast
        except budget.ObjectsExceeded:
            self.objects = self.max_objects + 1
            return self.finish(self.build_response(None))
        if data is not None:
            return self.finish(self.build_response(data))
        result = super().execute_operation(serially)
        return await result if self.is_awaitable(result) else result

    def execute_field(
        self,
        parent_type: GraphQLObjectType,
        source: Any,
        field_details_list: Any,
        path: Path,
        position_context: Any,
    ) -> Any:
        root_mutation = parent_type is self.schema.mutation_type
        if root_mutation:
            # each root mutation reads what the ones before it wrote
            if self._loaders_made is None:
                self._loaders_made = []
            _fresh_loaders(self.context_value, self._loaders_made)
        if self.objects > self.max_objects and not root_mutation:
            # past the limit nothing more runs or raises (an error per field
            # in flight cost as much as the fields): the answer is one error
            return None
        node = field_details_list[0].node
        field_def = self.schema.get_field(parent_type, node.name.value)
        if field_def is not None and budget.holds_objects(field_def.type):
            self.objects += 1  # a field that will hold objects counts as it starts
            listed = _ID_LISTS.get((parent_type.name, node.name.value))
            if listed is not None:
                self.objects += len(getattr(source, listed))  # and a list of ids, whole
                if self._counted_lists is None:
                    self._counted_lists = set()
                self._counted_lists.add(path)
            if self.objects > self.max_objects and not root_mutation:
                return None
        attribute = _plain_attribute(field_def) if field_def is not None else ""
        # field middleware (none in this schema) would see every field: keep its path
        middleware = self.middleware_manager
        if field_def is not None and attribute and not (middleware and middleware.middlewares):
            try:
                return self._complete(
                    field_def.type, field_details_list, path, getattr(source, attribute)
                )
            except _NotPlain:
                pass
        return super().execute_field(
            parent_type, source, field_details_list, path, position_context
        )

    def execute_fields(
        self,
        parent_type: GraphQLObjectType,
        source_value: Any,
        path: Path | None,
        grouped_field_set: Any,
        position_context: Any,
    ) -> Any:
        # every object of the result passes here once, whichever path completes
        # it (an item of a list counted whole as it started is counted already)
        if not (self._counted_lists and path is not None and path.prev in self._counted_lists):
            self.objects += 1
        if self.objects > self.max_objects:
            return {}  # build_response answers with the error, whatever data was made
        execute = super().execute_fields
        if loop_slice.spent():
            # this turn of the loop has done its share of graphql work: the
            # object (and its subtree) starts in a later one (schema/loop_slice.py)
            return loop_slice.later(
                lambda: execute(
                    parent_type, source_value, path, grouped_field_set, position_context
                )
            )
        return execute(parent_type, source_value, path, grouped_field_set, position_context)

    def complete_leaf_value(self, return_type: Any, result: Any) -> Any:  # type: ignore[override]
        return self._counted(super().complete_leaf_value(return_type, result))

    def _counted(self, leaf: Any) -> Any:
        if type(leaf) is str:
            self.text += len(leaf)
            if self.text > budget.MAX_TEXT:
                self.objects = self.max_objects + 1  # past the limits: see execute_field
        return leaf

    # the sub-fields memo of a subscription event's executor (collect_subfields)
    _event_subfields: dict[Any, Any] | None = None

    def build_per_event_executor(self, payload: Any) -> Any:
        # a copy of this executor answers each subscription event: each
        # event's result is a result of its own, with the whole limit
        executor = super().build_per_event_executor(payload)
        if isinstance(executor, PlainFieldExecutor):
            executor.objects = executor.text = 0
            executor._counted_lists = None
            executor._event_subfields = {}
            if shared_events.is_batch(payload):
                executor._batch = payload
            if shared_events.is_shared(payload) and self._shareable():
                executor._shared_event = (payload, self._operation_key)
        return executor

    def _shareable(self) -> bool:
        """Whether this subscription's events can be answered by a shared
        execution: its key made once. Sharing only saves work, so a key that
        cannot be made (a document shape the key did not foresee) logs and
        leaves the subscription to run its own, never ends it (a named
        fragment did: "Not an AST Node" reached the client)."""
        if self._operation_key is None:
            try:
                self._operation_key = shared_events.operation_key(
                    self.operation, self.fragments, self.variable_values.coerced
                )
            except Exception:
                log.exception("subscription events not shared")
                self._operation_key = False
        return self._operation_key is not False

    def collect_subfields(self, return_type: GraphQLObjectType, field_details_list: Any) -> Any:
        """graphql-core's memo of collected sub-fields, per event for a
        subscription: its own memo is shared by every event's copy of the
        executor and keyed by field lists made anew for each event, so it kept
        one entry per event for as long as the subscription lasted (1.5 KB per
        event per subscriber, never freed until it ended)."""
        memo = self._event_subfields
        if memo is None:
            return super().collect_subfields(return_type, field_details_list)
        # keyed as graphql-core keys it: by the list's identity, kept alive
        key = (return_type, id(field_details_list))
        found = memo.get(key)
        if found is None:
            collected = collect_subfields(
                self.schema, self.fragments, self.variable_values, self.operation,
                return_type, field_details_list, self.hide_suggestions,
            )  # fmt: skip
            found = memo[key] = (field_details_list, collected)
        return found[1]

    def build_response(self, data: dict[str, Any] | None) -> Any:
        if self.objects > self.max_objects:
            # one error, no data: the fields cut short are not holes to show
            return ExecutionResult(None, [budget.exceeded_error(self.max_objects, self.mutation)])
        return super().build_response(data)

    def handle_field_error(
        self,
        raw_error: Exception,
        return_type: GraphQLOutputType,
        field_details_list: Any,
        path: Path,
    ) -> None:
        # shaped here, where the error arises, so every transport sends the same
        # `extensions.code` (HTTP reshapes it identically; WebSocket sends it as is)
        nodes = [details.node for details in field_details_list]
        shaped = shaped_error(raw_error, nodes, path.as_list(), self.variable_values.coerced)
        super().handle_field_error(shaped, return_type, field_details_list, path)

    def _complete(
        self, t: GraphQLOutputType, field_details_list: Any, path: Path, value: Any
    ) -> Any:
        if isinstance(t, GraphQLNonNull):
            if value is None:
                raise _NotPlain
            t = t.of_type
        if value is None:
            return None
        if isinstance(t, GraphQLScalarType | GraphQLEnumType):
            return self._counted(t.serialize(value))
        if isinstance(t, GraphQLList):
            item = t.of_type
            return self._gather(
                [
                    self._complete(item, field_details_list, Path(path, i, None), v)
                    for i, v in enumerate(value)
                ]
            )
        if isinstance(t, GraphQLObjectType):
            grouped = self.collect_subfields(t, field_details_list)[0]
            return self.execute_fields(t, value, path, grouped, None)
        raise _NotPlain

    def _gather(self, items: list[Any]) -> Any:
        """A list whose items may still be running (objects with resolver fields)."""
        pending = [i for i, v in enumerate(items) if self.is_awaitable(v)]
        if not pending:
            return items

        async def wait() -> list[Any]:
            # together, so the items' loads fall into one DataLoader batch
            done = await asyncio.gather(*(items[i] for i in pending))
            for i, v in zip(pending, done, strict=True):
                items[i] = v
            return items

        return wait()
