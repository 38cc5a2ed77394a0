"""What the fast path's resolvers share: one connection, one clock reading,
and the records already read in this request."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from waypost.pagination import Page
from waypost.schema import budget

Json = dict[str, Any]


class Fallback(Exception):
    """Hand the whole operation to graphql-core: an error to render (a bad
    argument, a null in a non-null field) or a case the fast path leaves to it.
    Queries write nothing, so running them again there is safe, and the
    answer is then by construction the normal one."""


@dataclass
class Reads:
    """One request's reads, all on one reader connection (one snapshot)."""

    conn: sqlite3.Connection
    now: datetime
    now_at: str
    principal_id: str = ""  # the caller, for `Query.me` ("": none, which falls back)
    # every (type name, field name) the operation selects (plan.SelectionPlan)
    selected: frozenset[tuple[str, str]] = frozenset()
    # objects completed so far (schema/budget.py counts them against MAX_OBJECTS)
    objects: int = 0
    max_objects: int = budget.MAX_OBJECTS  # the limit `objects` counts against
    text: int = 0  # characters of the result's strings (budget.MAX_TEXT)
    # kind -> id -> record (None: no such record), like the DataLoaders' caches:
    # a record referenced many times is read once per request
    _records: dict[str, dict[str, Json | None]] = field(default_factory=dict)

    def records(
        self,
        kind: str,
        ids: Sequence[str],
        read: Callable[[Reads, list[str]], list[Json | None]],
    ) -> list[Json | None]:
        """Records by id in the order given, reading the missing ones in one batch."""
        cache = self._records.setdefault(kind, {})
        missing = [i for i in dict.fromkeys(ids) if i not in cache]
        if missing:
            for i, found in zip(missing, read(self, missing), strict=True):
                cache[i] = found
        return [cache[i] for i in ids]


class ConnectionValue:
    """A connection's value: a page's items, where it sits, and how to count
    the whole list (read only when `totalCount` is selected, as in the normal
    path). Cursors are made only when `edges` or `pageInfo` ask for them."""

    __slots__ = ("_count", "_counted", "_cursors", "has_next", "has_previous", "items")

    def __init__(
        self,
        items: list[Json],
        cursors: list[str] | Callable[[], list[str]],
        has_next: bool,
        has_previous: bool,
        total: Callable[[Reads], int],
    ) -> None:
        self.items = items
        self._cursors = cursors
        self.has_next = has_next
        self.has_previous = has_previous
        self._count = total
        self._counted: int | None = None

    def total(self, r: Reads) -> int:
        """The whole list's count, read once however many parents share this
        page (a project's connection reached through each of its tasks)."""
        if self._counted is None:
            self._counted = self._count(r)
        return self._counted

    @classmethod
    def of(cls, page: Page[Json], total: Callable[[Reads], int]) -> ConnectionValue:
        return cls(page.items, page.cursors, page.has_next, page.has_previous, total)

    @property
    def cursors(self) -> list[str]:
        if callable(self._cursors):
            self._cursors = self._cursors()
        return self._cursors
