"""GraphQL query limits, checked in time linear in the document's size.

Service contract sections 12 and 14: depth 16 (introspection fields ignored),
30 aliases counted through fragments, 5,000 tokens, a 64 KiB body (read by
bearer authentication), one `__schema` field (our choice), and GitHub's node
limit: for every path of nested connections the product of their
`first`/`last`, summed over all paths, at most 50,000.

Why not Strawberry's depth and alias rules: they walk every path through the
fragments again, so 22 fragments that each spread the next twice (900 bytes)
cost 2^22 walks and stalled the whole server for 47 s. Here one pass measures
every fragment once (memoized by name) and reuses the figures wherever it is
spread, so a fragment DAG costs what its text costs.

graphql-core's own rules then run with a smaller complexity budget (their
overlapping-fields comparison is quadratic in repeated fields) and on a
worker thread, so a slow document never holds up other requests.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLInterfaceType,
    GraphQLNamedType,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    ListValueNode,
    ObjectValueNode,
    OperationDefinitionNode,
    SelectionNode,
    SelectionSetNode,
    ValueNode,
    VariableNode,
    get_named_type,
)
from graphql.validation.rules import overlapping_fields_can_be_merged
from strawberry.extensions import SchemaExtension
from strawberry.schema.schema import validate_document

from waypost.pagination import DEFAULT_LIMIT
from waypost.schema.memo import Memo, variables_key
from waypost.schema.mutation_arguments import argument_refusals, argument_value
from waypost.schema.offload import off_loop
from waypost.schema.operation import coerced_variables, selected_operation

MAX_DEPTH = 16
MAX_ALIASES = 30
MAX_TOKENS = 5000
MAX_NODES = 50_000
# `__schema` fields per operation. The depth limit ignores introspection, and
# one `__schema` holds the whole schema (the standard introspection query
# completes some 5,500 objects on the event loop); aliases multiplied it:
# thirty aliased copies ran 1.4 s each until the execution limit ended them,
# and while two clients sent them another client's new query text waited
# 1.9 s (docs/graphql.md). One is all any introspection client asks for.
MAX_SCHEMA_FIELDS = 1
# A connection without `first`/`last` returns this many items (relay.window
# leaves the count to check_limit, whose default this is).
DEFAULT_PAGE = DEFAULT_LIMIT
# GraphQL's Int is 32 bits: a `first` past it is no Int at all, and
# graphql-core's validation refuses it by name; the node limit leaves it out.
INT_RANGE = range(-(2**31), 2**31)
# Selection sets entered along one path, fragments included. Far above any
# real query (the standard introspection query nests 12); it keeps the
# measuring pass's recursion bounded for documents that nest introspection
# fields (which the depth limit ignores) or chain fragments without end.
MAX_NESTING = 100
# graphql-core meters the work of its overlapping-fields rule; its default
# (500,000 units) allows about a second of CPU on a 5,000-token document.
# 20,000 bounds the rule at a few tens of milliseconds and is far above what
# real queries spend (the standard introspection query spends 0, the
# 22-level fragment chain 63).
COMPLEXITY_BUDGET = 20_000
# Distinct query texts whose validation result is kept (bounded, so unique
# texts cannot grow memory); agents and dashboards repeat a few queries.
CACHED_QUERIES = 256

overlapping_fields_can_be_merged.MAX_COMPLEXITY_BUDGET = COMPLEXITY_BUDGET
# The fragments each operation of the document reaches (directly or through
# other fragments), summed over its operations. graphql-core's variable rules
# walk every operation's fragments once per operation, so their time grows
# with this sum, not with the text: 300 operations spreading one fragment
# that spreads 200 others (15 KB) took 60-150 ms. One operation reaching
# every fragment a 5,000-token document can hold stays far below it.
MAX_FRAGMENT_USES = 1000
# Fragment spreads written in the document, wherever they stand. graphql-core's
# rules visit every spread (its variable rules more than once), so a document
# of nothing but spreads (2,480 of `...A`, 12 KB within the token limit) took
# its rules 93-110 ms, past the 100 ms section 14 allows; at 500 they take
# about 20 ms. Real queries spread a fragment per component, tens of them.
MAX_FRAGMENT_SPREADS = 500
# Fields written in the document, wherever they stand. graphql-core's rules
# walk every field with its type info, and build an error (a spelling
# suggestion and a line and column found from the text's start) for each
# unknown one up to a hundred: 4,990 unknown fields (59 KB within the token
# limit) took them 143-190 ms, past section 14's 100 ms; at 1,000 the worst
# found take about 40 ms. graphql-core's introspection query writes 67.
MAX_FIELDS = 1000
# For each operation, the fields written in the fragments it reaches (each
# fragment once per operation), summed over the operations. graphql-core
# compares and walks a fragment's fields again for each operation that
# spreads it: 450 operations spreading one fragment of 540 fields (15 KB)
# took 110 ms. At 50,000 the worst found take about 25 ms.
MAX_FIELDS_REACHED = 50_000
# Operations in one document. graphql-core's variable rules walk each
# operation on its own, with type info, whatever it holds: 480 operations of
# one spread each (13 KB) took them 78 ms, and twice that under load. Within
# all the limits here the worst documents found take about 50 ms.
MAX_OPERATIONS = 100
# Variable uses each operation reaches (its own, and those written in every
# fragment it reaches), summed over the operations. graphql-core checks each
# use's position again for every operation that reaches it: 20 operations
# spreading one fragment of 2,350 uses of `$a` (7.9 KB) took 145 ms. One
# operation can write about 2,450 within the token limit (25 ms).
MAX_VARIABLE_USES = 2500


class FragmentCycle(Exception):
    """A fragment spreads itself, directly or through other fragments."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class _TooDeep(Exception):
    """The document nests past MAX_NESTING (raised out of the recursion)."""


