"""Why a context packet's items are in the order they are: the reason every
rerank reports (docs/context.md), one list for the code that reports them
and for the REST and GraphQL documents that name them."""

from __future__ import annotations

from typing import Final, Literal, get_args

Reason = Literal[
    "disabled", "applied", "too_few", "too_many", "busy", "circuit_open",
    "timeout", "connect_error", "bad_status", "too_large", "bad_scores",
]  # fmt: skip
REASONS: Final[tuple[Reason, ...]] = get_args(Reason)
