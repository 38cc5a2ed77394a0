"""The SQL of the decision lists, the per-task lists and the digest's queries.

Plain functions over one `sqlite3.Connection`, as in store.py. Statuses come
from `STATUS_SQL` over a `decision_current` row `s` (derived from the
history, as the gate derives them), except the lists' and counts' status
filters and the context packet's unresolved decisions, which read the stored
state (`STATUS_WHERE`, migrations 0023, 0025 and 0027; each status filter
walks the partial index of its status, `STATUS_INDEX`), and the digest's pending
list, which starts from the unanswered decisions (`_UNANSWERED`), and its
timing-out list, from those that can still time out (`TIMING_OUT_HOLDS`):
`admin verify` and the gate-state tests hold the stored state to the history.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Final

from waypost.pagination import keyset
from waypost.resolvers.decisions.status import (
    STATUS_FROM,
    STATUS_INDEX,
    STATUS_SQL,
    STATUS_WHERE,
)
from waypost.resolvers.decisions.store import CAN_TIME_OUT, MAY_TIME_OUT, TIMING_OUT_HOLDS
from waypost.resolvers.decisions.timeouts import TIMEOUT

# When the sweep will answer a `decision_current` row `s` (TIMEOUT after it opened).
_TIMEOUT_AT_SQL: Final = (
    f"strftime('%Y-%m-%dT%H:%M:%fZ', s.opened_at, '+{int(TIMEOUT.total_seconds())} seconds')"
)
# What `decision_holds.timeout_opened_at` holds (migration 0029), from the
# history: the opening time of a generation that can time out before it
# expires, else NULL. `admin verify` compares the two.
TIMEOUT_OPENED_AT_SQL: Final = (
    f"CASE WHEN {CAN_TIME_OUT} AND (s.expires_at IS NULL OR s.expires_at > {_TIMEOUT_AT_SQL})"
    " THEN s.opened_at END"
)


# The decisions `decision_current` holds: those with their current generation.
_CURRENT: Final = (
    " JOIN decision_generations g ON g.decision_id = d.id AND g.generation = d.generation"
)


def _of_status(status: str) -> str:
    """The decisions of one status, `h`, in list order: one range of the
    partial index that holds that status (`STATUS_INDEX`, migrations 0025
    and 0027), read from the stored state, which compares no pins. Computing
    each decision's status (its pins, a call into Python) cost 11-16 ms per
    count at 3,200 decisions; walking the project's decisions for a status
    few of them have, 77 ms a page at 50,000. INDEXED BY: the planner may
    otherwise take the index of fresh decisions, which holds every decision
    since the last rules edit. An unknown status matches nothing."""
    if status not in STATUS_INDEX:
        return "decision_holds h WHERE 0"
    return (
        f"decision_holds h INDEXED BY {STATUS_INDEX[status]}"
        f" WHERE h.project_id = :project AND {STATUS_WHERE[status]}"
    )


def unresolved_ids(
    conn: sqlite3.Connection,
    project_id: str,
    now_at: str,
    statuses: Sequence[str],
    task_ids: list[str] | None,
    count: int,
) -> list[str]:
    """Decisions of one of `statuses`, oldest first, affecting any of
    `task_ids` in their current generation (or all of the project's when it
    is None); each once.

    The statuses are read from the stored state (`STATUS_WHERE`), as the
    lists' filters are: computing each decision's (its pins, a call into
    Python) walked the whole project for every context packet, 117 ms at
    50,000 decisions. For the whole project, each status is one range of
    its partial index (`_of_status`; the statuses are disjoint), so the cost
    is what the project holds of those statuses: walking every decision of
    the project and testing its stored state still cost 1.6 ms at 3,500
    decisions and 42 ms at 50,000, for every packet, however few were
    unresolved. With tasks named, the walk starts from their decisions
    (`decision_affected_by_task`, current generations only), so its cost is
    what those tasks carry, not what the project does."""
    if task_ids is None:
        # each range its own oldest `count` (its index is in that order, so
        # the walk stops there), then the best of those: merging whole
        # ranges sorted every stale decision for each packet (55,561 after
        # one rules edit: 28 ms against 1.6 ms; scaleaudit)
        ranges = " UNION ALL ".join(
            f"SELECT * FROM (SELECT h.decision_id, h.created_at FROM {_of_status(s)}"
            " ORDER BY h.created_at, h.decision_id LIMIT :n)"
            for s in statuses
        )
        if not ranges:
            return []
        found = conn.execute(
            f"SELECT decision_id FROM ({ranges}) ORDER BY created_at, decision_id LIMIT :n",
            {"project": project_id, "now": now_at, "n": count},
        ).fetchall()
        return [r["decision_id"] for r in found]
    matches = " OR ".join(f"({STATUS_WHERE.get(s, '0')})" for s in statuses) or "0"
    # CROSS JOIN keeps the tasks' decisions the outer loop: the planner
    # otherwise walks the project's index and tests each decision
    source = (
        "(SELECT DISTINCT x.decision_id FROM json_each(:tasks) t"
        " JOIN decision_affected x ON x.task_id = t.value"
        " JOIN decision_holds c ON c.decision_id = x.decision_id"
        "  AND c.generation = x.generation) m"
        " CROSS JOIN decisions d ON d.id = m.decision_id"
    )
    rows = conn.execute(
        f"SELECT d.id FROM {source}{STATUS_FROM}"
        f" WHERE d.project_id = :project AND ({matches})"
        " ORDER BY d.created_at, d.id LIMIT :n",
        {"project": project_id, "tasks": json.dumps(list(task_ids)), "now": now_at, "n": count},
    ).fetchall()
    return [r["id"] for r in rows]


# The project's unanswered decisions, `h`, in list order (a pending
# decision is one of them): the digest's pending list.
_UNANSWERED = (
    "decision_holds h INDEXED BY decision_holds_unanswered"
    " WHERE h.project_id = :project AND h.answered = 0"
)


# The project's decisions whose expiry has passed, `h`, by expiry (migration
# 0033): one range, however many others have an expiry still to come.
_EXPIRED = (
    "decision_holds h INDEXED BY decision_holds_expiry"
    f" WHERE h.project_id = :project AND {STATUS_WHERE['expired']}"
)
# At most this many expired decisions are sorted for a page (0.34 ms at
# 1,000); more, and the page walks the decisions with an expiry in list order
# (0027's index) as before, which finds a page at once where the oldest
# expire first and steps over the live ones where they do not.
FEW_EXPIRED = 1000


def _few_expired(conn: sqlite3.Connection, params: dict[str, object]) -> bool:
    found = conn.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM {_EXPIRED} LIMIT {FEW_EXPIRED + 1})", params
    ).fetchone()[0]
    return int(found) <= FEW_EXPIRED


def list_page_rows(
    conn: sqlite3.Connection,
    project_id: str,
    now_at: str,
    status: str | None,
    after: tuple[str, str],
    count: int,
    backward: bool = False,
) -> list[sqlite3.Row]:
    """Up to `count` of the project's decisions (decision_id, created_at) past
    (created_at, id) `after` in creation order, optionally of one status;
    backward (GraphQL `last`): those before it, in reverse order."""
    cmp, order = keyset(False, backward)
    params = {"project": project_id, "at": after[0], "id": after[1], "now": now_at, "n": count}
    if status is not None:
        few = status == "expired" and _few_expired(conn, params)
        return conn.execute(
            f"SELECT h.decision_id, h.created_at FROM {_EXPIRED if few else _of_status(status)}"
            f" AND (h.created_at, h.decision_id) {cmp} (:at, :id)"
            f" ORDER BY h.created_at {order}, h.decision_id {order} LIMIT :n",
            params,
        ).fetchall()
    return conn.execute(
        f"SELECT d.id AS decision_id, d.created_at FROM decisions d{_CURRENT}"
        f" WHERE d.project_id = :project AND (d.created_at, d.id) {cmp} (:at, :id)"
        f" ORDER BY d.created_at {order}, d.id {order} LIMIT :n",
        params,
    ).fetchall()


def count_of_status(
    conn: sqlite3.Connection, project_id: str, now_at: str, status: str | None
) -> int:
    """How many of the project's decisions have `status` (all of them for None)."""
    if status == "expired":
        sql = f"SELECT count(*) FROM {_EXPIRED}"
    elif status is not None:
        sql = f"SELECT count(*) FROM {_of_status(status)}"
    else:
        # every decision has its current generation (`admin verify`'s
        # `history` holds them to it): the project's range of its index
        # alone, where a join with the generations cost 24 ms at 50,000
        sql = "SELECT count(*) FROM decisions d WHERE d.project_id = :project"
    row = conn.execute(sql, {"project": project_id, "now": now_at}).fetchone()
    return int(row[0])