@dataclass(frozen=True)
class Measure:
    depth: int
    aliases: int
    nodes: int
    # the response keys of `__schema` fields: fields under one key merge into
    # one (`{ __schema { a } __schema { b } }` runs once), through fragments too
    schemas: frozenset[str] = frozenset()


class _Measurer:
    """One pass over one operation; each fragment is measured once.

    Once per operation, not per document: a fragment's figures depend on the
    operation's variables (its `first: $n`), so one operation's figures are
    no other's (two operations with other defaults for `$n` shared them, and
    the second ran past the node limit)."""

    def __init__(
        self, schema: GraphQLSchema, document: DocumentNode, variables: dict[str, Any]
    ) -> None:
        self.schema = schema
        self.variables = variables  # coerced, with the operation's defaults
        self.fragments = {
            d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
        }
        self.memo: dict[str, Measure] = {}
        self.in_progress: set[str] = set()

    def operation(self, op: OperationDefinitionNode) -> Measure:
        root = self.schema.get_root_type(op.operation)
        return self.selections(op.selection_set, root, 0)

    def selections(
        self, selection_set: SelectionSetNode, parent: GraphQLNamedType | None, level: int
    ) -> Measure:
        # level 0 is the operation's own set: MAX_NESTING sets are levels 0
        # to MAX_NESTING - 1 (`>` let 101 through; graphqldocaudit)
        if level >= MAX_NESTING:
            raise _TooDeep
        depth = aliases = nodes = 0
        schemas: frozenset[str] = frozenset()
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                m = self.field(selection, parent, level)
            elif isinstance(selection, FragmentSpreadNode):
                m = self.fragment(selection.name.value, level)
            elif isinstance(selection, InlineFragmentNode):
                cond = selection.type_condition
                inner = self.schema.get_type(cond.name.value) if cond else parent
                m = self.selections(selection.selection_set, inner, level + 1)
            else:  # pragma: no cover - the three kinds above are all there is
                continue
            depth = max(depth, m.depth)
            aliases += m.aliases
            nodes += m.nodes
            schemas |= m.schemas
        return Measure(depth, aliases, nodes, schemas)

    def field(self, node: FieldNode, parent: GraphQLNamedType | None, level: int) -> Measure:
        own_alias = 1 if node.alias else 0
        own_schema = (
            frozenset({(node.alias or node.name).value})
            if node.name.value == "__schema"
            else frozenset()
        )
        if node.selection_set is None:
            return Measure(0, own_alias, 0, own_schema)
        definition = None
        if isinstance(parent, GraphQLObjectType | GraphQLInterfaceType):
            definition = parent.fields.get(node.name.value)
        child_type = get_named_type(definition.type) if definition else None
        inner = self.selections(node.selection_set, child_type, level + 1)
        # The depth rule counts as Strawberry's did: introspection fields
        # (`__schema`, `__type`) and everything under them count 0.
        depth = 0 if node.name.value.startswith("__") else 1 + inner.depth
        nodes = inner.nodes
        if definition is not None and ("first" in definition.args or "last" in definition.args):
            page = self.page_size(node, definition.args)
            nodes = page * (1 + inner.nodes)
        return Measure(depth, own_alias + inner.aliases, nodes, own_schema | inner.schemas)

    def fragment(self, name: str, level: int) -> Measure:
        known = self.memo.get(name)
        if known is not None:
            return known
        definition = self.fragments.get(name)
        if definition is None or name in self.in_progress:
            # unknown fragments and cycles are refused by graphql-core's rules
            return Measure(0, 0, 0)
        self.in_progress.add(name)
        parent = self.schema.get_type(definition.type_condition.name.value)
        measured = self.selections(definition.selection_set, parent, level + 1)
        self.in_progress.discard(name)
        self.memo[name] = measured
        return measured

    def page_size(self, node: FieldNode, args: dict[str, Any]) -> int:
        """The items a connection may return: `last`, else `first`, else its default."""
        given = {a.name.value: a.value for a in node.arguments or ()}
        sizes = [
            argument_value(given[name], self.variables)
            for name in ("first", "last")
            if name in given
        ]
        numbers = [
            s for s in sizes if isinstance(s, int) and not isinstance(s, bool) and s in INT_RANGE
        ]
        if numbers:
            return max(0, *numbers)
        for name in ("first", "last"):
            default = args[name].default_value if name in args else None
            if isinstance(default, int) and not isinstance(default, bool):
                return max(0, default)
        return DEFAULT_PAGE


