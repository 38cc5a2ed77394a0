"""The context packet: policy, then open decisions, then ranked text matches.

One read transaction takes the policy, the pending or invalidated decisions
and the time-limited search, and loads the matched records from the same
snapshot. It is closed before anything else happens: the budget is applied
in memory and the reranker (when enabled) calls its provider afterwards, so
no read transaction is ever held across a network call.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from waypost.clock import format_time
from waypost.errors import InvalidRequest
from waypost.resolvers.context.budget import Fill, fill
from waypost.resolvers.context.params import BUDGET_MAX, LIMIT_MAX, ContextQuery
from waypost.resolvers.context.ranking_store import Hit, ranked
from waypost.resolvers.context.search import Scope, SearchTimedOut, fts_query
from waypost.resolvers.context.search import time_limit as search_time_limit
from waypost.resolvers.context.search import time_limit_ms as search_time_limit_ms
from waypost.resolvers.context.store import gated_tasks, knowledge_objects
from waypost.resolvers.decisions.gate import declined_blockers
from waypost.resolvers.decisions.operations import unresolved_sync
from waypost.resolvers.projects.operations import require_project
from waypost.resolvers.tasks.store import task_rows_by_ids
from waypost.resolvers.tasks.views import present_tasks
from waypost.runtime import Runtime

log = logging.getLogger("waypost.context")


@dataclass(frozen=True)
class Words:
    """How `next_actions` names the request's arguments and the other reads
    it points to: REST's, GraphQL's (a dashboard on GraphQL was told
    `include_shared=true` and "the policy route", names its API does not
    have), or MCP's tools (`reworded`: its `context` tool calls REST, and an
    agent with tools alone was sent to routes)."""

    filters: tuple[str, str, str, str]  # task_id, component, environment, version
    include_shared: str
    policy: str
    decision: str  # where one decision is read
    decisions: str  # where the decisions that hold work are listed
    lists: str

    def narrowing(self, query: ContextQuery) -> str:
        """How to narrow a search: more specific terms, or a scope filter the
        request did not send (an agent that sent `task_id` was told to add
        `task_id`)."""
        unsent = [name for name, value in zip(self.filters, _scope_values(query), strict=True)
                  if value is None]  # fmt: skip
        if not unsent:
            return "more specific terms (more or rarer words)"
        return f"more specific terms (more or rarer words) or a scope filter ({', '.join(unsent)})"


def _scope_values(query: ContextQuery) -> tuple[str | None, ...]:
    return (query.task_id, query.component, query.environment, query.version)


REST_WORDS = Words(
    ("task_id", "component", "environment", "version"),
    "set include_shared=true",
    "the policy route",
    "the decisions route",
    "the decisions route (status=pending, stale or expired)",
    "the tasks and knowledge routes with q",
)
GRAPHQL_WORDS = Words(
    ("taskId", "component", "environment", "version"),
    "set includeShared: true",
    "the project's policy field",
    "the project's decision field",
    "the project's decisions field (status: PENDING, STALE or EXPIRED)",
    "the project's tasks and knowledge fields with q",
)

MCP_WORDS = Words(
    REST_WORDS.filters,  # the context tool's arguments are the route's
    REST_WORDS.include_shared,
    "the policy tool",
    "decision_get",
    "decision_list (status pending, stale or expired)",
    "task_list and knowledge_search with q",
)


def reworded(actions: list[str], said: Words, wanted: Words) -> list[str]:
    """`next_actions` written in `said`'s names, in `wanted`'s: the longest
    name first, since "the decisions route" begins another."""
    phrases = ("include_shared", "policy", "decision", "decisions", "lists")
    pairs = sorted(((getattr(said, name), getattr(wanted, name)) for name in phrases),
                   key=lambda pair: -len(pair[0]))  # fmt: skip
    out = []
    for action in actions:
        for old, new in pairs:
            action = action.replace(old, new)
        out.append(action)
    return out


@dataclass(frozen=True)
class Snapshot:
    """What the read transaction found, before the budget is applied."""

    policy: dict[str, Any]
    decisions: list[dict[str, Any]]
    matches: list[dict[str, Any]]
    timed_out: bool
    # decisions answered deny or defer that hold the requested task (not
    # items: those are the decisions still to be answered or reopened)
    declined: list[str]


def _load(
    conn: sqlite3.Connection, project_id: str, hits: list[Hit], now: datetime
) -> list[dict[str, Any]]:
    """The matched records as packet items, in the order of `hits`."""
    task_ids = [h.id for h in hits if h.type == "task"]
    objects: dict[tuple[str, str], dict[str, Any]] = {}
    if task_ids:
        for task in present_tasks(
            conn, project_id, list(task_rows_by_ids(conn, task_ids).values()), now
        ):
            objects[("task", task["id"])] = task
    knowledge = knowledge_objects(conn, [h.id for h in hits if h.type == "knowledge"])
    for knowledge_id, obj in knowledge.items():
        objects[("knowledge", knowledge_id)] = obj
    return [{"type": h.type, **objects[(h.type, h.id)]} for h in hits]


def read_sync(
    conn: sqlite3.Connection,
    project_id: str,
    query: ContextQuery,
    match: str,
    now: datetime,
    time_limit_ms: int,
) -> Snapshot:
    project = require_project(conn, project_id)
    policy = {"revision": project["policy_revision"], "rules": project["rules"]}
    gated = None
    if query.task_id is not None:
        gated = gated_tasks(conn, project_id, query.task_id)
        if gated is None:
            raise InvalidRequest.field("task_id", "task_id names no task of this project")
    # One more than the limit of each kind tells whether anything was left out.
    decisions = [
        {"type": "decision", **d}
        for d in unresolved_sync(conn, project_id, format_time(now), gated, query.limit + 1)
    ]
    declined = declined_blockers(conn, project_id, gated, now) if gated else []
    scope = Scope(query.task_id, query.component, query.environment, query.version)
    try:
        with search_time_limit(conn, time_limit_ms):
            hits = ranked(conn, project_id, match, scope, query.include_shared, query.limit + 1)
    except SearchTimedOut:
        return Snapshot(policy, decisions, [], timed_out=True, declined=declined)
    matches = _load(conn, project_id, hits, now)
    return Snapshot(policy, decisions, matches, timed_out=False, declined=declined)


def next_actions(
    query: ContextQuery, snap: Snapshot, filled: Fill, time_limit_ms: int, words: Words = REST_WORDS
) -> list[str]:
    """Concrete advice whenever the packet is empty or incomplete, and when
    decisions answered deny or defer hold the requested task."""
    narrow = words.narrowing(query)
    actions: list[str] = []
    held: list[str] = []
    if snap.declined:
        # first: an agent that reads no further must not take the task for free
        # (an empty packet said only that nothing was pending; agentflow)
        held.append(
            f"Task {query.task_id} is held by decision(s) {', '.join(snap.declined)}, answered"
            " deny or defer: work on it stays refused until one is reopened and answered"
            f" allow (read each at {words.decision} for its answer and rationale); there"
            " is no answer to wait for, so leave this task for other work unless whoever"
            " answered is to be asked again."
        )
    timed_out = (
        f"The search was ended by its time limit ({time_limit_ms} ms) before it finished"
        f" ranking, so no text matches are included: use {narrow}."
    )
    wanted = filled.wanted or filled.used
    # where what no packet can hold is read whole; decisions come first
    # whatever q is, so no search of the lists finds one a packet left out
    # (policyjourney: a stale decision behind a policy of the largest budget)
    elsewhere = f"list the matches whole from {words.lists}"
    if len(filled.items) < len(snap.decisions):
        elsewhere = f"read the decisions left out from {words.decisions} and {elsewhere}"
    if filled.stopped_by == "policy":
        if filled.used <= BUDGET_MAX:
            if wanted <= BUDGET_MAX:
                target = wanted
                first = f" ({wanted} holds it and the first item)" if wanted > filled.used else ""
            else:
                target = filled.used
                first = (
                    f" (the first item does not fit beside it even in the largest budget,"
                    f" {BUDGET_MAX}: {elsewhere})"
                )
            actions.append(
                f"Increase budget to at least {target} bytes: the policy alone takes"
                f" {filled.used} bytes, so no context items were returned{first}. Do not"
                " treat this packet as a complete orientation until then."
            )
        else:
            # no budget can hold an item beside such a policy (64 KiB of rules
            # that JSON escapes, quotes or control characters, pass 128 KiB):
            # asking again with the largest budget would answer the same
            actions.append(
                f"The policy alone takes {filled.used} bytes, more than the largest budget"
                f" ({BUDGET_MAX}), so no packet of this project can hold an item: read the"
                f" policy whole from {words.policy}, the decisions that hold work from"
                f" {words.decisions}, and the matches from {words.lists}; or have a human"
                " shorten the rules."
            )
        # section 14: a search ended by its limit always says so, whatever else stopped
        return [*held, *actions, timed_out] if snap.timed_out else [*held, *actions]
    if snap.timed_out:
        actions.append(timed_out)
    if filled.stopped_by == "limit":
        more = f"raise limit (up to {LIMIT_MAX})" if query.limit < LIMIT_MAX else elsewhere
        actions.append(
            f"More items matched than limit={query.limit}: {more}, or narrow the search"
            f" with {narrow}."
        )
    elif filled.stopped_by == "budget":
        if wanted <= BUDGET_MAX:
            advice = f"raise budget to at least {wanted} bytes for the next one, or narrow"
        else:
            # no budget holds the next item beside what came before it (or
            # beside the policy): only the lists hold it whole
            advice = f"{elsewhere}, or narrow"
        actions.append(
            f"More matching items did not fit the budget of {query.budget} bytes: {advice}"
            f" the search with {narrow}."
        )
    if not filled.items and not actions:
        # only what the request can still change: a filter it did not send
        # cannot be dropped, an opt-in it made cannot be made again
        sent = [name for name, value in zip(words.filters, _scope_values(query), strict=True)
                if value is not None]  # fmt: skip
        hints = ["try other or fewer search terms"]
        if sent:
            hints.append(f"drop a scope filter ({', '.join(sent)})")
        if not query.include_shared:
            hints.append(words.include_shared)
        actions.append(
            f"Nothing matched: {', '.join(hints[:-1])}{' or ' if len(hints) > 1 else ''}"
            f"{hints[-1]}; no decision is pending for this scope."
        )
    return [*held, *actions]


async def build(
    rt: Runtime,
    project_id: str,
    query: ContextQuery,
    *,
    rerank: bool = True,
    words: Words = REST_WORDS,
) -> dict[str, Any]:
    """The context packet of section 8 for `query`; `rerank=False` leaves
    the provider out (reported `disabled`) where no one will read the items;
    `words`: the API whose names `next_actions` uses."""
    match = fts_query(query.q)
    now = rt.now()
    limit_ms = search_time_limit_ms(rt)
    snap = await rt.db.search(lambda c: read_sync(c, project_id, query, match, now, limit_ms))
    if snap.timed_out:
        log.info("context search ended by its time limit of %s ms", limit_ms)
    filled = fill(snap.policy, [*snap.decisions, *snap.matches], query.limit, query.budget)
    items = filled.items
    reranked: dict[str, Any] = {"applied": False, "reason": "disabled"}
    if rt.reranker is not None and rerank:
        # the read transaction above is closed: no snapshot is held across this call
        items, reason = await rt.reranker.rerank(query.q, items)
        rt.metrics.reranker_outcome(reason)  # waypost_reranker_calls_total{outcome}
        reranked = {"applied": reason == "applied", "reason": reason}
    return {
        "policy": snap.policy,
        "items": items,
        "instructions_complete": filled.stopped_by != "policy",
        "truncated": filled.stopped_by is not None or snap.timed_out,
        "next_actions": next_actions(query, snap, filled, limit_ms, words),
        "rerank": reranked,
    }
