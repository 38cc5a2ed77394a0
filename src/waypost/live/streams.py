"""What the SSE route and the GraphQL subscriptions share: a project's events
as an async iterator (with keep-alive ticks and token re-checks), and a
decision's changes computed from them."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from waypost.clock import format_time
from waypost.errors import Forbidden, NotFound, Unauthenticated, Unavailable, WaypostError
from waypost.live import hub_for
from waypost.resolvers.access import principals, sessions
from waypost.resolvers.core import events
from waypost.resolvers.decisions.status import decision_status, work_allowed
from waypost.resolvers.decisions.views import load_decisions, load_generations
from waypost.resolvers.projects.operations import require_project
from waypost.runtime import Actor, Runtime

log = logging.getLogger("waypost.live")

Event = dict[str, Any]
# what `project_event_batches` yields besides events (compared by identity): OPENED
# once the listener is in place, KEEPALIVE after each quiet keep-alive interval
# (the SSE route writes a comment line for each)
OPENED: Event = {}
KEEPALIVE: Event = {}


async def check_project(rt: Runtime, project_id: str) -> None:
    await rt.db.read(lambda conn: require_project(conn, project_id))


async def still_valid(rt: Runtime, token: str, session_id: str | None = None) -> bool:
    """Whether the stream's token still authenticates (not revoked meanwhile),
    and the session it was opened in, if it named one, is still live: an SSE
    stream opened in a session went on after the session ended, where a
    GraphQL socket closes (tokenjourney)."""
    return await refusal(rt, token, session_id) is None


async def refusal(rt: Runtime, token: str, session_id: str | None = None) -> WaypostError | None:
    """Why a stream must end now (`still_valid`), None while it may go on. A
    stream ends with it, so that its client can tell a revoked token or an
    ended session from a server that stops: a subscription ended with a bare
    `complete`, as at a stop, and its socket closed `4401` only at its own
    re-check, up to 15 seconds later (gqlwsaudit)."""

    def check(conn: Any) -> None:
        actor = principals.authenticate(conn, token, "api")
        if session_id is not None:
            sessions.enter_session(conn, actor, session_id, at)

    try:
        # inside: a clock file being rewritten (Unavailable, Retry-After 1)
        # says nothing of the token or the session, as a busy store does not;
        # raised out of here it ended every stream and killed MCP's watch
        at = format_time(rt.now())
        await rt.db.read(check)
    except (Unauthenticated, Forbidden) as refused:
        return refused
    except Unavailable as refused:
        # a busy store says nothing of the token: ask again later; a store an
        # operator must mend (Retry-After 30) ends the stream, as it cannot
        # tell a token revoked meanwhile
        return None if refused.retry_after <= 1 else refused
    except Exception:
        # a fault: logged, and the stream ends as it did (rather than trust a
        # token nobody could check)
        log.exception("re-checking a stream's token failed")
        return Unavailable("the stream's token could not be checked again", retry_after=5)
    return None


async def project_event_batches(
    rt: Runtime,
    actor: Actor,
    token: str,
    project_id: str,
    after: int | None,
    after_name: str = "after",
) -> AsyncGenerator[list[Event] | Event, None]:
    """Events of `project_id` after `after` (None: from the next new one), in
    sequence order, each once, as the lists the hub hands out on each wake
    (a stream writes each list at once: one write, not one per event); first
    `OPENED`, and `KEEPALIVE` after each quiet keep-alive interval.

    Ends when the hub stops, and raises the refusal (`unauthenticated`,
    `forbidden`) once the token no longer authenticates or the session it
    was opened in is no longer live (checked every `recheck_seconds`).
    Raises `TooManyStreams` before the
    first item when the caps are reached, `SlowConsumer` when the consumer
    falls too far behind the live events.
    """
    hub = hub_for(rt)
    limits = hub.limits
    async with hub.listen(project_id, actor.token_id, after, after_name) as listener:
        yield OPENED
        checked = kept = time.monotonic()
        while True:
            wait = max(0.0, min(kept + limits.keepalive_seconds, checked + limits.recheck_seconds)
                       - time.monotonic())  # fmt: skip
            batch = await listener.next_batch(wait)
            if batch:
                yield batch
            now = time.monotonic()
            if now - checked >= limits.recheck_seconds:
                if (refused := await refusal(rt, token, actor.session_id)) is not None:
                    raise refused
                checked = now
            if now - kept >= limits.keepalive_seconds:
                kept = now
                yield KEEPALIVE


async def load_decision(rt: Runtime, decision_id: str) -> dict[str, Any] | None:
    now_at = format_time(rt.now())
    found = await rt.db.read(lambda conn: load_decisions(conn, [decision_id], now_at))
    return found.get(decision_id)


# The events that change a decision's generation or answer. Each states what
# the decision became (and a reopen, what it was just before), so a batch
# holding several of them (an answer and a reopen committed together, or read
# late by a busy subscriber) still yields every state in turn, not the last.
_CHANGES = ("decision.answered", "decision.timed_out", "decision.reopened")


def _steps(changes: list[Event]) -> list[tuple[int, str | None, bool]]:
    """(generation, status or None for its answer's, with its answer) per state,
    from one decision's change events (`_CHANGES`), oldest first."""
    steps: list[tuple[int, str | None, bool]] = []
    for event in changes:
        generation = event["data"]["generation"]
        if event["type"] == "decision.reopened":
            steps.append((generation - 1, event["data"]["previous_status"], True))
            steps.append((generation, "pending", False))
        else:
            steps.append((generation, None, True))
    return steps


async def load_changes(
    rt: Runtime, decision_id: str, seen: int | None
) -> tuple[list[dict[str, Any]], int] | None:
    """The decision as each of its change events after sequence `seen` left
    it, then as it is now (which adds what no event of its own states: stale,
    expired), with the project's last event sequence that read includes;
    None when the decision is gone. `seen` None: as it is now only.

    The change events are read in the same snapshot as the decision, not
    taken from the batch that woke the stream: a batch may not yet hold an
    event that the read already sees, and its state was then lost (answer,
    reopen and answer again reached a loaded subscriber as only the last).
    Generations and answers are immutable, so the earlier states are rebuilt
    from them, each generation with its answer only once answered. An event at
    or before `seen` is already in a state yielded before (it committed before
    that read), and is never rebuilt again."""
    now_at = format_time(rt.now())

    def read(conn: Any) -> tuple[dict[str, Any] | None, list[Any], dict[Any, Any], int]:
        found = load_decisions(conn, [decision_id], now_at).get(decision_id)
        if found is None:
            return None, [], {}, 0
        project_id = found["project_id"]
        steps = []
        if seen is not None:
            steps = _steps(events.subject_events(conn, project_id, seen, decision_id, _CHANGES))
        keys = sorted({(decision_id, generation) for generation, _, _ in steps})
        through = events.last_project_sequence(conn, project_id)
        return found, steps, load_generations(conn, keys), through

    found, steps, generations, through = await rt.db.read(read)
    if found is None:
        return None
    states = []
    for generation, status, answered in steps:
        current = generations.get((decision_id, generation))
        if current is None:
            continue
        current = {**current, "answer": current["answer"] if answered else None}
        if status is None:
            answer = current["answer"]
            status = decision_status(answer and answer["disposition"], None, now_at, False)
        states.append({**found, "generation": generation, "current": current,
                       "status": status, "work_allowed": work_allowed(status)})  # fmt: skip
    states.append(found)
    return states, through


def _may_change(event: Event, decision_id: str, affected: frozenset[str]) -> bool:
    """Whether `event` can change the decision's state: its own events
    (answered, timed out, reopened), an edit of a task it affects or of the
    policy (stale). Reading it again after every event of a busy project and
    every second, 100 subscribers that nothing changed took 16 writers to
    0.75 of their throughput alone (0.89 since)."""
    subject = event["subject_id"]
    return (
        subject == decision_id
        or event["subject_type"] == "policy"
        or (event["subject_type"] == "task" and subject in affected)
    )


def _lapsed(rt: Runtime, decision: dict[str, Any]) -> bool:
    """Whether the service's clock has now passed the expiry of the decision
    as last read (the one change no event states; the clock may also be set
    back): compared with whether that read found it expired."""
    expires_at = decision["current"]["expires_at"]
    return expires_at is not None and expires_at <= format_time(rt.now())


def _state(decision: dict[str, Any]) -> tuple[Any, ...]:
    current = decision["current"]
    answer = current["answer"]
    return (decision["generation"], decision["status"], answer and answer["at"])


async def decision_changes(
    rt: Runtime, actor: Actor, token: str, decision_id: str
) -> AsyncIterator[dict[str, Any]]:
    """The decision now, then again each time its generation, answer or status
    changes. Status changes that write no event of their own (stale after an
    edit of an affected task or of the rules, expired when time passes) are
    found by reading the decision again after each event that may change it
    (`_may_change`), when its expiry passes (`_lapsed`, looked at least
    every `poll_seconds`) and at each token re-check. Ends as
    `project_event_batches` does."""
    known = await load_decision(rt, decision_id)
    if known is None:
        raise NotFound("no such decision", {"decision_id": decision_id})
    hub = hub_for(rt)
    limits = hub.limits
    async with hub.listen(known["project_id"], actor.token_id, None) as listener:
        # read once the listener is in place: a change committed between the
        # two is in this state or in the listener's first batch, never lost
        # (and `seen` keeps the batch from replaying what this read holds)
        first = await load_changes(rt, decision_id, None)
        if first is None:
            return
        (decision,), seen = first
        # whether the read found it expired, by the read's own time: the
        # clock may move on while the state is sent, or just after a reopen
        lapsed = decision["status"] == "expired"
        yield decision
        last = _state(decision)
        # the tasks whose edits can make it stale (a reopen keeps them)
        affected = frozenset(a["task_id"] for a in decision["current"]["affected"])
        checked = time.monotonic()
        owed = False
        while True:
            # an event that can change it, its expiry passing (or, the clock
            # set back, no longer passed), or a token check: look again (the
            # read finds the events itself, in its own snapshot)
            batch = await listener.next_batch(limits.poll_seconds)
            due = time.monotonic() - checked >= limits.recheck_seconds
            if any(_may_change(event, decision_id, affected) for event in batch):
                owed = True
            try:
                if due:
                    if (refused := await refusal(rt, token, actor.session_id)) is not None:
                        raise refused
                    checked = time.monotonic()
                elif not owed and _lapsed(rt, decision) == lapsed:
                    continue
                changes = await load_changes(rt, decision_id, seen)
            except Unavailable as refused:
                if refused.retry_after > 1:
                    raise
                # a clock file being rewritten (or a busy store) says nothing
                # of the decision: read it again at the next poll, the change
                # that woke this read still owed (it ended the subscription,
                # and its follower missed the answer that came next; clockjourney)
                owed = True
                continue
            owed = False
            if changes is None:
                return
            states, seen = changes
            decision = states[-1]
            lapsed = decision["status"] == "expired"
            for found in states:
                state = _state(found)
                # never back to an older generation, never the same state twice
                if state != last and found["generation"] >= last[0]:
                    last = state
                    yield found
