"""Decision rows: generations and their pins, answers, the gate's blocked set
and the sweep's queries. The lists and the digest read through
lists_store.py, the decision JSON's batch loaders through views_store.py, and
the status function itself lives in status.py.

Plain functions over one `sqlite3.Connection`, called inside a unit of work;
the rules (validation, authority, the order of checks, errors) stay in the
operation modules. Ids travel as one JSON array through `json_each`, so a
batch costs one statement whatever its size.

Cost note (the gate): the `decision_current` view's `stale` column is a
correlated subquery over every task a decision affects. Joined straight to
`decision_affected`, SQLite evaluates it once per (task, decision) row, so a
decision over 100 tasks pays 100 times for the same answer. The gate's
statements therefore decide each decision's status once, in a MATERIALIZED
CTE, and only then fan out to the tasks it affects.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any, Final

from waypost.resolvers.decisions.status import STATUS_SQL, STATUS_WHERE

# ---------------------------------------------------------------- the gate

# The ids of the tasks the gate holds back in one project, derived from the
# history rather than read from the stored state of migration 0014 (the
# claim's fallback when the two disagree: tasks/ready_store.next_ready_row_derived),
# as the CTE `blocked`
# (with its helper `holding`), for `WITH {BLOCKED_CTE} SELECT ...`. It binds
# `:project` and `:now` (gate.gate_params). MATERIALIZED makes SQLite compute
# the set once per statement (and the statuses once per decision) instead of
# re-deriving it per task.
BLOCKED_CTE: Final = (
    "holding(decision_id, generation) AS MATERIALIZED ("
    " SELECT s.decision_id, s.generation FROM decision_current s"
    # only an `allow` answer can make a decision `allowed`: any other one holds
    # work whatever its pins say, so its `stale` (a join over every affected
    # task) is never computed (SQLite's OR does not evaluate its right side)
    " WHERE s.project_id = :project AND (s.disposition IS NOT 'allow'"
    f" OR {STATUS_SQL} <> 'allowed')),"
    " blocked(id) AS MATERIALIZED ("
    " SELECT x.task_id FROM holding CROSS JOIN decision_affected x"
    "  ON x.decision_id = holding.decision_id AND x.generation = holding.generation)"
)


def blocking_pairs(
    conn: sqlite3.Connection, task_ids: Sequence[str], params: Mapping[str, str], per_task: int
) -> list[sqlite3.Row]:
    """(task_id, decision_id) of the decisions blocking each task, at most
    `per_task` per task, in each task's `created_at`, id order of decisions."""
    return conn.execute(
        # `pairs`: every generation affecting an asked task, found from the tasks
        # through the by-task index (CROSS JOIN keeps that order), never a scan
        # of the project's decisions. `holding`: the status of each distinct
        # generation among them, once; only current generations survive the join
        # with `decision_current`.
        "WITH pairs(task_id, decision_id, generation) AS MATERIALIZED ("
        "  SELECT x.task_id, x.decision_id, x.generation FROM json_each(:tasks) k"
        "  CROSS JOIN decision_affected x ON x.task_id = k.value),"
        " holding(decision_id) AS MATERIALIZED ("
        "  SELECT s.decision_id FROM (SELECT DISTINCT decision_id, generation FROM pairs) asked"
        "  CROSS JOIN decision_current s ON s.decision_id = asked.decision_id"
        "   AND s.generation = asked.generation"
        f"  WHERE s.project_id = :project AND {STATUS_SQL} <> 'allowed')"
        # Back to the tasks: `d.generation` keeps current generations only, and
        # `IN holding` is a lookup in an index SQLite builds once (a join of the
        # two CTEs would compare every pair with every decision).
        " SELECT task_id, decision_id FROM ("
        "  SELECT pairs.task_id, d.id AS decision_id, ROW_NUMBER() OVER"
        "   (PARTITION BY pairs.task_id ORDER BY d.created_at, d.id) AS n"
        "  FROM pairs CROSS JOIN decisions d"
        "   ON d.id = pairs.decision_id AND d.generation = pairs.generation"
        "  WHERE pairs.decision_id IN holding)"
        f" WHERE n <= {int(per_task)} ORDER BY task_id, n",
        {"tasks": json.dumps(list(dict.fromkeys(task_ids))), **params},
    ).fetchall()


