"""GraphQL subscriptions over a real WebSocket (graphql-transport-ws): the token
in connection_init, projectEvents in order, decisionChanged with the status
changes that write no event of their own."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import json
import logging
from contextlib import aclosing
from datetime import timedelta
from typing import Any

import pytest
import starlette.websockets
from graphql import ExecutionResult
from strawberry.http.exceptions import WebSocketDisconnected
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.conftest import Caller, Service
from tests.decisions_support import edit_task, new_task, open_decision, reopen, send_answer
from tests.live_support import QUICK, GraphQLWS, graphql_ws, running
from waypost.clock import format_time
from waypost.http.auth import GRAPHQL_BODY_LIMIT
from waypost.live import Hub, LiveLimits, TooManyStreams, hub_for, streams
from waypost.live.streams import decision_changes
from waypost.resolvers.access import principals
from waypost.resolvers.projects import store as project_store
from waypost.schema import schema
from waypost.schema.context import Context
from waypost.schema.relay import global_id
from waypost.schema.websocket import RefusedPayload, TransportWS, oversized_subscribe

EVENTS = """subscription ($after: Int) {
  projectEvents(projectId: "demo", after: $after) {
    sequence projectId type subjectId actor { name } } }"""
CHANGED = """subscription ($id: ID!) {
  decisionChanged(id: $id) { restId status generation current { answer { disposition } } } }"""


async def _next(client: GraphQLWS, op: str) -> dict[str, Any]:
    message = await client.receive()
    assert message["id"] == op and message["type"] == "next", message
    payload: dict[str, Any] = message["payload"]
    assert "errors" not in payload, payload
    return payload["data"]


async def log_end(caller: Caller) -> dict[str, int]:
    """`after` at the project's last event: a subscription from there gets
    only the events written next."""
    log = (await caller.get("/api/v1/projects/demo/events", limit=200)).json()["items"]
    return {"after": log[-1]["sequence"]}


async def close_code_after_init(service: Service, payload: Any) -> int:
    """The code the service closes a socket with after this connection_init."""
    async with running(service) as base:
        url = base.replace("http://", "ws://") + "/graphql"
        async with connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
            await ws.send(json.dumps({"type": "connection_init", "payload": payload}))
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
    assert closed.value.rcvd is not None
    return closed.value.rcvd.code


async def test_a_client_offering_only_the_legacy_protocol_is_closed_with_4406(
    service: Service,
) -> None:
    """`graphql-ws` (the legacy protocol) is not offered: the socket is
    accepted with no subprotocol and closed with 4406, before any message."""
    async with running(service) as base:
        url = base.replace("http://", "ws://") + "/graphql"
        async with connect(url, subprotocols=["graphql-ws"]) as ws:  # type: ignore[list-item]
            assert ws.subprotocol is None
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4406


@pytest.mark.parametrize("payload", [{}, {"Authorization": "Bearer wp_nope"}, {"Authorization": 7}])
async def test_a_missing_or_bad_token_closes_the_socket_with_4401(
    service: Service, project: str, payload: dict[str, Any]
) -> None:
    assert await close_code_after_init(service, payload) == 4401


@pytest.mark.parametrize("payload", ["abc", [1], 5])
async def test_a_connection_init_payload_that_is_no_object_is_malformed(
    service: Service, project: str, payload: Any
) -> None:
    """The protocol's payload is an object or absent: anything else is a
    malformed message (4400); it was taken for a bad credential (4401)."""
    assert await close_code_after_init(service, payload) == 4400


@pytest.mark.parametrize("payload", [None, [1], {}])
async def test_a_second_connection_init_closes_the_socket_with_4429(
    service: Service, human: Caller, payload: Any
) -> None:
    """The protocol's "too many initialisation requests" for any second init:
    one whose payload was `null` or no object got 4400 (Strawberry judged the
    payload before it looked for a repeat)."""
    async with running(service) as base:
        url = base.replace("http://", "ws://") + "/graphql"
        async with connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
            first = {"Authorization": f"Bearer {human.token}"}
            await ws.send(json.dumps({"type": "connection_init", "payload": first}))
            assert json.loads(await ws.recv()) == {"type": "connection_ack"}
            await ws.send(json.dumps({"type": "connection_init", "payload": payload}))
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4429


async def test_a_token_named_twice_in_connection_init_closes_the_socket(
    service: Service, human: Caller
) -> None:
    """`Authorization` and `authorization` both: the last one was taken, as
    if the other had not been sent; over HTTP a header sent twice is refused."""
    payload = {"Authorization": "Bearer wp_nope", "authorization": f"Bearer {human.token}"}
    assert await close_code_after_init(service, payload) == 4401


async def test_project_events_replay_then_follow_in_order(
    service: Service, human: Caller, project: str
) -> None:
    await new_task(human, "before")
    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(EVENTS, {"after": 0})
        await new_task(human, "after")
        expected = (await human.get("/api/v1/projects/demo/events", limit=200)).json()["items"]
        got = [(await _next(client, op))["projectEvents"] for _ in expected]
    assert [g["sequence"] for g in got] == [e["sequence"] for e in expected]
    assert [g["type"] for g in got] == [e["type"] for e in expected]
    assert got[-1]["actor"] == {"name": "alice"}
    assert {g["projectId"] for g in got} == {"demo"}  # section 10's project_id


async def test_project_events_carry_their_subject_as_it_is_when_delivered(
    service: Service, human: Caller, project: str
) -> None:
    query = """subscription ($after: Int) { projectEvents(projectId: "demo", after: $after) {
      type project { restId } subject { __typename ... on Task { restId title } } } }"""
    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(query, await log_end(human))
        task_id = await new_task(human, "live")
        got = (await _next(client, op))["projectEvents"]
    assert got == {
        "type": "task.created",
        "project": {"restId": "demo"},
        "subject": {"__typename": "Task", "restId": task_id, "title": "live"},
    }


async def test_subscriptions_asking_the_same_share_one_execution_of_each_event(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each subscription executed its selection for each event: 100 dashboards
    cost 100 executions a write (16 writers fell from 1,750 to 120 writes/s,
    `python -m bench --suite fanout`). Operations that print the same, with
    the same variables, now share one execution; whoever asks, since nothing
    a subscription selects depends on the caller."""
    from waypost.schema.execution import PlainFieldExecutor

    runs: list[int] = []  # the event each execution answered
    execute = PlainFieldExecutor._execute_operation

    def counted(self: PlainFieldExecutor, serially: bool | None) -> Any:
        runs.append(self.root_value.sequence)
        return execute(self, serially)

    monkeypatch.setattr(PlainFieldExecutor, "_execute_operation", counted)
    bob = await service.principal("human", "bob")
    # the same selection, written otherwise, from the same place given inline
    respaced = EVENTS.replace(" ", "\n  ").replace("($after:\n  Int)", "")
    narrower = """subscription ($after: Int) {
      projectEvents(projectId: "demo", after: $after) { sequence subjectId } }"""
    async with (
        running(service) as base,
        graphql_ws(base, human.token) as alice_ws,
        graphql_ws(base, bob.token) as bob_ws,
    ):
        after = await log_end(human)
        alice_op = await alice_ws.subscribe(EVENTS, after)
        respaced = respaced.replace("$after", str(after["after"]))
        bob_ops = [await bob_ws.subscribe(respaced, {}), await bob_ws.subscribe(narrower, after)]

        async def next_of_each() -> list[dict[str, Any]]:
            got = [(await _next(alice_ws, alice_op))["projectEvents"]]
            # one socket's two subscriptions answer in either order
            by_op = {m["id"]: m["payload"] for m in [await bob_ws.receive() for _ in bob_ops]}
            return got + [by_op[op]["data"]["projectEvents"] for op in bob_ops]

        # a stream that starts behind the hub's window reads the log itself,
        # one copy each: once all three have caught up they share the hub's
        await new_task(human, "catching up")
        await next_of_each()
        task = await new_task(human, "shared")
        got = await next_of_each()
    assert got[0] == got[1] and got[0]["subjectId"] == task and got[0]["actor"] == {"name": "alice"}
    assert got[2] == {"sequence": got[0]["sequence"], "subjectId": task}
    # one execution for the two that ask the same, one for the other
    assert runs.count(got[0]["sequence"]) == 2, runs


