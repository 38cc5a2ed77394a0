"""The decision gate: may work on a task proceed, as far as decisions go?

`ensure_decisions_resolved` (the guard both specs name) runs inside the
writer transaction of every ownership-dependent task operation
(tasks/operations.ensure_work_allowed), and `ensure_all_resolved` for an
activity and its subject together; `blocking_decisions` is the same
predicate in batch form, used for readiness in the task JSON and the
context packet; `store.BLOCKED_CTE` is the same predicate again as a set of
task ids, derived per statement; only the claim's safety net uses it now.
`named_blockers` gives `blocking_decisions`' answer with the stored state's
help, so that a refusal costs a key look-up per decision on the task, not a
status derived for each; the guard, `declined_blockers` (the context
packet's next actions) and the task JSON of the tasks the stored state holds
(tasks/readiness.py) read it.
Claims, ready lists and the digest read the stored gate state instead
(migration 0014: the part of the status only writes change, kept by
triggers; the expiry compared at read time; docs/tasks.md says why that is
exact), and the claim puts its pick to `blocking_decisions` (see
tasks/readiness.py).

A task is blocked by every decision whose *current* generation affects it and
whose status is anything but `allowed` (pending, denied, deferred, stale or
expired). The status comes from `decision_status`, the one function that
decides; earlier generations never block or unblock anything. The SQL (and
why it is shaped the way it is) lives in store.py.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from waypost.clock import format_time
from waypost.errors import DecisionRequired
from waypost.resolvers.decisions import store

__all__ = [
    "MAX_IDS",
    "blocking_decisions",
    "declined_blockers",
    "ensure_all_resolved",
    "ensure_decisions_resolved",
    "gate_params",
    "named_blockers",
]

log = logging.getLogger(__name__)

MAX_IDS = 20
# statuses no answer can lift: only a reopening (a new generation) can
UNANSWERABLE = frozenset({"stale", "expired"})
# answers that keep the work blocked: nothing is left to wait for, and only a
# reopening (someone reconsidering) can lift them
DECLINED = frozenset({"denied", "deferred"})


def gate_params(project_id: str, now: datetime) -> dict[str, str]:
    """The parameters `store.BLOCKED_CTE` binds (the status function is installed on every
    connection when it opens: see `waypost.runtime.CONNECTION_HOOKS`)."""
    return {"project": project_id, "now": format_time(now)}


def blocking_decisions(
    conn: sqlite3.Connection, project_id: str, task_ids: Sequence[str], now: datetime
) -> dict[str, list[str]]:
    """For each task id, the ids of decisions that block it (stable order).

    One statement for any number of tasks. The order is the decisions'
    `created_at`, then id. Each list holds at most MAX_IDS + 1 ids: enough to
    report MAX_IDS of them and whether more exist (`len(ids) > MAX_IDS`).
    """
    result: dict[str, list[str]] = {task_id: [] for task_id in task_ids}
    if not task_ids:
        return result
    params = gate_params(project_id, now)
    rows = store.blocking_pairs(conn, task_ids, params, MAX_IDS + 1)
    for r in rows:
        result[r["task_id"]].append(r["decision_id"])
    return result


def named_blockers(
    conn: sqlite3.Connection, project_id: str, task_ids: Sequence[str], now: datetime
) -> dict[str, list[str]]:
    """`blocking_decisions`' answer, the decisions named by the stored gate
    state (migration 0014) and each put to the history.

    Deriving a status from the history costs about ten times what reading the
    stored one does, and `blocking_decisions` derives one for every current
    decision on a task: with 20,000 decisions on one task, every refusal of a
    claim on it held the writer 67 ms per derivation (scaleaudit). Here the
    stored state names at most MAX_IDS + 1 decisions per task, in the same
    order, and only those are derived. The history stays the authority: a
    task for which the stored state names none is derived whole (the only way
    a task is found unblocked), and when the history calls a named decision
    allowed (a row written around the triggers) the stored state is dropped
    and everything derived, with an error logged. Where the two agree, as the
    triggers keep them and `admin verify` checks, the lists are the same.
    """
    result: dict[str, list[str]] = {task_id: [] for task_id in task_ids}
    if not task_ids:
        return result
    params = gate_params(project_id, now)
    for task_id, decision_id in store.held_pairs(conn, task_ids, params, MAX_IDS + 1):
        result[task_id].append(decision_id)
    named = list(dict.fromkeys(d for found in result.values() for d in found))
    if named:
        status_of = store.statuses(conn, named, params)
        allowed = [d for d in named if status_of.get(d, "allowed") == "allowed"]
        if allowed:
            log.error(
                "stored gate state names decisions %s that the history allows;"
                " deriving the gate from the history",
                allowed,
            )
            return blocking_decisions(conn, project_id, task_ids, now)
    unnamed = [task_id for task_id, found in result.items() if not found]
    if unnamed:
        result.update(blocking_decisions(conn, project_id, unnamed, now))
    return result


def _merged(blocking: dict[str, list[str]], task_ids: Sequence[str]) -> list[str]:
    """The decisions of `blocking`, the tasks' in task order, each once."""
    return list(dict.fromkeys(d for task_id in task_ids for d in blocking[task_id]))


