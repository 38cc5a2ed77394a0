"""The batch loaders behind the decision JSON (views.py): decisions,
generations, their answers and the tasks they affect, by key.

Keys travel as one JSON array through `json_each`, so a batch costs one
statement whatever its size.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any, Final


def _ids(values: Iterable[Any]) -> str:
    return json.dumps(list(values), separators=(",", ":"))


GenKey = tuple[str, int]  # (decision id, generation)


def decision_rows(conn: sqlite3.Connection, ids: Sequence[str]) -> list[sqlite3.Row]:
    """Decisions by id with their current generation's disposition, expiry and
    `stale` flag (the inputs of their status)."""
    return conn.execute(
        "SELECT d.*, s.disposition, s.expires_at, s.stale FROM json_each(?) k"
        " JOIN decisions d ON d.id = k.value"
        " JOIN decision_current s ON s.decision_id = d.id",
        (_ids(ids),),
    ).fetchall()


def generation_rows(conn: sqlite3.Connection, keys: Sequence[GenKey]) -> list[sqlite3.Row]:
    """Generations by key, each with its answer's columns prefixed `a_` (NULL when none)."""
    return conn.execute(
        "SELECT g.*, a.disposition AS a_disposition, a.answer AS a_answer,"
        " a.rationale AS a_rationale, a.conditions_confirmed AS a_conditions_confirmed,"
        " a.actor_id AS a_actor_id, a.actor_session_id AS a_actor_session_id,"
        " a.relayed AS a_relayed, a.relay_prompt AS a_relay_prompt,"
        " a.relay_response AS a_relay_response, a.authorized_by AS a_authorized_by,"
        " a.relay_policy_revision AS a_relay_policy_revision, a.timed_out AS a_timed_out,"
        " a.at AS a_at"
        " FROM json_each(?) k"
        " JOIN decision_generations g ON g.decision_id = json_extract(k.value, '$[0]')"
        "  AND g.generation = json_extract(k.value, '$[1]')"
        " LEFT JOIN decision_answers a ON a.decision_id = g.decision_id"
        "  AND a.generation = g.generation",
        (_ids([list(k) for k in keys]),),
    ).fetchall()


_GENERATION_COLUMNS: Final = frozenset({
    "decision_id", "generation", "policy_revision", "environment", "conditions", "expires_at",
    "reopen_rationale", "actor_id", "actor_session_id", "at",
})  # fmt: skip
_ANSWER_COLUMNS: Final = frozenset({
    "disposition", "answer", "rationale", "conditions_confirmed", "actor_id", "actor_session_id",
    "relayed", "relay_prompt", "relay_response", "authorized_by", "relay_policy_revision",
    "timed_out", "at",
})  # fmt: skip


def generation_columns(
    conn: sqlite3.Connection,
    keys: Sequence[GenKey],
    columns: Sequence[str],
    answer_columns: Sequence[str],
) -> list[tuple[Any, ...]]:
    """Generations by key as plain tuples: `columns` of the generation, then
    `answer_columns` of its answer (NULL when none; no join when none are
    asked). `generation_rows` with only the columns a reader shows: each
    column read costs about as much as the look-up of the row."""
    if set(columns) - _GENERATION_COLUMNS or set(answer_columns) - _ANSWER_COLUMNS:
        raise ValueError(f"not a generation column: {columns} {answer_columns}")
    selected = ", ".join([*(f"g.{c}" for c in columns), *(f"a.{c}" for c in answer_columns)])
    join = (
        " LEFT JOIN decision_answers a ON a.decision_id = g.decision_id"
        " AND a.generation = g.generation"
        if answer_columns
        else ""
    )
    cursor = conn.cursor()
    cursor.row_factory = None
    rows: list[tuple[Any, ...]] = cursor.execute(
        f"SELECT {selected} FROM json_each(?) k"
        " JOIN decision_generations g ON g.decision_id = json_extract(k.value, '$[0]')"
        f"  AND g.generation = json_extract(k.value, '$[1]'){join}",
        (_ids([list(k) for k in keys]),),
    ).fetchall()
    return rows


def affected_rows(conn: sqlite3.Connection, keys: Sequence[GenKey]) -> list[sqlite3.Row]:
    """The pins of each generation, in listed order."""
    return conn.execute(
        "SELECT x.decision_id, x.generation, x.task_id, x.task_revision FROM json_each(?) k"
        " JOIN decision_affected x ON x.decision_id = json_extract(k.value, '$[0]')"
        "  AND x.generation = json_extract(k.value, '$[1]')"
        " ORDER BY x.decision_id, x.generation, x.position",
        (_ids([list(k) for k in keys]),),
    ).fetchall()


def generation_pages(
    conn: sqlite3.Connection, specs: Sequence[tuple[str, int, int]]
) -> list[sqlite3.Row]:
    """For each (decision id, before, limit) spec, numbered `k` by its position,
    up to limit + 1 generations below `before`, newest first."""
    return conn.execute(
        "SELECT k, decision_id, generation FROM ("
        " SELECT k.key AS k, g.decision_id, g.generation, json_extract(k.value, '$[2]') AS lim,"
        "  ROW_NUMBER() OVER (PARTITION BY k.key ORDER BY g.generation DESC) AS n"
        " FROM json_each(?) k"
        " JOIN decision_generations g ON g.decision_id = json_extract(k.value, '$[0]')"
        "  AND g.generation < json_extract(k.value, '$[1]')"
        ") WHERE n <= lim + 1 ORDER BY k, generation DESC",
        (_ids([list(s) for s in specs]),),
    ).fetchall()
