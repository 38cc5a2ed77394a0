"""How the packet's byte budget counts (service contract section 8).

The budget counts the UTF-8 bytes of the compact JSON of the policy plus each
included item: exactly the bytes the REST response spends on them, since the
response is written by the same encoder (msgspec: no spaces, UTF-8, no
escaping of non-ASCII text).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

_encoder = msgspec.json.Encoder()


def size(value: Any) -> int:
    """UTF-8 bytes of `value` as compact JSON."""
    return len(_encoder.encode(value))


@dataclass
class Fill:
    """Which items fit, in order, and why the filling stopped (if it did)."""

    items: list[dict[str, Any]] = field(default_factory=list)
    used: int = 0
    stopped_by: str | None = None  # "limit" | "budget" | "policy"
    # when the budget or the policy stopped it: the budget that would have
    # taken the next item too, so that the advice can name a size that
    # works (an agent told only "raise budget" asked three times)
    wanted: int | None = None


def fill(policy: dict[str, Any], ordered: list[dict[str, Any]], limit: int, budget: int) -> Fill:
    """Take items in order while both the count and the byte budget allow.

    Filling stops at the first item that does not fit; a smaller item further
    down is not taken in its place, so what is returned is always a prefix of
    the ranked order. When the policy alone is over budget nothing else is
    taken (the policy is still returned whole).
    """
    result = Fill(used=size(policy))
    if result.used > budget:
        result.stopped_by = "policy"
        result.wanted = result.used + (size(ordered[0]) if ordered else 0)
        return result
    for item in ordered:
        if len(result.items) >= limit:
            result.stopped_by = "limit"
            break
        cost = size(item)
        if result.used + cost > budget:
            result.stopped_by = "budget"
            result.wanted = result.used + cost
            break
        result.items.append(item)
        result.used += cost
    return result
