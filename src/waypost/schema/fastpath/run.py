"""Running a plan: one level of the result at a time, every parent at once.

For each field of a selection set, its resolver gets all the parents at that
level (one batch of reads per relation per level, like the DataLoaders) and
the values are completed as graphql-core completes them: non-null checked,
lists flattened so their items are completed together, leaves serialized
as the schema's scalars and enums serialize, objects by their own selection.
Anything graphql-core would turn into an error (a null in a non-null field,
a value its scalar refuses) raises `Fallback`, and the whole operation runs
on graphql-core instead, which renders the error as it always has.
"""

from __future__ import annotations

from typing import Any

from graphql import (
    GraphQLEnumType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLScalarType,
    GraphQLUnionType,
)

from waypost.schema import budget
from waypost.schema.fastpath.plan import SelectionPlan
from waypost.schema.fastpath.reads import Fallback, Reads

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def execute(reads: Reads, plan: SelectionPlan, parents: list[Any]) -> list[dict[str, Any]]:
    """The result objects of `plan` for each parent, keys in selection order."""
    if not parents:
        # graphql-core resolves nothing below a null: nor do we (a resolver
        # would check its arguments, `first: 0` under a missing project, and
        # refuse what graphql-core never looks at)
        return []
    reads.objects += len(parents)
    if reads.objects > reads.max_objects:
        raise budget.ObjectsExceeded
    results: list[dict[str, Any]] = [{} for _ in parents]
    for field in plan.fields:
        if field.sub is not None or field.by_type is not None:
            # a field of an object (or union) type counts as it starts
            reads.objects += len(parents)
            if reads.objects > reads.max_objects:
                raise budget.ObjectsExceeded
        values = field.resolve(reads, parents, field.args)
        done = _complete(reads, field.type, field.sub, values, field.by_type)
        if len(done) != len(results):
            raise Fallback  # a resolver broke its contract: let graphql-core answer
        name = field.key
        # a loop of stores per field is faster than dict(zip(...)) per object
        for result, value in zip(results, done):  # noqa: B905 (lengths checked above)
            result[name] = value
    return results


def _complete(
    reads: Reads,
    t: GraphQLOutputType,
    sub: SelectionPlan | None,
    values: list[Any],
    by_type: tuple[tuple[str, SelectionPlan], ...] | None = None,
) -> list[Any]:
    if isinstance(t, GraphQLNonNull):
        if None in values:
            raise Fallback  # graphql-core nulls the parent and reports an error
        t = t.of_type
    if isinstance(t, GraphQLList):
        # every item of every list completed together, then cut back into lists
        flat = [item for v in values if v is not None for item in v]
        done = _complete(reads, t.of_type, sub, flat, by_type)
        lists: list[Any] = []
        start = 0
        for v in values:
            if v is None:
                lists.append(None)
            else:
                lists.append(done[start : start + len(v)])
                start += len(v)
        return lists
    if isinstance(t, GraphQLObjectType):
        assert sub is not None
        if None not in values:  # the usual case: no holes to put back
            return execute(reads, sub, values)
        objects = iter(execute(reads, sub, [v for v in values if v is not None]))
        return [None if v is None else next(objects) for v in values]
    if isinstance(t, GraphQLUnionType):
        assert by_type is not None
        return _complete_union(reads, by_type, values)
    if isinstance(t, GraphQLEnumType):
        names = _enum_names(t)
        try:
            done = [None if v is None else names[v] for v in values]
        except (KeyError, TypeError):
            raise Fallback from None
        # an enum's name is text of the result too: graphql-core counts it
        # (execution.py `_counted`), and both paths must stop at one limit
        _count_text(reads, done)
        return done
    if isinstance(t, GraphQLScalarType) and t.name == "JSON":
        # Strawberry's JSON scalar serializes a value as it is; its strings
        # count as text, as graphql-core's leaves do (a whole object: none)
        _count_text(reads, values)
        return values
    if isinstance(t, GraphQLScalarType):
        kinds = _SCALARS.get(t.name)
        if kinds is None or not set(map(type, values)) <= kinds:
            raise Fallback  # let the scalar's own serialize decide (or refuse)
        if t.name in _TEXT:
            _count_text(reads, values)
        if t.name == "Int":
            ints = [v for v in values if v is not None]
            if ints and not (min(ints) >= _INT_MIN and max(ints) <= _INT_MAX):
                raise Fallback  # graphql-core refuses Ints beyond 32 bits
        return values
    raise Fallback


def _complete_union(
    reads: Reads, by_type: tuple[tuple[str, SelectionPlan], ...], values: list[Any]
) -> list[Any]:
    """A union's values, each a (type name, record) pair from its resolver:
    the records of each type completed together by that type's selection."""
    done: list[Any] = [None] * len(values)
    plans = dict(by_type)
    if any(v is not None and v[0] not in plans for v in values):
        raise Fallback  # a type the resolver named wrongly: graphql-core decides
    for name, plan in by_type:
        at = [i for i, v in enumerate(values) if v is not None and v[0] == name]
        if at:
            objects = execute(reads, plan, [values[i][1] for i in at])
            for i, result in zip(at, objects, strict=True):
                done[i] = result
    return done


def _count_text(reads: Reads, leaves: list[Any]) -> None:
    """Add completed leaves to the text count, stopping past the limit."""
    reads.text += sum(map(budget.text_of, leaves))
    if reads.text > budget.MAX_TEXT:
        raise budget.ObjectsExceeded


# Values these scalars serialize unchanged (graphql-core's serialize_string,
# serialize_int, ...; DateTime and ID are strings in this schema). Anything
# else goes to the scalar's own serialize on the normal path.
# Checked by exact type (a bool is no Int, a str subclass may serialize otherwise).
_NONE = type(None)
_TEXT = frozenset({"String", "ID", "DateTime"})
_SCALARS: dict[str, set[type]] = {
    "String": {str, _NONE},
    "ID": {str, _NONE},
    "DateTime": {str, _NONE},
    "Boolean": {bool, _NONE},
    "Int": {int, _NONE},
}

# enum type name -> REST value -> GraphQL name (Strawberry's enums serialize a
# member by its value's name: DecisionStatus("pending") is "PENDING")
_ENUM_NAMES: dict[str, dict[Any, str]] = {}


def _enum_names(t: GraphQLEnumType) -> dict[Any, str]:
    found = _ENUM_NAMES.get(t.name)
    if found is None:
        found = _ENUM_NAMES[t.name] = {v.value: name for name, v in t.values.items()}
    return found
