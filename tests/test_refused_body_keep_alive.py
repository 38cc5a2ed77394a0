"""A body refused before it is read (413 over the route's limit, 401, 415)
whose declared length passes the transport's bound (`BODY_MOST`, 1 MiB) gets
its answer, and then the connection is cut (http/slow_clients.py). The answer
must say so (`Connection: close`, RFC 9112 9.6): without it a keep-alive
client (httpx, requests, browsers) sends its next request, a valid one, down
the connection the server has cut, and that request fails with "Connection
reset by peer": bad input lost a good request (fuzzjourney)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.serve_support import Server, auth, serve
from waypost.http.slow_clients import BODY_MOST

pytestmark = pytest.mark.slow

OVER = BODY_MOST + 1024 * 1024  # 2 MiB: far past every route's own limit too


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    with serve(tmp_path_factory.mktemp("refusedbody")) as srv:
        yield srv, srv.admin_token


def _refusals(token: str) -> list[tuple[str, dict[str, str], int]]:
    body = {"Content-Type": "application/json", "Idempotency-Key": "k-refused"}
    return [
        ("/api/v1/projects", {**auth(token), **body}, 413),
        ("/api/v1/projects", {**auth("wp_not-a-token"), **body}, 401),
        ("/api/v1/projects", {**auth(token), **body, "Content-Type": "text/plain"}, 415),
        ("/graphql", {**auth(token), "Content-Type": "application/json"}, 413),
    ]


@pytest.mark.parametrize("case", range(4))
def test_a_cut_connection_is_announced(server: tuple[Server, str], case: int) -> None:
    srv, token = server
    path, headers, status = _refusals(token)[case]
    with httpx.Client(base_url=srv.url, timeout=10) as client:
        r = client.post(path, headers=headers, content=b"a" * OVER)
        assert r.status_code == status, r.text
        assert r.headers.get("connection", "").lower() == "close", r.headers


@pytest.mark.parametrize("case", range(4))
def test_the_next_request_on_the_client_is_not_lost(server: tuple[Server, str], case: int) -> None:
    srv, token = server
    path, headers, status = _refusals(token)[case]
    with httpx.Client(base_url=srv.url, timeout=10) as client:
        for attempt in range(3):  # the cut races the next request: try a few times
            r = client.post(path, headers=headers, content=b"a" * OVER)
            assert r.status_code == status, r.text
            # a valid request, on the same client: it must get its answer
            me = client.get("/api/v1/me", headers=auth(token))
            assert me.status_code == 200, (attempt, me.text)


def test_a_pipelined_upgrade_declaring_a_large_body_still_gets_its_refusal(
    server: tuple[Server, str],
) -> None:
    """A WebSocket upgrade makes no request cycle of its own: `cycle` is
    still the one of the request before it. Its declared `Content-Length`
    past 1 MiB closed that earlier answer instead (`connection: close`), and
    the 400 the upgrade is owed behind it was never written (review80)."""
    import socket
    from urllib.parse import urlsplit

    srv, _ = server
    address = urlsplit(srv.url)
    head = (
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /graphql HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Protocol: graphql-transport-ws\r\n"
        b"Content-Length: " + str(OVER).encode() + b"\r\n\r\n"
    )
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        sock.sendall(head)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
    assert got.startswith(b"HTTP/1.1 200 "), got
    assert b"HTTP/1.1 400 " in got, got  # observed: the 200 alone, then the close
    assert b"A WebSocket upgrade is not taken behind requests not yet answered." in got
