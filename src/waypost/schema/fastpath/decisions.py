"""Decisions on the fast path: their generations (forward pages, the columns a
query shows), answers, relays and affected tasks."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from waypost.pagination import decode_cursor, encode_cursor
from waypost.resolvers.decisions import views as decision_views
from waypost.schema.fastpath.reads import ConnectionValue, Reads
from waypost.schema.fastpath.registry import (
    connection,
    global_id_of,
    key,
    read_principals,
    read_projects,
    read_tasks,
    ref,
    register,
)
from waypost.schema.relay import backward_window, check_cursor, window

# --- decisions --------------------------------------------------------------------


def _generations(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    """`Decision.generations`, in either direction, as `relay.position_page`
    pages them (a backward page is the forward page that holds it,
    `relay.backward_window`).

    Generations are numbered 1..n, n the decision's `generation` (what
    `position_page` and `totalCount` rely on too), so a page's keys follow
    from the cursor without the loader's window statement, and the current
    generation is the one the decision came with (`load_decisions` built it
    with the same `load_generations`). The others are read in one batch, and
    the page is made as `history_pages` makes it.
    """
    w = window(a.get("first"), a.get("after"), a.get("last"), a.get("before"))
    check_cursor(w, int)
    before = 2**62 if w.cursor is None or w.backward else decode_cursor(w.cursor, int)[0]
    assert isinstance(before, int)
    wanted = []
    flags: list[tuple[bool, bool] | None] = []  # (hasNextPage, hasPreviousPage) if backward
    for d in parents:
        if w.backward:
            back = backward_window(d["generation"], w)
            top, size = back.top, back.limit
            flags.append((back.has_next, back.has_previous))
        else:
            # up to limit + 1 keys: the extra one tells that another page follows
            top, size = min(before - 1, d["generation"]), w.limit + 1
            flags.append(None)
        wanted.append([(d["id"], g) for g in range(top, max(top - size, 0), -1)])
    older = {k for d, keys in zip(parents, wanted, strict=True) for k in keys
             if k[1] != d["generation"]}  # fmt: skip
    # only the keys some selection of the operation shows (each column costs)
    gen_keys, answer_keys = _generation_keys(r.selected)
    loaded = decision_views.load_generations_showing(r.conn, sorted(older), gen_keys, answer_keys)
    result = []
    for d, keys, backward in zip(parents, wanted, flags, strict=True):
        # Page.from_rows' rule (limit + 1 rows fetched: the extra one means more),
        # with the cursors (encode_cursor(generation)) made only if asked for
        shown = keys[: w.limit]
        items = [d["current"] if k[1] == d["generation"] else loaded[k] for k in shown]

        def cursors(shown: list[tuple[str, int]] = shown) -> list[str]:
            return [encode_cursor(k[1]) for k in shown]

        def count(r: Reads, n: int = d["generation"]) -> int:
            return n  # generations are numbered 1..n: the current one is their count

        # as relay.position_page: a forward page after a cursor has items before it
        more, earlier = backward or (len(keys) > w.limit, w.cursor is not None)
        result.append(ConnectionValue(items, cursors, more, earlier, count))
    return result


# The generation and answer JSON key each field of the fast path reads: the
# registrations below are made from these tables, and `_generation_keys`
# reads only the keys a query selects.
GENERATION_KEYS: dict[str, str] = {
    "generation": "generation",
    "affected": "affected",
    "policyRevision": "policy_revision",
    "environment": "environment",
    "conditions": "conditions",
    "expiresAt": "expires_at",
    "reopenRationale": "reopen_rationale",
    "actorId": "actor_id",
    "actorSessionId": "actor_session_id",
    "at": "at",
    "answer": "answer",
    "actor": "actor_id",
}
ANSWER_KEYS: dict[str, str] = {
    "disposition": "disposition",
    "answer": "answer",
    "rationale": "rationale",
    "conditionsConfirmed": "conditions_confirmed",
    "actorId": "actor_id",
    "actorSessionId": "actor_session_id",
    "relayed": "relayed",
    "relay": "relay",
    "relayPolicyRevision": "relay_policy_revision",
    "timedOut": "timed_out",
    "at": "at",
    "actor": "actor_id",
    "authorizedBy": "authorized_by",
}


@lru_cache(maxsize=256)
def _generation_keys(
    selected: frozenset[tuple[str, str]],
) -> tuple[frozenset[str], frozenset[str]]:
    generation = [f for t, f in selected if t == "DecisionGeneration" and f in GENERATION_KEYS]
    answer = [f for t, f in selected if t == "DecisionAnswer" and f in ANSWER_KEYS]
    return (
        frozenset(GENERATION_KEYS[f] for f in generation),
        frozenset(ANSWER_KEYS[f] for f in answer),
    )


connection("Decision")
connection("DecisionGeneration")
register("Decision", {
    "id": global_id_of("Decision"),
    "restId": key("id"),
    "projectId": key("project_id"),
    "question": key("question"),
    "options": key("options"),
    "rationale": key("rationale"),
    "requiredActor": key("required_actor"),
    "recommendation": key("recommendation"),
    "reversible": key("reversible"),
    "status": key("status"),
    "workAllowed": key("work_allowed"),
    "generation": key("generation"),
    "current": key("current"),
    "createdAt": key("created_at"),
    "affected": lambda r, ps, a: [p["current"]["affected"] for p in ps],
    "createdBy": ref("principal", read_principals, "created_by"),
    "project": ref("project", read_projects, "project_id"),
    "generations": _generations,
})  # fmt: skip
# each field reads its key; a principal's field reads the principal it names
register("DecisionGeneration", {
    **{name: key(json_key) for name, json_key in GENERATION_KEYS.items()},
    "actor": ref("principal", read_principals, "actor_id"),
})  # fmt: skip
register("DecisionAnswer", {
    **{name: key(json_key) for name, json_key in ANSWER_KEYS.items()},
    "actor": ref("principal", read_principals, "actor_id"),
    "authorizedBy": ref("principal", read_principals, "authorized_by"),
})  # fmt: skip
register("Relay", {"prompt": key("prompt"), "response": key("response")})


def _current_revision(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
    tasks = r.records("task", [p["task_id"] for p in parents], read_tasks)
    return [t["revision"] if t is not None else None for t in tasks]


register("DecisionAffected", {
    "taskId": key("task_id"),
    "pinnedRevision": key("task_revision"),
    "task": ref("task", read_tasks, "task_id"),
    "currentRevision": _current_revision,
})  # fmt: skip
