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
from waypost.resolvers.decisions import store

TIMEOUT: Final = timedelta(hours=24)
# How many decisions one unit of work answers at most; the sweep runs it again,
# each time its own transaction, until fewer are due, so the writer lock is
# never held for long and a backlog is still answered within one pass.
BATCH: Final = 500
TIMEOUT_RATIONALE: Final = (
    f"No answer within {TIMEOUT // timedelta(hours=1)} hours: the service applied the"
    " recommendation of this reversible decision."
)


def answer_timed_out(conn: sqlite3.Connection, now: datetime) -> int:
    """One unit of the sweep's step: answer due decisions (up to BATCH); returns how many."""
    at = format_time(now)
    # Only pending ones (never stale or expired) that may time out (store.MAY_TIME_OUT).
    due = store.due_for_timeout(conn, format_time(now - TIMEOUT), at, BATCH)
    store.insert_timeout_answers(conn, due, TIMEOUT_RATIONALE, at)
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
