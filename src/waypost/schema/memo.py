"""Bounded memos for work that depends only on a query's text and variables.

Dashboards and agents send the same few queries again and again; what follows
from the document and the variables alone (the query limits, the fast path's
plan) is kept for the next request instead of recomputed. Keys are exact:
`variables_key` gives one only for plain JSON values (their `repr` is then
a faithful encoding), and None otherwise, which means "do not memo".
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

V = TypeVar("V")

_PLAIN = (str, int, float, bool, type(None))


def _plain(value: Any) -> bool:
    # exact types: a subclass (an enum member that is also a str) may repr otherwise
    if type(value) in _PLAIN:
        return True
    if type(value) is list:
        return all(_plain(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    return False


def variables_key(variables: dict[str, Any] | None) -> str | None:
    """A key equal for equal plain-JSON variables, None when any value is not
    plain JSON (an object whose repr might not tell two values apart)."""
    if not variables:
        return ""
    return repr(variables) if _plain(variables) else None


class Memo(Generic[V]):
    """A bounded LRU (touched from the event loop only)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[Hashable, V] = OrderedDict()

    def get(self, key: Hashable) -> V | None:
        found = self.items.get(key)
        if found is not None:
            self.items.move_to_end(key)
        return found

    def put(self, key: Hashable, value: V) -> None:
        self.items[key] = value
        self.items.move_to_end(key)
        while len(self.items) > self.size:
            self.items.popitem(last=False)