def _written(*selection_sets: SelectionSetNode) -> Iterator[SelectionNode]:
    """Every selection written in `selection_sets`, nested ones too, not
    through spreads (a spread is yielded, not followed): the one walk the
    counts below share. Without recursion: nesting is as deep as the text
    allows."""
    pending = list(selection_sets)
    while pending:
        for selection in pending.pop().selections:
            yield selection
            if isinstance(selection, FieldNode | InlineFragmentNode) and selection.selection_set:
                pending.append(selection.selection_set)


def _own_selection_sets(document: DocumentNode) -> list[SelectionSetNode]:
    """The selection sets of the document's operations and fragments."""
    return [d.selection_set for d in document.definitions if hasattr(d, "selection_set")]


def fragment_spreads(document: DocumentNode) -> int:
    """Every fragment spread written in the document (not through fragments)."""
    written = _written(*_own_selection_sets(document))
    return sum(isinstance(selection, FragmentSpreadNode) for selection in written)


def fields_written(document: DocumentNode) -> int:
    """Every field written in the document (not through fragments)."""
    return sum(_written_in(selection_set)[0] for selection_set in _own_selection_sets(document))


def _written_in(selection_set: SelectionSetNode) -> tuple[int, int]:
    """The fields and the variable uses written in `selection_set`, nested
    selection sets too (not through spreads)."""
    fields = uses = 0
    for selection in _written(selection_set):
        values: list[ValueNode] = [
            d_arg.value for d in selection.directives or () for d_arg in d.arguments or ()
        ]
        if isinstance(selection, FieldNode):
            fields += 1
            values.extend(a.value for a in selection.arguments or ())
        uses += _variables_in(values)
    return fields, uses


