"""A dashboard that resumes `projectEvents` from an earlier position gets each
event's `subject` as it is now (graphql.md, "Root fields of the core": the
record that changed, as it is now), as `projectEventBatches` gives it, not
the answer another subscriber was sent when the event was new
(dashboardjourney).

Answers are shared only by "subscribers woken with the same events"
(graphql.md, "Fan-out, measured"): a subscriber that resumes later, from
the hub's window, was not woken with them, yet it was handed the answer
kept from the first delivery, whatever had changed since."""

from __future__ import annotations

from typing import Any

from tests.conftest import Caller, Service
from tests.decisions_support import edit_task, new_task
from tests.live_support import GraphQLWS, graphql_ws, running

EVENTS = """subscription ($after: Int) {
  projectEvents(projectId: "demo", after: $after) {
    sequence type subject { __typename ... on Task { restId title revision } } } }"""
BATCHES = """subscription ($after: Int) {
  projectEventBatches(projectId: "demo", after: $after) {
    lastSequence events {
      sequence type subject { __typename ... on Task { restId title revision } } } } }"""


async def _data(client: GraphQLWS, op: str) -> dict[str, Any]:
    message = await client.receive()
    assert message["id"] == op and message["type"] == "next", message
    assert "errors" not in message["payload"], message
    data: dict[str, Any] = message["payload"]["data"]
    return data


async def _log_end(caller: Caller) -> int:
    log = (await caller.get("/api/v1/projects/demo/events", limit=200)).json()["items"]
    sequence: int = log[-1]["sequence"]
    return sequence


async def test_a_resumed_project_events_subscription_gets_the_subject_as_it_is_now(
    service: Service, human: Caller, project: str
) -> None:
    bob = await service.principal("human", "bob")
    async with running(service) as base, graphql_ws(base, human.token) as live:
        live_op = await live.subscribe(EVENTS, {"after": await _log_end(human)})
        # once an event has reached it, the live subscription is surely in
        # place: the events after this one come to it from the hub's window
        await new_task(human, "Warming up")
        start = (await _data(live, live_op))["projectEvents"]["sequence"]
        task_id = await new_task(human, "First title")
        created = (await _data(live, live_op))["projectEvents"]
        assert created["type"] == "task.created"
        assert created["subject"]["title"] == "First title"  # as it was then: right

        await edit_task(human, task_id, title="Second title")
        assert (await _data(live, live_op))["projectEvents"]["type"] == "task.updated"

        # a second dashboard (another tab, or the first reconnecting) resumes
        # from before the task was created: the same events, read now
        async with graphql_ws(base, bob.token) as late:
            resumed_op = await late.subscribe(EVENTS, {"after": start})
            resumed = [(await _data(late, resumed_op))["projectEvents"] for _ in range(2)]
            batch_op = await late.subscribe(BATCHES, {"after": start})
            batch = (await _data(late, batch_op))["projectEventBatches"]["events"]

    now = {"__typename": "Task", "restId": task_id, "title": "Second title", "revision": 2}
    assert [e["sequence"] for e in resumed] == [e["sequence"] for e in batch]
    # projectEventBatches reads each subject now ...
    assert [e["subject"] for e in batch] == [now, now]
    # ... and so must projectEvents: it was handed the first delivery's
    # answer, "First title" at revision 1, long after the task had changed
    assert [e["subject"] for e in resumed] == [now, now], resumed


async def test_the_hub_shares_live_events_and_copies_every_one_a_resume_replays(
    service: Service, human: Caller, project: str
) -> None:
    """At the hub: listeners woken with an event are handed the one object
    (so one execution answers them all: schema/shared_events.py); a listener
    opened after it, resuming from before it, a copy, up to and including
    the last event the window held when it opened."""
    from waypost.live import hub_for

    hub = hub_for(service.rt)
    end = await _log_end(human)
    async with hub.listen("demo", "tok_a", end) as a, hub.listen("demo", "tok_b", end) as b:
        await new_task(human, "One")
        got_a, got_b = await a.next_batch(5.0), await b.next_batch(5.0)
        assert got_a and [id(e) for e in got_a] == [id(e) for e in got_b]
        last = got_a[-1]["sequence"]
        assert hub.position == last
        async with hub.listen("demo", "tok_c", last - 1) as c:
            (replayed,) = await c.next_batch(5.0)
        assert replayed == got_a[-1] and replayed is not got_a[-1]
        await new_task(human, "Two")
        live_a, live_b = await a.next_batch(5.0), await b.next_batch(5.0)
        assert live_a and all(x is y for x, y in zip(live_a, live_b, strict=True))
