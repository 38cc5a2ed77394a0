"""The request deadline of `serve`'s listeners (http/slow_clients.py), over
real sockets, on both of uvicorn's HTTP parsers: a connection whose next
request has not arrived whole in time is closed; a request that has arrived
whole, and an upgraded WebSocket, are never cut."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from websockets.asyncio.client import connect

from tests.live_support import _Server, free_port
from waypost.http.slow_clients import with_request_deadline

DEADLINE = 0.3
PARSERS = ["h11", "httptools"]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Echoes a request's body (after `?wait` seconds); a WebSocket echoes a message."""
    if scope["type"] == "websocket":
        await receive()  # connect
        await send({"type": "websocket.accept"})
        message = await receive()
        await send({"type": "websocket.send", "text": message["text"]})
        await send({"type": "websocket.close"})
        return
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    wait = scope["query_string"].decode().removeprefix("wait=")
    await asyncio.sleep(float(wait or 0))
    answer = b"echo:" + body
    length = [(b"content-length", b"%d" % len(answer))]
    await send({"type": "http.response.start", "status": 200, "headers": length})
    await send({"type": "http.response.body", "body": answer})


@contextlib.asynccontextmanager
async def listening(http: str) -> AsyncIterator[int]:
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, http=with_request_deadline(http, DEADLINE),
        log_level="warning", lifespan="off",
    )  # fmt: skip
    server = _Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


async def everything(reader: asyncio.StreamReader) -> bytes:
    """All the server sends until it closes (the test fails if it never does)."""
    return await asyncio.wait_for(reader.read(), 10)


async def hang_up(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()


@pytest.mark.parametrize("http", PARSERS)
async def test_a_connection_that_sends_nothing_is_closed(http: str) -> None:
    async with listening(http) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await everything(reader) == b""
        await hang_up(writer)


@pytest.mark.parametrize("http", PARSERS)
async def test_a_trickled_head_is_closed_before_it_is_whole(http: str) -> None:
    async with listening(http) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        closed = asyncio.create_task(everything(reader))
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")
        sent = 0
        with contextlib.suppress(ConnectionError):
            # a header line every 0.1 s, for 10 s if the server let it
            while not closed.done() and sent < 100:
                writer.write(b"X-Slow: %d\r\n" % sent)
                await writer.drain()
                sent += 1
                await asyncio.sleep(0.1)
        assert await closed == b""
        assert sent < 100  # cut long before the head could be finished
        await hang_up(writer)


@pytest.mark.parametrize("http", PARSERS)
async def test_a_body_short_of_its_length_is_closed_unanswered(http: str) -> None:
    async with listening(http) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
        assert await everything(reader) == b""
        await hang_up(writer)


@pytest.mark.parametrize("http", PARSERS)
async def test_a_whole_request_is_answered_however_long_it_takes(http: str) -> None:
    async with listening(http) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        wait = DEADLINE * 4
        writer.write(
            b"POST /?wait=%g HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
            b"Connection: close\r\n\r\nhi" % wait
        )
        answer = await everything(reader)
        assert answer.startswith(b"HTTP/1.1 200 ")
        assert answer.endswith(b"\r\n\r\necho:hi")
        await hang_up(writer)


@pytest.mark.parametrize("http", PARSERS)
async def test_the_deadline_starts_again_after_each_response(http: str) -> None:
    async with listening(http) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        request = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n"
        for n in range(3):  # each sent after more than one deadline in all
            writer.write(request + b"%d" % n)
            assert (await reader.readuntil(b"echo:%d" % n)).startswith(b"HTTP/1.1 200 ")
            await asyncio.sleep(DEADLINE / 2)
        # then a head begun and never finished: closed
        writer.write(b"GET / HTTP/1.1\r\n")
        assert await everything(reader) == b""
        await hang_up(writer)


@pytest.mark.parametrize("http", PARSERS)
async def test_an_upgraded_websocket_outlives_the_deadline(http: str) -> None:
    async with listening(http) as port, connect(f"ws://127.0.0.1:{port}/") as ws:
        await asyncio.sleep(DEADLINE * 4)
        await ws.send("still here")
        assert await asyncio.wait_for(ws.recv(), 10) == "still here"