def _variables_in(values: list[ValueNode]) -> int:
    """The variables written in argument values, lists and objects searched."""
    uses = 0
    while values:
        value = values.pop()
        if isinstance(value, VariableNode):
            uses += 1
        elif isinstance(value, ListValueNode):
            values.extend(value.values)
        elif isinstance(value, ObjectValueNode):
            values.extend(f.value for f in value.fields)
    return uses


@dataclass(frozen=True)
class Reach:
    """What the document's operations reach, summed over the operations: the
    fragments (each once per operation), and the fields and variable uses
    written in them (counted while the fragments are within their limit;
    the variable uses of the operations' own selections too)."""

    fragments: int
    fields: int
    variables: int


def reach(document: DocumentNode) -> Reach:
    """The fragments each operation reaches, and their fields, summed over the
    operations.

    Linear in the document: each fragment's reach is a bit set computed once
    (the union of the fragments it spreads and theirs). A fragment that
    spreads itself, directly or through others, raises `FragmentCycle`: the
    document is invalid, and the reach of a fragment on a cycle is not what
    one pass finds (300 operations spreading a cycle that reaches 200
    fragments counted 600 and took graphql-core's other rules 150 ms)."""
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    sizes = [_written_in(d.selection_set) for d in fragments.values()]
    bit = {name: 1 << i for i, name in enumerate(fragments)}
    spreads = {name: _spread_names(d.selection_set) for name, d in fragments.items()}
    reaches: dict[str, int] = {}
    for start in fragments:
        if start in reaches:
            continue
        # depth first, one child at a time and without recursion (a chain may
        # be as long as the text allows): a fragment entered but not finished
        # is on the current path, so meeting it again closes a cycle
        entered = {start}
        stack = [(start, iter(spreads[start]))]
        while stack:
            name, children = stack[-1]
            for child in children:
                if child in fragments and child not in reaches:
                    if child in entered:  # entered, not finished: on the path
                        raise FragmentCycle(child)
                    entered.add(child)
                    stack.append((child, iter(spreads[child])))
                    break
            else:
                stack.pop()
                found = 0
                for n in spreads[name]:
                    found |= bit.get(n, 0) | reaches.get(n, 0)
                reaches[name] = found
    total = fields = variables = 0
    for definition in document.definitions:
        if isinstance(definition, OperationDefinitionNode):
            variables += _written_in(definition.selection_set)[1]
            found = 0
            for n in _spread_names(definition.selection_set):
                found |= bit.get(n, 0) | reaches.get(n, 0)
            total += found.bit_count()
            # one step per fragment reached, so only within the limit on them
            # (past it the document is refused for that, and 300 operations
            # reaching 200 fragments each would take 60,000 steps)
            while found and total <= MAX_FRAGMENT_USES:
                lowest = found & -found
                size = sizes[lowest.bit_length() - 1]
                fields += size[0]
                variables += size[1]
                found ^= lowest
    return Reach(total, fields, variables)


def _spread_names(selection_set: SelectionSetNode) -> list[str]:
    """The fragments spread anywhere in `selection_set` (not through them),
    each once, in the order the walk first meets them."""
    spread = (s for s in _written(selection_set) if isinstance(s, FragmentSpreadNode))
    return list(dict.fromkeys(selection.name.value for selection in spread))


def _operation_name(op: OperationDefinitionNode) -> str:
    return op.name.value if op.name else "anonymous"


