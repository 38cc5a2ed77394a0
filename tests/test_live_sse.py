"""GET /api/v1/projects/{project}/events/stream over a real socket: committed
events only, in order, each once, resumable; keep-alives, caps, revocation."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.conftest import Caller, Service
from tests.decisions_support import new_task
from tests.live_support import SseEvent, next_data_event, running, sse_events
from waypost.clock import format_time
from waypost.errors import Unavailable
from waypost.live import Hub, LiveLimits, SlowConsumer, hub_for
from waypost.live.hub import Listener, _Window
from waypost.live.sse import _encoded_for
from waypost.live.streams import still_valid
from waypost.resolvers.access import principals
from waypost.resolvers.core import events

STREAM = "/api/v1/projects/demo/events/stream"


@contextlib.asynccontextmanager
async def stream(
    base: str, caller: Caller, headers: dict[str, str] | None = None, **params: Any
) -> AsyncIterator[tuple[httpx.Response, AsyncIterator[SseEvent]]]:
    async with (
        httpx.AsyncClient(base_url=base, timeout=10) as client,
        client.stream(
            "GET", STREAM, params=params, headers={**caller.headers(), **(headers or {})}
        ) as r,
    ):
        yield r, sse_events(r)


async def rest_events(caller: Caller, after: int = 0) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (
        await caller.get("/api/v1/projects/demo/events", after=after, limit=200)
    ).json()["items"]
    return items


async def test_minus_zero_is_the_start_of_the_log_as_on_the_list(
    service: Service, human: Caller, project: str
) -> None:
    """The list reads `after=-0` as 0 (decimal digits with a sign); the stream
    refused it, so the two read one position two ways (review32)."""
    await new_task(human, "before")
    listed = await rest_events(human)
    async with running(service) as base, stream(base, human, after="-0") as (r, evs):
        assert r.status_code == 200
        assert (await next_data_event(evs)).id == str(listed[0]["sequence"])


async def test_replays_after_then_follows_the_live_tail_in_order(
    service: Service, human: Caller, project: str
) -> None:
    await new_task(human, "before")
    async with running(service) as base, stream(base, human, after=0) as (r, evs):
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        # no proxy on the way may compress or buffer the stream
        assert r.headers["cache-control"] == "no-store, no-transform"
        assert r.headers["x-accel-buffering"] == "no"
        for i in range(3):
            await new_task(human, f"live {i}")
        expected = await rest_events(human)
        got = [await next_data_event(evs) for _ in expected]
    assert [int(e.id or 0) for e in got] == [e["sequence"] for e in expected]
    assert [e.event for e in got] == [e["type"] for e in expected]
    assert [e.json() for e in got] == expected  # the event objects of REST, verbatim


async def test_a_title_with_unicode_line_breaks_stays_on_its_data_line(
    service: Service, human: Caller, project: str
) -> None:
    """The stream is read with httpx's `iter_lines` (docs/graphql.md's
    example), which also breaks lines at NEL, U+2028 and U+2029: a task
    titled with one reached the reader as half a JSON object."""
    title = "line\u2028separator\u2029paragraph\x85next"
    await new_task(human, title)
    async with (
        running(service) as base,
        httpx.AsyncClient(base_url=base, timeout=10) as client,
        client.stream("GET", STREAM, params={"after": 0}, headers=human.headers()) as r,
    ):
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                if event["type"] == "task.created":
                    break
    assert title in json.dumps(event, ensure_ascii=False)


async def test_without_after_starts_with_the_next_new_event(
    service: Service, human: Caller, project: str
) -> None:
    old = await rest_events(human)
    async with running(service) as base, stream(base, human) as (_, evs):
        first = await anext(evs)
        assert first.comments == ["stream open"]
        await new_task(human, "new")
        event = await next_data_event(evs)
    assert int(event.id or 0) > old[-1]["sequence"]
    assert event.event == "task.created"


async def test_last_event_id_wins_over_after(service: Service, human: Caller, project: str) -> None:
    for i in range(3):
        await new_task(human, f"t{i}")
    seqs = [e["sequence"] for e in await rest_events(human)]
    async with (
        running(service) as base,
        stream(base, human, headers={"Last-Event-ID": str(seqs[-2])}, after=0) as (_, evs),
    ):
        event = await next_data_event(evs)
    assert int(event.id or 0) == seqs[-1]


async def test_an_empty_last_event_id_is_no_position(
    service: Service, human: Caller, project: str
) -> None:
    """A client may send back an id the server reset to empty: `after` then holds."""
    for i in range(2):
        await new_task(human, f"t{i}")
    seqs = [e["sequence"] for e in await rest_events(human)]
    async with (
        running(service) as base,
        stream(base, human, headers={"Last-Event-ID": ""}, after=seqs[-2]) as (_, evs),
    ):
        event = await next_data_event(evs)
    assert int(event.id or 0) == seqs[-1]


async def test_keep_alive_comments_while_quiet(
    service: Service, human: Caller, project: str
) -> None:
    async with running(service) as base, stream(base, human) as (_, evs):
        await anext(evs)  # stream open
        quiet = await asyncio.wait_for(anext(evs), 5)
    assert quiet.comments == ["keep-alive"] and not quiet.data


async def test_rolled_back_writes_never_appear(
    service: Service, human: Caller, project: str
) -> None:
    def doomed(conn: Any) -> None:
        events.append(
            conn, project_id="demo", type="task.created", subject_type="task",
            subject_id="ghost", actor_id=None, actor_session_id=None, at="2026-01-01T00:00:00Z",
            data={},
        )  # fmt: skip
        raise RuntimeError("rolled back")

    async with running(service) as base, stream(base, human) as (_, evs):
        await anext(evs)
        with pytest.raises(RuntimeError):
            await service.rt.db.write(doomed)
        await new_task(human, "real")
        event = await next_data_event(evs)
    assert event.json()["subject_id"] != "ghost"
    assert event.event == "task.created"


async def to_its_end(evs: AsyncIterator[SseEvent]) -> list[SseEvent]:
    return [e async for e in evs]


def ended_with(rest: list[SseEvent]) -> Any:
    """The error a stream ended with: its last event, the only one with data
    (a stream that ended with nothing left its client unable to tell a
    revoked token from a stopping server: gqlwsaudit)."""
    [*_, last] = [e for e in rest if e.data]
    assert [e for e in rest if e.data] == [last] and last.event == "error", rest
    return last.json()


async def test_stream_ends_when_its_token_is_revoked(
    service: Service, human: Caller, project: str
) -> None:
    other = await service.principal("human", "bob")
    token_id = (await other.get("/api/v1/me")).json()["principal"]["id"]
    del token_id
    async with running(service) as base, stream(base, other) as (_, evs):
        await anext(evs)
        actor = await service.rt.db.read(lambda c: principals.authenticate(c, other.token, "api"))
        at = format_time(service.clock.now())
        await service.rt.db.write(lambda c: principals.revoke_token(c, actor.token_id, at))
        rest = await asyncio.wait_for(to_its_end(evs), 5)  # the stream ends by itself
    assert ended_with(rest)["code"] == "unauthenticated"


async def test_a_stream_opened_in_a_session_ends_when_the_session_ends(
    service: Service, human: Caller, project: str
) -> None:
    """As a GraphQL socket closes once the session it named ends, so does an
    event stream opened in one (it went on, tokenjourney); the same agent's
    stream opened in no session goes on."""
    agent = await service.principal("agent", "ada")
    session = await agent.start_session()
    async with (
        running(service) as base,
        stream(base, agent) as (_, in_session),
        stream(base, dataclasses.replace(agent, session_id=None)) as (_, sessionless),
    ):
        await anext(in_session)
        await anext(sessionless)
        ended = await agent.post(f"/api/v1/sessions/{session}/end")
        assert ended.status_code == 200, ended.text
        rest = await asyncio.wait_for(to_its_end(in_session), 5)  # the stream ends by itself
        refused = ended_with(rest)
        assert (refused["code"], refused["details"]["reason"]) == ("forbidden", "session_not_live")
        await new_task(human, "after the session")
        assert (await asyncio.wait_for(next_data_event(sessionless), 5)).event == "task.created"


async def test_streams_per_token_are_capped(service: Service, human: Caller, project: str) -> None:
    async with running(service) as base, contextlib.AsyncExitStack() as stack:
        readers = []  # kept: a reader collected early would close its stream
        for _ in range(3):  # QUICK allows 3 per token
            _, evs = await stack.enter_async_context(stream(base, human))
            readers.append(evs)
            await anext(evs)
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            refused = await asyncio.wait_for(client.get(STREAM, headers=human.headers()), 10)
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "too_many_streams"
        assert hub_for(service.rt).open_count() == 3
        # a HEAD gets the status a GET would (it answered 200 past the cap)
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            head = await asyncio.wait_for(client.head(STREAM, headers=human.headers()), 10)
        assert head.status_code == 429
        assert hub_for(service.rt).open_count() == 3


async def test_a_head_request_gets_the_head_and_holds_no_stream(
    service: Service, human: Caller, project: str
) -> None:
    """A HEAD ran the stream (without its body) and never ended: each held one
    of the token's streams, until GETs were refused as too many."""
    async with running(service) as base, httpx.AsyncClient(base_url=base, timeout=10) as client:
        for _ in range(5):  # more than the 3 streams QUICK allows a token
            r = await asyncio.wait_for(client.head(STREAM, headers=human.headers()), 10)
            assert r.status_code == 200 and r.content == b""
            assert r.headers["content-type"].startswith("text/event-stream")
            # the GET's body is endless: no length (it said Content-Length: 0)
            assert "content-length" not in r.headers, r.headers
        r = await client.head("/api/v1/projects/nope/events/stream", headers=human.headers())
        assert r.status_code == 404
        assert hub_for(service.rt).open_count() == 0
    async with running(service) as base, stream(base, human) as (r, evs):
        assert r.status_code == 200 and (await anext(evs)).comments == ["stream open"]