BATCHES = """subscription ($after: Int) {
  projectEventBatches(projectId: "demo", after: $after) {
    lastSequence events { sequence type subjectId actor { name } } } }"""


async def test_project_event_batches_carry_every_event_in_order_once(
    service: Service, human: Caller, project: str
) -> None:
    """The events of projectEvents, but every event ready at a wake in one
    message: 100 subscribers of projectEvents took 16 writers to about 0.15
    of their throughput alone (a message, and Strawberry's handling of it,
    per event per subscriber), of projectEventBatches to about 0.9 (`python
    -m bench --suite fanout`)."""
    for i in range(3):
        await new_task(human, f"before {i}")
    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(BATCHES, {"after": 0})
        batches = [(await _next(client, op))["projectEventBatches"]]
        for i in range(3):
            await new_task(human, f"after {i}")
        expected = (await human.get("/api/v1/projects/demo/events", limit=200)).json()["items"]
        got = list(batches[0]["events"])
        while len(got) < len(expected):
            batches.append((await _next(client, op))["projectEventBatches"])
            got += batches[-1]["events"]
    assert [g["sequence"] for g in got] == [e["sequence"] for e in expected]
    assert [g["type"] for g in got] == [e["type"] for e in expected]
    assert got[-1]["actor"] == {"name": "alice"}
    # the replay (the project's creation and three tasks) came as one message
    assert len(batches[0]["events"]) == 4, batches[0]
    assert all(b["events"] and b["lastSequence"] == b["events"][-1]["sequence"] for b in batches)


