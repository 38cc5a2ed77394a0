"""Timeouts: the sweep answers reversible decisions nobody answered for 24 hours.

The answer is an allow with the recommendation, conditions confirmed,
`timed_out: true`, attributed to the principal that asked the current cycle
(the creator for generation 1, the reopener after that) with no session. It
never touches a stale or expired decision, so a recommendation is never
applied to a scope other than the one it was made for, and never a
human-required decision whose current cycle an agent opened.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from typing import Final

from waypost.clock import format_time
from waypost.resolvers.core import events
from waypost.resolvers.decisions.status import STATUS_SQL

TIMEOUT: Final = timedelta(hours=24)
# How many decisions one pass answers at most; the next pass takes the rest, so
# the writer lock is never held for long.
BATCH: Final = 500
TIMEOUT_RATIONALE: Final = (
    "No answer within 24 hours: the service applied the recommendation of this reversible decision."
)

# Decisions the sweep may ever answer, over a `decision_current` row `s`: the
# current cycle unanswered, reversible, and not a human-required question that
# an agent asked (such a cycle waits for a human, however long it takes).
MAY_TIME_OUT: Final = (
    "s.reversible = 1 AND s.disposition IS NULL"
    " AND NOT (s.required_actor = 'human' AND s.opened_by_kind = 'agent')"
)


def answer_timed_out(conn: sqlite3.Connection, now: datetime) -> int:
    """One sweep step: answer every due decision (up to BATCH); returns how many."""
    at = format_time(now)
    due = conn.execute(
        "SELECT s.decision_id, s.project_id, s.generation, s.recommendation, s.opened_by"
        f" FROM decision_current s WHERE {MAY_TIME_OUT} AND s.opened_at <= :cutoff"
        f" AND {STATUS_SQL} = 'pending' ORDER BY s.opened_at, s.decision_id LIMIT :n",
        {"cutoff": format_time(now - TIMEOUT), "now": at, "n": BATCH},
    ).fetchall()
    conn.executemany(
        "INSERT INTO decision_answers (decision_id, generation, disposition, answer, rationale,"
        " conditions_confirmed, actor_id, actor_session_id, relayed, timed_out, at)"
        " VALUES (?, ?, 'allow', ?, ?, 1, ?, NULL, 0, 1, ?)",
        [(d["decision_id"], d["generation"], d["recommendation"], TIMEOUT_RATIONALE,
          d["opened_by"], at) for d in due],
    )  # fmt: skip
    for d in due:
        events.append(
            conn,
            project_id=d["project_id"],
            type="decision.timed_out",
            subject_type="decision",
            subject_id=d["decision_id"],
            actor_id=d["opened_by"],
            actor_session_id=None,
            at=at,
            data={"generation": d["generation"], "disposition": "allow",
                  "answer": d["recommendation"]},
        )  # fmt: skip
    return len(due)
