"""A decision's status, computed from its pins, its answer and the service time.

This is the one place that decides, in Python; `STATUS_WHERE` below is its
twin over the stored state, held to it by a test on every combination of
inputs. The order is fixed by the service
contract (section 13): a passed `expires_at` makes a decision `expired`;
otherwise a changed pin makes it `stale`, whatever its answer; otherwise the
answer decides (`pending` when there is none). Only `allowed` lets work go on.

The pin comparison itself (judged-field edits and rules-text edits since the
pinned revisions) lives in the `decision_current` view of migration 0004, which
hands this function a single `stale` flag. SQL queries call the same function
as `waypost_decision_status(disposition, expires_at, now, stale)` so the gate,
the digest and the sweep filter with exactly this code (the lists' status
filters and counts read `STATUS_WHERE`).
"""

from __future__ import annotations

import sqlite3
from typing import Final, Literal

Status = Literal["pending", "allowed", "denied", "deferred", "expired", "stale"]
STATUSES: Final[tuple[Status, ...]] = (
    "pending",
    "allowed",
    "denied",
    "deferred",
    "expired",
    "stale",
)
_BY_DISPOSITION: Final[dict[str, Status]] = {
    "allow": "allowed",
    "deny": "denied",
    "defer": "deferred",
}
SQL_FUNCTION: Final = "waypost_decision_status"


def decision_status(
    disposition: str | None, expires_at: str | None, now_at: str, stale: bool | int
) -> Status:
    """The status of a generation (times are RFC 3339 strings that sort in time order)."""
    if expires_at is not None and expires_at <= now_at:
        return "expired"
    if stale:
        return "stale"
    if disposition is None:
        return "pending"
    return _BY_DISPOSITION[disposition]


def work_allowed(status: str) -> bool:
    """Work may go on only under a live allow."""
    return status == "allowed"


def install(conn: sqlite3.Connection) -> None:
    """Make `waypost_decision_status(...)` callable from SQL on this connection.

    A connection set-up hook (`waypost.runtime.CONNECTION_HOOKS`): it runs once
    when a connection opens, never per call, because registering a function
    expires every statement the connection has prepared.
    """
    conn.create_function(SQL_FUNCTION, 4, decision_status, deterministic=True)


# The SQL expression of the status over a `decision_current` row aliased `s`,
# with the service time bound as the named parameter `:now`.
STATUS_SQL: Final = f"{SQL_FUNCTION}(s.disposition, s.expires_at, :now, s.stale)"

# Each status as an SQL condition over the stored state: `h` the decision's
# `decision_holds` row (its current generation's expiry, stored `stale`,
# `answered` and `disposition`, migrations 0023, 0025 and 0027), `:now` the
# service time. The same order as `decision_status`
# (tests/test_decisions_status.py compares the two on every combination of
# their inputs), without a call into Python or a comparison of pins per
# decision: the lists' status filters and counts, and the context packet's
# unresolved decisions, read these. Each holds the terms of the partial index
# its list walks (`STATUS_INDEX`), which SQLite needs to see to use it.
_LIVE = "(h.expires_at IS NULL OR h.expires_at > :now) AND "
STATUS_WHERE: Final[dict[str, str]] = {
    "expired": "h.expires_at IS NOT NULL AND h.expires_at <= :now",
    "stale": f"{_LIVE}h.stale = 1",
    "pending": f"{_LIVE}h.stale = 0 AND h.answered = 0",
    **{
        status: f"{_LIVE}h.answered = 1 AND h.stale = 0 AND h.disposition = '{disposition}'"
        for disposition, status in _BY_DISPOSITION.items()
    },
}
# The partial index of `decision_holds` (project, [disposition,] creation
# time, id) that holds every decision of each status, in list order.
STATUS_INDEX: Final[dict[str, str]] = {
    "expired": "decision_holds_expiring",
    "stale": "decision_holds_stale",
    "pending": "decision_holds_unanswered",
    **{status: "decision_holds_answered" for status in _BY_DISPOSITION.values()},
}
# What the conditions read, joined to a `decisions` row aliased `d`.
STATUS_FROM: Final = " JOIN decision_holds h ON h.decision_id = d.id"
