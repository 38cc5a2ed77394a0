"""Bounded memos for work that depends only on a query's text and variables.

Dashboards and agents send the same few queries again and again; what follows
from the document and the variables alone (the query limits, the fast path's
plan) is kept for the next request instead of recomputed. Keys are exact:
`variables_key` gives one only for plain JSON values (their `repr` is then
a faithful encoding), and None otherwise, which means "do not memo".
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
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


# The parsed tokens the memos of documents and plans may keep, each (a
# token of a parsed document takes about 560 bytes: 100,000 about 56 MB).
# By count alone, 256 texts of 5,000 tokens each held 850 MB of a `serve`,
# refused documents among them (cacheaudit); a dashboard's query is a few
# hundred tokens, so 256 of those still fit.
TOKENS_KEPT = 100_000


def tokens_kept(node: Any) -> int:
    """The tokens a parsed node keeps alive: its location links every token
    of its document's text, comments included (1 for a node without one)."""
    loc = getattr(node, "loc", None)
    if loc is None:
        return 1
    count, token = 0, loc.start_token
    while token.prev is not None:
        token = token.prev
    while token is not None:
        count, token = count + 1, token.next
    return count


class Memo(Generic[V]):
    """A bounded LRU (touched from the event loop only): at most `size`
    entries and, given `weigh`, at most `most` of their weight in all, the
    least recently used let go first (an entry heavier than `most` is not
    kept)."""

    def __init__(self, size: int, weigh: Callable[[V], int] | None = None, most: int = 0) -> None:
        self.size = size
        self.weigh = weigh
        self.most = most
        self.weight = 0
        self.weights: dict[Hashable, int] = {}
        self.items: OrderedDict[Hashable, V] = OrderedDict()

    def get(self, key: Hashable) -> V | None:
        found = self.items.get(key)
        if found is not None:
            self.items.move_to_end(key)
        return found

    def put(self, key: Hashable, value: V) -> None:
        self._drop(key)
        weight = self.weigh(value) if self.weigh is not None else 0
        if self.weigh is not None and weight > self.most:
            return
        self.items[key] = value
        self.weights[key] = weight
        self.weight += weight
        while len(self.items) > self.size or self.weight > self.most:
            self._drop(next(iter(self.items)))

    def clear(self) -> None:
        self.items.clear()
        self.weights.clear()
        self.weight = 0

    def _drop(self, key: Hashable) -> None:
        if key in self.items:
            del self.items[key]
            self.weight -= self.weights.pop(key)
