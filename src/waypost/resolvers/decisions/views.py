"""Reading decisions: the JSON shapes of section 7 and batch loaders behind them.

Every loader here runs a fixed number of statements whatever the number of
decisions or generations asked for (ids travel as one JSON array through
`json_each`), so a list page, the digest or a GraphQL dashboard of fifty
decisions with all their generations costs the same few statements.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence
from operator import itemgetter
from typing import Any

from waypost.errors import NotFound
from waypost.pagination import Page, check_limit, decode_cursor, encode_cursor
from waypost.resolvers.decisions import views_store
from waypost.resolvers.decisions.status import decision_status, work_allowed
from waypost.resolvers.decisions.views_store import GenKey

# The answer's fields, in the order of `generation_rows`' `a_` columns.
_ANSWER_FIELDS = (
    "disposition", "answer", "rationale", "conditions_confirmed", "actor_id",
    "actor_session_id", "relayed", "relay_prompt", "relay_response", "authorized_by",
    "relay_policy_revision", "timed_out", "at",
)  # fmt: skip
_GENERATION_FIELDS = (
    "decision_id", "generation", "policy_revision", "environment", "conditions",
    "expires_at", "reopen_rationale", "actor_id", "actor_session_id", "at",
)  # fmt: skip


def _json_list(text: str) -> Any:
    # most generations carry no conditions: skip the parser for those
    return [] if text == "[]" else json.loads(text)


def _answer(values: Sequence[Any]) -> dict[str, Any]:
    """An answer from its columns, in `_ANSWER_FIELDS` order."""
    (disposition, answer, rationale, confirmed, actor_id, actor_session_id, relayed,
     relay_prompt, relay_response, authorized_by, relay_policy_revision, timed_out,
     at) = values  # fmt: skip
    return {
        "disposition": disposition,
        "answer": answer,
        "rationale": rationale,
        "conditions_confirmed": bool(confirmed),
        "actor_id": actor_id,
        "actor_session_id": actor_session_id,
        "relayed": bool(relayed),
        "relay": {"prompt": relay_prompt, "response": relay_response} if relayed else None,
        "authorized_by": authorized_by,
        "relay_policy_revision": relay_policy_revision,
        "timed_out": bool(timed_out),
        "at": at,
    }


def load_generations(conn: sqlite3.Connection, keys: Sequence[GenKey]) -> dict[GenKey, Any]:
    """Generation objects (pins, affected tasks, answer) by (decision id, generation).

    Columns are taken by position, found once per result: a sqlite3.Row looks
    a name up by comparing it with every column name, and that cost more than
    the two statements for a page of generations.
    """
    if not keys:
        return {}
    rows = views_store.generation_rows(conn, keys)
    affected = _affected(conn, keys)
    result: dict[GenKey, Any] = {}
    if not rows:
        return result
    names = {name: i for i, name in enumerate(rows[0].keys())}
    columns = itemgetter(*(names[n] for n in _GENERATION_FIELDS))
    answer_at = [names["a_" + n] for n in _ANSWER_FIELDS]
    answer_columns = itemgetter(*answer_at)
    disposition_at = answer_at[0]
    for g in rows:
        (decision_id, generation, policy_revision, environment, conditions, expires_at,
         reopen_rationale, actor_id, actor_session_id, at) = columns(g)  # fmt: skip
        key = (decision_id, generation)
        result[key] = {
            "generation": generation,
            "affected": affected.get(key, []),
            "policy_revision": policy_revision,
            "environment": environment,
            "conditions": _json_list(conditions),
            "expires_at": expires_at,
            "reopen_rationale": reopen_rationale,
            "actor_id": actor_id,
            "actor_session_id": actor_session_id,
            "at": at,
            "answer": None if g[disposition_at] is None else _answer(answer_columns(g)),
        }
    return result


def _affected(conn: sqlite3.Connection, keys: Sequence[GenKey]) -> dict[GenKey, list[Any]]:
    """The affected tasks of each generation, in the asker's order."""
    affected: dict[GenKey, list[dict[str, Any]]] = {}
    for decision_id, generation, task_id, task_revision in views_store.affected_rows(conn, keys):
        affected.setdefault((decision_id, generation), []).append(
            {"task_id": task_id, "task_revision": task_revision}
        )
    return affected