def by_task_rows(
    conn: sqlite3.Connection,
    task_ids: Sequence[str],
    after: tuple[str, str],
    count: int,
    backward: bool,
) -> list[sqlite3.Row]:
    """For each task, up to `count` decisions that ever affected it (any
    generation) as (task_id, id, created_at), newest first past `after`
    (backward: oldest first).

    Each task's page is a LIMIT on its range of `task_decisions` (migration
    0031, in list order): looking up every pin of the task and numbering
    its decisions cost 41 ms at 20,000 decisions on one task."""
    cmp, order = keyset(True, backward)
    return conn.execute(
        "SELECT t.value AS task_id, x.decision_id AS id, x.created_at"
        " FROM json_each(:tasks) t JOIN task_decisions x ON x.task_id = t.value"
        " AND (x.created_at, x.decision_id) IN (SELECT created_at, decision_id"
        "  FROM task_decisions WHERE task_id = t.value"
        f"  AND (created_at, decision_id) {cmp} (:at, :last)"
        f"  ORDER BY created_at {order}, decision_id {order} LIMIT :n)"
        f" ORDER BY t.value, x.created_at {order}, x.decision_id {order}",
        {"tasks": json.dumps(sorted(set(task_ids))), "at": after[0], "last": after[1],
         "n": count},
    ).fetchall()  # fmt: skip


