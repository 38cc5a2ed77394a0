"""Strict JSON decoding into request models.

The standard library parser finds duplicate keys and non-finite numbers
(which msgspec alone would accept or misreport); msgspec then converts the
value into the route's model in strict mode, so a boolean is never an
integer, unknown fields are refused, and every error names its JSON path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from waypost.errors import InvalidRequest

T = TypeVar("T")
_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<name>[^`]*)`")
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]*)`")


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_json(raw: bytes) -> Any:
    """Parse a JSON document strictly; errors are 400 invalid_request."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest.field("", "the body is not valid UTF-8") from exc
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_refuse_constant)
    except _DuplicateKey as exc:
        raise InvalidRequest.field(exc.key, f"duplicate key {exc.key!r}") from exc
    except ValueError as exc:
        raise InvalidRequest(
            "the body is not a complete JSON document", {"field": "", "error": str(exc)[:200]}
        ) from exc


def field_of(error: msgspec.ValidationError) -> tuple[str, str]:
    """(JSON path without `$.`, message) from a msgspec validation error."""
    text = str(error)
    match = _PATH.search(text)
    path = match.group("path").lstrip(".") if match else ""
    message = text[: match.start()] if match else text
    for pattern in (_UNKNOWN, _MISSING):
        named = pattern.match(message)
        if named:
            name = named.group("name")
            path = f"{path}.{name}" if path else name
    return path, message


def convert(value: Any, model: type[T], *, strict: bool = True) -> T:
    """Convert a parsed value into `model`, raising InvalidRequest naming the field."""
    try:
        return msgspec.convert(value, model, strict=strict)
    except msgspec.ValidationError as exc:
        path, message = field_of(exc)
        raise InvalidRequest(message, {"field": path}) from exc


def decode_body(raw: bytes, model: type[T]) -> T:
    return convert(parse_json(raw), model)


def decode_query(items: list[tuple[str, str]], model: type[T]) -> T:
    """Query parameters into `model`: duplicates and unknown names are refused."""
    values: dict[str, str] = {}
    for key, value in items:
        if key in values:
            raise InvalidRequest.field(key, f"duplicate query parameter {key!r}")
        values[key] = value
    return convert(values, model, strict=False)


def to_builtins(value: Any) -> Mapping[str, Any]:
    """A request model as plain JSON values (for fingerprints)."""
    result = msgspec.to_builtins(value)
    assert isinstance(result, dict)
    return result
