"""A second SIGINT while `serve` drains (a forced quit) ends it without an
ERROR: uvicorn skips the lifespan's shutdown then, and the lifespan task,
cancelled at exit, logged a traceback at ERROR level, which operators are
told to alert on (docs/operations.md)."""

from __future__ import annotations

import re
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.console_support import Rest
from tests.mcp_support import MCP_HEADERS
from tests.serve_support import Server, serve

pytestmark = pytest.mark.slow


@contextmanager
def a_write_queued_behind_a_lock(tmp_path: Path) -> Iterator[tuple[Server, list[int]]]:
    """`serve` with one write waiting for another process's write lock; the
    write's status lands in the list once it is answered (the lock is let go
    once the body of the `with` is done)."""
    with serve(tmp_path, "--metrics") as served:
        admin = Rest(served.url, served.admin_token)
        admin.send("POST", "/api/v1/projects", {"id": "demo", "name": "Demo"}, 201)
        served.metrics_token()  # made before the lock is taken: it writes
        holder = sqlite3.connect(tmp_path / "waypost.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process's write lock
        answers: list[int] = []

        def write() -> None:  # waits for the lock while the service stops
            body = {"kind": "fact", "title": "queued", "body": "b"}
            r = httpx.post(served.url + "/api/v1/projects/demo/knowledge", json=body,
                           headers=admin.headers(True), timeout=30)  # fmt: skip
            answers.append(r.status_code)

        writer = threading.Thread(target=write)
        writer.start()
        served.wait_for_unanswered_writes(1)  # the write waits for the lock
        try:
            yield served, answers
        finally:
            writer.join(timeout=30)
            holder.execute("ROLLBACK")
            holder.close()


def test_a_forced_quit_during_the_drain_logs_no_error(tmp_path: Path) -> None:
    with a_write_queued_behind_a_lock(tmp_path) as (served, answers):
        served.process.send_signal(signal.SIGINT)
        served.wait_for("Waiting for connections to close")  # draining
        served.process.send_signal(signal.SIGINT)  # the operator's second Ctrl-C
        assert served.process.wait(timeout=30) == 0
        lines = served.rest_of_log()
    assert answers == [503]  # the queued write was answered, not dropped
    assert [x for x in lines if " ERROR " in x or "Traceback" in x] == []
    assert any("Application shutdown complete" in x for x in lines)
    # docs/operations.md, "Stopping": each signal says what it did, in the
    # words operators read (no test read the forced quit's; opsdocaudit)
    said = [x.split(" INFO waypost ", 1)[-1] for x in served.seen if " INFO waypost " in x]
    first = "SIGINT: stopping (no new connections; the requests under way finish)"
    forced = "SIGINT again: a forced quit (open connections are not waited for)"
    assert said.count(first) == 1 and said.count(forced) == 1, said
    assert said.index(first) < said.index(forced)


def test_a_sigint_after_a_sigterm_forces_without_saying_again(tmp_path: Path) -> None:
    """The first SIGINT after a SIGTERM forces the quit too, and was logged
    "SIGINT again" though no SIGINT had come (operatorjourney)."""
    with a_write_queued_behind_a_lock(tmp_path) as (served, answers):
        served.process.send_signal(signal.SIGTERM)
        served.wait_for("Waiting for connections to close")  # draining
        served.process.send_signal(signal.SIGINT)
        assert served.process.wait(timeout=30) == 0
        served.rest_of_log()
    said = [x.split(" INFO waypost ", 1)[-1] for x in served.seen if " INFO waypost " in x]
    assert "SIGINT: a forced quit (open connections are not waited for)" in said, said
    assert not [x for x in said if "again" in x], said
    assert answers == [503]


def test_a_second_signal_during_the_lifespan_shutdown_runs_it_once(tmp_path: Path) -> None:
    """uvicorn had begun the lifespan's shutdown itself when the second
    SIGINT came; `serve` then ran it a second time ("Waiting for application
    shutdown." twice)."""
    with serve(tmp_path) as served:
        # an MCP client's session: the endpoint's half-second grace for it
        # keeps the shutdown going while the second signal comes (with none
        # open the shutdown ends at once)
        hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
        headers = {**MCP_HEADERS, "Authorization": f"Bearer {served.admin_token}"}
        opened = httpx.post(f"{served.url}/mcp", json=hello, headers=headers, timeout=30)
        assert "mcp-session-id" in opened.headers, opened.text
        served.process.send_signal(signal.SIGINT)
        lines: list[str] = []
        deadline = time.monotonic() + 20
        while not any("Waiting for application shutdown" in x for x in lines):
            assert time.monotonic() < deadline, lines
            lines.append(served.lines.get(timeout=20))
        served.process.send_signal(signal.SIGINT)
        assert served.process.wait(timeout=30) == 0
        lines += served.rest_of_log()
    assert sum("Waiting for application shutdown" in x for x in lines) == 1, lines
    assert [x for x in lines if " ERROR " in x or "Traceback" in x] == []


def test_a_forced_quit_under_a_body_still_arriving_logs_no_error(tmp_path: Path) -> None:
    """A POST whose body was still arriving at the second SIGINT was cancelled
    when the loop closed: uvicorn logged "Exception in ASGI application" with
    a traceback, at ERROR, and answered 500."""
    import socket

    with serve(tmp_path) as served:
        admin = Rest(served.url, served.admin_token)
        admin.send("POST", "/api/v1/projects", {"id": "demo", "name": "Demo"}, 201)
        host, port = served.url.removeprefix("http://").split(":")
        slow = socket.create_connection((host, int(port)), timeout=30)
        # one whole request first: the connection is accepted and read
        slow.sendall(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        served_first = b""
        while b"\r\n\r\n" not in served_first:
            served_first += slow.recv(65536)
        head_of_first, _, body = served_first.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: *(\d+)", head_of_first).group(1))  # type: ignore[union-attr]
        while len(body) < length:
            body += slow.recv(65536)
        head = (
            "POST /api/v1/projects/demo/knowledge HTTP/1.1\r\n"
            f"Host: {host}\r\nAuthorization: Bearer {served.admin_token}\r\n"
            "Content-Type: application/json\r\nIdempotency-Key: slow-1\r\n"
            "Content-Length: 200\r\n\r\n{"
        )
        slow.sendall(head.encode())  # one byte of the promised 200
        time.sleep(0.5)  # its head is read (nothing outside shows it)
        served.process.send_signal(signal.SIGINT)
        served.wait_for("Waiting for connections to close")  # for the open request
        served.process.send_signal(signal.SIGINT)  # the operator's second Ctrl-C
        assert served.process.wait(timeout=30) == 0
        answer = slow.recv(65536)
        slow.close()
        lines = served.rest_of_log()
    assert b" 500 " not in answer.split(b"\r\n", 1)[0], answer
    assert [x for x in lines if " ERROR " in x or "Traceback" in x] == [], lines


@pytest.mark.parametrize("late", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_store_closes_is_told_it_is_already_stopping(
    tmp_path: Path, late: signal.Signals
) -> None:
    """After a forced quit the store closes last (its writer waits out the
    busy timeout of a write queued behind another process's lock, about 5 s).
    The handlers were gone by then: a SIGTERM there killed the process (exit
    -15, the queued write unanswered) and a third Ctrl-C raised through the
    queued write's request (exit 1, a 500 and a traceback). A SIGTERM after
    the forced quit also took it back (shutdownaudit)."""
    with a_write_queued_behind_a_lock(tmp_path) as (served, answers):
        served.process.send_signal(signal.SIGINT)
        served.wait_for("Waiting for connections to close")
        served.process.send_signal(signal.SIGINT)  # the forced quit
        served.wait_for("Application shutdown complete")  # the store closes next
        time.sleep(0.2)
        served.process.send_signal(late)  # a supervisor's, or a third Ctrl-C
        assert served.process.wait(timeout=30) == 0
        lines = served.rest_of_log()
    assert answers == [503]
    assert [x for x in lines if " ERROR " in x or "Traceback" in x] == [], lines
    assert any(f"{late.name}: already stopping" in x for x in lines), lines
