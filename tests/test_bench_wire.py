"""bench/wire.py, the latency suites' lean HTTP client, reads what real servers send:
a content-length body, a chunked body, keep-alive and a server that closes."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from bench.wire import WireClient

CHUNKED = (
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-type: application/json\r\n\r\n"
    b"5\r\n[1, 2\r\n3;ext=1\r\n, 3\r\n1\r\n]\r\n0\r\nx-trailer: t\r\n\r\n"
)


SILENT_CLOSE = b"<close>"


def _answer(path: bytes) -> bytes:
    if path.startswith(b"/chunked"):
        return CHUNKED
    if path.startswith(b"/close"):
        return b"HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 4\r\n\r\ngone"
    body = b'{"path": "' + path + b'"}'
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    # /ask-close: answered, then the connection is closed without saying so
    return answer + (SILENT_CLOSE if path.startswith(b"/ask-close") else b"")


@pytest.fixture
def server() -> Iterator[tuple[str, list[int]]]:
    """A loopback server answering each request line; `accepted` counts connections."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[int] = []

    def serve_connection(conn: socket.socket) -> None:
        buffer = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buffer:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                answer = _answer(head.split(b" ")[1])
                conn.sendall(answer.removesuffix(SILENT_CLOSE))
                if b"connection: close" in answer or answer.endswith(SILENT_CLOSE):
                    return

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(1)
            threading.Thread(target=serve_connection, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    host, port = listener.getsockname()
    try:
        yield f"http://{host}:{port}", accepted
    finally:
        listener.close()


def test_keep_alive_content_length_and_chunked_answers(server: tuple[str, list[int]]) -> None:
    base, accepted = server
    with WireClient(base, headers={"Authorization": "Bearer t"}) as client:
        first = client.get("/a", params={"q": "two words"})
        assert first.status_code == 200
        assert first.json() == {"path": "/a?q=two+words"}
        chunked = client.get("/chunked")
        assert chunked.json() == [1, 2, 3]
        assert chunked.headers["content-type"] == "application/json"
        assert client.get("/b").json() == {"path": "/b"}
    assert len(accepted) == 1  # one connection for all three


def test_a_closed_connection_is_opened_again(server: tuple[str, list[int]]) -> None:
    base, accepted = server
    with WireClient(base) as client:
        gone = client.get("/close")
        assert (gone.status_code, gone.text) == (404, "gone")
        assert client.get("/after").json() == {"path": "/after"}
    assert len(accepted) == 2


def test_an_idle_connection_the_server_closed_is_replaced(server: tuple[str, list[int]]) -> None:
    """A server may close a keep-alive connection while it is idle (uvicorn
    does after 5 s): the next GET goes out again on a new connection."""
    base, accepted = server
    with WireClient(base) as client:
        assert client.get("/first").json() == {"path": "/first"}
        assert client.get("/ask-close", params={"x": 1}).status_code == 200
        assert client.get("/second").json() == {"path": "/second"}
    assert len(accepted) == 2
