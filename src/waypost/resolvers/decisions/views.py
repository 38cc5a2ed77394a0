"""Reading decisions: the JSON shapes of section 7 and batch loaders behind them.

Every loader here runs a fixed number of statements whatever the number of
decisions or generations asked for (ids travel as one JSON array through
`json_each`), so a list page, the digest or a GraphQL dashboard of fifty
decisions with all their generations costs the same few statements.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from waypost.errors import NotFound
from waypost.pagination import Page, check_limit, decode_cursor, encode_cursor
from waypost.resolvers.decisions import store
from waypost.resolvers.decisions.status import decision_status, work_allowed
from waypost.resolvers.decisions.store import GenKey


def answer_json(row: sqlite3.Row, prefix: str = "") -> dict[str, Any]:
    """An answer from its columns (`prefix` names them when joined to a generation)."""

    def col(name: str) -> Any:
        return row[prefix + name]

    relay = None
    if col("relayed"):
        relay = {"prompt": col("relay_prompt"), "response": col("relay_response")}
    return {
        "disposition": col("disposition"),
        "answer": col("answer"),
        "rationale": col("rationale"),
        "conditions_confirmed": bool(col("conditions_confirmed")),
        "actor_id": col("actor_id"),
        "actor_session_id": col("actor_session_id"),
        "relayed": bool(col("relayed")),
        "relay": relay,
        "authorized_by": col("authorized_by"),
        "relay_policy_revision": col("relay_policy_revision"),
        "timed_out": bool(col("timed_out")),
        "at": col("at"),
    }


def load_generations(conn: sqlite3.Connection, keys: Sequence[GenKey]) -> dict[GenKey, Any]:
    """Generation objects (pins, affected tasks, answer) by (decision id, generation)."""
    if not keys:
        return {}
    rows = store.generation_rows(conn, keys)
    affected: dict[GenKey, list[dict[str, Any]]] = {}
    for r in store.affected_rows(conn, keys):
        key = (r["decision_id"], r["generation"])
        affected.setdefault(key, []).append(
            {"task_id": r["task_id"], "task_revision": r["task_revision"]}
        )
    result: dict[GenKey, Any] = {}
    for g in rows:
        key = (g["decision_id"], g["generation"])
        answer = None
        if g["a_disposition"] is not None:
            answer = answer_json(g, prefix="a_")
        result[key] = {
            "generation": g["generation"],
            "affected": affected.get(key, []),
            "policy_revision": g["policy_revision"],
            "environment": g["environment"],
            "conditions": json.loads(g["conditions"]),
            "expires_at": g["expires_at"],
            "reopen_rationale": g["reopen_rationale"],
            "actor_id": g["actor_id"],
            "actor_session_id": g["actor_session_id"],
            "at": g["at"],
            "answer": answer,
        }
    return result


def load_decisions(
    conn: sqlite3.Connection, ids: Sequence[str], now_at: str
) -> dict[str, dict[str, Any]]:
    """Decision objects by id, with their current generation and computed status."""
    if not ids:
        return {}
    rows = store.decision_rows(conn, ids)
    current = load_generations(conn, [(r["id"], r["generation"]) for r in rows])
    result: dict[str, dict[str, Any]] = {}
    for r in rows:
        status = decision_status(r["disposition"], r["expires_at"], now_at, r["stale"])
        result[r["id"]] = {
            "id": r["id"],
            "project_id": r["project_id"],
            "question": r["question"],
            "options": json.loads(r["options"]),
            "rationale": r["rationale"],
            "required_actor": r["required_actor"],
            "recommendation": r["recommendation"],
            "reversible": bool(r["reversible"]),
            "status": status,
            "work_allowed": work_allowed(status),
            "generation": r["generation"],
            "current": current[(r["id"], r["generation"])],
            "created_at": r["created_at"],
            "created_by": r["created_by"],
        }
    return result


def decisions_in_order(
    conn: sqlite3.Connection, ids: Sequence[str], now_at: str
) -> list[dict[str, Any]]:
    found = load_decisions(conn, ids, now_at)
    return [found[i] for i in ids if i in found]


def load_decision(
    conn: sqlite3.Connection, project_id: str, decision_id: str, now_at: str
) -> dict[str, Any]:
    found = load_decisions(conn, [decision_id], now_at).get(decision_id)
    if found is None or found["project_id"] != project_id:
        raise NotFound("no such decision", {"decision_id": decision_id})
    return found


# --- generation history (descending generation cursor) -------------------------

HistoryRequest = tuple[str, str | None, int | None]  # (decision id, cursor, limit)


def _before(cursor: str | None) -> int:
    if cursor is None:
        return 2**62
    value = decode_cursor(cursor, int)[0]
    assert isinstance(value, int)
    return value


def history_pages(
    conn: sqlite3.Connection, requests: Sequence[HistoryRequest]
) -> list[Page[dict[str, Any]]]:
    """Pages of generations, newest first, for many decisions in three statements."""
    if not requests:
        return []
    limits = [check_limit(n) for _, _, n in requests]
    specs = [(d, _before(c), n) for (d, c, _), n in zip(requests, limits, strict=True)]
    rows = store.generation_pages(conn, specs)
    per_request: list[list[GenKey]] = [[] for _ in specs]
    for r in rows:
        per_request[r["k"]].append((r["decision_id"], r["generation"]))
    objects = load_generations(conn, sorted({key for keys in per_request for key in keys}))
    pages: list[Page[dict[str, Any]]] = []
    for limit, keys in zip(limits, per_request, strict=True):
        page = Page.from_rows(keys, limit, lambda key: encode_cursor(key[1]))
        pages.append(Page([objects[k] for k in page.items], page.cursors, page.has_next))
    return pages