async def test_a_batch_past_the_execution_limits_ends_the_subscription_saying_where_to_resume(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The execution limits apply to a whole message, and a batch holds up
    to 200 events: an answer past them carried `data: null` and the
    subscription went on with the next run, its events lost without a
    trace. It now ends, its error naming the sequence to resume after
    (`projectEvents`, whose limits apply to each event, delivers them)."""
    from waypost.schema import budget

    for i in range(3):
        await new_task(human, f"before {i}")
    # each event alone is 3 objects (the root, the event, its actor); the
    # replay of four, 10 (with the batch)
    monkeypatch.setattr(budget, "MAX_OBJECTS", 6)
    expected = (await human.get("/api/v1/projects/demo/events", limit=200)).json()["items"]
    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(BATCHES, {"after": 0})
        message = await client.receive()
        assert message["id"] == op and message["type"] == "next", message
        assert message["payload"]["data"] is None, message
        (error,) = message["payload"]["errors"]
        after = expected[0]["sequence"] - 1
        assert error["message"].startswith(f"this batch was not delivered; resume after {after}")
        assert error["extensions"] == {"code": "invalid_request", "after": after}, error
        assert (await client.receive()) == {"id": op, "type": "complete"}
        op = await client.subscribe(EVENTS, {"after": after})
        got = [(await _next(client, op))["projectEvents"] for _ in expected]
    assert [g["sequence"] for g in got] == [e["sequence"] for e in expected]


async def test_batch_subscriptions_woken_together_share_one_execution(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two dashboards following the project get the same run of events at a
    wake: one execution of their selection answers both."""
    from waypost.schema.execution import PlainFieldExecutor
    from waypost.schema.subscriptions import EventBatch

    runs: list[int] = []  # the last event of each batch an execution answered
    execute = PlainFieldExecutor._execute_operation

    def counted(self: PlainFieldExecutor, serially: bool | None) -> Any:
        if isinstance(self.root_value, EventBatch):
            runs.append(self.root_value.events[-1].sequence)
        return execute(self, serially)

    monkeypatch.setattr(PlainFieldExecutor, "_execute_operation", counted)
    bob = await service.principal("human", "bob")
    async with (
        running(service) as base,
        graphql_ws(base, human.token) as alice_ws,
        graphql_ws(base, bob.token) as bob_ws,
    ):
        after = await log_end(human)
        alice_op = await alice_ws.subscribe(BATCHES, after)
        bob_op = await bob_ws.subscribe(BATCHES, after)

        async def next_of_each() -> list[dict[str, Any]]:
            return [
                (await _next(alice_ws, alice_op))["projectEventBatches"],
                (await _next(bob_ws, bob_op))["projectEventBatches"],
            ]

        # a stream that starts behind the hub's window reads the log itself,
        # one copy each: once both have caught up they share the hub's
        await new_task(human, "catching up")
        await next_of_each()
        task = await new_task(human, "shared")
        got = await next_of_each()
    assert got[0] == got[1] and [e["subjectId"] for e in got[0]["events"]] == [task]
    assert runs.count(got[0]["lastSequence"]) == 1, runs


def test_what_is_asked_of_each_event_decides_which_subscriptions_share() -> None:
    from graphql import OperationDefinitionNode, parse
    from graphql.execution.collect_fields import FragmentDetails

    from waypost.schema.shared_events import operation_key

    def key(document: str, variables: dict[str, Any] | None = None) -> Any:
        operation, *fragments = parse(document).definitions
        assert isinstance(operation, OperationDefinitionNode)
        # as the executor holds them (graphql-core's FragmentDetails)
        held = {f.name.value: FragmentDetails(f) for f in fragments}  # type: ignore[attr-defined]
        return operation_key(operation, held, variables or {})

    plain = 'subscription { projectEvents(projectId: "a") { sequence } }'
    # the root field's arguments pick the events, not what each answer holds
    elsewhere = 'subscription { projectEvents(projectId: "b", after: 3) { sequence } }'
    assert key(plain) == key(elsewhere)
    assert key(plain) != key('subscription { seen: projectEvents(projectId: "a") { sequence } }')
    assert key(plain) != key('subscription { projectEvents(projectId: "a") { sequence type } }')
    fragment = """subscription { projectEvents(projectId: "a") { ...F } }
    fragment F on Event { sequence %s }"""
    assert key(fragment % "") != key(fragment % "type")
    chosen = """subscription ($type: Boolean!, $from: Int) {
      projectEvents(projectId: "a", after: $from) { sequence type @include(if: $type) } }"""
    assert key(chosen, {"type": True, "from": 1}) == key(chosen, {"type": True, "from": 9})
    assert key(chosen, {"type": True}) != key(chosen, {"type": False})


async def test_subscriptions_with_fragments_share_by_what_the_fragments_select(
    service: Service, human: Caller, project: str
) -> None:
    """The key printed the executor's fragments, which are (definition,
    signatures) pairs, not nodes: every subscription with a named fragment
    was answered "Not an AST Node" on its first event, and ended."""
    bob = await service.principal("human", "bob")
    with_fragment = """subscription ($after: Int) {
      projectEvents(projectId: "demo", after: $after) { ...Seen } }
    fragment Seen on Event { sequence %s }"""
    async with (
        running(service) as base,
        graphql_ws(base, human.token) as alice_ws,
        graphql_ws(base, bob.token) as bob_ws,
    ):
        after = await log_end(human)
        alice_op = await alice_ws.subscribe(with_fragment % "type", after)
        bob_op = await bob_ws.subscribe(with_fragment % "subjectId", after)
        for title in ("catching up", "shared"):
            task = await new_task(human, title)
            alice, bob_got = await _next(alice_ws, alice_op), await _next(bob_ws, bob_op)
    assert alice["projectEvents"] == {"sequence": bob_got["projectEvents"]["sequence"],
                                      "type": "task.created"}  # fmt: skip
    assert bob_got["projectEvents"]["subjectId"] == task


async def test_a_subscription_whose_events_cannot_be_shared_runs_its_own(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """Sharing only saves work: a key that cannot be made must not end the
    subscription (a named fragment's did, with the fault's text sent out)."""
    from waypost.schema import shared_events

    def unforeseen(*args: Any) -> Any:
        raise TypeError("a document shape the key did not foresee")

    monkeypatch.setattr(shared_events, "operation_key", unforeseen)
    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(EVENTS, await log_end(human))
        task = await new_task(human, "not shared")
        assert (await _next(client, op))["projectEvents"]["subjectId"] == task
    assert any("subscription events not shared" in r.getMessage() for r in caplog.records)


async def test_only_an_answer_without_errors_is_shared_and_its_task_let_go() -> None:
    """An error's `locations` point into the document it ran for, so each
    subscriber with an erring answer runs its own; a finished answer is kept
    without its task, which held the first subscriber's context (loaders,
    token) for as long as the answer was remembered."""
    from graphql import GraphQLError

    from waypost.schema import shared_events

    runs: list[str] = []

    def runner(name: str, result: ExecutionResult) -> Any:
        async def run() -> ExecutionResult:
            runs.append(name)
            await asyncio.sleep(0)
            return result

        return run

    good, bad = ExecutionResult({"x": 1}), ExecutionResult(None, [GraphQLError("no")])
    payload, other = object(), object()
    first = shared_events.answer(payload, "op", runner("first", good))
    second = shared_events.answer(payload, "op", runner("second", good))
    assert await first is good and await second is good  # type: ignore[misc]
    assert runs == ["first"]
    assert shared_events._ANSWERS.entries[(id(payload), "op")][1] is good  # the answer, no task
    erring = [shared_events.answer(other, "op", runner(n, bad)) for n in ("a", "b")]
    assert [await e for e in erring] == [bad, bad]  # type: ignore[misc]
    assert runs == ["first", "a", "b"] and (id(other), "op") not in shared_events._ANSWERS.entries

    async def failing() -> ExecutionResult:
        runs.append("failing")
        await asyncio.sleep(0)
        raise RuntimeError("a fault in the first subscriber's execution")

    third = object()
    failed = shared_events.answer(third, "op", failing)
    own = shared_events.answer(third, "op", runner("own", good))
    with pytest.raises(RuntimeError):
        await failed  # type: ignore[misc]
    assert await own is good and runs[-2:] == ["failing", "own"]  # type: ignore[misc]


async def test_a_subscription_keeps_nothing_of_the_events_it_delivered(
    service: Service, human: Caller, project: str
) -> None:
    """graphql-core's memo of collected sub-fields (here `actor { name }`),
    shared by every event's copy of the executor, kept one entry per event
    while the subscription lasted: 1.5 KB per event per subscriber."""

    def collected_alive() -> int:
        gc.collect()
        return sum(type(o).__name__ == "CollectedFields" for o in gc.get_objects())

    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(EVENTS, await log_end(human))
        before = collected_alive()
        for n in range(60):
            await new_task(human, f"task {n}")
            assert (await _next(client, op))["projectEvents"]["actor"] == {"name": "alice"}
        assert collected_alive() - before < 10


async def test_decision_changed_follows_answers_and_status_changes_made_elsewhere(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(CHANGED, {"id": decision["id"]})
        first = (await _next(client, op))["decisionChanged"]
        assert (first["status"], first["generation"]) == ("PENDING", 1)

        assert (await send_answer(human, decision["id"], disposition="allow")).status_code == 200
        answered = (await _next(client, op))["decisionChanged"]
        assert answered["status"] == "ALLOWED"
        assert answered["current"]["answer"] == {"disposition": "ALLOW"}

        # an edit of a judged field of the affected task: no decision event, but stale
        await edit_task(human, task, title="A different question now")
        stale = (await _next(client, op))["decisionChanged"]
        assert stale["status"] == "STALE"


async def test_decision_changed_yields_every_state_a_late_read_finds_in_one_batch(
    service: Service, human: Caller, project: str
) -> None:
    """An answer, a reopen and a second answer committed before the stream
    reads again (one batch): each state is yielded in turn, not only the last
    one (the answer in between was lost)."""
    task = await new_task(human)
    decision = await open_decision(human, [task])
    actor = await service.rt.db.read(lambda conn: principals.authenticate(conn, human.token, "api"))
    changes = decision_changes(service.rt, actor, human.token, decision["id"])
    async with aclosing(changes):
        first = await anext(changes)
        assert (first["status"], first["generation"]) == ("pending", 1)
        # the generator is paused: everything below reaches it as one batch
        assert (await send_answer(human, decision["id"], disposition="allow")).status_code == 200
        assert (await reopen(human, decision["id"], 1)).status_code == 200
        denied = await send_answer(human, decision["id"], generation=2, disposition="deny")
        assert denied.status_code == 200
        await edit_task(human, task, title="A different question now")
        async with asyncio.timeout(10):  # a lost state would wait for ever
            seen = [await anext(changes) for _ in range(4)]
    states = [(d["generation"], d["status"], d["current"]["answer"] and d["current"]["answer"]
               ["disposition"]) for d in seen]  # fmt: skip
    assert states == [(1, "allowed", "allow"), (2, "pending", None), (2, "denied", "deny"),
                      (2, "stale", "deny")]  # fmt: skip
    assert all(d["work_allowed"] is (d["status"] == "allowed") for d in seen)


async def test_decision_changed_reads_again_only_when_something_may_have_changed_it(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It read the decision after every event of its project: 100 of them,
    on a decision nothing touched, cost 16 writers a quarter of their
    throughput (`python -m bench --suite fanout`). Edits of other tasks
    cannot change it; an edit of a task it affects can."""
    task, other = await new_task(human), await new_task(human, "Another task")
    decision = await open_decision(human, [task])
    actor = await service.rt.db.read(lambda conn: principals.authenticate(conn, human.token, "api"))
    reads = 0
    load = streams.load_changes

    async def counted(rt: Any, decision_id: str, seen: int | None) -> Any:
        nonlocal reads
        reads += 1
        return await load(rt, decision_id, seen)

    monkeypatch.setattr(streams, "load_changes", counted)
    changes = decision_changes(service.rt, actor, human.token, decision["id"])
    async with aclosing(changes):
        assert (await anext(changes))["status"] == "pending"
        following = asyncio.ensure_future(anext(changes))
        for i in range(5):
            await edit_task(human, other, title=f"Another task, take {i}")
        await asyncio.sleep(0.3)  # the hub has handed the stream those events
        assert reads == 1 and not following.done()  # the first state's read alone
        await edit_task(human, task, title="A different question now")
        async with asyncio.timeout(10):
            assert (await following)["status"] == "stale"
    assert reads == 2


async def _states(changes: Any, seconds: float = 1.5) -> list[tuple[int, str]]:
    """What the stream yields within `seconds` (it never ends by itself)."""
    seen = []
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            while True:
                found = await anext(changes)
                seen.append((found["generation"], found["status"]))
    return seen


@pytest.mark.parametrize(
    "commits_during", ["the first read", "a batch's read", "a batch's read, twice"]
)
async def test_decision_changed_never_replays_what_a_read_already_showed(
    service: Service,
    human: Caller,
    project: str,
    monkeypatch: pytest.MonkeyPatch,
    commits_during: str,
) -> None:
    """Changes that commit while the stream reads are in that read's state; the
    next batch replayed them (an old generation's ALLOWED after the new
    PENDING, as a reviewer showed)."""
    task = await new_task(human)
    decision = await open_decision(human, [task])
    actor = await service.rt.db.read(lambda conn: principals.authenticate(conn, human.token, "api"))
    original = streams.load_changes
    reads = 0

    async def allow() -> None:
        assert (await send_answer(human, decision["id"], disposition="allow")).status_code == 200

    async def racing(rt: Any, decision_id: str, seen: int | None) -> Any:
        nonlocal reads
        reads += 1
        if commits_during == "the first read" and reads == 1:
            assert (
                await send_answer(human, decision["id"], disposition="allow")
            ).status_code == 200
            assert (await reopen(human, decision["id"], 1)).status_code == 200
        if commits_during.startswith("a batch's read") and reads == 2:
            assert (await reopen(human, decision["id"], 1)).status_code == 200
            if commits_during.endswith("twice"):
                # a state no event of the batch in hand holds: it was lost
                denied = await send_answer(human, decision["id"], generation=2, disposition="deny")
                assert denied.status_code == 200
        return await original(rt, decision_id, seen)

    monkeypatch.setattr(streams, "load_changes", racing)
    changes = decision_changes(service.rt, actor, human.token, decision["id"])
    async with aclosing(changes):
        first = await anext(changes)
        if commits_during.startswith("a batch's read"):
            assert (first["generation"], first["status"]) == (1, "pending")
            assert (
                await send_answer(human, decision["id"], disposition="allow")
            ).status_code == 200
            expected = [(1, "allowed"), (2, "pending")]
            if commits_during.endswith("twice"):
                expected.append((2, "denied"))
            assert await _states(changes) == expected
        else:
            assert (first["generation"], first["status"]) == (2, "pending")
            assert await _states(changes) == []


async def test_decision_changed_reports_expiry_when_time_passes(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    expires = format_time(service.clock.now() + timedelta(minutes=5))
    decision = await open_decision(human, [task], expires_at=expires)
    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(CHANGED, {"id": decision["id"]})
        assert (await _next(client, op))["decisionChanged"]["status"] == "PENDING"
        service.clock.advance(minutes=6)  # nothing is written: time alone moves it
        assert (await _next(client, op))["decisionChanged"]["status"] == "EXPIRED"


async def test_each_message_says_the_services_clock(
    service: Service, human: Caller, project: str
) -> None:
    """Every HTTP answer carries the service's clock (`Waypost-Now`); a
    message over the socket carried none, and a dashboard counting down to
    an expiry had only the browser's clock, which may be hours off."""
    task = await new_task(human)
    expires = format_time(service.clock.now() + timedelta(minutes=5))
    decision = await open_decision(human, [task], expires_at=expires)
    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(CHANGED, {"id": decision["id"]})
        first = await client.receive()
        assert first["id"] == op and first["payload"]["extensions"] == {
            "now": format_time(service.clock.now())
        }  # fmt: skip
        service.clock.advance(minutes=6)
        expired = await client.receive()
        assert expired["payload"]["data"]["decisionChanged"]["status"] == "EXPIRED"
        assert expired["payload"]["extensions"]["now"] == format_time(service.clock.now())


async def test_decision_changed_sees_an_expiry_the_clock_passes_while_a_state_is_sent(
    service: Service, human: Caller, project: str
) -> None:
    """Whether the decision had expired was taken from the clock when the
    stream resumed after sending a state, not from the read that made the
    state: a clock passing the expiry in between (just after the first
    state, or just after a reopen's PENDING with a near expiry) was seen
    only at the next token check, 15 s later."""
    task = await new_task(human)
    expires = format_time(service.clock.now() + timedelta(minutes=5))
    decision = await open_decision(human, [task], expires_at=expires)
    actor = await service.rt.db.read(lambda conn: principals.authenticate(conn, human.token, "api"))
    changes = decision_changes(service.rt, actor, human.token, decision["id"])
    async with aclosing(changes), asyncio.timeout(5):  # the token check is 15 s away
        assert (await anext(changes))["status"] == "pending"
        service.clock.advance(minutes=6)  # while the stream is paused at that state
        assert (await anext(changes))["status"] == "expired"
        again = format_time(service.clock.now() + timedelta(minutes=5))
        assert (await reopen(human, decision["id"], 1, expires_at=again)).status_code == 200
        reopened = await anext(changes)
        assert (reopened["generation"], reopened["status"]) == (2, "pending")
        service.clock.advance(minutes=6)
        assert (await anext(changes))["status"] == "expired"


async def test_subscriptions_are_capped_per_token(
    service: Service, human: Caller, project: str
) -> None:
    async with running(service) as base, graphql_ws(base, human.token) as client:
        ops = [await client.subscribe(EVENTS) for _ in range(4)]  # QUICK allows 3
        message = await client.receive()
        refused = message["id"]
        assert message["type"] == "next", message
        assert message["payload"]["errors"][0]["extensions"]["code"] == "too_many_streams"
        assert (await client.receive()) == {"id": refused, "type": "complete"}
        # the other three are open: each gets the next event
        await new_task(human, "seen by three")
        got = {(await client.receive())["id"] for _ in range(3)}
    assert got == set(ops) - {refused}


async def test_sockets_are_capped_per_token_with_or_without_subscriptions(
    service: Service, human: Caller, project: str
) -> None:
    """An acknowledged socket with no subscription was neither counted nor
    ever closed: one token opened 20,000 and the process ran out of
    descriptors. Sockets are capped per token as streams are (QUICK: 3)."""
    agent = await service.agent()
    async with running(service) as base, contextlib.AsyncExitStack() as held:
        url = base.replace("http://", "ws://") + "/graphql"
        first = contextlib.AsyncExitStack()
        await first.enter_async_context(graphql_ws(base, human.token))
        for _ in range(2):
            await held.enter_async_context(graphql_ws(base, human.token))
        async with connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
            init = {
                "type": "connection_init",
                "payload": {"Authorization": f"Bearer {human.token}"},
            }
            await ws.send(json.dumps(init))
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        # another token is counted apart
        async with graphql_ws(base, agent.token) as other:
            op = await other.subscribe(EVENTS, {"after": 0})  # the project's events so far
            assert (await other.receive())["id"] == op
        # a socket that closes frees its place
        await first.aclose()
        for _ in range(500):
            if service.rt.hub is not None and service.rt.hub.socket_count() == 2:
                break
            await asyncio.sleep(0.02)
        assert service.rt.hub is not None and service.rt.hub.socket_count() == 2
        async with graphql_ws(base, human.token) as again:
            op = await again.subscribe(EVENTS, {"after": 0})
            assert (await again.receive())["id"] == op


async def test_unknown_records_and_limits_are_errors(
    service: Service, human: Caller, project: str
) -> None:
    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(CHANGED, {"id": "dec_nope"})
        message = await client.receive()
        assert message["id"] == op
        assert message["payload"]["errors"][0]["extensions"]["code"] == "not_found"
        assert (await client.receive()) == {"id": op, "type": "complete"}
        # a decision's global id, where its REST id is taken: the error says so
        op = await client.subscribe(CHANGED, {"id": global_id("Decision", "dec_nope")})
        error = (await client.receive())["payload"]["errors"][0]
        assert error["extensions"]["code"] == "not_found"
        assert '"dec_nope"' in error["message"] and "`restId`" in error["message"], error
        assert (await client.receive()) == {"id": op, "type": "complete"}
        # a negative position, refused as by the SSE route (it streamed from 1)
        op = await client.subscribe(EVENTS, {"after": -5})
        message = await asyncio.wait_for(client.receive(), 10)
        assert message["id"] == op
        error = message["payload"]["errors"][0]["extensions"]
        assert error["code"] == "invalid_request" and error["field"] == "after", error
        assert (await client.receive()) == {"id": op, "type": "complete"}
        # a position past the log's end (a restored database), as by the SSE route
        op = await client.subscribe(EVENTS, {"after": 10**9})
        message = await asyncio.wait_for(client.receive(), 10)
        error = message["payload"]["errors"][0]["extensions"]
        assert error["code"] == "invalid_request" and error["field"] == "after", error
        assert error["last_sequence"] == 1, error  # the project's creation
        assert (await client.receive()) == {"id": op, "type": "complete"}
        # the query limits of section 12 apply: 31 aliases is one too many
        fields = " ".join(f"a{i}: type" for i in range(31))
        op = await client.subscribe(
            f'subscription {{ projectEvents(projectId: "demo") {{ {fields} }} }}'
        )
        message = await client.receive()
    assert message["id"] == op
    assert message["type"] == "error", message
    assert "alias" in message["payload"][0]["message"].lower(), message
    assert message["payload"][0]["extensions"]["code"] == "invalid_request"


async def test_a_refused_subscribe_does_not_echo_a_long_name_whole(
    service: Service, human: Caller, project: str
) -> None:
    """Validation quotes the name it refuses: as over HTTP, at most 200
    characters of it come back."""
    name = "k" * 60_000
    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(
            f'subscription {{ projectEvents(projectId: "demo") {{ {name} }} }}'
        )
        message = await asyncio.wait_for(client.receive(), 10)
    assert message["id"] == op and message["type"] == "error", str(message)[:300]
    assert len(message["payload"][0]["message"]) <= 203


async def test_a_subscribe_over_the_body_limit_is_refused_for_its_operation(
    service: Service, human: Caller, project: str
) -> None:
    """The 64 KiB of a POST /graphql body bound a subscribe frame too (a 5 MB
    document was accepted); the socket stays open for the next one."""
    padded = 'subscription { projectEvents(projectId: "demo") { sequence } }' + " " * 70_000
    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(padded)
        message = await asyncio.wait_for(client.receive(), 10)
        assert message["id"] == op and message["type"] == "error", message
        assert message["payload"][0]["extensions"]["code"] == "payload_too_large"
        op = await client.subscribe(EVENTS, {"after": 0})
        assert (await _next(client, op))["projectEvents"]["sequence"] >= 1


async def test_decision_required_names_what_to_wait_on(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    agent = await service.agent()
    rest = await agent.post("/api/v1/projects/demo/claims", {"task_id": task})
    assert rest.status_code == 409
    details = rest.json()["error"]["details"]
    assert details["wait_on"] == {
        "stream": "/api/v1/projects/demo/events/stream",
        "subscription": "decisionChanged",
    }
    data = await agent.gql(
        """mutation ($input: TaskClaimInput!) { taskClaim(input: $input) {
             userErrors { code waitOn message } } }""",
        {"input": {"idempotencyKey": "claim-1", "projectId": "demo", "taskId": task}},
    )
    (user_error,) = data["data"]["taskClaim"]["userErrors"]
    assert user_error["code"] == "decision_required"
    assert user_error["waitOn"] == [f'decisionChanged(id: "{decision["id"]}")']
    assert "events/stream" in user_error["message"]


async def test_faults_are_masked_over_the_socket_too(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(row: Any) -> dict[str, Any]:
        raise RuntimeError("secret: /var/lib/waypost.db is corrupt")

    monkeypatch.setattr(project_store, "policy_json", broken)
    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe('{ project(id: "demo") { policy { revision } } }')
        message = await client.receive()
    assert message["id"] == op and message["type"] == "next"
    (error,) = message["payload"]["errors"]
    assert error["message"] == "Unexpected error."
    assert error["extensions"] == {"code": "internal"}
    assert "secret" not in json.dumps(message)


async def test_a_token_revoked_while_its_socket_is_open_runs_nothing_more(
    service: Service, human: Caller, project: str
) -> None:
    other = await service.principal("human", "bob")
    async with running(service) as base, graphql_ws(base, other.token) as client:
        op = await client.subscribe("{ me { name } }")
        assert (await _next(client, op)) == {"me": {"name": "bob"}}
        assert (await client.receive()) == {"id": op, "type": "complete"}
        actor = await service.rt.db.read(lambda c: principals.authenticate(c, other.token, "api"))
        at = format_time(service.clock.now())
        await service.rt.db.write(lambda c: principals.revoke_token(c, actor.token_id, at))
        await client.subscribe("{ me { name } }")
        with pytest.raises(ConnectionClosed) as closed:
            await client.receive()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401


async def test_an_idle_socket_is_closed_once_its_token_is_revoked(
    service: Service, human: Caller, project: str
) -> None:
    """A socket with no subscription ran nothing that re-checked its token:
    revoked, it stayed open and counted against the socket caps for ever."""
    other = await service.principal("human", "bob")
    async with running(service) as base, graphql_ws(base, other.token) as client:
        assert service.rt.hub is not None and service.rt.hub.socket_count() == 1
        actor = await service.rt.db.read(lambda c: principals.authenticate(c, other.token, "api"))
        at = format_time(service.clock.now())
        await service.rt.db.write(lambda c: principals.revoke_token(c, actor.token_id, at))
        with pytest.raises(ConnectionClosed) as closed:
            await client.receive(timeout=5)  # QUICK re-checks every 0.3 s
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
        for _ in range(100):
            if service.rt.hub.socket_count() == 0:
                break
            await asyncio.sleep(0.05)
        assert service.rt.hub.socket_count() == 0


DEEP: Any = 1
for _ in range(40):
    DEEP = [DEEP]


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ({"query": "{ me { name }"}, "Syntax Error"),
        ({"query": 5}, "query must be a string"),
        ({"query": "query A { me { name } } query B { me { name } }"}, "operation name"),
        ({"query": "{ me { name } }", "variables": {"a": DEEP}}, "nest"),
    ],
)
async def test_a_refused_subscribe_answers_an_error_for_its_id(
    service: Service, human: Caller, project: str, payload: dict[str, Any], words: str
) -> None:
    async with running(service) as base, graphql_ws(base, human.token) as client:
        await client.ws.send(json.dumps({"id": "x", "type": "subscribe", "payload": payload}))
        message = await client.receive()
        assert message["id"] == "x" and message["type"] == "error", message
        assert words in message["payload"][0]["message"], message
        assert message["payload"][0]["extensions"]["code"] == "invalid_request"
        # the socket is still open and serves the next operation
        op = await client.subscribe("{ me { name } }")
        assert (await _next(client, op)) == {"me": {"name": "alice"}}


async def test_operations_running_at_once_on_one_socket_count_their_own_searches(
    service: Service, human: Caller, project: str
) -> None:
    """A socket keeps one context for all its operations; their loaders were
    kept on it, so an operation started after another replaced the first's,
    and two queries of three searches each were refused as one of six."""
    async with running(service) as base, graphql_ws(base, human.token) as client:
        ops = []
        for words in (("a", "b", "c"), ("d", "e", "f")):
            fields = " ".join(f'{w}: tasks(q: "{w}x") {{ totalCount }}' for w in words)
            ops.append(await client.subscribe('{ project(id: "demo") { ' + fields + " } }"))
        answers: dict[str, dict[str, Any]] = {}
        while len(answers) < 2:
            message = await client.receive()
            if message["type"] == "next":
                answers[message["id"]] = message["payload"]
        for op in ops:
            assert "errors" not in answers[op], answers[op]


async def test_operations_past_the_sockets_limit_are_told_to_wait(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strawberry refused them "Subscription limit reached" with
    `invalid_request`, so a client sending valid queries would not retry."""
    from waypost.schema import websocket

    monkeypatch.setattr(websocket, "MAX_OPERATIONS", 2)
    async with running(service) as base, graphql_ws(base, human.token) as client:
        first = await client.subscribe(EVENTS, {"after": 0})
        await client.subscribe(EVENTS, {"after": 0})
        await client.ws.send(json.dumps(
            {"id": "third", "type": "subscribe", "payload": {"query": "{ me { name } }"}}
        ))  # fmt: skip
        message = await asyncio.wait_for(client.receive(), 10)
        while message.get("id") != "third":  # the subscriptions' events come first
            message = await asyncio.wait_for(client.receive(), 10)
        assert message["type"] == "error", message
        assert message["payload"][0]["extensions"] == {"code": "too_many_operations", "most": 2}
        await client.ws.send(json.dumps({"id": first, "type": "complete"}))
        op = await client.subscribe("{ me { name } }")
        message = await client.receive()
        while message.get("id") != op:  # the other subscription's events
            message = await client.receive()
        assert message["type"] == "next", message
        assert message["payload"]["data"] == {"me": {"name": "alice"}}


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ({"query": "query A { me { name } }", "operationName": "B"}, "Unknown operation"),
        ({"query": "query A { me { name } }", "operationName": ""}, "Unknown operation"),
        ({"query": "query A { me { name } } query C { me { id } }", "operationName": "B"},
         "Unknown operation"),
        ({"query": "fragment F on Query { me { name } }"}, "Must provide an operation"),
    ],
)  # fmt: skip
async def test_an_operation_name_that_selects_nothing_ends_only_its_own_operation(
    service: Service, human: Caller, project: str, payload: dict[str, Any], words: str
) -> None:
    """Strawberry closed the whole socket (4400) for it, and every other
    subscription on it; over HTTP the same request is a 400."""
    async with running(service) as base, graphql_ws(base, human.token) as client:
        running_op = await client.subscribe(EVENTS, {"after": 0})
        assert (await _next(client, running_op))["projectEvents"]["sequence"] >= 1
        await client.ws.send(json.dumps({"id": "x", "type": "subscribe", "payload": payload}))
        message = await asyncio.wait_for(client.receive(), 10)
        assert message["id"] == "x" and message["type"] == "error", message
        assert words in message["payload"][0]["message"], message
        assert message["payload"][0]["extensions"]["code"] == "invalid_request"
        # the running subscription still delivers
        await human.post("/api/v1/projects/demo/tasks", {"title": "after the refusal"})
        assert (await _next(client, running_op))["projectEvents"]["sequence"] >= 2
    r = await human.client.post("/graphql", json=payload, headers=human.headers())
    assert r.status_code == 400, r.text


@pytest.mark.parametrize(
    ("frame", "words"),
    [
        ('{"id": "x", "type": "subscribe", "payload": {"query": "{ me { name } }",'
         ' "query": "{ me { id } }"}}', "duplicate key"),
        ('{"id": "x", "type": "subscribe", "payload": {"query": "{ me { name } }",'
         ' "variables": {"a": NaN}}}', "NaN"),
        ('{"id": "x", "type": "subscribe", "payload": {"query": "{ me { name } }",'
         ' "variables": {"a": 99999999999999999999}}}', "64"),
        # past what Python's json reads at all (its int() limit, its
        # recursion): the frame's id was not found and the socket closed
        ('{"id": "x", "type": "subscribe", "payload": {"query": "{ me { name } }",'
         f' "variables": {{"a": {"1" * 5000}}}}}}}', "64"),
        ('{"id": "x", "type": "subscribe", "payload": {"query": "{ me { name } }",'
         f' "variables": {{"a": {"[" * 3000}{"]" * 3000}}}}}}}', "nests too deeply"),
    ],
)  # fmt: skip
async def test_a_subscribe_frame_of_refused_json_answers_an_error_for_its_id(
    service: Service, human: Caller, project: str, frame: str, words: str
) -> None:
    """docs/graphql.md: JSON the strict parser refuses in a subscribe payload
    is refused for its operation, the socket staying open; it closed the
    socket (4400), ending every other subscription on it."""
    async with running(service) as base, graphql_ws(base, human.token) as client:
        running_op = await client.subscribe(EVENTS, {"after": 0})
        assert (await _next(client, running_op))["projectEvents"]["sequence"] >= 1
        await client.ws.send(frame)
        message = await asyncio.wait_for(client.receive(), 10)
        assert message["id"] == "x" and message["type"] == "error", message
        assert words in message["payload"][0]["message"], message
        assert message["payload"][0]["extensions"]["code"] == "invalid_request"
        op = await client.subscribe("{ me { name } }")
        assert (await _next(client, op)) == {"me": {"name": "alice"}}


@pytest.mark.parametrize(
    "frame",
    [
        "not json", '"a string"', "5", '{"id": "1", "type": "subscribe", "payload": "x"}',
        # an empty id names nothing the client could complete (it ran)
        '{"id": "", "type": "subscribe", "payload": {"query": "{ me { name } }"}}',
        # an id that is no string: a TypeError and an ERROR traceback
        '{"id": [1], "type": "complete"}', '{"id": {"a": 1}, "type": "complete"}',
        # an id no frame could carry back: a fault, and an ERROR traceback
        '{"id": "\\ud800", "type": "subscribe", "payload": {"query": "{ me { name } }"}}',
    ],
)  # fmt: skip
async def test_a_malformed_frame_closes_the_socket_with_4400(
    service: Service, human: Caller, project: str, frame: str
) -> None:
    async with running(service) as base, graphql_ws(base, human.token) as client:
        await client.ws.send(frame)
        with pytest.raises(ConnectionClosed) as closed:
            await client.receive()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4400


async def test_a_subscribe_reusing_a_running_id_closes_with_4409(
    service: Service, human: Caller, project: str
) -> None:
    """The request checks must not answer for an id that is still running:
    graphql-transport-ws closes the socket (Strawberry's 4409)."""
    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(EVENTS, {"after": 0})
        await client.ws.send(
            json.dumps({"id": op, "type": "subscribe", "payload": {"query": "{ me { name }"}})
        )
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                await client.receive()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4409


async def test_a_subscriber_gone_mid_send_is_no_error_and_other_faults_still_are(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A client that goes away mid-send is no fault of the service (section
    14). Closing console tabs as an event went out logged Strawberry's
    "Exception in worker task" ERROR with a traceback (2 of 5 closes in
    Chromium); the race needs a browser's timing, so the handler's verdict
    on each kind of failure is tested here."""
    handler = TransportWS(
        view=None,  # type: ignore[arg-type]
        websocket=None,  # type: ignore[arg-type]
        context=None,  # type: ignore[arg-type]
        root_value=None,
        schema=schema,
        connection_init_wait_timeout=timedelta(seconds=1),
    )
    caplog.set_level(logging.DEBUG)

    def handled(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
        # the handler's lines (Waypost's and Strawberry's), not a line another
        # module logs meanwhile (a condition's, by timer: own_condition_log)
        return [r for r in caplog.records if r.name.startswith(("waypost.graphql", "strawberry"))]

    await handler.handle_task_exception(WebSocketDisconnected())
    assert [r.levelno for r in handled(caplog)] == [logging.DEBUG]
    caplog.clear()
    # A socket with several subscriptions: after the first failed send, the
    # others' sends meet Starlette's own exceptions (an audit counted 11
    # ERROR lines for 15 clients that dropped with 4 subscriptions each)
    sent_after_close = starlette.websockets.WebSocketDisconnected(
        'Cannot call "send" once a close message has been sent.'
    )
    await handler.handle_task_exception(sent_after_close)
    await handler.handle_task_exception(starlette.websockets.WebSocketDisconnect(1006))
    assert [r.levelno for r in handled(caplog)] == [logging.DEBUG, logging.DEBUG]
    caplog.clear()
    await handler.handle_task_exception(RuntimeError("a real fault"))
    assert [r.levelno for r in handled(caplog)] == [logging.ERROR]


@pytest.mark.parametrize("key", ["Waypost-Session", "waypost-session", "WAYPOST-SESSION"])
@pytest.mark.parametrize("named", ["ended", 5, ["ses_x"]])
async def test_connection_init_reads_the_session_header_in_any_case_and_form(
    service: Service, key: str, named: object
) -> None:
    """A session named in connection_init that is not live, under any casing
    of its header name or in a form no header could carry, closes the socket
    (4401) as over HTTP it answers 403: it was read only as `Waypost-Session`,
    and a non-string value was dropped, so the socket ran without it."""
    agent = await service.agent("ws-agent")
    assert (await agent.post(f"/api/v1/sessions/{agent.session_id}/end")).status_code == 200
    payload = {"authorization": f"Bearer {agent.token}", key: agent.session_id}
    if named != "ended":
        payload[key] = named
    assert await close_code_after_init(service, payload) == 4401


async def test_a_socket_is_closed_once_the_session_it_named_ends(service: Service) -> None:
    """docs/graphql.md: every acknowledged socket re-checks its token *and
    session* and closes with 4401 once they fail, as connection_init refuses a
    session that is not live. Only the token's revocation and connection_init
    were pinned: a watch that re-checked the token alone left an agent's socket
    acting in a session that had ended (its subscriptions kept streaming). A
    live session named in lowercase is acknowledged first."""
    agent = await service.agent("ws-ends")
    payload = {"authorization": f"Bearer {agent.token}", "waypost-session": agent.session_id}
    async with running(service) as base:
        url = base.replace("http://", "ws://") + "/graphql"
        async with connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
            await ws.send(json.dumps({"type": "connection_init", "payload": payload}))
            assert json.loads(await ws.recv())["type"] == "connection_ack"
            ended = await agent.post(f"/api/v1/sessions/{agent.session_id}/end")
            assert ended.status_code == 200, ended.text
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 5)  # QUICK re-checks every 0.3 s
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401


async def test_request_errors_over_the_socket_carry_code_and_field_as_over_http(
    service: Service, human: Caller, project: str
) -> None:
    """docs/graphql.md: top-level errors carry `extensions.code` (and a refused
    argument its `field`), and the rules apply on the socket too. A variable
    that did not fit its type came back with no extensions at all, a
    mutation's refused `first: 0` without its field, a NaN in a payload
    without the variable it was in, and `extensions: []` ran."""
    mutation = (
        'mutation { taskCreate(input: {idempotencyKey: "ws-1", projectId: "demo", title: "T"})'
        " { task { revisions(first: 0) { totalCount } } } }"
    )
    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe("query ($n: Int) { projects(first: $n) { totalCount } }",
                                    {"n": "x"})  # fmt: skip
        message = await client.receive()
        assert message["id"] == op and message["type"] == "next", message
        error = message["payload"]["errors"][0]
        assert error["extensions"] == {"code": "invalid_request", "field": "n"}, error
        assert (await client.receive()) == {"id": op, "type": "complete"}
        op = await client.subscribe(mutation)
        message = await client.receive()
        assert message["id"] == op and message["type"] == "error", message
        assert message["payload"][0]["extensions"] == {"code": "invalid_request", "field": "first"}
        frame = ('{"id": "nan", "type": "subscribe", "payload": {"query": "{ me { name } }",'
                 ' "variables": {"a": NaN}}}')  # fmt: skip
        await client.ws.send(frame)
        message = await client.receive()
        assert message["id"] == "nan" and message["type"] == "error", message
        assert message["payload"][0]["extensions"]["field"] == "variables.a", message
        payload = {"query": "{ me { name } }", "extensions": []}
        await client.ws.send(json.dumps({"id": "ext", "type": "subscribe", "payload": payload}))
        message = await client.receive()
        assert message["id"] == "ext" and message["type"] == "error", message
        assert "extensions must be an object" in message["payload"][0]["message"]
    # nothing was written by the refused mutation
    tasks = await human.get("/api/v1/projects/demo/tasks")
    assert tasks.json()["items"] == []


def test_a_subscriber_cut_by_the_keepalive_is_no_fault() -> None:
    """resaudit: a subscriber that stopped reading was cut by uvicorn's
    keepalive (1011), and each send waiting on it then raised uvicorn's
    RuntimeError, logged as an ERROR with a traceback. Its words, as each of
    uvicorn's WebSocket implementations raises them, say the client is gone;
    another RuntimeError stays a fault."""
    from waypost.schema.websocket import client_gone

    for ending in (".", " "):  # websockets_sansio and wsproto; websockets (legacy)
        said = f"Unexpected ASGI message 'websocket.send', after sending 'websocket.close'{ending}"
        assert client_gone(RuntimeError(said))
    assert not client_gone(RuntimeError("Unexpected ASGI message 'websocket.accept'"))
    assert not client_gone(ValueError("Unexpected ASGI message 'websocket.send', after sending"))


async def test_a_rules_edit_pushes_stale_at_once_not_at_the_next_recheck(
    service: Service, human: Caller, project: str
) -> None:
    """A rules edit makes every allow of the project stale: `decisionChanged`
    says so as the policy event arrives. The tests' short re-check (0.3 s)
    hid a stream that waited for it (15 s in service: mutantaudit3)."""
    task = await new_task(human)
    decision = await open_decision(human, [task])
    slow = LiveLimits(poll_seconds=0.1, keepalive_seconds=30, recheck_seconds=60)
    async with running(service, slow) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(CHANGED, {"id": decision["id"]})
        assert (await _next(client, op))["decisionChanged"]["status"] == "PENDING"
        assert (await send_answer(human, decision["id"], disposition="allow")).status_code == 200
        assert (await _next(client, op))["decisionChanged"]["status"] == "ALLOWED"
        r = await human.patch(
            "/api/v1/projects/demo/policy", {"expected_revision": 1, "rules": "new rules"}
        )
        assert r.status_code == 200, r.text
        async with asyncio.timeout(5):
            assert (await _next(client, op))["decisionChanged"]["status"] == "STALE"


# -- what mutation testing found unpinned (mutantaudit8) -----------------------


def test_a_subscribe_of_exactly_the_body_limit_is_taken() -> None:
    """As on POST /graphql: a document and its variables of exactly
    GRAPHQL_BODY_LIMIT bytes as sent are taken, one byte more refused for
    the operation (the payload's own bytes, the frame's envelope apart)."""

    def frame(pad: int) -> bytes:
        payload = '{"query": "' + "#" * pad + '", "variables": {}}'
        return ('{"id": "1", "type": "subscribe", "payload": ' + payload + "}").encode()

    pad = GRAPHQL_BODY_LIMIT - len('{"query": "", "variables": {}}')
    assert oversized_subscribe(frame(pad)) is None
    refused = oversized_subscribe(frame(pad + 1))
    assert refused is not None and refused["id"] == "1"
    assert isinstance(refused["payload"], RefusedPayload)
    assert refused["payload"].refusal.code == "payload_too_large"


async def test_a_closed_socket_gives_back_exactly_its_own_place(service: Service) -> None:
    """A token's GraphQL WebSockets are counted one by one (QUICK: 3 per
    token): closing one of two leaves one, and the cap still holds."""
    hub = Hub(service.rt.db, QUICK)
    hub.open_socket("t")
    hub.open_socket("t")
    hub.close_socket("t")
    assert hub.socket_count() == 1
    hub.open_socket("t")
    hub.open_socket("t")
    with pytest.raises(TooManyStreams):
        hub.open_socket("t")


async def test_a_connection_init_without_a_payload_is_unauthenticated_not_malformed(
    service: Service, project: str
) -> None:
    """The protocol's payload is an object or absent; a null one carries no
    token: 4401, not the malformed-message 4400."""
    assert await close_code_after_init(service, None) == 4401


async def test_a_subscriber_that_falls_behind_the_window_is_told_where_to_resume(
    service: Service, human: Caller, project: str
) -> None:
    """Caught up once, then further behind than the window (20, kept up to
    40) while it took nothing: its next message is an error `slow_consumer`
    with `after`, the last sequence it was sent, then the end (docs/graphql.md
    "Bounded resources"). A subscription that ended quietly instead
    (`complete` alone) let a dashboard believe it had every event, and no
    test said so (liveaudit)."""
    hub = hub_for(service.rt, QUICK)
    actor = await service.rt.db.read(lambda conn: principals.authenticate(conn, human.token, "api"))
    context = Context(rt=service.rt, actor=actor, token=human.token)
    asked = """subscription ($after: Int) {
      projectEvents(projectId: "demo", after: $after) { sequence } }"""
    subscription = await schema.subscribe(
        asked, variable_values=await log_end(human), context_value=context
    )
    assert not isinstance(subscription, ExecutionResult), subscription
    async with aclosing(subscription) as results:
        # it listens (the generator runs from the first ask) before the event
        # it is sent first commits: it is caught up
        asking = asyncio.ensure_future(anext(results))
        async with asyncio.timeout(10):
            while hub.open_count() < 1:
                await asyncio.sleep(0.01)
        await new_task(human, "seen")
        first = await asyncio.wait_for(asking, 10)
        assert not first.errors and first.data is not None, first.errors
        seen = first.data["projectEvents"]["sequence"]
        for n in range(60):  # it takes nothing meanwhile
            await new_task(human, f"unread {n}")
        end = (await log_end(human))["after"]
        async with asyncio.timeout(10):
            while hub.position < end:  # the hub has read them all
                await asyncio.sleep(0.01)
        dropped = await asyncio.wait_for(anext(results), 10)
        assert dropped.data is None and dropped.errors, dropped
        extensions = dropped.errors[0].extensions or {}
        assert extensions.get("code") == "slow_consumer", extensions
        assert extensions.get("after") == seen, extensions  # resumed there, nothing is lost
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(anext(results), 10)


async def test_a_null_session_in_connection_init_is_no_session(
    service: Service, human: Caller
) -> None:
    """docs/graphql.md: a `Waypost-Session` that is not a string closes the
    socket (4401), but a `null` one is no session, as a header left out."""
    payload = {"Authorization": f"Bearer {human.token}", "Waypost-Session": None}
    async with running(service) as base:
        url = base.replace("http://", "ws://") + "/graphql"
        async with connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
            await ws.send(json.dumps({"type": "connection_init", "payload": payload}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 10)) == {
                "type": "connection_ack"}  # fmt: skip


async def test_a_socket_that_never_sends_connection_init_is_closed_4408(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/graphql.md: a socket that never sends `connection_init` is closed
    after 60 seconds (4408). The view's wait is read here, then shortened so
    that the close itself is seen."""
    from starlette.routing import WebSocketRoute

    from waypost.schema.view import WaypostGraphQL

    view = next(r.app for r in service.app.routes if isinstance(r, WebSocketRoute))
    assert isinstance(view, WaypostGraphQL)
    assert view.connection_init_wait_timeout == timedelta(seconds=60)
    monkeypatch.setattr(view, "connection_init_wait_timeout", timedelta(seconds=0.2))
    async with running(service) as base:
        url = base.replace("http://", "ws://") + "/graphql"
        async with connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4408


async def test_a_batch_holds_at_most_200_events(
    service: Service, human: Caller, project: str
) -> None:
    """docs/graphql.md: an `EventBatch` holds one or more events, at most 200,
    and its `lastSequence` is the `after` to resume from: 250 events behind
    the subscription come as 200, then the rest."""
    for i in range(249):
        await new_task(human, f"t{i}")
    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(BATCHES, {"after": 0})
        first = (await _next(client, op))["projectEventBatches"]
        assert [e["sequence"] for e in first["events"]] == list(range(1, 201))
        assert first["lastSequence"] == 200
        second = (await _next(client, op))["projectEventBatches"]
    assert [e["sequence"] for e in second["events"]] == list(range(201, 251))
    assert second["lastSequence"] == 250


async def test_a_subscriber_catching_up_lets_other_work_run_between_its_events(
    service: Service, human: Caller, project: str
) -> None:
    """A run the hub hands out is up to a page of 200 events, and each was
    executed and sent with no pause between them: a subscriber catching up
    on 12,000 events held every other request on the loop for 5 s
    (slowconsumer). Between two events of its catch-up, another task gets
    its turn (counted by turns of the loop, not by time)."""
    hub_for(service.rt, QUICK)
    for n in range(250):
        await new_task(human, f"backlog {n}")
    actor = await service.rt.db.read(lambda conn: principals.authenticate(conn, human.token, "api"))
    context = Context(rt=service.rt, actor=actor, token=human.token)
    turns = 0

    async def other_work() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    for asked in (
        'subscription { projectEvents(projectId: "demo", after: 0) { sequence } }',
        'subscription { projectEventBatches(projectId: "demo", after: 0) { events { sequence } } }',
    ):
        subscription = await schema.subscribe(asked, context_value=context)
        assert not isinstance(subscription, ExecutionResult), subscription
        ticker = asyncio.ensure_future(other_work())
        seen: list[int] = []
        counted: list[int] = []
        try:
            async with aclosing(subscription) as results, asyncio.timeout(30):
                while len(seen) < 251:  # the project's creation and the 250 tasks
                    result = await anext(results)
                    assert not result.errors and result.data is not None, result.errors
                    data = result.data
                    found = (
                        [data["projectEvents"]["sequence"]]
                        if "projectEvents" in data
                        else [e["sequence"] for e in data["projectEventBatches"]["events"]]
                    )
                    seen.extend(found)
                    counted.append(turns)
        finally:
            ticker.cancel()
        assert seen == sorted(seen) and len(set(seen)) == len(seen)
        # every message of the catch-up came after a turn of the other work
        # (the first of each run maybe not: the hub's handing over is the
        # hub's; 251 events are two runs)
        waited = sum(b > a for a, b in itertools.pairwise(counted))
        assert waited >= len(counted) - 3, counted[:20]
