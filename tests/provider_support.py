"""A real HTTPS reranking provider on loopback for the reranker tests.

uvicorn serves a small ASGI app over TLS with a certificate from a trustme
CA, in its own thread and event loop; the service under test reaches it
through its real httpx client, trusting the CA via TYPESAFE_CA_BUNDLE (the
settings field). The test steers the provider's next answers (`mode`) and can
hold requests inside the provider until it releases them.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trustme
import uvicorn

Scorer = Callable[[list[dict[str, str]]], Any]


def reverse_scores(documents: list[dict[str, str]]) -> Any:
    """Later documents score higher (so a success visibly reverses the order)."""
    n = len(documents)
    return {"scores": [{"id": d["id"], "score": 3 * i / max(1, n - 1)}
                       for i, d in enumerate(documents)]}  # fmt: skip


@dataclass
class Provider:
    url: str = ""
    ca_path: Path = Path()
    calls: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    # each call's method and target (path and query, as sent)
    targets: list[tuple[str, str]] = field(default_factory=list)
    # what to answer: "scores", "status", "slow_headers", "drip", "large",
    # "large_declared", "at_the_limit", "raw", "gzip_bomb", "endless", "reset"
    mode: str = "scores"
    scorer: Scorer = field(default_factory=lambda: reverse_scores)
    status: int = 500
    raw: bytes = b""
    hold: threading.Event | None = None  # set: requests wait here until it is set
    arrived: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_arrivals(self, count: int, timeout: float = 5.0) -> None:
        for _ in range(count):
            assert self.arrived.acquire(timeout=timeout), "the provider saw no call"

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        with self.lock:
            self.calls += 1
            self.bodies.append(json.loads(raw))
            self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
            query = scope.get("query_string", b"").decode()
            target = scope["raw_path"].decode() + (f"?{query}" if query else "")
            self.targets.append((scope["method"], target))
        self.arrived.release()
        if self.hold is not None:
            hold = self.hold
            await asyncio.get_running_loop().run_in_executor(None, hold.wait, 30)
        await self._answer(self.bodies[-1], send, receive)

    async def _answer(self, body: dict[str, Any], send: Any, receive: Any) -> None:
        mode = self.mode
        if mode == "status":
            headers = [(b"location", b"https://127.0.0.1:1/elsewhere"), (b"retry-after", b"0")]
            await _respond(send, self.status, b"{}", headers)
        elif mode == "slow_headers":
            await asyncio.sleep(4)
            await _respond(send, 200, json.dumps(self.scorer(body["documents"])).encode())
        elif mode == "drip":
            # each chunk arrives well within httpx's per-read timeout; only the
            # total time limit can end this
            await send({"type": "http.response.start", "status": 200, "headers": []})
            for _ in range(40):
                await send({"type": "http.response.body", "body": b" ", "more_body": True})
                await asyncio.sleep(0.1)
            await send({"type": "http.response.body", "body": b"{}"})
        elif mode == "large":
            # chunked, no Content-Length: the client must stop reading by itself
            await send({"type": "http.response.start", "status": 200, "headers": []})
            chunk = b" " * 65536
            for _ in range(8):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"{}"})
        elif mode == "large_declared":
            # the length named, and the body held back past the 3 s total:
            # only the head can refuse it in time (uvicorn sends a body without
            # a Content-Length chunked, so the length is named)
            await send({"type": "http.response.start", "status": 200,
                        "headers": _length(256 * 1024 + 1)})  # fmt: skip
            await send({"type": "http.response.body", "body": b" ", "more_body": True})
            await asyncio.sleep(4)
            await send({"type": "http.response.body", "body": b" " * (256 * 1024)})
        elif mode == "at_the_limit":
            # good scores padded with JSON's own whitespace to exactly 256 KiB
            scores = json.dumps(self.scorer(body["documents"])).encode()
            await _respond(send, 200, scores.ljust(256 * 1024), _length(256 * 1024))
        elif mode == "endless":
            # chunked and never ending (until the client hangs up, or 10 s):
            # only a client that stops reading at the limit answers `too_large`
            gone = asyncio.create_task(_hung_up(receive))
            await send({"type": "http.response.start", "status": 200, "headers": []})
            chunk = b" " * 65536
            deadline = time.monotonic() + 10
            while not gone.done() and time.monotonic() < deadline:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await asyncio.sleep(0)
            gone.cancel()
        elif mode == "reset":
            # a length named, part of the body sent, then the connection dropped
            await send({"type": "http.response.start", "status": 200, "headers": _length(4096)})
            await send({"type": "http.response.body", "body": b'{"scores": [', "more_body": True})
            raise ConnectionResetError("the provider dropped the connection mid-body")
        elif mode == "raw":
            await _respond(send, 200, self.raw)
        elif mode == "gzip_bomb":
            # 64 MiB of spaces in 64 KiB of gzip: decoded, it would pass the limit
            # a thousand times over inside one network read
            bomb = gzip.compress(b" " * (64 * 1024 * 1024), compresslevel=9)
            await _respond(send, 200, bomb, [(b"content-encoding", b"gzip")])
        else:
            await _respond(send, 200, json.dumps(self.scorer(body["documents"])).encode())


async def _hung_up(receive: Any) -> None:
    """Returns when the client has closed the connection."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _length(size: int) -> list[tuple[bytes, bytes]]:
    return [(b"content-length", str(size).encode())]


async def _respond(
    send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": body})


class ProviderServer:
    """One uvicorn server whose answers come from the Provider in `current`:
    each test gets a Provider of its own (its counters and modes start
    fresh) without starting and stopping a TLS server of its own, which cost
    the reranker tests ~0.15 s each. A request still running from an earlier
    test finishes on that test's Provider, never counted in this one's."""

    def __init__(self, url: str, ca_path: Path) -> None:
        self.url, self.ca_path = url, ca_path
        self.current = Provider(url=url, ca_path=ca_path)

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self.current.app(scope, receive, send)

    @contextmanager
    def serving(self) -> Iterator[Provider]:
        """A fresh Provider answering until the block ends (then its held
        requests are let go)."""
        provider = self.current = Provider(url=self.url, ca_path=self.ca_path)
        try:
            yield provider
        finally:
            if provider.hold is not None:
                provider.hold.set()


@contextmanager
def provider_server(tmp_path: Path) -> Iterator[ProviderServer]:
    """The provider over TLS on a free loopback port, stopped on exit."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    ca_path, cert_path, key_path = (tmp_path / n for n in ("ca.pem", "cert.pem", "key.pem"))
    ca.cert_pem.write_to_path(str(ca_path))
    cert.cert_chain_pems[0].write_to_path(str(cert_path))
    cert.private_key_pem.write_to_path(str(key_path))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    made = ProviderServer(f"https://127.0.0.1:{port}/rerank", ca_path)
    config = uvicorn.Config(
        made.app,
        ssl_certfile=str(cert_path),
        ssl_keyfile=str(key_path),
        log_level="critical",
        interface="asgi3",
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the provider did not start"
        time.sleep(0.01)
    try:
        yield made
    finally:
        if made.current.hold is not None:
            made.current.hold.set()
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextmanager
def running_provider(tmp_path: Path) -> Iterator[Provider]:
    """A server of its own with one Provider, stopped on exit."""
    with provider_server(tmp_path) as made, made.serving() as provider:
        yield provider


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    sock.close()
    return port
