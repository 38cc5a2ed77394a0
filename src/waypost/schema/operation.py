"""The operation a GraphQL request runs, and its variables as execution sees them.

The checks made before execution (the query limits, the paging of a
mutation's selection) must judge what will run, with the values it will
run with: graphql-core coerces an `Int` variable sent as `100.0` to `100`
and fills in each operation's defaults, so reading the request's raw JSON
missed a page size given as a float (the node limit counted the default
50 instead), and one operation's defaults are not another's.
"""

from __future__ import annotations

from typing import Any

from graphql import DocumentNode, GraphQLError, GraphQLSchema, OperationDefinitionNode
from graphql.execution.values import get_variable_values


def selected_operation(
    document: DocumentNode, operation_name: str | None
) -> OperationDefinitionNode | GraphQLError:
    """The operation the request runs, or why none runs (graphql-core's
    own words: execution would refuse the request the same way)."""
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if operation_name is None:
        if len(operations) == 1:
            return operations[0]
        if not operations:
            return GraphQLError("Must provide an operation.")
        return GraphQLError("Must provide operation name if query contains multiple operations.")
    for op in operations:
        if op.name is not None and op.name.value == operation_name:
            return op
    return GraphQLError(f"Unknown operation named '{operation_name}'.")


def coerced_variables(
    schema: GraphQLSchema, op: OperationDefinitionNode, variables: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The operation's variables as execution will see them: coerced to their
    types, defaults filled in. None when any of them does not coerce (or a
    required one is missing): execution then refuses the request by name
    before anything runs, and a check that judged the variables it has
    would refuse it in words about another argument."""
    found: Any = get_variable_values(schema, op.variable_definitions or (), variables or {})
    if isinstance(found, list):  # the errors execution will answer with
        return None
    # graphql-core 3.3 answers VariableValues (the values in `coerced`), 3.2 a dict
    coerced = getattr(found, "coerced", found)
    return dict(coerced) if isinstance(coerced, dict) else {}
