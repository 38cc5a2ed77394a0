"""`Expect: 100-continue` on `serve`'s configuration (http/expect_continue.py),
over real sockets, on both of uvicorn's HTTP parsers: an answer given before
the body was asked for closes the connection and says so; a body asked for
gets its `100` and the connection goes on."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest

from tests.conftest import Caller, Service
from tests.live_support import _Server, loopback_socket
from waypost.http.slow_clients import with_request_deadline
from waypost.serving import _config

PARSERS = ["h11", "httptools"]
BODY = json.dumps({"id": "expecting", "name": "Expecting"}).encode()


@contextlib.asynccontextmanager
async def streams(
    service: Service, http: str
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """One connection to the service's app as `serve` configures it."""
    sock = loopback_socket()
    port = sock.getsockname()[1]
    config = _config(service.app, "127.0.0.1", port, with_request_deadline(http, 30.0))
    config.lifespan = "off"
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        sock.close()


def post_head(token: str | None) -> bytes:
    authorization = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        "POST /api/v1/projects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Idempotency-Key: expect-1\r\n{authorization}Content-Length: {len(BODY)}\r\n"
        "Expect: 100-continue\r\n\r\n"
    ).encode()


@pytest.mark.parametrize("http", PARSERS)
async def test_an_answer_before_the_body_was_asked_for_closes_the_connection(
    service: Service, http: str
) -> None:
    """A `401` to an unauthenticated request sent with no `100`: the server
    went on waiting for the declared body, so a client that sent none and
    reused the connection had its next request read as that body
    (protocoljourney). RFC 9110 (10.1.1): such a server SHOULD say whether
    it closes; it now says `Connection: close`, and closes."""
    async with streams(service, http) as (reader, writer):
        writer.write(post_head(None))
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 401 "), head
        assert b"\r\nconnection: close\r\n" in head.lower(), head
        rest = await asyncio.wait_for(reader.read(), 10)  # then the end of the stream
        assert json.loads(rest)["error"]["code"] == "unauthenticated"


@pytest.mark.parametrize("http", PARSERS)
async def test_a_body_asked_for_gets_its_100_and_the_connection_goes_on(
    service: Service, human: Caller, http: str
) -> None:
    async with streams(service, http) as (reader, writer):
        writer.write(post_head(human.token))
        continued = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert continued == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(BODY)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 201 ") and b"connection: close" not in head.lower()
        length = int(next(line.split(b":")[1] for line in head.lower().split(b"\r\n")
                          if line.startswith(b"content-length:")))  # fmt: skip
        assert json.loads(await reader.readexactly(length))["id"] == "expecting"
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        again = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert again.startswith(b"HTTP/1.1 200 "), again


def chunked_head(token: str | None, expect: str = "100-continue") -> bytes:
    authorization = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        "POST /api/v1/projects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Idempotency-Key: expect-2\r\n{authorization}Transfer-Encoding: chunked\r\n"
        f"Expect: {expect}\r\n\r\n"
    ).encode()


@pytest.mark.parametrize("http", PARSERS)
@pytest.mark.parametrize("expect", ["100-continue", "100-Continue"])
async def test_a_chunked_body_refused_before_it_was_asked_for_closes_too(
    service: Service, http: str, expect: str
) -> None:
    """A chunked body waits for its `100` as a declared length does, and
    RFC 9110 compares the expectation case-insensitively (as uvicorn does
    when it decides to send its `100`): the `401` closes the connection."""
    async with streams(service, http) as (reader, writer):
        writer.write(chunked_head(None, expect))
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 401 "), head
        assert b"\r\nconnection: close\r\n" in head.lower(), head
        await asyncio.wait_for(reader.read(), 10)  # the end of the stream
