"""Strict JSON decoding into request models.

The standard library parser finds duplicate keys and non-finite numbers
(which msgspec alone would accept or misreport); msgspec then converts the
value into the route's model in strict mode, so a boolean is never an
integer, unknown fields are refused, and every error names its JSON path.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import msgspec

from waypost.errors import InvalidRequest

T = TypeVar("T")
_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")
# the name up to the message's last backtick: a key may hold backticks itself
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<name>.*)`\Z", re.DOTALL)
_END_OF_TEXT = re.compile(r"\(\?!\[\\+s\\+S\]\)")
_MISSING = re.compile(r"^Object missing required field `(?P<name>.*)`\Z", re.DOTALL)
# a refusal's message at most: msgspec quotes the value it refused whole
# ("Invalid enum value '...'"), which may be 100 KB of the client's text (an
# unknown field's list of the fields taken follows, the model's, not the client's)
MESSAGE_MOST = 200


# SQLite stores 64-bit integers; a larger JSON integer could never be stored
# or compared, so it is refused where it is parsed, with its path.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class _Refused:
    """Stands in for a JSON value the strict parser refuses.

    The parser's hooks cannot see where they are in the document, so they leave
    this marker in place and `_find_refused` walks the parsed value once for
    its JSON path. `key` is set for a duplicate key inside the marked object.
    """

    __slots__ = ("key", "message")

    def __init__(self, message: str, key: str | None = None) -> None:
        self.message = message
        self.key = key


# A JSON `\ud800` escape without its pair decodes to a lone surrogate, which is
# not text: it cannot be encoded as UTF-8, stored or fingerprinted.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def is_utf8(text: str) -> bool:
    """Whether `text` is text at all: a lone surrogate (from a JSON or
    GraphQL escape, or a shell's undecodable bytes) cannot be encoded."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _find_text(value: Any, pattern: re.Pattern[str]) -> str | None:
    """The JSON path of the first key or string `pattern` finds something in."""
    if not _holds_text(value, pattern):
        return None  # the usual case: no path is spelled for a value that has none
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str) and pattern.search(item):
            return path
        if isinstance(item, dict):
            for key in item:
                if pattern.search(key):
                    return _join(path, key)
            stack.extend(reversed([(_join(path, k), v) for k, v in item.items()]))
        elif isinstance(item, list):
            stack.extend(reversed([(_join(path, i), v) for i, v in enumerate(item)]))
    return None


