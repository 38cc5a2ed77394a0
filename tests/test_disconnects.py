"""A client that goes away mid-request is not an error of the service
(contract 14): a real `waypost serve`, raw sockets that hang up mid-body, and
a log with no ERROR line and no traceback."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx
import pytest

from tests.serve_support import START, Server, start

pytestmark = pytest.mark.slow


def hang_up_mid_body(url: str, path: str, token: str, declared: int, sent: bytes) -> None:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nIdempotency-Key: k-{time.monotonic_ns()}\r\n"
            f"Content-Length: {declared}\r\n\r\n"
        )
        sock.sendall(head.encode() + sent)
        time.sleep(0.05)  # the server is now waiting for the rest of the body


def drain(server: Server) -> list[str]:
    lines = list(server.seen)
    while not server.lines.empty():
        lines.append(server.lines.get_nowait())
    return lines


@pytest.fixture
def served(tmp_path: Path) -> tuple[Server, str]:
    clock = tmp_path / "clock"
    clock.write_text(START)
    server = start(tmp_path / "waypost.db", clock)
    server.wait_for(r"created human principal 'admin'")
    token = server.wait_for(r"^\s+(wp_\S+)$").group(1)
    server.wait_for(r"listening on http://")
    return server, token


def test_clients_hanging_up_mid_body_leave_no_error_in_the_log(
    served: tuple[Server, str],
) -> None:
    server, token = served
    try:
        for _ in range(10):
            hang_up_mid_body(server.url, "/api/v1/projects", token, 1000, b'{"id": "p", ')
            hang_up_mid_body(server.url, "/graphql", token, 5000, b'{"query": "{ me {')
            hang_up_mid_body(server.url, "/api/v1/projects", token, 1000, b"")
        time.sleep(0.5)
        # the service is fine and still answers
        r = httpx.get(f"{server.url}/api/v1/me", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200
    finally:
        assert server.stop() == 0
    log = drain(server)
    assert not [line for line in log if "ERROR" in line or "Traceback" in line], log
