"""A tool call's arguments checked against the tool's input schema, refused as
the REST route would refuse them: `invalid_request` naming the argument.

The MCP SDK can check arguments itself, but its refusal is jsonschema's text
(`Input validation error: 5 is not of type 'string'`): no REST code, Python
reprs. Agents read one error format from every tool (advice.py), so the
check runs here, with the same schema (schemas.py, the REST body's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError, relevance

from waypost.decoding import clip
from waypost.ids import END
from waypost.mcp_server.calls import ApiError
from waypost.mcp_server.schemas import IDEMPOTENCY_KEY
from waypost.resolvers.core.receipts import KEY_MAX
from waypost.rest.openapi import NUL_FREE_PATTERN

FIRST_ERRORS = 20  # errors looked at to choose the one to report


@dataclass(frozen=True)
class RestOrder:
    """What the REST route a tool stands for checks after the body's model
    and its NUL check (rest/routing.py `decode_body`): the key (`key`), then,
    inside the write, the items of `items_later`, then the project and the
    path's ids (`path`)."""

    key: frozenset[str] = frozenset()
    items_later: frozenset[str] = frozenset()
    path: frozenset[str] = frozenset()


class ArgumentChecker:
    """One compiled validator per tool schema, and the order its REST route
    checks the arguments in."""

    def __init__(
        self, schemas: dict[str, dict[str, Any]], orders: Mapping[str, RestOrder] | None = None
    ) -> None:
        self._validators = {
            name: jsonschema.validators.validator_for(schema)(_left_to_rest(schema))
            for name, schema in schemas.items()
        }
        self._orders = dict(orders or {})

    def fit(self, tool: str, arguments: dict[str, Any]) -> bool:
        """Whether each of `arguments` (some of a call's) is valid on its own,
        by its property's schema."""
        validator = self._validators.get(tool)
        if validator is None or not isinstance(validator.schema, dict):
            return False
        properties = validator.schema.get("properties", {})
        return all(
            name in properties and validator.evolve(schema=properties[name]).is_valid(value)
            for name, value in arguments.items()
        )

    def refusal(self, tool: str, arguments: dict[str, Any]) -> ApiError | None:
        """`invalid_request` for the first problem with `arguments`, or None."""
        validator = self._validators.get(tool)
        if validator is None:
            return None
        order = self._orders.get(tool, RestOrder())
        error = _earliest(_first_errors(validator, arguments), arguments, order)
        if error is None:
            return None
        field, message = _explain(error)
        return ApiError("invalid_request", message, {"field": field}, 400)


def _first_errors(validator: Any, arguments: Any) -> list[ValidationError]:
    """Each argument's first errors, in the order written, then the call's
    own (unknown or missing arguments). The first few only: every error of
    a 130,000-item array of the wrong type took 2 s to build, on the event
    loop; and a cut of the whole call's errors, which come in the schema's
    order, could leave out the argument REST names (review64)."""
    schema = validator.schema
    if not isinstance(schema, dict) or not isinstance(arguments, dict):
        return list(islice(validator.iter_errors(arguments), FIRST_ERRORS))
    properties = schema.get("properties", {})
    found: list[ValidationError] = []
    for name, value in arguments.items():
        if name in properties:
            own = validator.evolve(schema=properties[name]).iter_errors(value)
            for error in islice(own, FIRST_ERRORS):
                error.path.appendleft(name)
                found.append(error)
    shape = {**schema, "properties": dict.fromkeys(properties, True)}
    found.extend(islice(validator.evolve(schema=shape).iter_errors(arguments), FIRST_ERRORS))
    return found


def _earliest(
    errors: list[ValidationError], arguments: dict[str, Any], order: RestOrder
) -> ValidationError | None:
    """The error REST would name for the same call: by its steps (`_step`),
    and within one step where its decoder, reading the body in the order it
    was written, stops first (a missing field after the fields present),
    where jsonschema's own choice named another of two bad arguments
    (mcpparity). jsonschema's relevance breaks ties within one value; the
    errors inside a value of `T or null` (decision_answer's `relay`) are
    chosen the same way, where jsonschema's `best_match` chose among them by
    relevance alone (review65)."""
    if not errors:
        return None
    keys = [(_step(error, order), _place(error, arguments)) for error in errors]
    first = min(keys)
    chosen = max((e for e, key in zip(errors, keys, strict=True) if key == first), key=relevance)
    if chosen.validator in ("anyOf", "oneOf") and chosen.context:
        # what the branch the value is of found in it (not that it is no null)
        at = len(chosen.absolute_path)
        inner = [
            e for e in chosen.context if not (e.validator == "type" and len(e.absolute_path) == at)
        ]
        if inner:
            return _earliest(inner, arguments, order)
    return chosen


def _step(error: ValidationError, order: RestOrder) -> int:
    """REST's order: 0 the body's model, 1 NUL anywhere in the body, 2 the
    key, 3 the items the write checks, 4 the project and the path's ids."""
    path = error.absolute_path
    top: Any = path[0] if path else None
    required: Any = error.validator_value
    if not path and error.validator == "required" and isinstance(error.instance, dict):
        top = next((n for n in required if n not in error.instance), None)
    if top in order.path:
        return 4
    if top in order.key:
        return 2
    if _only_nul(error):
        return 1
    if top in order.items_later and len(path) >= 2:
        # an item of the wrong type is the model's (a list of objects)
        return 0 if len(path) == 2 and error.validator == "type" else 3
    return 0