def _holds_text(value: Any, pattern: re.Pattern[str]) -> bool:
    """Whether `pattern` finds something in any key or string of `value`."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if pattern.search(item):
                return True
        elif isinstance(item, dict):
            if any(pattern.search(key) for key in item):
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    # The path goes back in the error body, which must be UTF-8: a lone
    # surrogate in a key (any refusal can be nested under one) is escaped.
    key = clip(key.encode("utf-8", "backslashreplace").decode())
    return f"{path}.{key}" if path else key


def _find_refused(value: Any) -> tuple[str, _Refused] | None:
    """The first refused marker in document order, with its JSON path.

    Iterative, because the parser accepts nesting deeper than Python's
    recursion limit leaves room for.
    """
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, _Refused):
            return (_join(path, item.key) if item.key is not None else path), item
        if isinstance(item, dict):
            stack.extend(reversed([(_join(path, k), v) for k, v in item.items()]))
        elif isinstance(item, list):
            stack.extend(reversed([(_join(path, i), v) for i, v in enumerate(item)]))
    return None


def clip(text: str, most: int = 40) -> str:
    """Client text quoted in an error, at most `most` characters: a refusal
    names what it refused, it does not echo a 200 KB number back."""
    return text if len(text) <= most else text[:most] + "..."


_marks = threading.local()


def _mark(message: str, key: str | None = None) -> _Refused:
    marker = _Refused(message, key)
    _marks.refused.append(marker)
    return marker


def _pairs(items: list[tuple[str, Any]]) -> Any:
    seen: dict[str, Any] = {}
    for key, value in items:
        if key in seen:
            return _mark(f"duplicate key {clip(key)!r}", key)
        seen[key] = value
    return seen


def _constant(name: str) -> Any:
    return _mark(f"{name} is not valid JSON")


def _number(text: str) -> Any:
    value = float(text)
    return value if math.isfinite(value) else _mark(f"{clip(text)} is out of range")


def _integer(text: str) -> Any:
    # the length test first: int() of a huge literal is itself refused by Python
    if len(text) > 20 or not INT64_MIN <= (value := int(text)) <= INT64_MAX:
        return _mark("integer out of the 64-bit range")
    return value


# what json.loads(text, object_pairs_hook=..., ...) makes on every call, made once
_STRICT = json.JSONDecoder(
    object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_number, parse_int=_integer
)


def parse_json(raw: bytes) -> Any:
    """Parse a JSON document strictly; errors are 400 invalid_request naming the field.

    Refused: invalid UTF-8, truncated or malformed text, duplicate keys,
    `NaN`/`Infinity` (and numbers that overflow to them), integers outside the
    64-bit range, and nesting deeper than the parser allows.
    """
    # the hooks' markers, per thread: the decoder is made once (json.loads
    # with hooks builds a decoder and its scanner on every call, two thirds
    # of the time it took to parse a knowledge create's body)
    refused: list[_Refused] = []
    _marks.refused = refused
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest.field("", "the body is not valid UTF-8") from exc
    try:
        if text.startswith("\ufeff"):  # as json.loads refuses it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        value = _STRICT.decode(text)
    except RecursionError as exc:
        raise InvalidRequest.field("", "the body nests too deeply") from exc
    except json.JSONDecodeError as exc:
        # where the document breaks, not the decoder's own text (contract section 2)
        raise InvalidRequest(
            f"the body is not a complete JSON document (line {exc.lineno}, column {exc.colno})",
            {"field": "", "line": exc.lineno, "column": exc.colno},
        ) from exc
    if refused:
        found = _find_refused(value)
        assert found is not None
        path, marker = found
        raise InvalidRequest.field(path, marker.message)
    if _SURROGATE_ESCAPE.search(text):
        lone = _find_text(value, _LONE_SURROGATE)
        if lone is not None:
            raise InvalidRequest.field(lone, "text must not hold an unpaired surrogate escape")
    return value


# NUL ends a string in C, so many a client, tool and database (PostgreSQL's
# `text` among them) cannot hold it; no text a person writes needs it.
_NUL = re.compile("\x00")


def refuse_nul(value: Any, named: Callable[[str], str] = str) -> None:
    """Refuse a request whose text holds NUL (U+0000), which no stored text
    may, naming the first field that does (as `named` spells it)."""
    path = _find_text(value, _NUL)
    if path is not None:
        raise InvalidRequest.field(named(path), f"{named(path)} must not hold NUL (U+0000)")


def is_json_media_type(content_type: str | None) -> bool:
    """`application/json`, compared case-insensitively, optionally `; charset=utf-8`.

    The one rule for REST and GraphQL bodies (service contract 13 and 14).
    The charset may be quoted, `charset="utf-8"`: the same value (RFC 9110,
    8.3.2), which was refused 415. An empty parameter is no parameter (RFC
    9110, 5.6.6): `application/json;charset=utf-8;` was refused where
    `application/json;` was taken (sec14audit).
    """
    kind, *parts = (content_type or "").split(";")
    if kind.strip(" \t").lower() != "application/json":
        return False
    params = [part for part in parts if part.strip(" \t")]
    if not params:
        return True
    if len(params) > 1:  # a second charset says nothing more, or contradicts the first
        return False
    name, _, value = params[0].partition("=")
    value = value.strip(" \t")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = _QUOTED_PAIR.sub(r"\1", value[1:-1])
    return name.strip(" \t").lower() == "charset" and value.lower() == "utf-8"


# a backslash and the character it quotes inside a quoted-string (RFC 9110, 5.6.4)
_QUOTED_PAIR = re.compile(r"\\(.)")


def field_of(error: msgspec.ValidationError) -> tuple[str, str]:
    """(JSON path without `$.`, message) from a msgspec validation error."""
    text = str(error)
    match = _PATH.search(text)
    path = match.group("path").lstrip(".") if match else ""
    message = text[: match.start()] if match else text
    for pattern in (_UNKNOWN, _MISSING):
        named = pattern.match(message)
        if named:
            # the name is the client's key (an unknown one may be 100 KB long)
            name = clip(named.group("name"))
            message = message[: named.start("name")] + name + message[named.end("name") :]
            path = f"{path}.{name}" if path else name
    return path, message


def convert(value: Any, model: type[T], *, strict: bool = True) -> T:
    """Convert a parsed value into `model`, raising InvalidRequest naming the field."""
    try:
        return msgspec.convert(value, model, strict=strict)
    except msgspec.ValidationError as exc:
        path, message = field_of(exc)
        if message.startswith("Invalid enum value"):
            # msgspec quotes the value refused; the caller needs those taken
            # (an agent was told `Invalid enum value 'bogus'` and no more)
            allowed = _enum_values(msgspec.inspect.type_info(model), path)
            if allowed:
                message = f"{path} must be one of {', '.join(allowed)}"
        # patterns end in (?![\s\S]) so "$" cannot match before a newline; say "$"
        message = clip(_END_OF_TEXT.sub("$", message), MESSAGE_MOST)
        if message.startswith("Object contains unknown field"):
            # with the fields taken, as a query parameter is refused (an agent
            # that sent a record back as read was told of provenance's
            # actor_id, actor_session_id and recorded_at one a round trip):
            # those of the object msgspec found the key in, from its own path
            # (the key may hold `.` or `[`, or be clipped to end in "...")
            at = _PATH.search(str(exc))
            where = at.group("path").lstrip(".") if at else ""
            taken = _field_names(msgspec.inspect.type_info(model), where)
            if taken:
                message += f" (this object takes {', '.join(taken)})"
        raise InvalidRequest(message, {"field": path}) from exc


_PATH_PART = re.compile(r"\[\d+\]|[^.\[]+")


def _type_at(info: msgspec.inspect.Type, path: str) -> msgspec.inspect.Type | None:
    """The type at `path` (`lessons[0].kind`) of a model, unwrapped; None
    where the path leads to none."""
    for part in _PATH_PART.findall(path):
        info = _unwrapped(info)
        if part.startswith("[") and isinstance(info, msgspec.inspect.ListType):
            info = info.item_type
        elif isinstance(info, msgspec.inspect.StructType):
            found = [f.type for f in info.fields if f.encode_name == part]
            if not found:
                return None
            info = found[0]
        else:
            return None
    return _unwrapped(info)


def _enum_values(info: msgspec.inspect.Type, path: str) -> list[str]:
    """The values the enum at `path` of a model takes; [] where there is none."""
    found = _type_at(info, path)
    if isinstance(found, msgspec.inspect.LiteralType):
        return [str(v) for v in found.values]
    return []


def _field_names(info: msgspec.inspect.Type, path: str) -> list[str]:
    """The fields the object at `path` of a model takes, sorted; [] where
    there is no object."""
    found = _type_at(info, path)
    if isinstance(found, msgspec.inspect.StructType):
        return sorted(f.encode_name for f in found.fields)
    return []


def _unwrapped(info: msgspec.inspect.Type) -> msgspec.inspect.Type:
    """The type inside constraints and an optional's union with None (msgspec
    leaves UNSET out of a field's type)."""
    while True:
        if isinstance(info, msgspec.inspect.Metadata):
            info = info.type
        elif isinstance(info, msgspec.inspect.UnionType):
            kept = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
            if len(kept) != 1:
                return info
            info = kept[0]
        else:
            return info