def held_pairs(
    conn: sqlite3.Connection, task_ids: Sequence[str], params: Mapping[str, str], per_task: int
) -> list[tuple[str, str]]:
    """(task_id, decision_id) of the decisions the stored gate state (migration
    0014's `decision_holds`) says block each task, at most `per_task` per task,
    in the order `blocking_pairs` gives. Not the authority: gate.named_blockers
    puts each of them to the history."""
    rows = conn.execute(
        # each task's decisions in list order (`task_decisions`, every decision
        # that ever pinned it), a key look-up each for the stored state and for
        # the pin of the current generation: about 0.35 us a decision, where
        # `blocking_pairs` pays about 3.3 us to derive a status from the history
        # (20,000 decisions on one task: 7 against 67 ms). Each task's walk
        # stops at `per_task` (LIMIT in a subquery per task): numbered over
        # the whole page, 100 tasks under 900 decisions each walked 90,000
        # (gatescaleaudit)
        "SELECT j.value AS task_id, (SELECT json_group_array(json_array(created_at, decision_id))"
        "  FROM (SELECT k.created_at, k.decision_id FROM task_decisions k"
        "   CROSS JOIN decision_holds h ON h.decision_id = k.decision_id"
        "   WHERE k.task_id = j.value AND h.project_id = :project"
        "    AND (h.held = 1 OR h.expires_at <= :now)"
        "    AND EXISTS (SELECT 1 FROM decision_affected x WHERE x.decision_id = h.decision_id"
        "     AND x.generation = h.generation AND x.task_id = k.task_id)"
        f"   ORDER BY k.created_at, k.decision_id LIMIT {int(per_task)})) AS held"
        " FROM json_each(:tasks) j",
        {"tasks": json.dumps(list(dict.fromkeys(task_ids))), **params},
    ).fetchall()
    # an aggregate's order is SQLite's to choose: put back in list order
    return [
        (row["task_id"], decision_id)
        for row in rows
        for _, decision_id in sorted(json.loads(row["held"]))
    ]


# The stored state's two kinds of blocker no answer lifts as they stand: one
# answered deny or defer (only a reopening and an allow lift it), and one
# stale or expired (it must be reopened before it can be answered).
_STUCK_KINDS: Final = (
    ("declined", f"({STATUS_WHERE['denied']}) OR ({STATUS_WHERE['deferred']})"),
    ("reopen", f"({STATUS_WHERE['stale']}) OR ({STATUS_WHERE['expired']})"),
)


def stuck_pairs(
    conn: sqlite3.Connection, task_ids: Sequence[str], params: Mapping[str, str], per_kind: int
) -> list[sqlite3.Row]:
    """(task_id, decision_id, kind) of the decisions the stored state says
    block each task and that no answer lifts as they stand, `kind` "declined"
    (denied, deferred) or "reopen" (stale, expired): at most `per_kind` of
    each kind per task, in the order `held_pairs` gives. `held_pairs` names
    the first 21 blockers only, and one of these past them went unsaid: the
    refusal said to wait for answers that could not lift the work
    (specaudit-svc). Not the authority: the gate puts each to the history.

    One walk of the task's decisions in list order (the key of
    `task_decisions`) per task and kind, stopping at `per_kind` found: a
    window over every match sorted them all first (20,000 denied decisions
    on one task: 52 ms, 6 ms walked; review33). A task with none of either
    kind is walked whole twice (13 ms at 20,000 pending, where `held_pairs`
    takes 34). A task is asked for at most with its subject: four walks."""
    tasks = list(dict.fromkeys(task_ids))
    walks = [
        f"SELECT * FROM (SELECT k.task_id, k.decision_id, '{kind}' AS kind"
        " FROM task_decisions k CROSS JOIN decision_holds h ON h.decision_id = k.decision_id"
        f" WHERE k.task_id = :task{i} AND h.project_id = :project AND ({where})"
        " AND EXISTS (SELECT 1 FROM decision_affected x WHERE x.decision_id = h.decision_id"
        "  AND x.generation = h.generation AND x.task_id = k.task_id)"
        f" ORDER BY k.created_at, k.decision_id LIMIT {int(per_kind)})"
        for i in range(len(tasks))
        for kind, where in _STUCK_KINDS
    ]
    if not walks:
        return []
    named = {f"task{i}": task_id for i, task_id in enumerate(tasks)}
    return conn.execute(" UNION ALL ".join(walks), {**named, **params}).fetchall()


def statuses(
    conn: sqlite3.Connection, decision_ids: Sequence[str], params: Mapping[str, str]
) -> dict[str, str]:
    """The status of each of the project's `decision_ids` (the gate's refusal
    says which need reopening rather than an answer)."""
    rows = conn.execute(
        # from the ids (CROSS JOIN keeps that order): filtered by project
        # first, SQLite read every decision of the project (45 ms a refusal
        # at 200,000 decisions, inside the writer)
        f"SELECT s.decision_id, {STATUS_SQL} AS status FROM json_each(:ids) k"
        " CROSS JOIN decision_current s ON s.decision_id = k.value"
        " WHERE s.project_id = :project",
        {"ids": json.dumps(list(decision_ids)), **params},
    ).fetchall()
    return {r["decision_id"]: r["status"] for r in rows}