def _only_nul(error: ValidationError) -> bool:
    """Whether what `error` refuses is NUL alone, the value otherwise fit
    (an optional argument's `T or null` refuses through its branches)."""
    if error.validator == "pattern":
        return bool(error.validator_value == NUL_FREE_PATTERN)
    if error.validator in ("anyOf", "oneOf") and error.context:
        return any(_only_nul(e) for e in error.context) and all(
            _only_nul(e) or e.validator == "type" for e in error.context
        )
    return False


def _place(error: ValidationError, arguments: dict[str, Any]) -> tuple[int, ...]:
    """Where in the arguments, read in order, `error` is met: the position of
    each key or item along its path, then of the unknown or missing key."""
    place: list[int] = []
    node: Any = arguments
    for part in error.absolute_path:
        if isinstance(node, dict) and part in node:
            place.append(list(node).index(part))
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            place.append(part)
            node = node[part]
        else:  # not a path into the value: judge it where it stands
            break
    if isinstance(node, dict) and error.validator == "additionalProperties":
        known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        place.append(min((i for i, key in enumerate(node) if key not in known), default=len(node)))
    elif isinstance(node, dict) and error.validator == "required":
        place.append(len(node))
    return tuple(place)


def _left_to_rest(node: Any) -> Any:
    """The schema without `uniqueItems`: REST refuses a repeated tag, option,
    task id or scope value in the operation, after it looked the key up, so
    under a used key it answers the stored answer or `422
    idempotency_key_reused`. Refused here, before the key was looked up, the
    same call got `invalid_request` through a tool (and a retry of a write
    an earlier build took, after an upgrade added such a rule, was told its
    committed write was invalid). The tools list the rule all the same."""
    if isinstance(node, dict):
        return {k: _left_to_rest(v) for k, v in node.items() if k != "uniqueItems"}
    if isinstance(node, list):
        return [_left_to_rest(v) for v in node]
    return node


def _path(parts: Iterable[str | int]) -> str:
    """`lessons[0].title`, the REST `details.field` form."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _explain(error: ValidationError) -> tuple[str, str]:
    """(field, message) in the service's words, never jsonschema's reprs."""
    where = _path(error.absolute_path)
    kind, instance = error.validator, error.instance
    value: Any = error.validator_value
    if kind == "required" and isinstance(instance, dict):
        missing = next((n for n in value if n not in instance), "")
        field = f"{where}.{missing}" if where else str(missing)
        return field, f"{field} is required"
    if kind == "additionalProperties" and isinstance(instance, dict):
        schema = error.schema if isinstance(error.schema, dict) else {}
        known = set(schema.get("properties", {}))
        # the first written, where REST's decoder stops
        unknown = [k for k in instance if k not in known]
        # quoted cut short, as REST quotes a key: one of 5,000 characters
        # came back four times in a 20 KB answer (errmsgaudit)
        name = clip(unknown[0]) if unknown else ""
        field = f"{where}.{name}" if where else name
        # with the ones taken, as REST says them: a record sent back as read
        # was refused one unknown member a call (provenance's three)
        taken = ", ".join(sorted(known)) or "none"
        return field, f"unknown argument {field} ({where or 'this tool'} takes {taken})"
    if kind in ("anyOf", "oneOf") and error.context:
        # an optional argument is `T or null` of no type it takes (what a
        # branch found inside a value `_earliest` has chosen already)
        kinds = " or ".join(str(e.validator_value) for e in error.context)
        return where, f"{where or 'the arguments'} must be of type {kinds}"
    label = where or "the arguments"
    return where, f"{label} {_constraint(str(kind), value)}"


def _constraint(kind: str, value: Any) -> str:
    """What a failed JSON Schema keyword asks for, in words."""
    match kind:
        case "type":
            return f"must be of type {value}"
        case "enum":
            return "must be one of " + ", ".join(str(v) for v in value)
        case "pattern" if value == NUL_FREE_PATTERN:
            return "must not hold NUL (U+0000)"  # REST's words
        case "pattern" if value == IDEMPOTENCY_KEY["pattern"]:
            return f"must be 1-{KEY_MAX} characters from ! to ~"  # REST's words
        case "pattern":
            # the end written as REST writes it (its lookahead is for Python's
            # re, where `$` also matches before a final newline)
            return f"must match the pattern {str(value).replace(END, '$')}"
        case "minLength" | "maxLength":
            bound = "at least" if kind == "minLength" else "at most"
            return f"must be {bound} {value} characters long"
        case "minimum" | "maximum":
            return f"must be {'at least' if kind == 'minimum' else 'at most'} {value}"
        case "minItems" | "maxItems":
            return f"must hold {'at least' if kind == 'minItems' else 'at most'} {value} items"
        case "uniqueItems":
            return "must not repeat an item"
    return f"is not valid ({kind})"