def _unanswerable(
    conn: sqlite3.Connection,
    project_id: str,
    task_ids: Sequence[str],
    merged: list[str],
    now: datetime,
) -> tuple[list[str], list[str]]:
    """(declined, reopen): the decisions that hold any of `task_ids` answered
    deny or defer, and those stale or expired, in the refusal's order (past
    the MAX_IDS named, those named first), at most MAX_IDS of each. `merged`
    is the tasks' blockers as the gate found them, at most MAX_IDS + 1 per
    task: complete unless longer than MAX_IDS, and then the stored state
    names the rest (`store.stuck_pairs`). Either way the history says each
    one's status."""
    params = gate_params(project_id, now)
    candidates = merged
    if len(merged) > MAX_IDS:
        # those named first (the history judged them: a stored state that
        # drifted cannot hide one of them), then the rest the stored state names
        by_task: dict[str, list[str]] = {}
        for r in store.stuck_pairs(conn, task_ids, params, MAX_IDS):
            by_task.setdefault(r["task_id"], []).append(r["decision_id"])
        rest = (d for t in task_ids for d in by_task.get(t, []))
        candidates = list(dict.fromkeys([*merged[:MAX_IDS], *rest]))
    status_of = store.statuses(conn, candidates, params)
    declined = [d for d in candidates if status_of.get(d) in DECLINED][:MAX_IDS]
    reopen = [d for d in candidates if status_of.get(d) in UNANSWERABLE][:MAX_IDS]
    return declined, reopen


def declined_blockers(
    conn: sqlite3.Connection, project_id: str, task_ids: Sequence[str], now: datetime
) -> list[str]:
    """The decisions answered deny or defer that hold any of `task_ids`, in
    the refusal's order, at most MAX_IDS: the packet of a task says so
    (its items hold only the decisions still to be answered or reopened)."""
    merged = _merged(named_blockers(conn, project_id, task_ids, now), task_ids)
    return _unanswerable(conn, project_id, task_ids, merged, now)[0]


def ensure_decisions_resolved(
    conn: sqlite3.Connection, project_id: str, task_id: str, now: datetime, *, held: bool = True
) -> None:
    """Raise `decision_required` when a decision blocks work on `task_id`."""
    ensure_all_resolved(conn, project_id, [task_id], now, held=held)


def ensure_all_resolved(
    conn: sqlite3.Connection,
    project_id: str,
    task_ids: Sequence[str],
    now: datetime,
    *,
    held: bool = True,
) -> None:
    """Raise `decision_required` when a decision blocks any of `task_ids` (an
    activity and its subject); the ids are merged in task order, each once.

    `held=False` says the stored gate state of the first task (an activity's
    covers its subject) lets it through: the stored state then names nothing,
    so the history is asked at once. Either way only the history lets work
    through (`named_blockers`).

    Each per-task list is capped at MAX_IDS + 1, so the merged list is longer
    than MAX_IDS exactly when the full union is: `truncated` stays exact.
    """
    ask = named_blockers if held else blocking_decisions
    merged = _merged(ask(conn, project_id, task_ids, now), task_ids)
    if not merged:
        return
    shown = merged[:MAX_IDS]
    stream = f"/api/v1/projects/{project_id}/events/stream"
    details: dict[str, Any] = {
        "decision_ids": shown,
        "truncated": len(merged) > MAX_IDS,
        # where to wait instead of polling (docs/graphql.md, "Waiting")
        "wait_on": {"stream": stream, "subscription": "decisionChanged"},
    }
    # past the MAX_IDS shown too: one declined decision anywhere among them
    # means no answer the agent could wait for lifts the work
    declined, reopen = _unanswerable(conn, project_id, task_ids, merged, now)
    if not reopen and not declined:
        raise DecisionRequired(
            "a decision blocks this work: wait for its answer on the event stream"
            f" (GET {stream}) or the GraphQL subscription decisionChanged, then retry",
            details,
        )
    reopen_route = f"POST /api/v1/projects/{project_id}/decisions/{{id}}/reopen"
    if declined:
        # A denied or deferred decision is answered: a wait for its answer
        # returned at once and the retry was refused again, for ever
        # (agentflow). While one stands nothing else lifts the work, so
        # nothing is to be waited on or reopened for it (review31): the
        # other decisions are still named (`reopen` for whoever reconsiders).
        del details["wait_on"]
        stuck = f" ({len(reopen)} others are stale or expired: details.reopen)" if reopen else ""
        raise DecisionRequired(
            f"{len(declined)} of the decisions that block this work were answered deny or"
            " defer (details.declined), which keeps the work blocked until someone"
            f" reconsiders and reopens the decision ({reopen_route}) and it is answered"
            " allow: there is no answer to wait for, so leave this work (give a task you"
            f" hold back: POST /api/v1/projects/{project_id}/tasks/{{id}}/release; then"
            f" claim other work) unless whoever answered is to be asked again{stuck}",
            {
                **details,
                "reason": "declined",
                "declined": declined,
                **({"reopen": reopen} if reopen else {}),
            },
        )
    # A stale or expired decision cannot be answered: waiting for its answer
    # (what the refusal said) returned at once, and the retry was refused again.
    raise DecisionRequired(
        f"{len(reopen)} of the decisions that block this work cannot be answered as they"
        " stand (stale: what they judged changed; or expired): reopen each one"
        f" ({reopen_route}, details.reopen; an expired one with a new expires_at, or"
        " null for none) so that it is answered again, wait for the answers, then retry",
        {**details, "reason": "reopen_required", "reopen": reopen},
    )