def decimal_integer(text: str, signed: bool = True) -> int | None:
    """The 64-bit integer `text` writes in decimal digits (leading zeros
    allowed, a `-` first when `signed`), else None: no spaces, `+`, fraction
    or exponent, and nothing past 64 bits ever reaches a statement."""
    sign, digits = ("-", text[1:]) if signed and text[:1] == "-" else ("", text)
    if not (digits.isascii() and digits.isdigit()):
        return None
    digits = digits.lstrip("0") or "0"
    if len(digits) > 19:
        return None
    value = int(sign + digits)
    return value if INT64_MIN <= value <= INT64_MAX else None


def _not_an_integer(text: str) -> str:
    """Why `decimal_integer` refused `text`: digits past 64 bits are a
    decimal integer, only too large ("must be a decimal integer" was said of
    2**63 too, eventsjourney)."""
    negative = text[:1] == "-"
    digits = text[1:] if negative else text
    if not (digits.isascii() and digits.isdigit()):
        return "must be a decimal integer"
    return f"must be at least {INT64_MIN}" if negative else f"must be at most {INT64_MAX}"


_TYPED_FIELDS: dict[type, tuple[frozenset[str], frozenset[str], frozenset[str]]] = {}
_BOOLEANS: dict[str, bool] = {"true": True, "false": False}


