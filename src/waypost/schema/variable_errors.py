"""graphql-core's refusals of variables and enum values, in the service's terms.

A variable that does not coerce to its type is refused by graphql-core with
a message alone: no `extensions.field`, where REST names the body's field
and a mutation's userErrors name theirs, so a client correcting its request
in a loop had nothing to read (errmsgaudit). Its message also quoted the
whole input as a Python `repr` ("found: {'projectId': 'demo', ...}"). Here
the field is the path within `variables` (`i.title`, `i.taskIds[1]`, `n`),
the repr is dropped, and an unknown enum value is told the values taken.
"""

from __future__ import annotations

import re

from strawberry.schema.base import BaseSchema
from strawberry.types.enum import StrawberryEnumDefinition

from waypost.decoding import clip

# graphql-core's prefix: the variable, then the path of schema field names
# and list indexes to the refused value (no text of the client's in either)
_VARIABLE = re.compile(
    r"Variable '\$(?P<name>\w+)' has invalid value(?: at (?P<at>(?:\.\w+|\[\d+\])+))?:"
    r" (?P<why>.*)\Z",
    re.S,
)
# its refusals of an input object, each ending with the whole input's repr:
# the field is a schema name, or (unknown) the client's key, up to the tail
_INPUT_OBJECT = re.compile(
    r"(?P<said>Expected value of type '\w+'(?: to be an object| to include required field"
    r" '(?P<required>\w+)'| not to include unknown field '(?P<unknown>.*?)'"
    r"(?P<hint>\. Did you mean [^?]*\?)?))[,.]? [Ff]ound: .*\Z",
    re.S,
)
_ENUM = re.compile(r"does not exist in '(?P<enum>\w+)' enum\.")


def reworded(message: str, schema: BaseSchema) -> tuple[str, str | None]:
    """`message` with an enum's values and without the input's repr, and the
    path within `variables` it refuses (None when it refuses no variable)."""
    message = _ENUM.sub(lambda m: _with_values(m, schema), message, count=1)
    # JSON's and GraphQL's word for what was sent, not Python's (a variable's
    # null and a literal's alike)
    message = message.replace(" not to be None.", " not to be null.", 1)
    found = _VARIABLE.match(message)
    if found is None:
        return message, None
    at, why = found["at"] or "", found["why"]
    field = found["name"] + at
    refused = _INPUT_OBJECT.match(why)
    if refused is not None:
        named = refused["required"] or refused["unknown"]
        if named is not None:
            field = f"{field}.{clip(named)}"
        # the repr dropped; a long unknown key quoted cut short, as REST quotes one
        said = refused["said"]
        if refused["unknown"] is not None:
            said = said.replace(f"'{refused['unknown']}'", f"'{clip(refused['unknown'])}'", 1)
        why = said + ("" if refused["hint"] else ".")
    where = f" at {at}" if at else ""
    return f"Variable '${found['name']}' has invalid value{where}: {why}", field


def _with_values(found: re.Match[str], schema: BaseSchema) -> str:
    kind = schema.get_type_by_name(found["enum"])
    if not isinstance(kind, StrawberryEnumDefinition):
        return found[0]
    values = ", ".join(value.name for value in kind.values)
    return f"does not exist in '{found['enum']}' enum (one of {values})."