# ---------------------------------------------------------------- state and pins


def current_state_row(
    conn: sqlite3.Connection, project_id: str, decision_id: str
) -> sqlite3.Row | None:
    """The decision's `decision_current` row plus its options and question."""
    row: sqlite3.Row | None = conn.execute(
        "SELECT s.*, d.options, d.question FROM decision_current s"
        " JOIN decisions d ON d.id = s.decision_id"
        " WHERE s.decision_id = ? AND s.project_id = ?",
        (decision_id, project_id),
    ).fetchone()
    return row


def task_revisions(
    conn: sqlite3.Connection, project_id: str, task_ids: Sequence[str]
) -> dict[str, int]:
    """The current revision of each of `task_ids` that names a task of the project."""
    rows = conn.execute(
        # `+t.project_id`: look each task up by its key and then check its
        # project; a plain `t.project_id = ?` made SQLite walk every task of
        # the project (6.5 ms of the writer's time at 10,000 tasks)
        "SELECT t.id, t.revision FROM json_each(?) k JOIN tasks t ON t.id = k.value"
        " WHERE +t.project_id = ?",
        (json.dumps(list(task_ids)), project_id),
    ).fetchall()
    return {r["id"]: r["revision"] for r in rows}


def publication_holders_around(conn: sqlite3.Connection, task_ids: Sequence[str]) -> list[str]:
    """Ids of tasks holding publication authority among `task_ids`, their subjects
    and their activities, in id order."""
    rows = conn.execute(
        "SELECT t.id FROM tasks t WHERE t.publication_holder_id IS NOT NULL AND ("
        " t.id IN (SELECT value FROM json_each(:ids))"
        " OR t.id IN (SELECT a.subject_task_id FROM tasks a"
        "             WHERE a.id IN (SELECT value FROM json_each(:ids)))"
        " OR t.subject_task_id IN (SELECT value FROM json_each(:ids)))"
        " ORDER BY t.id",
        {"ids": json.dumps(list(task_ids))},
    ).fetchall()
    return [r["id"] for r in rows]


def generation_row(conn: sqlite3.Connection, decision_id: str, generation: int) -> sqlite3.Row:
    row: sqlite3.Row = conn.execute(
        "SELECT * FROM decision_generations WHERE decision_id = ? AND generation = ?",
        (decision_id, generation),
    ).fetchone()
    return row


def affected_task_ids(conn: sqlite3.Connection, decision_id: str, generation: int) -> list[str]:
    """The tasks a generation affects, in the order it listed them."""
    return [
        r["task_id"]
        for r in conn.execute(
            "SELECT task_id FROM decision_affected WHERE decision_id = ? AND generation = ?"
            " ORDER BY position",
            (decision_id, generation),
        )
    ]


def relay_grant_row(conn: sqlite3.Connection, project_id: str) -> sqlite3.Row | None:
    """(revision, actor_id) of the most recent policy revision that turned relaying on."""
    row: sqlite3.Row | None = conn.execute(
        "SELECT r.revision, r.actor_id FROM policy_revisions r"
        " LEFT JOIN policy_revisions prev ON prev.project_id = r.project_id"
        "  AND prev.revision = r.revision - 1"
        " WHERE r.project_id = ? AND r.allow_relayed_human_answers = 1"
        "  AND (prev.revision IS NULL OR prev.allow_relayed_human_answers = 0)"
        " ORDER BY r.revision DESC LIMIT 1",
        (project_id,),
    ).fetchone()
    return row


# ---------------------------------------------------------------- writes


def insert_decision(conn: sqlite3.Connection, values: Mapping[str, Any]) -> None:
    """The stable part of a decision at generation 1; `values` names id,
    project_id, question, options (a list), rationale, required_actor,
    recommendation, reversible, at, actor_id and actor_kind."""
    v = values
    conn.execute(
        "INSERT INTO decisions (id, project_id, question, options, rationale, required_actor,"
        " recommendation, reversible, generation, created_at, created_by, created_by_kind)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)",
        (v["id"], v["project_id"], v["question"], json.dumps(v["options"], ensure_ascii=False),
         v["rationale"], v["required_actor"], v["recommendation"], int(v["reversible"]),
         v["at"], v["actor_id"], v["actor_kind"]),
    )  # fmt: skip


def advance_generation(conn: sqlite3.Connection, decision_id: str) -> None:
    conn.execute("UPDATE decisions SET generation = generation + 1 WHERE id = ?", (decision_id,))