# Keys of the generation and answer JSON that are a column of the same name
_GENERATION_PLAIN = ("policy_revision", "environment", "expires_at", "reopen_rationale",
                     "actor_id", "actor_session_id", "at")  # fmt: skip
_ANSWER_PLAIN = ("disposition", "answer", "rationale", "actor_id", "actor_session_id",
                 "authorized_by", "relay_policy_revision", "at")  # fmt: skip
_ANSWER_FLAGS = ("conditions_confirmed", "relayed", "timed_out")
GENERATION_KEYS = frozenset({"generation", "affected", "conditions", "answer", *_GENERATION_PLAIN})
ANSWER_KEYS = frozenset({*_ANSWER_PLAIN, *_ANSWER_FLAGS, "relay"})


def load_generations_showing(
    conn: sqlite3.Connection,
    keys: Sequence[GenKey],
    shown: Collection[str],
    answer_shown: Collection[str],
) -> dict[GenKey, Any]:
    """`load_generations` with the generation keys `shown` (and `generation`)
    and, when `answer` is among them, the answer keys `answer_shown` (and
    `disposition`): the values are the same, only the columns a reader does
    not show are not read (each one costs about as much as the row look-up).
    The GraphQL fast path reads older generations so (schema/fastpath)."""
    if not keys:
        return {}
    columns = ["decision_id", "generation", *(k for k in _GENERATION_PLAIN if k in shown)]
    if "conditions" in shown:
        columns.append("conditions")
    answer_columns: list[str] = []
    if "answer" in shown:
        wanted = [k for k in (*_ANSWER_PLAIN, *_ANSWER_FLAGS) if k in answer_shown]
        if "relay" in answer_shown:
            wanted += ["relayed", "relay_prompt", "relay_response"]
        answer_columns = list(dict.fromkeys(["disposition", *wanted]))
    rows = views_store.generation_columns(conn, keys, columns, answer_columns)
    affected = _affected(conn, keys) if "affected" in shown else None
    n = len(columns)
    result: dict[GenKey, Any] = {}
    for row in rows:
        g = dict(zip(columns, row[:n], strict=True))
        key = (g.pop("decision_id"), g["generation"])
        if "conditions" in g:
            g["conditions"] = _json_list(g["conditions"])
        if affected is not None:
            g["affected"] = affected.get(key, [])
        if answer_columns:
            g["answer"] = _answer_showing(dict(zip(answer_columns, row[n:], strict=True)))
        result[key] = g
    return result


def _answer_showing(a: dict[str, Any]) -> dict[str, Any] | None:
    """An answer from the columns read (`_answer`'s conversions), None when none."""
    if a["disposition"] is None:
        return None
    for flag in _ANSWER_FLAGS:
        if flag in a:
            a[flag] = bool(a[flag])
    if "relay_prompt" in a:
        prompt, response = a.pop("relay_prompt"), a.pop("relay_response")
        a["relay"] = {"prompt": prompt, "response": response} if a["relayed"] else None
    return a


def load_decisions(
    conn: sqlite3.Connection, ids: Sequence[str], now_at: str
) -> dict[str, dict[str, Any]]:
    """Decision objects by id, with their current generation and computed status."""
    if not ids:
        return {}
    rows = views_store.decision_rows(conn, ids)
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
    if not cursor:
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
    rows = views_store.generation_pages(conn, specs)
    per_request: list[list[GenKey]] = [[] for _ in specs]
    for r in rows:
        per_request[r["k"]].append((r["decision_id"], r["generation"]))
    objects = load_generations(conn, sorted({key for keys in per_request for key in keys}))
    pages: list[Page[dict[str, Any]]] = []
    for limit, keys in zip(limits, per_request, strict=True):
        page = Page.from_rows(keys, limit, lambda key: encode_cursor(key[1]))
        pages.append(Page([objects[k] for k in page.items], page.cursors, page.has_next))
    return pages
