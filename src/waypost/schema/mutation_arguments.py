"""Arguments in a mutation's selection, checked before the mutation runs.

A connection refuses a bad `first`, `last`, `after` or `before` when it is
resolved, and a search field a bad `q` (or a context packet a `limit` out of
bounds). In a query that costs nothing; in a mutation the field is resolved
after the write has committed (and its idempotency receipt been stored), so
the refusal nulled part of the answer, which read as refused while the write
stood: a client that fixed its selection and retried with a new key wrote
twice. So a mutation's selection is checked here, with the rules every
connection applies (`relay.window`), the shapes the service's cursors take,
and the checks fields register with `checked_before_mutations` (the same
functions their resolvers call), and a mutation that would meet such a
refusal is not run at all. Refusals that depend on stored data (a `taskId`
of another project) still come when the field is resolved.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from graphql import (
    BooleanValueNode,
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
    IntValueNode,
    OperationType,
    SelectionNode,
    SelectionSetNode,
    StringValueNode,
    Undefined,
    VariableNode,
    get_named_type,
)

from waypost.errors import InvalidRequest
from waypost.http.responses import graphql_extensions
from waypost.pagination import MALFORMED_CURSOR, decode_cursor
from waypost.schema.operation import coerced_variables, selected_operation
from waypost.schema.relay import event_sequence, window

PAGING = ("first", "after", "last", "before")
# A field's check of its arguments (by their GraphQL names; an argument left
# out has its default): raises InvalidRequest as the resolver would.
ArgumentCheck = Callable[[dict[str, Any]], None]
CHECKS: dict[tuple[str, str], ArgumentCheck] = {}


def checked_before_mutations(
    type_name: str, field: str
) -> Callable[[ArgumentCheck], ArgumentCheck]:
    """Register `check` for `type_name.field` wherever it sits in a mutation's
    selection (a test holds every registration to the schema's names)."""

    def register(check: ArgumentCheck) -> ArgumentCheck:
        CHECKS[(type_name, field)] = check
        return check

    return register


def python_names(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments under the Python names of the REST models (`taskId` -> `task_id`)."""
    return {re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower(): v for k, v in arguments.items()}


# the parts of every cursor the service makes (pagination.encode_cursor)
_CURSOR_SHAPES: tuple[tuple[type, ...], ...] = ((int,), (str,), (str, str))


# the one connection whose cursor is an event sequence, which the docs teach
# as `after: "0"` (the start)
_SEQUENCE_CURSORS = frozenset({("Project", "events")})


def _is_cursor(text: str, sequence: bool) -> bool:
    """Could the service have made this cursor for the connection? The event
    connection's cursor is a sequence number (`sequence`); the others are
    encoded parts. A sequence passed for any connection: `after: "0"` in a
    mutation's `submissions`, refused only once the write had committed
    (gqlfuzz)."""
    if sequence:
        return event_sequence(text) is not None
    for shape in _CURSOR_SHAPES:
        try:
            decode_cursor(text, *shape)
        except InvalidRequest:
            continue
        return True
    return False


def argument_value(node: Any, variables: dict[str, Any]) -> Any:
    """A literal or a variable's value; None for anything else (graphql-core's
    rules refuse values of the wrong type by themselves)."""
    if isinstance(node, IntValueNode):
        # past 32 bits it is no Int anyway; int() of 4,300 digits or more raises
        return int(node.value) if len(node.value) <= 11 else None
    if isinstance(node, StringValueNode | BooleanValueNode):
        return node.value
    if isinstance(node, VariableNode):
        return variables.get(node.name.value)
    return None


class _Walk:
    def __init__(self, schema: GraphQLSchema, document: DocumentNode, variables: dict[str, Any]):
        self.schema = schema
        self.variables = variables
        self.fragments = {
            d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
        }
        self.seen: set[str] = set()
        self.refusals: list[GraphQLError] = []

    def skipped(self, node: SelectionNode) -> bool:
        """`@skip(if: true)` or `@include(if: false)`: graphql-core never runs it."""
        for directive in node.directives or ():
            name = directive.name.value
            if name not in ("skip", "include"):
                continue
            values, arguments = self.variables, directive.arguments or ()
            given = {a.name.value: argument_value(a.value, values) for a in arguments}
            condition = given.get("if")
            if type(condition) is bool and condition == (name == "skip"):
                return True
        return False

    def selections(self, selection_set: SelectionSetNode, parent: GraphQLNamedType | None) -> None:
        for selection in selection_set.selections:
            if self.skipped(selection):
                continue
            if isinstance(selection, FieldNode):
                self.field(selection, parent)
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                fragment = self.fragments.get(name)
                # each fragment once per operation: its fields' arguments
                # depend on nothing else
                if fragment is not None and name not in self.seen:
                    self.seen.add(name)
                    inner = self.schema.get_type(fragment.type_condition.name.value)
                    self.selections(fragment.selection_set, inner)
            elif isinstance(selection, InlineFragmentNode):
                cond = selection.type_condition
                inner = self.schema.get_type(cond.name.value) if cond else parent
                self.selections(selection.selection_set, inner)

    def field(self, node: FieldNode, parent: GraphQLNamedType | None) -> None:
        if node.selection_set is None or not isinstance(
            parent, GraphQLObjectType | GraphQLInterfaceType
        ):
            return
        definition = parent.fields.get(node.name.value)
        if definition is None:
            return
        if "first" in definition.args:
            self.check(node, (parent.name, node.name.value) in _SEQUENCE_CURSORS)
        registered = CHECKS.get((parent.name, node.name.value))
        if registered is not None:
            self.check_arguments(node, definition.args, registered)
        self.selections(node.selection_set, get_named_type(definition.type))

    def check_arguments(
        self, node: FieldNode, defined: dict[str, Any], check: ArgumentCheck
    ) -> None:
        given = {a.name.value: a.value for a in node.arguments or ()}
        values: dict[str, Any] = {}
        for name, argument in defined.items():
            value_node = given.get(name)
            # left out, or a variable left out: the default, as execution takes it
            absent = value_node is None or (
                isinstance(value_node, VariableNode) and value_node.name.value not in self.variables
            )
            if absent:
                default = argument.default_value
                values[name] = None if default is Undefined else default
            else:
                values[name] = argument_value(value_node, self.variables)
        try:
            check(values)
        except InvalidRequest as refusal:
            self.refusals.append(_refused(refusal, node))

    def check(self, node: FieldNode, sequence: bool) -> None:
        values = self.variables
        given = {a.name.value: argument_value(a.value, values) for a in node.arguments or ()}
        first, after, last, before = (given.get(name) for name in PAGING)
        if not all(n is None or (type(n) is int) for n in (first, last)) or not all(
            c is None or isinstance(c, str) for c in (after, before)
        ):
            return  # not an Int or a String: graphql-core's rules refuse it
        try:
            w = window(first, after, last, before)
            if w.cursor is not None and not _is_cursor(w.cursor, sequence):
                raise InvalidRequest.field("before" if w.backward else "after", MALFORMED_CURSOR)
        except InvalidRequest as refusal:
            self.refusals.append(_refused(refusal, node))


def _refused(refusal: InvalidRequest, node: FieldNode) -> GraphQLError:
    """The refusal with its code and field in `extensions`: over HTTP the view
    shapes it from the original error, but a WebSocket answer is the error as
    it stands (it came without `extensions.field`)."""
    extensions = graphql_extensions(refusal)
    return GraphQLError(refusal.message, [node], original_error=refusal, extensions=extensions)


def argument_refusals(
    schema: GraphQLSchema,
    document: DocumentNode,
    variables: dict[str, Any] | None,
    operation_name: str | None,
) -> list[GraphQLError]:
    """Why the operation the request runs, when it is a mutation, would meet a
    refusal of an argument in its selection, if it would. Another operation of
    the document is no business of this request (the request rules already
    refused a document of several operations that names none)."""
    op = selected_operation(document, operation_name)
    if isinstance(op, GraphQLError) or op.operation is not OperationType.MUTATION:
        return []
    # coerced as execution will: a `first` sent as 0.0 is the Int 0, refused
    # here (it passed, and the write committed before the refusal)
    coerced = coerced_variables(schema, op, variables)
    if coerced is None:
        return []  # execution refuses the variables themselves, by name
    walk = _Walk(schema, document, coerced)
    walk.selections(op.selection_set, schema.mutation_type)
    return walk.refusals
