"""A REST read whose client has gone while it waited for a place of the
search lane ends there, unrun (cancelling.caller_gone, http/client_gone.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import uvicorn

from tests.conftest import Caller, Service
from tests.context_support import EndlessSearch
from tests.live_support import _Server, loopback_socket
from waypost.cancelling import caller_gone
from waypost.http.slow_clients import with_request_deadline
from waypost.resolvers.context import packet
from waypost.resolvers.decisions import digest
from waypost.schema import offload


@contextlib.asynccontextmanager
async def _serving(service: Service, http: str) -> AsyncIterator[int]:
    """The app on a real socket, on the HTTP protocol `serve` runs it with."""
    sock = loopback_socket()
    config = uvicorn.Config(
        service.app, log_level="warning", lifespan="off", http=with_request_deadline(http, 30)
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        sock.close()


async def _hold_the_search_lane(service: Service, release: threading.Event) -> list[Any]:
    """Both places of the search lane taken by searches that wait for `release`."""
    entered = threading.Semaphore(0)

    def held(conn: Any) -> None:
        entered.release()
        release.wait(30)

    holders = [asyncio.ensure_future(service.rt.db.search(held)) for _ in range(2)]
    for _ in holders:
        assert await asyncio.to_thread(entered.acquire, True, 10)
    return holders


async def _get(port: int, path: str, token: str) -> tuple[Any, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
    )
    await writer.drain()
    return reader, writer


@pytest.mark.parametrize("http", ["h11", "httptools"])
@pytest.mark.parametrize(
    ("path", "module", "name"),
    [("/api/v1/projects/demo/context?q=runner", packet, "read_sync"),
     ("/api/v1/projects/demo/digest", digest, "digest_sync")],
)  # fmt: skip
async def test_a_queued_search_whose_client_left_never_runs(
    service: Service,
    human: Caller,
    project: str,
    monkeypatch: pytest.MonkeyPatch,
    http: str,
    path: str,
    module: Any,
    name: str,
) -> None:
    """Clients that gave up and asked again queued searches no one would
    read, each holding a place of the lane up to the time limit once its
    turn came, ahead of the searches still wanted (uvicorn never cancels a
    request whose client went)."""
    ran: list[str] = []
    real = getattr(module, name)

    def spied(*args: Any, **kwargs: Any) -> Any:
        ran.append(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spied)
    head, _ = await _one_of_two_leaves(service, http, lambda port: _get(port, path, human.token))
    # the client that stayed gets its answer: only its read ran
    assert head.startswith(b"HTTP/1.1 200"), head
    assert ran == [name]


async def _one_of_two_leaves(
    service: Service, http: str, send: Callable[[int], Awaitable[tuple[Any, Any]]]
) -> tuple[bytes, bytes]:
    """Two like requests wait for a place of the held search lane, the
    first's client leaves, the lane is let go: the answer of the one that
    stayed (once a search let through would have run too)."""
    release = threading.Event()
    async with _serving(service, http) as port:
        holders = await _hold_the_search_lane(service, release)
        try:
            _, left = await send(port)
            stays, stays_writer = await send(port)
            await asyncio.sleep(0.5)  # both requests are in, waiting for a place
            left.close()
            await left.wait_closed()
            await asyncio.sleep(0.3)
        finally:
            release.set()
            await asyncio.gather(*holders)
        answer = await _response(stays)
        stays_writer.close()
        await asyncio.sleep(0.2)  # a search let through would have run by now
    return answer


async def _response(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    lengths = [
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    ]
    assert len(lengths) == 1, head
    return head, await reader.readexactly(lengths[0])


@pytest.mark.parametrize("http", ["h11", "httptools"])
async def test_a_watched_read_leaves_nothing_to_the_connections_next_request(
    service: Service, human: Caller, project: str, http: str
) -> None:
    """The watch reads the connection, and uvicorn's `receive` resumes its
    reading; on asyncio's loop that put the socket's reader in the watch's
    context, and the next request on the connection started in it: a write
    an hour later said the first read's instant in `Waypost-Now`, and a
    GraphQL query waiting for its lane met the stale watch (review49)."""
    release = threading.Event()
    async with _serving(service, http) as port:
        holders = await _hold_the_search_lane(service, release)
        reader, writer = await _get(port, "/api/v1/projects/demo/context?q=runner", human.token)
        # a request pipelined behind it, while the read waits and watches
        writer.write(
            f"GET /api/v1/projects/demo HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {human.token}\r\n\r\n".encode()
        )
        await asyncio.sleep(0.5)
        release.set()
        await asyncio.gather(*holders)
        for _ in range(2):
            head, _ = await _response(reader)
            assert head.startswith(b"HTTP/1.1 200"), head
        service.clock.advance(hours=1)
        body = b'{"title": "an hour later"}'
        writer.write(
            b"POST /api/v1/projects/demo/tasks HTTP/1.1\r\nHost: x\r\n"
            + f"Authorization: Bearer {human.token}\r\nIdempotency-Key: later-{http}\r\n".encode()
            + f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        head, _ = await _response(reader)
        writer.close()
    assert head.startswith(b"HTTP/1.1 201"), head
    assert f"waypost-now: {service.clock.iso()}".lower().encode() in head.lower(), head


async def _post_graphql(port: int, query: str, token: str) -> tuple[Any, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"query": query}).encode()
    writer.write(
        b"POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    return reader, writer


@pytest.mark.parametrize("http", ["h11", "httptools"])
async def test_a_graphql_packet_whose_client_left_never_searches(
    service: Service,
    human: Caller,
    project: str,
    monkeypatch: pytest.MonkeyPatch,
    http: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`Project.context` over HTTP queues for the search lane as the REST
    route does; a client that left no longer has its search run, and its
    leaving is no fault to log."""
    ran: list[str] = []
    real = packet.read_sync

    def spied(*args: Any, **kwargs: Any) -> Any:
        ran.append("read_sync")
        return real(*args, **kwargs)

    monkeypatch.setattr(packet, "read_sync", spied)
    query = '{ project(id: "demo") { context(q: "runner") { items { __typename } } } }'
    head, answer = await _one_of_two_leaves(
        service, http, lambda port: _post_graphql(port, query, human.token)
    )
    assert head.startswith(b"HTTP/1.1 200"), head
    assert "errors" not in json.loads(answer), answer
    assert ran == ["read_sync"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    # counted as gone, not as an operation that ran with errors (review50)
    registry = service.rt.metrics.registry
    outcomes = {
        outcome: registry.get_sample_value(
            "waypost_graphql_operations_total", {"type": "query", "outcome": outcome}
        )
        for outcome in ("ok", "gone", "errors")
    }
    assert outcomes == {"ok": 1.0, "gone": 1.0, "errors": None}


async def test_an_introspection_built_for_two_is_not_given_up_when_one_leaves(
    service: Service, human: Caller
) -> None:
    """One build answers every request for the same introspection; the one
    that started it leaving must not end it for the one still waiting."""
    query = "query GoneTest { __schema { queryType { name } } }"
    lane = offload._gate(offload.INTROSPECTION)
    async with _serving(service, "h11") as port:
        await lane.acquire()  # the lane taken: both requests wait for the one build
        try:
            _, left = await _post_graphql(port, query, human.token)
            await asyncio.sleep(0.3)
            stays, stays_writer = await _post_graphql(port, query, human.token)
            await asyncio.sleep(0.3)
            left.close()
            await left.wait_closed()
            await asyncio.sleep(0.3)
        finally:
            lane.release()
        head, answer = await _response(stays)
        stays_writer.close()
    assert head.startswith(b"HTTP/1.1 200"), head
    assert json.loads(answer) == {"data": {"__schema": {"queryType": {"name": "Query"}}}}


@pytest.mark.parametrize("http", ["h11", "httptools"])
@pytest.mark.parametrize("over", ["rest", "graphql"])
async def test_a_running_search_whose_client_left_ends_at_its_next_check(
    service: Service,
    human: Caller,
    project: str,
    monkeypatch: pytest.MonkeyPatch,
    http: str,
    over: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A search already running when its client closed the connection ran on
    to the time limit (a second by default) for no one, holding a reader
    and a place of the search lane: it ends at the limit's next check, as
    a cancelled MCP call's does, answering no one and logging no fault."""
    endless = EndlessSearch()
    monkeypatch.setattr(packet, "read_sync", endless)
    async with _serving(service, http) as port:
        if over == "rest":
            _, writer = await _get(port, "/api/v1/projects/demo/context?q=runner", human.token)
        else:
            query = '{ project(id: "demo") { context(q: "runner") { items { __typename } } } }'
            _, writer = await _post_graphql(port, query, human.token)
        assert await asyncio.to_thread(endless.started.wait, 10)
        await asyncio.sleep(0.2)  # past the age a search is watched from
        writer.close()
        await writer.wait_closed()
        assert await asyncio.to_thread(endless.ended.wait, 5), "the search ran on"
        assert endless.outcome == ["SearchAbandoned"]
        # the readers answer, and a search after it runs to its end
        after = service.rt.db.search(lambda c: c.execute("SELECT 3").fetchone()[0])
        assert await asyncio.wait_for(after, 5) == 3
        await asyncio.sleep(0.1)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_search_that_ends_soon_starts_no_watch(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watch of a running search starts only past its age: a packet's
    search (1-5 ms at 10,000 records) reads nothing of its connection."""
    watched: list[str] = []

    async def never() -> None:
        watched.append("watched")
        await asyncio.Event().wait()

    token = caller_gone.set(lambda: never())
    try:
        for _ in range(5):
            assert await service.rt.db.search(lambda c: c.execute("SELECT 1").fetchone()[0]) == 1
        await asyncio.sleep(0.1)
    finally:
        caller_gone.reset(token)
    assert watched == []
