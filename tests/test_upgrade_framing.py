"""A request asking an upgrade other than to a WebSocket (`Connection:
Upgrade`, `Upgrade: h2c`) is served as a plain request, as RFC 9110 (7.8)
lets a server do: then its body is its body (RFC 9112 6.3).

httptools (llhttp) takes any request with `Connection: Upgrade` and an
`Upgrade` for one whose message ends with its head: its body and whatever
follows in the same read are handed back as "the other protocol", which
uvicorn drops with a warning, and the next read is parsed as HTTP again.
So the app ran the request with an empty body, and a body that arrived in
a later read ran as a request of its own: a request smuggled past whatever
a front proxy checks (the proxy saw one request), on both listeners
(`POST /api/v1/projects` whose body was a second `POST /api/v1/projects`
created the second project; `POST /v1/decisions` likewise registered the
memo its body held) (protocoljourney).
"""

from __future__ import annotations

import asyncio
import re

import pytest

from tests.test_slow_clients import PARSERS, everything, hang_up, listening

SMUGGLED = b"POST /?wait=0 HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\nSMUGGLED"
UPGRADE_H2C = b"Connection: Upgrade\r\nUpgrade: h2c\r\n"


def statuses(answer: bytes) -> list[bytes]:
    return re.findall(rb"HTTP/1\.1 (\d{3}) ", answer)


@pytest.mark.parametrize("http", PARSERS)
async def test_the_body_of_an_upgrade_request_is_never_a_request_of_its_own(http: str) -> None:
    head = b"POST / HTTP/1.1\r\nHost: x\r\n" + UPGRADE_H2C
    head += b"Content-Length: %d\r\n\r\n" % len(SMUGGLED)
    async with listening(http, deadline=1.0) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head)
        await writer.drain()
        await asyncio.sleep(0.2)  # the body in a read of its own, as a slow link sends it
        writer.write(SMUGGLED)
        answer = await everything(reader)
        await hang_up(writer)
    # the body never ran as a request: the app echoes what it was given
    assert not answer.endswith(b"\r\n\r\necho:SMUGGLED"), answer
    # either refused, or served once, with its own body
    assert statuses(answer) in ([b"400"], [b"200"]), answer
    if statuses(answer) == [b"200"]:
        assert answer.endswith(b"echo:" + SMUGGLED), answer


@pytest.mark.parametrize("http", PARSERS)
async def test_a_request_pipelined_behind_an_upgrade_request_is_not_dropped(http: str) -> None:
    """Behind a bodiless `GET` asking `Upgrade: h2c`, in the same read: it was
    dropped unanswered, the connection left open until the deadline, its
    client waiting for an answer that never came. Answered, or the first
    answer says the connection closes (`Connection: close`)."""
    first = b"GET / HTTP/1.1\r\nHost: x\r\n" + UPGRADE_H2C + b"\r\n"
    second = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nsecond"
    async with listening(http, deadline=1.0) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(first + second)
        answer = await everything(reader)
        await hang_up(writer)
    assert statuses(answer)[:1] == [b"200"], answer
    first_head = answer.partition(b"\r\n\r\n")[0].lower()
    assert answer.endswith(b"echo:second") or b"\r\nconnection: close" in first_head, answer
