"""The top level of a WebSocket frame the strict JSON parser refused.

A `subscribe` whose payload the parser refuses is answered for its
operation, the socket and its other subscriptions kept (docs/graphql.md);
for that its `type` and `id` must still be read. Python's `json.loads`
cannot read every such frame: an integer of more than 4,300 digits is
refused by `int()`, and a value nested a few thousand deep raises
RecursionError, and both frames closed the whole socket (4400). So only the
top level is read here: each member's value is left as text, skipped by
its brackets whatever its depth, and only the short ones asked for are
parsed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import cast

# the decoder's own reader of a JSON string (C, escapes and all); typeshed
# does not declare it
scanstring = cast(
    Callable[[str, int], tuple[str, int]],
    json.decoder.scanstring,  # type: ignore[attr-defined]
)

# what ends a value's text or changes its depth (strings are jumped over whole)
_STRUCTURE = re.compile(r'["\[\]{},]')
_SPACE = re.compile(r"[ \t\n\r]*")


def top_level(text: str) -> dict[str, str] | None:
    """The members of the JSON object `text`, each value as its text; None
    when `text` is no JSON object at its top level (or is cut short)."""
    try:
        return _members(text)
    except (ValueError, IndexError):  # a string cut short or badly escaped
        return None


def member_value(members: dict[str, str], name: str) -> object:
    """The parsed value of a short member, or None (absent or not JSON)."""
    text = members.get(name)
    if text is None or len(text) > 1024:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _members(text: str) -> dict[str, str] | None:
    at = _skip(text, 0)
    if text[at : at + 1] != "{":
        return None
    members: dict[str, str] = {}
    at = _skip(text, at + 1)
    if text[at : at + 1] == "}":
        return members
    while True:
        if text[at : at + 1] != '"':
            return None
        key, at = scanstring(text, at + 1)
        at = _skip(text, at)
        if text[at : at + 1] != ":":
            return None
        start = _skip(text, at + 1)
        end = _value_end(text, start)
        if end is None:
            return None
        members[key] = text[start:end].strip()
        if text[end] == "}":
            return members
        at = _skip(text, end + 1)  # past the comma


def _value_end(text: str, at: int) -> int | None:
    """Where the value beginning at `at` ends: the `,` or `}` after it."""
    depth = 0
    while (found := _STRUCTURE.search(text, at)) is not None:
        mark, at = found.group(), found.end()
        if mark == '"':
            _, at = scanstring(text, at)
        elif mark in "[{":
            depth += 1
        elif depth:
            depth -= mark != ","  # a comma inside brackets ends nothing
        else:
            return found.start() if mark != "]" else None
    return None


def _skip(text: str, at: int) -> int:
    found = _SPACE.match(text, at)
    return found.end() if found is not None else at