def check_limits(
    schema: GraphQLSchema,
    document: DocumentNode,
    variables: dict[str, Any] | None = None,
    operation_name: str | None = None,
) -> list[GraphQLError]:
    """Depth, aliases (through fragments), nesting and the node limit of the
    operation the request runs (`operation_name`; another operation of the
    document never runs), with its variables as execution will see them.

    Time linear in the document: each fragment's figures are computed once.
    """
    try:
        reached = reach(document)
    except FragmentCycle as cycle:
        # graphql-core's NoFragmentCycles refuses it too, but only after its
        # other rules have walked the cycle for every operation
        return [
            GraphQLError(f"Cannot spread fragment '{cycle.name}' within itself (a fragment cycle).")
        ]
    operations = sum(isinstance(d, OperationDefinitionNode) for d in document.definitions)
    if operations > MAX_OPERATIONS:
        msg = (
            f"the document holds {operations:,} operations; the limit is {MAX_OPERATIONS:,}"
            " per document: send only the operation you run"
        )
        return [GraphQLError(msg)]
    spreads = fragment_spreads(document)
    if spreads > MAX_FRAGMENT_SPREADS:
        msg = (
            f"the document spreads fragments {spreads:,} times; the limit is"
            f" {MAX_FRAGMENT_SPREADS:,} spreads per document"
        )
        return [GraphQLError(msg)]
    if reached.fragments > MAX_FRAGMENT_USES:
        msg = (
            f"the document's operations reach {reached.fragments:,} fragments in all (each"
            " operation counts every fragment it spreads, directly or through another); the"
            f" limit is {MAX_FRAGMENT_USES:,}: send only the operation you run"
        )
        return [GraphQLError(msg)]
    fields = fields_written(document)
    if fields > MAX_FIELDS:
        msg = (
            f"the document selects {fields:,} fields; the limit is {MAX_FIELDS:,} fields"
            " per document"
        )
        return [GraphQLError(msg)]
    if reached.fields > MAX_FIELDS_REACHED:
        msg = (
            f"the document's operations reach {reached.fields:,} fields through fragments"
            " (each operation counts the fields of every fragment it reaches); the limit is"
            f" {MAX_FIELDS_REACHED:,}: send only the operation you run"
        )
        return [GraphQLError(msg)]
    if reached.variables > MAX_VARIABLE_USES:
        msg = (
            f"the document's operations use variables {reached.variables:,} times (each"
            " operation counts its own uses and those of every fragment it reaches); the"
            f" limit is {MAX_VARIABLE_USES:,}"
        )
        return [GraphQLError(msg)]
    op = selected_operation(document, operation_name)
    if isinstance(op, GraphQLError):
        return [op]  # nothing runs: graphql-core would refuse it the same way
    name = _operation_name(op)
    measurer = _Measurer(schema, document, coerced_variables(schema, op, variables) or {})
    try:
        m = measurer.operation(op)
    except _TooDeep:
        return [
            GraphQLError(f"'{name}' nests selections more than {MAX_NESTING} levels deep", [op])
        ]
    errors: list[GraphQLError] = []
    if m.depth > MAX_DEPTH:
        errors.append(
            GraphQLError(f"'{name}' exceeds maximum operation depth of {MAX_DEPTH}", [op])
        )
    if m.nodes > MAX_NODES:
        msg = (
            f"'{name}' exceeds the node limit: it may return {m.nodes:,} nodes, the limit"
            f" is {MAX_NODES:,} (the product of first/last along each path of nested"
            " connections, summed over all paths)"
        )
        errors.append(GraphQLError(msg, [op]))
    if m.aliases > MAX_ALIASES:
        errors.append(
            GraphQLError(f"{m.aliases} aliases found in '{name}'. Allowed: {MAX_ALIASES}", [op])
        )
    if len(m.schemas) > MAX_SCHEMA_FIELDS:
        msg = (
            f"'{name}' selects __schema under {len(m.schemas)} response keys (aliases);"
            f" the limit is {MAX_SCHEMA_FIELDS}"
            " per operation (one holds the whole schema)"
        )
        errors.append(GraphQLError(msg, [op]))
    return errors


# graphql-core's validation results by query text (touched only from the
# event loop; the validation itself runs on a thread)
_RESULTS: Memo[list[GraphQLError]] = Memo(CACHED_QUERIES)
# The validations running now, by event loop and query text: the clients
# that send one new text together (a console page after a restart, a fleet
# of agents) wait for one validation of it, where each queued its own in
# the documents lane behind the others' (overloadjourney: 40 such clients
# beside a REST load waited 20 s for their first answers; 12 got theirs
# 2 to 11.5 s apart, one validation after another).
_RUNNING: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[str, asyncio.Future[list[GraphQLError]]]
] = weakref.WeakKeyDictionary()