async def test_bad_positions_and_unknown_projects_are_refused(
    service: Service, human: Caller, project: str
) -> None:
    # A refusal that became a stream would be read for ever (its keep-alives
    # reset httpx's read timeout): the whole test has a deadline (mutantaudit8).
    async with (
        asyncio.timeout(30),
        running(service) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        r = await client.get(STREAM, params={"after": "x"}, headers=human.headers())
        assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "after"
        r = await client.get(STREAM, headers={**human.headers(), "Last-Event-ID": "-1"})
        assert r.status_code == 400
        # two positions: which was meant is not guessed (the first one won)
        twice = [*human.headers().items(), ("Last-Event-ID", "0"), ("Last-Event-ID", "1")]
        r = await asyncio.wait_for(client.get(STREAM, headers=twice), 10)  # not a stream
        assert r.status_code == 400, r.text
        assert r.json()["error"]["details"]["field"] == "Last-Event-ID"  # as a bad value names it
        # unknown or repeated parameters, as on every REST route (they were ignored)
        for query in ("foo=1", "after=1&after=5"):
            r = await asyncio.wait_for(client.get(f"{STREAM}?{query}", headers=human.headers()), 10)
            assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request"
            assert r.json()["error"]["details"]["field"] in ("foo", "after")
        r = await client.get("/api/v1/projects/nope/events/stream", headers=human.headers())
        assert r.status_code == 404
        r = await client.get(STREAM)
        assert r.status_code == 401


async def test_a_consumer_that_falls_behind_the_window_is_dropped(
    service: Service, human: Caller, project: str
) -> None:
    """Caught up once, then more than the window (20, kept up to 40) behind: dropped,
    and told where to resume; the writer never waited for it."""
    async with running(service):
        hub = hub_for(service.rt)
        async with hub.listen("demo", "tok", None) as listener:
            assert await listener.next_batch(0.05) == []
            for i in range(60):
                await new_task(human, f"t{i}")
            await asyncio.sleep(0.3)  # the hub reads the new events
            with pytest.raises(SlowConsumer) as caught:
                await listener.next_batch(0.05)
    assert caught.value.details["after"] == listener.last


async def test_a_listener_without_after_starts_with_the_next_new_event(
    service: Service, human: Caller, project: str
) -> None:
    """Section 14: without `after`, a stream starts with the next new event.
    It started where the hub had read the log to, and an event committed just
    before it opened (not yet read by the hub) was its first."""
    hub = hub_for(service.rt)
    async with hub.listen("demo", "tok", None):
        pass  # the hub is following the log
    await new_task(human, "committed before the stream opened")
    async with hub.listen("demo", "tok", None) as listener:
        assert await listener.next_batch(0.2) == []
        await new_task(human, "after")
        [event] = await listener.next_batch(5)
    assert event["data"]["title"] == "after"


async def test_a_commit_while_the_hub_starts_reaches_a_stream_resumed_before_it(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hub read the log's end, then began to listen for commits: an
    event committed between the two woke nothing, and a stream resumed from
    before it had it only at the next poll (30 s here, 1 s by default)."""
    db = service.rt.db
    before = await db.read(events.last_sequence)
    hub = hub_for(service.rt, LiveLimits(poll_seconds=30))
    read = db.read
    committed = []

    async def read_then_commit(fn: Any) -> Any:
        result = await read(fn)
        if fn is events.last_sequence and not committed:  # the hub's start, after its look
            committed.append(await new_task(human, "committed while the hub started"))
        return result

    monkeypatch.setattr(db, "read", read_then_commit)
    async with hub.listen("demo", "tok", before) as listener:
        monkeypatch.setattr(db, "read", read)
        found = await listener.next_batch(5)
    assert committed
    assert [e["data"]["title"] for e in found] == ["committed while the hub started"]


def test_encoded_frames_are_kept_per_hub_not_per_process(service: Service) -> None:
    """Sequences are unique in one database only: two runtimes in one process
    (tests, an embedding) must not write each other's cached frames."""
    first, second = Hub(service.rt.db), Hub(service.rt.db)
    event = {"sequence": 1, "type": "task.created", "data": {}}
    other = {"sequence": 1, "type": "knowledge.created", "data": {}}
    assert b"task.created" in _encoded_for(first).chunk([event])
    assert b"knowledge.created" in _encoded_for(second).chunk([other])
    assert _encoded_for(first) is _encoded_for(first)


@pytest.mark.parametrize(
    ("after", "status"),
    [
        ("9223372036854775807", 200),
        ("9223372036854775808", 400),
        # leading zeros: the list reads decimal digits, and the stream refused
        # a position of more than 19 digits before reading past them (codeaudit)
        ("0" * 19 + "9223372036854775807", 200),
        ("0" * 19 + "9223372036854775808", 400),
    ],
)
async def test_the_stream_takes_the_positions_the_event_list_takes(
    service: Service, human: Caller, project: str, after: str, status: int
) -> None:
    """The list took any sequence up to 2^63-1; the stream refused 19 digits.
    It now reads them, and refuses 2^63-1 for what it is: past the log's end."""
    listed = await human.get("/api/v1/projects/demo/events", after=after)
    assert listed.status_code == status, listed.text
    async with running(service) as base, httpx.AsyncClient(base_url=base, timeout=10) as client:
        for headers, params in (({}, {"after": after}), ({"Last-Event-ID": after}, {})):
            request = client.stream(
                "GET", STREAM, params=params, headers={**human.headers(), **headers}
            )
            async with request as r:
                assert r.status_code == 400
                refusal = json.loads(await r.aread())["error"]
                past_the_end = "past the end of the event log" in refusal["message"]
                assert past_the_end == (status == 200), refusal


async def test_a_position_past_the_end_of_the_log_is_refused_with_the_end(
    service: Service, human: Caller, project: str
) -> None:
    """A database restored from an earlier backup gives its sequences again: a
    client resuming past the restored log's end skipped every new event up to
    its old position, silently. Refused, naming the end to read again from."""
    last = (await human.get("/api/v1/projects/demo/events", limit=200)).json()["items"][-1]
    end = last["sequence"]
    async with running(service) as base, httpx.AsyncClient(base_url=base, timeout=10) as client:
        for headers, params, name in (
            ({}, {"after": end + 50}, "after"),
            ({"Last-Event-ID": str(end + 1)}, {"after": 0}, "Last-Event-ID"),  # it wins
        ):
            asked = client.get(STREAM, params=params, headers={**human.headers(), **headers})
            r = await asyncio.wait_for(asked, 10)  # a stream opened instead never ends
            assert r.status_code == 400
            details = r.json()["error"]["details"]
            assert details == {"field": name, "last_sequence": end}
            # a HEAD after the same checks (it answered 200)
            head = client.head(STREAM, params=params, headers={**human.headers(), **headers})
            assert (await asyncio.wait_for(head, 10)).status_code == 400
        assert hub_for(service.rt).open_count() == 0
    async with running(service) as base, stream(base, human, after=end) as (r, evs):
        assert r.status_code == 200  # the end itself: the next new event comes next
        assert (await anext(evs)).comments == ["stream open"]


async def test_last_event_id_is_read_without_the_spaces_around_it(
    service: Service, human: Caller, project: str
) -> None:
    """`Last-Event-ID: 5 ` was refused as no event sequence while a leading
    space passed (the HTTP parser strips that one): spaces and tabs around a
    header's value are not part of it (RFC 9110, 5.5)."""
    await new_task(human, "one")
    await new_task(human, "two")
    seqs = [e["sequence"] for e in await rest_events(human)]
    async with running(service) as base:
        host, port = base.removeprefix("http://").split(":")
        for padded in (f"{seqs[-2]} ", f"{seqs[-2]}\t", f" {seqs[-2]} \t"):
            reader, writer = await asyncio.open_connection(host, int(port))
            try:
                writer.write(
                    f"GET {STREAM} HTTP/1.1\r\nHost: {host}\r\n"
                    f"Authorization: Bearer {human.token}\r\nLast-Event-ID: {padded}\r\n\r\n"
                    .encode()
                )  # fmt: skip
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                assert head.startswith(b"HTTP/1.1 200"), (padded, head)
                # the replay starts after the position: the last event comes first
                seen = b""
                while f"id: {seqs[-1]}".encode() not in seen:
                    seen += await asyncio.wait_for(reader.read(65536), 10)
                assert f"id: {seqs[-2]}\n".encode() not in seen
            finally:
                writer.close()


async def test_an_empty_after_is_refused_as_on_the_event_list(
    service: Service, human: Caller, project: str
) -> None:
    """`?after=` started at the live tail, silently skipping every event before
    it; the event list refuses it, and so does the stream now. (An empty
    Last-Event-ID is still no position: a client may send back a reset id.)"""
    async with running(service) as base, httpx.AsyncClient(base_url=base, timeout=10) as client:
        r = await asyncio.wait_for(client.get(f"{STREAM}?after=", headers=human.headers()), 10)
        assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "after"


async def test_a_stream_holds_only_its_own_projects_events(
    service: Service, human: Caller, project: str
) -> None:
    """Another project's write while a stream is open never reaches it (no
    test kept a stream open while another project wrote: mutantaudit3)."""
    r = await human.post("/api/v1/projects", {"id": "other", "name": "Other"})
    assert r.status_code == 201, r.text
    async with running(service) as base, httpx.AsyncClient(base_url=base, timeout=10) as client:
        path = "/api/v1/projects/demo/events/stream"
        async with client.stream("GET", path, headers=human.headers()) as response:
            received = sse_events(response)
            r = await human.post("/api/v1/projects/other/tasks", {"title": "theirs"})
            assert r.status_code == 201, r.text
            r = await human.post("/api/v1/projects/demo/tasks", {"title": "ours"})
            assert r.status_code == 201, r.text
            first = (await next_data_event(received)).json()
            assert (first["project_id"], first["data"]["title"]) == ("demo", "ours"), first


# -- what mutation testing found unpinned (mutantaudit8) -----------------------


async def test_streams_past_the_servers_total_are_refused(
    service: Service, human: Caller, project: str
) -> None:
    """docs/api.md: 16 open streams for the token, or 1,000 for the service
    (QUICK: 3 and 5). Two tokens fill the service (3 + 2); a third token,
    under its own cap, is refused with the total."""
    agent, third = await service.agent(), await service.agent()
    async with running(service) as base, contextlib.AsyncExitStack() as stack:
        readers = []  # held: a reader let go is closed, and its stream with it
        for caller, n in ((human, 3), (agent, 2)):
            for _ in range(n):
                _, evs = await stack.enter_async_context(stream(base, caller))
                readers.append(evs)
                await anext(evs)
        assert hub_for(service.rt).open_count() == len(readers) == 5
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            refused = await asyncio.wait_for(client.get(STREAM, headers=third.headers()), 10)
        assert refused.status_code == 429, refused.status_code
        error = refused.json()["error"]
        assert error["code"] == "too_many_streams" and error["details"] == {"limit": 5}


async def test_keep_alives_come_every_interval_not_later(
    service: Service, human: Caller, project: str
) -> None:
    """A keep-alive every `keepalive_seconds`: with 0.4 s, three quiet ones
    come within 2 s (at twice the interval they would take 2.4)."""
    limits = LiveLimits(per_token=3, total=5, window=20, poll_seconds=0.1,
                        keepalive_seconds=0.4, recheck_seconds=30)  # fmt: skip
    async with running(service, limits) as base, stream(base, human) as (_, evs):
        assert (await anext(evs)).comments == ["stream open"]
        started = time.monotonic()
        for _ in range(3):
            assert (await asyncio.wait_for(anext(evs), 5)).comments == ["keep-alive"]
        took = time.monotonic() - started
    assert took < 2.0, took


def test_the_default_intervals_keep_the_contracts_15_seconds() -> None:
    """Contract: a keep-alive at least every 15 s, and a revoked token's
    stream ends within 15 s (the re-check): the defaults must say so."""
    limits = LiveLimits()
    assert limits.keepalive_seconds < 15 and limits.recheck_seconds <= 15


def test_the_default_figures_are_the_documented_ones() -> None:
    """docs/graphql.md, "Bounded resources" (the tests run with smaller ones):
    at most 16 open streams and subscriptions per token and 1,000 per server
    (acknowledged GraphQL WebSockets counted the same way); a shared window
    of the latest 2,000-4,000 events of a project; the hub waits 1 ms per
    open stream before it reads, at most 100 ms; another process's writes
    are picked up within a second."""
    limits = LiveLimits()
    assert (limits.per_token, limits.total) == (16, 1000)
    assert limits.window == 2000  # trimmed back to it past twice as many
    assert (limits.coalesce_per_listener, limits.coalesce_max) == (0.001, 0.1)
    assert limits.poll_seconds <= 1.0


async def test_a_resume_from_just_behind_the_trimmed_window_misses_nothing(
    service: Service, human: Caller, project: str
) -> None:
    """The hub's window (QUICK: 20, kept up to 40) trims in halves: a
    listener resuming from any position, just behind the trimmed window
    included, gets the very next event (each once, in order, none missed)."""
    async with running(service):
        hub = hub_for(service.rt)
        async with hub.listen("demo", "keeper", None) as keeper:
            assert await keeper.next_batch(0.05) == []
            for i in range(45):
                await new_task(human, f"t{i}")
            everything = await rest_events(human)
            for _ in range(100):  # until the hub has read them (bounded: 2 s)
                if hub.position >= everything[-1]["sequence"]:
                    break
                await asyncio.sleep(0.02)
            sequences = [e["sequence"] for e in everything]
            for before, expected in itertools.pairwise(sequences):
                async with hub.listen("demo", "resumer", before) as resumer:
                    batch = await resumer.next_batch(0.05)
                assert batch and batch[0]["sequence"] == expected, (before, batch[:1])


async def test_an_event_streams_429_carries_the_security_headers(
    service: Service, human: Caller, project: str
) -> None:
    # a hub whose cap is reached before any stream opens: refused at once
    hub_for(service.rt, LiveLimits(per_token=0, total=0))
    for method in ("GET", "HEAD"):
        r = await service.client.request(method, STREAM, headers=human.headers())
        assert r.status_code == 429, (method, r.text)
        if method == "GET":
            assert r.json()["error"]["code"] == "too_many_streams"
        # docs/api.md: every response, errors included
        assert r.headers["cache-control"] == "no-store", method
        assert r.headers["x-content-type-options"] == "nosniff", method


# --- the follower and the frame cache under failure and load ---------------------


async def test_a_stop_during_the_hubs_start_leaves_nothing_following(service: Service) -> None:
    """A hub stopped while its start still read the log's end (the server
    stopping as the first stream opened) starts no follower afterwards: it
    ran, and stayed on the database's commit listeners, after the stop."""
    hub = Hub(service.rt.db)
    before = set(asyncio.all_tasks())
    starting = asyncio.create_task(hub.start())
    hub.stop()  # before the start's read has returned
    await starting
    await asyncio.sleep(0)
    following = [t for t in set(asyncio.all_tasks()) - before
                 if t.get_name() == "waypost-live-hub" and not t.done()]  # fmt: skip
    assert following == []
    await hub.close()


# what a follower's read can meet: a busy store, a fault of ours
FOLLOWER_FAILURES = [
    Unavailable("the database is busy; retry shortly", retry_after=1),
    RuntimeError("a fault"),
]


@pytest.mark.parametrize("failure", FOLLOWER_FAILURES)
async def test_the_follower_reads_on_after_a_failed_read(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch,
    failure: Exception,
) -> None:  # fmt: skip
    """A read of new events that fails (a busy store, a fault) is tried
    again on the next wake: the follower is the only reader of new events
    for every stream, and had it ended, every stream stayed open and silent."""
    hub = Hub(service.rt.db, LiveLimits(poll_seconds=0.05))
    real = events.weighed_events_after
    failed: list[int] = []

    def fails_once(conn: Any, after: int, count: int) -> Any:
        if not failed:
            failed.append(1)
            raise failure
        return real(conn, after=after, count=count)

    try:
        async with hub.listen(project, "tok", None) as listener:
            monkeypatch.setattr(events, "weighed_events_after", fails_once)
            await new_task(human, "after a failed read")
            found: list[Any] = []
            for _ in range(200):  # bounded: the follower's retry comes within a poll
                found += await listener.next_batch(0.05)
                if found:
                    break
        assert failed == [1]
        assert [e["data"]["title"] for e in found] == ["after a failed read"]
    finally:
        await hub.close()


async def test_the_windows_of_all_projects_stay_within_their_characters(
    service: Service, human: Caller
) -> None:
    """Each listened project's window was bounded by a count only: 4,000
    events of up to 3.2 KB each (37 MB of objects) a project, for as many
    projects as streams may listen to (cacheaudit). Past `window_chars` the
    heaviest window loses its older half; a listener at its tail misses
    nothing, and one far behind that never caught up (`behind` reads
    nothing until the end) reads the rest from the log."""
    for name in ("busy", "quiet"):
        await human.post("/api/v1/projects", {"id": name, "name": name})
    limits = LiveLimits(window=1000, window_chars=20_000, poll_seconds=0.05)
    hub = Hub(service.rt.db, limits)
    try:
        async with (
            hub.listen("busy", "tok", None) as tail,
            hub.listen("busy", "tok", None) as behind,
            hub.listen("quiet", "tok", None) as quiet,
        ):
            await human.post("/api/v1/projects/quiet/tasks", {"title": "q"})
            assert [e["data"]["title"] for e in await quiet.next_batch(5)] == ["q"]
            titles = [f"{i:03d} " + "x" * 190 for i in range(60)]  # ~500 characters each
            seen: list[str] = []
            for title in titles:
                await human.post("/api/v1/projects/busy/tasks", {"title": title})
                while len(seen) < len(titles) and seen[-1:] != [title]:
                    seen += [e["data"]["title"] for e in await tail.next_batch(5)]
                windows = hub._windows
                assert hub._held == sum(w.held for w in windows.values()) <= 20_000
            assert seen == titles  # the tail listener kept up: nothing missed
            assert len(hub._windows["busy"].items) < 60  # trimmed by weight, not count
            assert hub._windows["quiet"].items  # the lighter window kept its event
            caught_up: list[str] = []
            while len(caught_up) < len(titles):  # a resume from the log, in order
                caught_up += [e["data"]["title"] for e in await behind.next_batch(5)]
            assert caught_up == titles
        assert hub._held == 0 and hub._windows == {}  # each window's weight left with it
    finally:
        await hub.close()


def _windows_of(hub: Hub, weights: dict[str, list[int]]) -> None:
    """Give `hub` one window per project holding events of these weights."""
    sequence = itertools.count(1)
    for project_id, project_weights in weights.items():
        window = hub._windows[project_id] = _Window(floor=0)
        for weight in project_weights:
            event = {"sequence": next(sequence), "project_id": project_id}
            hub._held += window.add(event, weight, hub.limits.window)


@pytest.mark.parametrize(
    ("weights", "left"),
    [
        # exactly `window_chars`: nothing to trim
        ({"a": [20] * 4, "b": [20]}, {"a": 4, "b": 1}),
        # one over: the heaviest by weight (not by count) loses its older half
        ({"a": [40, 40], "b": [10, 10, 11]}, {"a": 1, "b": 3}),
        ({"a": [20] * 5, "b": [1]}, {"a": 3, "b": 1}),
        ({"a": [30] * 4, "b": [5]}, {"a": 2, "b": 1}),
        # the heaviest holds one event: the next heaviest is trimmed instead
        # (it gave up there, over the bound: review68)
        ({"a": [60], "b": [20, 20, 20]}, {"a": 1, "b": 2}),
    ],
)
async def test_past_window_chars_the_heaviest_window_loses_its_older_half(
    service: Service, weights: dict[str, list[int]], left: dict[str, int]
) -> None:
    """docs/graphql.md: the windows together hold at most `window_chars`,
    past which the heaviest window gives up its older half; exactly that many
    is within the bound (mutantaudit11: the test above held only the bound)."""
    hub = Hub(service.rt.db, LiveLimits(window_chars=100))
    try:
        _windows_of(hub, weights)
        hub._fit()
        assert {p: len(w.items) for p, w in hub._windows.items()} == left
        for project_id, window in hub._windows.items():
            kept = window.sequences  # the newest, in order, above the new floor
            assert kept == [e["sequence"] for e in window.items]
            assert window.weights == weights[project_id][-len(kept) :]
            assert window.held == sum(window.weights)
            assert window.floor == (kept[0] - 1 if len(kept) < len(weights[project_id]) else 0)
        assert hub._held == sum(w.held for w in hub._windows.values()) <= 100
    finally:
        await hub.close()


async def test_a_windows_count_trim_gives_back_its_characters(
    service: Service, human: Caller
) -> None:
    """A window past twice `window` events drops its older ones: the
    characters they held leave the hub's total with them, or the total grew
    with every trim until `window_chars` trimmed windows that were small
    (mutantaudit11: no test trimmed a window by its count)."""
    await human.post("/api/v1/projects", {"id": "count", "name": "count"})
    hub = Hub(service.rt.db, LiveLimits(window=2, poll_seconds=0.05))
    try:
        async with hub.listen("count", "tok", None) as listener:
            titles = [f"task {n}" for n in range(9)]
            seen: list[str] = []
            for title in titles:
                await human.post("/api/v1/projects/count/tasks", {"title": title})
                while seen[-1:] != [title]:
                    seen += [e["data"]["title"] for e in await listener.next_batch(5)]
            assert seen == titles
            window = hub._windows["count"]
            assert 2 <= len(window.items) <= 4
            assert window.held == sum(window.weights) == hub._held
    finally:
        await hub.close()


async def test_a_caught_up_listener_behind_a_weight_trim_is_a_slow_consumer(
    service: Service,
) -> None:
    """A trim by weight moves the floor as a trim by count does: a listener
    that had caught up and is now below it is dropped (`slow_consumer`, to
    resume from its last sequence), never served from the log with a gap or
    left waiting; one at the tail is not (review68: `_fit` said one further
    behind "resumes from the log")."""
    hub = Hub(service.rt.db, LiveLimits(window_chars=100))
    try:
        _windows_of(hub, {"a": [30, 30, 30, 30]})  # sequences 1-4, 120 > 100
        window = hub._windows["a"]
        behind, tail = Listener(hub, "a", "tok", 1), Listener(hub, "a", "tok", 4)
        for listener in (behind, tail):
            listener.caught_up = True
            window.listeners.add(listener)
        hub._fit()
        assert window.floor == 2 and window.sequences == [3, 4]
        with pytest.raises(SlowConsumer) as dropped:
            hub._in_window(behind)
        assert dropped.value.details == {"after": 1}
        assert hub._in_window(tail) == []
    finally:
        await hub.close()


def test_the_windows_hold_16_mi_characters_by_default() -> None:
    """docs/graphql.md: "at most 16 Mi characters of events"."""
    assert LiveLimits().window_chars == 16 * 1024 * 1024


def test_the_shared_frame_cache_stays_bounded(service: Service) -> None:
    """Frames and joined chunks are kept for the streams of a hub to share,
    the oldest dropped past their bounds: kept for ever, every event the
    service ever streamed stayed in memory."""
    hub = Hub(service.rt.db)
    encoded = _encoded_for(hub)
    made = [{"sequence": n, "type": "task.created", "data": {}} for n in range(1, 5001)]
    for event in made:
        encoded.chunk([event])
    assert len(encoded._frames) == encoded.FRAMES_KEPT
    assert len(encoded._chunks) == encoded.CHUNKS_KEPT
    assert b"id: 5000\n" in encoded.chunk([made[-1]])  # the newest are the ones kept
    assert 1 not in encoded._frames


async def test_a_fault_while_rechecking_a_streams_token_ends_the_stream(
    service: Service, human: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token nobody could check (the check failed with a fault) is not
    trusted: the stream ends, as for a revoked one."""

    def broken(conn: Any, token: str, audience: str) -> Any:
        raise RuntimeError("the check fails")

    assert await still_valid(service.rt, human.token)
    monkeypatch.setattr(principals, "authenticate", broken)
    assert not await still_valid(service.rt, human.token)


async def test_a_fault_mid_stream_ends_it_with_an_internal_error_event(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that fails with a fault after the stream began (a resume from
    before the window, read from the log): the response has started, so the
    stream ends with an `error` event coded `internal`, not a cut body."""
    await new_task(human, "before")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the log read fails")

    async with running(service) as base:
        await hub_for(service.rt).start()  # its window starts past the events above
        monkeypatch.setattr(events, "list_events", broken)
        async with stream(base, human, after="0") as (r, evs):
            assert r.status_code == 200
            got = [event async for event in evs]
    assert got[0].comments == ["stream open"]
    assert got[-1].event == "error"
    assert got[-1].json() == {"code": "internal", "message": "internal error", "details": {}}


@pytest.mark.parametrize("failure", FOLLOWER_FAILURES)
async def test_the_follower_goes_on_after_a_failed_read_of_the_logs_end(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch,
    failure: Exception,
) -> None:  # fmt: skip
    """With nobody listening the follower only keeps the log's end current: a
    read of it that fails (a busy store, a fault) keeps the old position and
    the follower goes on, or every stream opened later stayed silent."""
    hub = Hub(service.rt.db, LiveLimits(poll_seconds=0.05))
    real = events.last_sequence
    failed: list[int] = []

    def fails_once(conn: Any) -> Any:
        if not failed:
            failed.append(1)
            raise failure
        return real(conn)

    try:
        await hub.start()
        monkeypatch.setattr(events, "last_sequence", fails_once)
        for _ in range(500):  # bounded: the follower reads the end every poll
            if failed:
                break
            await asyncio.sleep(0.01)
        assert failed == [1]
        async with hub.listen(project, "tok", None) as listener:
            await new_task(human, "after a failed read of the end")
            found: list[Any] = []
            for _ in range(200):  # bounded, as above
                found += await listener.next_batch(0.05)
                if found:
                    break
        assert [e["data"]["title"] for e in found] == ["after a failed read of the end"]
    finally:
        await hub.close()
