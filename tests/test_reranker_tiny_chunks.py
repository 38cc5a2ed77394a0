"""A provider whose answer comes in one-byte chunks (rerankerjourney).

HTTP/1.1 lets a response body arrive in chunks of one byte each, six bytes
on the wire apiece (`1\\r\\n \\r\\n`). A provider that answers so, fast,
fills serve's socket with hundreds of thousands of chunks; the client then
parses them one event at a time without giving the event loop a turn
between them, so every other request of the service waits, the 3 s total
limit is only noticed when a network read finally suspends, and the
256 KiB limit is not reached (parsing runs at tens of thousands of chunks
a second). A real TLS server on loopback (trustme), written with blocking
sockets in a thread so its writes hold no lock the service needs.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trustme

from tests.conftest import Caller, MovableClock, Service, serving
from tests.context_support import context, ids, knowledge
from waypost.settings import RerankSettings, Settings

KEY = "sk-test-secret-key"
HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
)
# 320 KiB of body (past the 256 KiB limit) in one-byte chunks: 1.9 MB on the wire
BODY = b"1\r\n \r\n" * (320 * 1024) + b"2\r\n{}\r\n0\r\n\r\n"


@pytest.fixture(scope="module")
def chunking_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("tiny-chunks")
    ca = trustme.CA()
    ca_path = tmp / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    stop = threading.Event()

    def answer(conn: socket.socket) -> None:
        try:
            with context.wrap_socket(conn, server_side=True) as tls:
                tls.settimeout(10)
                head = b""
                while b"\r\n\r\n" not in head:
                    head += tls.recv(65536)
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                body = head.split(b"\r\n\r\n", 1)[1]
                while len(body) < length:
                    body += tls.recv(65536)
                tls.sendall(HEAD)
                for at in range(0, len(BODY), 49152):
                    tls.sendall(BODY[at : at + 49152])
        except (OSError, ssl.SSLError, StopIteration):
            pass  # the client hung up: what a client that stops reading does

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{port}/rerank", ca_path
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


@pytest.fixture
async def service(
    tmp_path: Path, clock: MovableClock, chunking_provider: tuple[str, Path]
) -> AsyncIterator[Service]:
    url, ca_path = chunking_provider
    rerank = RerankSettings(api_key=KEY, url=url, ca_bundle=ca_path, circuit_open_seconds=1.0)
    settings = Settings(db_path=tmp_path / "waypost.db", sweep_interval=3600, readers=1,
                        rerank=rerank)  # fmt: skip
    async with serving(settings, clock) as made:
        yield made


async def test_a_body_of_one_byte_chunks_leaves_the_event_loop_turns(
    human: Caller, project: str
) -> None:
    """Counted in turns the loop gives the rest of the service, not in time:
    a body read without a turn between chunks gives one a network read (a
    few hundred in all; every request of the service waited 0.8-1.5 s at a
    time, and the 3 s limit was noticed at 3.1-3.8 s), one with a turn
    after each chunk tens of thousands."""
    for n in range(3):
        await knowledge(human, f"zebra note {n}", body="zebra")
    turns = 0
    done = asyncio.Event()

    async def the_rest_of_the_service() -> None:
        nonlocal turns
        while not done.is_set():
            await asyncio.sleep(0)
            turns += 1

    other = asyncio.create_task(the_rest_of_the_service())
    packet = await context(human, "zebra")
    done.set()
    await other
    # the packet keeps its FTS order, whatever ended the call
    assert packet["rerank"] == {"applied": False, "reason": packet["rerank"]["reason"]}
    assert packet["rerank"]["reason"] in ("timeout", "too_large")
    assert ids(packet) == sorted(ids(packet))  # equal ranks: id order
    assert turns > 5_000, f"the loop took {turns} turns meanwhile"
