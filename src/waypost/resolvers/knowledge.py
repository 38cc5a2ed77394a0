"""Knowledge records. The knowledge issue builds this module out; the task
workflow already calls `insert_submission_lessons` from submit."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from waypost.resolvers.runtime import Actor

MAX_SUBMISSION_LESSONS = 50


def insert_submission_lessons(
    conn: sqlite3.Connection,
    actor: Actor,
    now: datetime,
    project_id: str,
    task_id: str,
    submission_id: str,
    lessons: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Validate the whole batch, then insert each lesson and its revision 1.

    Runs inside the submission's writer transaction; an error rolls back the
    submission and every lesson together. Returns flat knowledge objects.
    """
    return []
