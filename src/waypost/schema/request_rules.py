"""What a GraphQL request must be before Strawberry runs it, over HTTP and WebSocket.

Strawberry assumes a well-formed request: a body that is not a JSON object,
a `payload` that is not one, variables nested hundreds of levels deep (the
known-request key walks them recursively) or a subscription sent over HTTP
each ended as an internal error. And where a document holds several
operations and names none, Strawberry runs the first, where the GraphQL
specification (GetOperation) refuses the request. These rules refuse all of
them first, as `invalid_request`, in the same words on both transports.
"""

from __future__ import annotations

from collections.abc import Mapping

from graphql import GraphQLError, Lexer, OperationDefinitionNode, OperationType, Source, TokenKind

from waypost.schema.documents import parsed
from waypost.schema.operation import selected_operation

# Deeper than any input object of the schema needs (they nest a few levels);
# far below what a recursive walk of the value could take.
MAX_NESTING = 32
# Strawberry's words for an empty query (its own check refuses only "")
NO_QUERY = "No GraphQL query found in the request"
SUBSCRIPTIONS_OVER_HTTP = (
    "subscriptions run over WebSocket (graphql-transport-ws on /graphql), not over HTTP"
)


def _holds_nothing(query: str) -> bool:
    """Whether the document is only spaces, commas and comments: refused as
    an empty one is (it was a 200 with a syntax error, where "" was a 400)."""
    try:
        return Lexer(Source(query)).advance().kind is TokenKind.EOF
    except GraphQLError:
        return False  # the parse reports it, with its location


def nesting(value: object) -> int:
    """How deeply lists and objects nest in a JSON value (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: list[object] = list(item.values())
        elif isinstance(item, list):
            children = list(item)
        else:
            continue
        deepest = max(deepest, depth + 1)
        if deepest > MAX_NESTING:
            break
        stack.extend((child, depth + 1) for child in children)
    return deepest


async def operations(query: str) -> list[tuple[str | None, OperationType]] | GraphQLError:
    """The (name, type) of each operation of `query`, or its syntax error."""
    document = await parsed(query)
    if isinstance(document, GraphQLError):
        return document
    return [
        (d.name.value if d.name else None, d.operation)
        for d in document.definitions
        if isinstance(d, OperationDefinitionNode)
    ]


async def unrunnable(query: str, operation_name: object) -> GraphQLError | None:
    """Why no operation of `query` would run: its syntax error, or no
    operation that `operation_name` selects (none in the document, a name
    it does not hold, several and no name); None when one would."""
    document = await parsed(query)
    if isinstance(document, GraphQLError):
        return document
    name = operation_name if isinstance(operation_name, str) else None
    selected = selected_operation(document, name)
    return selected if isinstance(selected, GraphQLError) else None


# the GraphQL-over-HTTP request parameters
REQUEST_FIELDS = frozenset({"query", "operationName", "variables", "extensions"})


async def refusal(request: Mapping[str, object], over_http: bool) -> str | None:
    """Why this request (an HTTP body or a WebSocket `subscribe` payload) is
    refused before execution, or None. A syntax error is not refused here:
    the pipeline reports it with its location."""
    unknown = sorted(set(request) - REQUEST_FIELDS)
    if unknown:
        # strict as every REST body: a misspelt `variable` must not be ignored
        allowed = ", ".join(sorted(REQUEST_FIELDS))
        return f"unknown field {unknown[0]!r} in the request (it takes {allowed})"
    query, name = request.get("query"), request.get("operationName")
    variables = request.get("variables")
    if not isinstance(query, str):
        return "query must be a string holding a GraphQL document"
    if name is not None and not isinstance(name, str):
        return "operationName must be a string"
    if variables is not None and not isinstance(variables, dict):
        return "variables must be an object"
    extensions = request.get("extensions")
    if extensions is not None and not isinstance(extensions, dict):
        # over HTTP Strawberry refused it first; a WebSocket payload ran
        return "extensions must be an object"
    if nesting(variables) > MAX_NESTING:
        return f"variables nest more than {MAX_NESTING} levels deep"
    if _holds_nothing(query):
        return NO_QUERY
    found = await operations(query)
    if isinstance(found, GraphQLError):
        return None
    if name is None and len(found) > 1:
        return "Must provide operation name if query contains multiple operations."
    chosen = [kind for op_name, kind in found if name is None or op_name == name]
    if over_http and chosen and chosen[0] is OperationType.SUBSCRIPTION:
        return SUBSCRIPTIONS_OVER_HTTP
    return None
