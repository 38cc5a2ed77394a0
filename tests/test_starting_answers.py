"""The listeners' answers while the store opens (http/starting.py), request
by request: the forms of a request head RFC 9112 lets a server accept."""

from __future__ import annotations

import asyncio
import json

import pytest

from waypost.http.starting import StartingAnswers, lifecycle_answer, public_answer
from waypost.serving import bind

STARTING = {"status": "starting"}


async def _ask(port: int, raw: bytes) -> tuple[bytes, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return head, body


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"GET /healthz HTTP/1.1\r\nHost: w\r\n\r\n", STARTING),
        (b"GET /healthz?full=1 HTTP/1.1\r\nHost: w\r\n\r\n", STARTING),
        (b"\r\n\r\nGET /healthz HTTP/1.1\r\nHost: w\r\n\r\n", STARTING),  # empty lines first
        (b"GET /healthz HTTP/1.1\nHost: w\n\n", STARTING),  # bare LF
        (b"GET HTTP://w:8080/healthz HTTP/1.1\r\nHost: w\r\n\r\n", STARTING),  # absolute form
        (b"GET /healthz HTTP/1.0\r\n\r\n", STARTING),
        (b"GET /api/v1/me HTTP/1.1\r\nHost: w\r\n\r\n", "unavailable"),
        (b"POST /graphql HTTP/1.1\r\nHost: w\r\nContent-Length: 2\r\n\r\n{}", "graphql"),
        (b"GET /console HTTP/1.1\r\nHost: w\r\n\r\n", "page"),
        (b"GET / HTTP/1.1\r\nHost: w\r\n\r\n", "page"),
    ],
)
async def test_each_request_gets_its_answer(raw: bytes, expected: object) -> None:
    sockets = bind("127.0.0.1", 0)
    starting = StartingAnswers()
    starting.start(sockets, public_answer, 16, 5.0)
    try:
        head, body = await _ask(sockets[0].getsockname()[1], raw)
    finally:
        starting.close()
        for sock in sockets:
            sock.close()
    assert head.startswith(b"HTTP/1.1 503 ") and b"\r\nRetry-After: 1" in head
    if expected == "page":
        # a reload of the console while the service starts: a page that
        # loads again by itself, where the JSON answer stayed on the screen
        assert b"\r\nContent-Type: text/html; charset=utf-8" in head
        assert b'<meta http-equiv="refresh" content="2">' in body
        assert b"Content-Security-Policy: default-src 'none'" in head
        # as every answer under /console (docs/console.md)
        assert b"\r\nX-Frame-Options: DENY\r\n" in head
        assert b"\r\nReferrer-Policy: no-referrer\r\n" in head
        assert b"\r\nCross-Origin-Opener-Policy: same-origin\r\n" in head
        return
    answer = json.loads(body)
    if expected == "unavailable":
        assert answer["error"]["details"] == {"reason": "starting"}
    elif expected == "graphql":
        assert answer["errors"][0]["extensions"]["reason"] == "starting"
    else:
        assert answer == expected


async def test_a_head_request_gets_no_body_and_the_lifecycle_its_own() -> None:
    public, private = bind("127.0.0.1", 0), bind("127.0.0.1", 0)
    starting = StartingAnswers()
    starting.start(public, public_answer, 16, 5.0)
    starting.start(private, lifecycle_answer, 16, 5.0)
    try:
        head, body = await _ask(public[0].getsockname()[1], b"HEAD /healthz HTTP/1.1\r\n\r\n")
        _, lifecycle = await _ask(private[0].getsockname()[1], b"GET /memos HTTP/1.1\r\n\r\n")
    finally:
        starting.close()
        for sock in (*public, *private):
            sock.close()
    assert b"\r\nContent-Length: 21" in head and body == b""
    # byte for byte what the lifecycle listener's app answers (json.dumps' spacing)
    assert lifecycle == json.dumps({"error": "unavailable"}).encode()