def insert_generation(
    conn: sqlite3.Connection,
    decision_id: str,
    generation: int,
    pins: list[tuple[str, int]],
    pinned: Mapping[str, Any],
) -> None:
    """One immutable generation and its affected-task pins (task id, revision).

    `pinned` names policy_revision, environment, conditions (a list),
    expires_at, reopen_rationale, actor_id, actor_kind, actor_session_id, at.
    """
    conn.execute(
        "INSERT INTO decision_generations (decision_id, generation, policy_revision,"
        " environment, conditions, expires_at, reopen_rationale, actor_id, actor_kind,"
        " actor_session_id, at) VALUES (:decision_id, :generation, :policy_revision,"
        " :environment, :conditions, :expires_at, :reopen_rationale, :actor_id, :actor_kind,"
        " :actor_session_id, :at)",
        {
            **pinned,
            "decision_id": decision_id,
            "generation": generation,
            "conditions": json.dumps(pinned["conditions"], ensure_ascii=False),
        },
    )
    conn.executemany(
        "INSERT INTO decision_affected (decision_id, generation, position, task_id,"
        " task_revision) VALUES (?, ?, ?, ?, ?)",
        [
            (decision_id, generation, i, task_id, revision)
            for i, (task_id, revision) in enumerate(pins)
        ],
    )


def insert_answer(conn: sqlite3.Connection, values: Mapping[str, Any]) -> None:
    """A direct or relayed answer; `values` names decision_id, generation,
    disposition, answer, rationale, conditions_confirmed, actor_id,
    actor_session_id, relayed, relay_prompt and relay_response (None unless
    relayed), authorized_by, relay_policy_revision and at."""
    v = values
    conn.execute(
        "INSERT INTO decision_answers (decision_id, generation, disposition, answer, rationale,"
        " conditions_confirmed, actor_id, actor_session_id, relayed, relay_prompt,"
        " relay_response, authorized_by, relay_policy_revision, timed_out, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
        (v["decision_id"], v["generation"], v["disposition"], v["answer"], v["rationale"],
         int(v["conditions_confirmed"]), v["actor_id"], v["actor_session_id"],
         int(v["relayed"]), v["relay_prompt"], v["relay_response"],
         v["authorized_by"], v["relay_policy_revision"], v["at"]),
    )  # fmt: skip


# ---------------------------------------------------------------- timeouts

# Decisions the sweep may ever answer, over a `decision_current` row `s`: the
# current cycle unanswered, reversible, and not a human-required question that
# an agent asked (such a cycle waits for a human, however long it takes).
CAN_TIME_OUT: Final = (
    "s.reversible = 1 AND NOT (s.required_actor = 'human' AND s.opened_by_kind = 'agent')"
)
MAY_TIME_OUT: Final = f"{CAN_TIME_OUT} AND s.disposition IS NULL"
# The terms of migration 0029's partial indexes over `decision_holds h`: the
# unanswered, fresh decisions whose current generation can time out, by the
# time it opened (`h.timeout_opened_at`, which is `s.opened_at` for them).
TIMING_OUT_HOLDS: Final = "h.answered = 0 AND h.stale = 0 AND h.timeout_opened_at IS NOT NULL"


def due_for_timeout(
    conn: sqlite3.Connection, cutoff: str, now_at: str, count: int
) -> list[sqlite3.Row]:
    """Up to `count` pending decisions that may time out and opened at or before `cutoff`.

    From the unanswered, fresh decisions that can time out alone (migration
    0029's partial index, in the order they are answered): walking every
    reversible decision ever made cost each pass 32 ms at 50,000 decisions
    with nothing due, and every unanswered one (stale and expired ones stay
    unanswered) 9.5 ms. `MAY_TIME_OUT` and the status, from the history,
    still decide."""
    return conn.execute(
        "SELECT s.decision_id, s.project_id, s.generation, s.recommendation, s.opened_by"
        " FROM decision_holds h INDEXED BY decision_holds_timing_out"
        " CROSS JOIN decision_current s ON s.decision_id = h.decision_id"
        f" WHERE {TIMING_OUT_HOLDS} AND h.timeout_opened_at <= :cutoff"
        f" AND {MAY_TIME_OUT} AND {STATUS_SQL} = 'pending'"
        " ORDER BY h.timeout_opened_at, h.decision_id LIMIT :n",
        {"cutoff": cutoff, "now": now_at, "n": count},
    ).fetchall()


def insert_timeout_answer(
    conn: sqlite3.Connection, due: sqlite3.Row, rationale: str, at: str
) -> None:
    """Allow a due decision with its recommendation, as the principal that asked it."""
    conn.execute(
        "INSERT INTO decision_answers (decision_id, generation, disposition, answer, rationale,"
        " conditions_confirmed, actor_id, actor_session_id, relayed, timed_out, at)"
        " VALUES (?, ?, 'allow', ?, ?, 1, ?, NULL, 0, 1, ?)",
        (due["decision_id"], due["generation"], due["recommendation"], rationale,
         due["opened_by"], at),
    )  # fmt: skip