async def _validated(
    schema: GraphQLSchema, document: DocumentNode, rules: tuple[Any, ...], key: str | None
) -> list[GraphQLError]:
    """graphql-core's own rules on `document` (on a worker thread), in our
    words; memoized by its text, and run once for every caller waiting on it."""

    async def validate() -> list[GraphQLError]:
        found = await off_loop(validate_document, schema, document, rules)
        return _in_our_words(_explain_abort(found))

    if key is None:
        return await validate()
    running = _RUNNING.setdefault(asyncio.get_running_loop(), {})
    task = running.get(key)
    if task is None:
        task = running[key] = asyncio.ensure_future(validate())
        task.add_done_callback(lambda done: _settled(running, key, done))
    # a waiter cancelled (its client gone) leaves the validation to the others
    return await asyncio.shield(task)


def _settled(
    running: dict[str, asyncio.Future[list[GraphQLError]]],
    key: str,
    done: asyncio.Future[list[GraphQLError]],
) -> None:
    """A validation ended: its result kept by text (before its waiters
    resume: this callback was added first), a failure not, so that the next
    caller validates afresh; its outcome seen even when every waiter left."""
    running.pop(key, None)
    if not done.cancelled() and done.exception() is None:
        _RESULTS.put(key, done.result())


# (query text, variables, operation name) of requests found within the
# limits: the limits depend on nothing else, so the same dashboard query is
# measured once
_WITHIN: Memo[bool] = Memo(CACHED_QUERIES)


def _explain_abort(errors: list[GraphQLError]) -> list[GraphQLError]:
    """graphql-core says only "Validation aborted." when a budget runs out."""
    if any(e.message == "Validation aborted." for e in errors):
        return [
            GraphQLError(
                "the document is too complex to validate: it repeats the same fields or"
                " fragments too many times (validation complexity limit)"
            )
        ]
    return errors


def _in_our_words(errors: list[GraphQLError]) -> list[GraphQLError]:
    """graphql-core quotes the exception a literal's parsing raised: an Int
    literal of 4,300 digits or more answered in Python's own words ("Exceeds
    the limit (4300 digits) for integer string conversion ... use
    sys.set_int_max_str_digits()"), over HTTP and WebSocket alike."""
    return [
        e
        if e.original_error is None or isinstance(e.original_error, GraphQLError)
        else GraphQLError(
            e.message.replace(f", but encountered error '{e.original_error}'; found", ", found"),
            e.nodes,
        )
        for e in errors
    ]


class QueryLimits(SchemaExtension):
    """Replaces Strawberry's validation step: limits first, then graphql-core's rules.

    The limits need the request's variables (the node limit reads `first`
    given as `$first`), so they run per query text and variables (memoized). The
    standard rules' result depends on the text alone and is cached.
    """

    async def on_validate(self) -> AsyncIterator[None]:
        ctx = self.execution_context
        document = ctx.graphql_document
        assert document is not None
        schema = ctx.schema._schema
        variables = variables_key(ctx.variables)
        within = (
            None
            if ctx.query is None or variables is None
            else (ctx.query, variables, ctx.operation_name)
        )
        if within is not None and _WITHIN.get(within):
            errors = []
        else:
            errors = check_limits(schema, document, ctx.variables, ctx.operation_name)
            if not errors and within is not None:
                _WITHIN.put(within, True)
        if not errors:
            rules = tuple(ctx.validation_rules)
            key = ctx.query
            cached = _RESULTS.get(key) if key is not None else None
            if cached is None:
                cached = await _validated(schema, document, rules, key)
            errors = cached
        if not errors:
            # a valid document only (its arguments have their types); not
            # memoized with the limits: it depends on the operation's name
            # too, and walks a mutation's selection only
            errors = argument_refusals(schema, document, ctx.variables, ctx.operation_name)
        ctx.pre_execution_errors = errors
        yield
