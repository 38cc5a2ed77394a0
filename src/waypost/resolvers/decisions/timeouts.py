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
import time
from datetime import datetime, timedelta
from typing import Final

from waypost.clock import format_time
from waypost.resolvers.core import events
from waypost.resolvers.decisions import store

TIMEOUT: Final = timedelta(hours=24)
# How many decisions one unit of work answers at most, and for how long it
# goes on answering (it answers at least one): the sweep runs it again, each
# time its own transaction, until a unit finds none due, so the writer lock is
# never held for long and a backlog is still answered within one pass. The
# time matters where an answer is dear: its trigger re-derives the gate of
# each task the decision pins from all of that task's pins (6 ms an answer on
# a task pinned by 20,000 decisions, where 500 held the writer 3 s).
BATCH: Final = 500
UNIT_SECONDS: Final = 0.05
TIMEOUT_RATIONALE: Final = (
    f"No answer within {TIMEOUT // timedelta(hours=1)} hours: the service applied the"
    " recommendation of this reversible decision."
)


def answer_timed_out(conn: sqlite3.Connection, now: datetime) -> int:
    """One unit of the sweep's step: answer due decisions (up to BATCH, for
    about UNIT_SECONDS); returns how many."""
    at = format_time(now)
    # Only pending ones (never stale or expired) that may time out (store.MAY_TIME_OUT).
    due = store.due_for_timeout(conn, format_time(now - TIMEOUT), at, BATCH)
    deadline = time.monotonic() + UNIT_SECONDS
    for answered, d in enumerate(due, start=1):
        store.insert_timeout_answer(conn, d, TIMEOUT_RATIONALE, at)
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
                  "answer": d["recommendation"], "relayed": False,
                  "task_ids": store.affected_task_ids(conn, d["decision_id"], d["generation"])},
        )  # fmt: skip
        if time.monotonic() >= deadline:
            return answered
    return len(due)