def counts_by_task(conn: sqlite3.Connection, task_ids: Sequence[str]) -> dict[str, int]:
    """How many decisions ever affected each task that any affected."""
    rows = conn.execute(
        "SELECT task_id, count(*) FROM task_decisions"
        " WHERE task_id IN (SELECT value FROM json_each(?)) GROUP BY task_id",
        (json.dumps(sorted(set(task_ids))),),
    ).fetchall()
    return {r[0]: int(r[1]) for r in rows}


def unanswered_ids(conn: sqlite3.Connection, project_id: str, count: int) -> list[str]:
    """Decisions whose current generation has no answer, oldest first."""
    rows = conn.execute(
        f"SELECT h.decision_id FROM {_UNANSWERED} ORDER BY h.created_at, h.decision_id LIMIT :n",
        {"project": project_id, "n": count},
    ).fetchall()
    return [r["decision_id"] for r in rows]


def timed_out_since_ids(
    conn: sqlite3.Connection, project_id: str, since: str, count: int
) -> list[str]:
    """Decisions the sweep answered at or after `since`, latest first.

    From the sweep's `decision.timed_out` events (one per answer it records,
    in the same transaction, at the answer's time; migration 0030 indexes
    them per project by time): reading the project's answers for the
    timed-out ones cost 22 ms at 50,000 decisions."""
    rows = conn.execute(
        "SELECT e.subject_id AS id, MAX(e.at) AS last FROM events e"
        " INDEXED BY events_timed_out"
        " WHERE e.project_id = :project AND e.type = 'decision.timed_out' AND e.at >= :since"
        " GROUP BY e.subject_id ORDER BY last DESC, e.subject_id LIMIT :n",
        {"project": project_id, "since": since, "n": count},
    ).fetchall()
    return [r["id"] for r in rows]


def timing_out_ids(
    conn: sqlite3.Connection, project_id: str, now_at: str, cutoff: str, count: int
) -> list[str]:
    """Pending decisions the sweep will answer (opened at or before `cutoff`) before
    they expire, in the order it will answer them."""
    # from the project's decisions that can still time out alone (migration 0029)
    rows = conn.execute(
        "SELECT s.decision_id FROM decision_holds h"
        " INDEXED BY decision_holds_timing_out_by_project"
        " CROSS JOIN decision_current s ON s.decision_id = h.decision_id"
        f" WHERE h.project_id = :project AND {TIMING_OUT_HOLDS}"
        " AND h.timeout_opened_at <= :cutoff"
        f" AND {MAY_TIME_OUT} AND {STATUS_SQL} = 'pending'"
        f" AND (s.expires_at IS NULL OR s.expires_at > {_TIMEOUT_AT_SQL})"
        " ORDER BY h.timeout_opened_at, h.decision_id LIMIT :n",
        {"project": project_id, "now": now_at, "cutoff": cutoff, "n": count},
    ).fetchall()
    return [r["decision_id"] for r in rows]