def _typed_fields(model: type) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The fields of a query model: all of them, those that take an integer,
    and those that take a boolean (alone or with None)."""
    found = _TYPED_FIELDS.get(model)
    if found is None:
        info = msgspec.inspect.type_info(model)
        assert isinstance(info, msgspec.inspect.StructType)
        integers, booleans = set(), set()
        for f in info.fields:
            # under a description's Metadata (a described `bool` is one)
            kind = _unwrapped(f.type)
            members = kind.types if isinstance(kind, msgspec.inspect.UnionType) else (kind,)
            kinds = [_unwrapped(k) for k in members]
            if any(isinstance(k, msgspec.inspect.IntType) for k in kinds):
                integers.add(f.encode_name)
            if any(isinstance(k, msgspec.inspect.BoolType) for k in kinds):
                booleans.add(f.encode_name)
        names = frozenset(f.encode_name for f in info.fields)
        found = _TYPED_FIELDS[model] = (names, frozenset(integers), frozenset(booleans))
    return found


def query_items(query_string: bytes) -> list[tuple[str, str]]:
    """The query string's name-value pairs, percent-decoded as UTF-8.

    A name or value whose decoded bytes are not UTF-8 is refused, naming it:
    `parse_qsl` and Starlette put U+FFFD in their place, so `q=%FF%FE`
    searched for text nobody sent and answered as if it had."""
    if not query_string:
        return []
    pairs = parse_qsl(
        query_string.decode("latin-1"), keep_blank_values=True, errors="surrogateescape"
    )
    for name, value in pairs:
        if _LONE_SURROGATE.search(name) or _LONE_SURROGATE.search(value):
            named = clip(_LONE_SURROGATE.sub("\ufffd", name))
            raise InvalidRequest.field(
                named, f"query parameter {named!r} is not UTF-8 once percent-decoded"
            )
    return pairs


def decode_query(items: list[tuple[str, str]], model: type[T]) -> T:
    """Query parameters into `model`: duplicates and unknown names are refused;
    an empty `cursor=` is no cursor (the first page), on every list that
    takes a cursor (elsewhere it is an unknown parameter, as any other).

    An integer parameter is decimal digits only: msgspec's lax conversion
    (needed to read "true" or "20" from text) would also take "2.0" or "1e0",
    and an integer beyond SQLite's 64 bits must never reach a statement. A
    boolean is `true` or `false`: the lax conversion also read "1", "0" and
    "TRUE", so `include_shared=1` opted in to other projects' records though
    the opt-in is to be explicit and a wrong type refused. With those two
    converted here, the rest converts strictly: the lax mode also read the
    text "null" as no value, so `status=null` listed every status.
    """
    values: dict[str, str] = {}
    for key, value in items:
        if key in values:
            named = clip(key)
            raise InvalidRequest.field(named, f"duplicate query parameter {named!r}")
        values[key] = value
    names, integers, booleans = _typed_fields(model)
    if values.get("cursor") == "" and "cursor" in names:
        del values["cursor"]  # a route that pages by something else refuses it by name
    typed: dict[str, object] = dict(values)
    for key in integers & values.keys():
        number = decimal_integer(values[key])
        if number is None:
            raise InvalidRequest.field(key, f"{key} {_not_an_integer(values[key])}")
        typed[key] = number  # "007" is decimal digits too; msgspec refuses leading zeros
    for key in booleans & values.keys():
        if values[key] not in _BOOLEANS:
            raise InvalidRequest.field(key, f"{key} must be true or false")
        typed[key] = _BOOLEANS[values[key]]
    unknown = next((key for key in values if key not in names), None)
    if unknown is not None:
        # in a query string's words, with the ones taken (msgspec's own said
        # "Object contains unknown field", of a body the request has not);
        # the first in the request, as msgspec named it
        named, taken = clip(unknown), ", ".join(sorted(names)) or "none"
        raise InvalidRequest.field(
            named, f"unknown query parameter {named} (this route takes {taken})"
        )
    try:
        return convert(typed, model, strict=True)
    except InvalidRequest as error:
        if error.message.startswith("Object missing required field"):
            raise InvalidRequest.field(
                error.details["field"], f"{error.details['field']} is required"
            ) from error
        raise
