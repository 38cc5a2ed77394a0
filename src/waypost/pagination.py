"""Opaque cursors and pages, shared by REST lists and GraphQL connections."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from waypost.b64url import decode_b64url, encode_b64url
from waypost.decoding import is_utf8
from waypost.errors import InvalidRequest

T = TypeVar("T")
U = TypeVar("U")
DEFAULT_LIMIT = 50
LIMIT_MAX = 200  # a page's `limit` at most, unless a list says otherwise


def encode_cursor(*parts: str | int) -> str:
    return encode_b64url(json.dumps(list(parts), separators=(",", ":")).encode())


# The refusal of a cursor no list wrote, with the way on (in words both REST
# and GraphQL callers read: `next_cursor` there, `endCursor` here)
MALFORMED_CURSOR = (
    "malformed cursor: send back a cursor this list gave, unchanged, or none to start at"
    " the first page"
)


def decode_cursor(cursor: str, *types: type, field_name: str = "cursor") -> tuple[object, ...]:
    """Decode a cursor made by `encode_cursor` whose parts have exactly `types`."""
    try:
        parts = json.loads(decode_b64url(cursor))
    except (ValueError, UnicodeError, RecursionError) as exc:
        raise InvalidRequest.field(field_name, MALFORMED_CURSOR) from exc
    if (
        not isinstance(parts, list)
        or len(parts) != len(types)
        or not all(type(p) is t for p, t in zip(parts, types, strict=True))
        # a forged integer beyond SQLite's range, or a string holding a lone
        # surrogate (not UTF-8), would fail in the store, not here
        or any(type(p) is int and not -(2**63) <= p < 2**63 for p in parts)
        or any(type(p) is str and not is_utf8(p) for p in parts)
        # character for character what this service writes (docs/api.md):
        # spaces or a byte-order mark in the JSON were read as a position
        or encode_cursor(*parts) != cursor
    ):
        raise InvalidRequest.field(field_name, MALFORMED_CURSOR)
    return tuple(parts)


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list: each item's own cursor, and whether more follow."""

    items: list[T]
    cursors: list[str] = field(default_factory=list)
    has_next: bool = False
    # GraphQL's `pageInfo.hasPreviousPage`; REST pages only walk forward
    has_previous: bool = False

    @property
    def next_cursor(self) -> str | None:
        return self.cursors[-1] if self.has_next and self.cursors else None

    @classmethod
    def from_rows(
        cls,
        rows: Sequence[T],
        limit: int,
        cursor_of: Callable[[T], str],
        *,
        backward: bool = False,
        cursor: str | None = None,
    ) -> Page[T]:
        """`rows` was fetched with `LIMIT limit + 1`: the extra row tells there is more.

        Backward (`last`/`before`), `rows` came in reverse list order; the page
        is turned back into list order. A cursor given names an existing
        record, so there is something on its other side (records are never
        deleted).
        """
        items = list(rows[:limit])
        more = len(rows) > limit
        if backward:
            items.reverse()
            return cls(items, [cursor_of(i) for i in items], cursor is not None, more)
        return cls(items, [cursor_of(i) for i in items], more, cursor is not None)

    def first(self, count: int) -> Page[T]:
        """The page's first `count` items, with more following them: a page
        cut short (a REST page at its byte bound) goes on from its last item."""
        if len(self.cursors) != len(self.items):
            raise ValueError("a page without a cursor per item cannot be cut short")
        return Page(self.items[:count], self.cursors[:count], True, self.has_previous)

    def map(self, fn: Callable[[T], object]) -> Page[object]:
        return Page([fn(i) for i in self.items], self.cursors, self.has_next, self.has_previous)

    def with_items(self, items: list[U]) -> Page[U]:
        """The same page over new items (one per old item, e.g. rows made JSON)."""
        return Page(items, self.cursors, self.has_next, self.has_previous)

    def to_json(self) -> dict[str, object]:
        return {"items": self.items, "next_cursor": self.next_cursor}


def keyset(descending: bool, backward: bool) -> tuple[str, str]:
    """(comparison against the cursor, ORDER BY direction) for one page.

    A list ordered `descending` walks `<` forward; walking backward flips both
    (the rows then come in reverse and `Page.from_rows` turns them back)."""
    down = descending != backward
    return ("<", "DESC") if down else (">", "ASC")


def check_limit(limit: int | None, *, maximum: int = LIMIT_MAX, field_name: str = "limit") -> int:
    if limit is None:
        return DEFAULT_LIMIT
    if not 1 <= limit <= maximum:
        raise InvalidRequest.field(field_name, f"{field_name} must be from 1 to {maximum}")
    return limit
