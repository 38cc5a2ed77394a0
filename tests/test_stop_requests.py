"""Requests that reach the service once its stop has begun (stopaudit).

uvicorn runs the requests pipelined behind one under way when the stop
begins, so a request may start after `Runtime.begin_stop`: what it meets
must be stopped too (an event stream must end, or the graceful stop waits
for its connection for ever), and a second SIGTERM changes nothing (only
SIGINT forces: docs/operations.md, "Stopping")."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from tests.conftest import Caller, Service
from tests.console_support import Rest
from tests.serve_support import serve
from waypost.live import Hub, StreamEnded, hub_for


async def test_a_stream_opened_once_the_stop_began_ends_though_no_hub_was_made_before(
    service: Service, human: Caller, project: str
) -> None:
    """The hub is made on first use; a stop with none made stopped nothing,
    and the first stream after it made a hub that followed the log for ever."""
    assert service.rt.hub is None  # no stream opened before the stop
    service.rt.begin_stop()
    assert hub_for(service.rt).closed
    r = await asyncio.wait_for(
        human.get(f"/api/v1/projects/{project}/events/stream"), 30
    )  # a bound on a hang, not on speed: the stream ends at once
    assert r.status_code == 200, r.text
    assert r.text == ": stream open\n\n"


async def test_healthz_says_stopping_once_the_stop_began(service: Service) -> None:
    """A `GET /healthz` pipelined behind a write answered `200 ok` after a
    forced quit had closed the store, where every other request got `503`."""
    assert (await service.client.get("/healthz")).json() == {"status": "ok"}
    service.rt.begin_stop()
    r = await service.client.get("/healthz")
    assert (r.status_code, r.json()) == (503, {"status": "stopping"})
    assert r.headers["Retry-After"] == "1"


async def test_a_stop_wakes_a_stream_waiting_for_its_next_batch(service: Service) -> None:
    """A listener waiting for events ends when the hub stops, not at its next
    poll (14 s later for a quiet SSE stream, past a supervisor's patience)."""
    hub = Hub(service.rt.db)
    try:
        async with hub.listen("demo", "tok_1", None) as listener:
            waiting = asyncio.create_task(listener.next_batch(3600))
            await asyncio.sleep(0)  # it runs to its wait for a wake
            assert not waiting.done()
            hub.stop()
            with pytest.raises(StreamEnded):
                await asyncio.wait_for(waiting, 30)  # a bound on a hang, not on speed
    finally:
        await hub.close()


def _answers(sock: socket.socket) -> bytes:
    sock.settimeout(30)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


@pytest.mark.slow
def test_a_stream_pipelined_behind_a_write_does_not_hold_the_stop(tmp_path: Path) -> None:
    """A stream pipelined behind a write queued for another process's lock,
    with no stream opened before: SIGTERM, then the lock goes. The stream ran
    after the stop on a hub of its own that nothing stopped, and the process
    never exited (the public listener waited for its connection)."""
    with serve(tmp_path, "--metrics") as served:
        admin = Rest(served.url, served.admin_token)
        admin.send("POST", "/api/v1/projects", {"id": "demo", "name": "Demo"}, 201)
        served.metrics_token()  # made before the lock is taken: it writes
        host, port = served.url.removeprefix("http://").split(":")
        token = served.admin_token
        body = b'{"kind": "fact", "title": "queued", "body": "b"}'
        write = (
            f"POST /api/v1/projects/demo/knowledge HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {token}\r\nIdempotency-Key: k1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        stream = (
            f"GET /api/v1/projects/demo/events/stream HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {token}\r\n\r\n"
        ).encode()
        holder = sqlite3.connect(tmp_path / "waypost.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process's write lock
        client = socket.create_connection((host, int(port)), timeout=30)
        try:
            client.sendall(write + stream)
            served.wait_for_unanswered_writes(1)
            served.process.send_signal(signal.SIGTERM)
            served.wait_for("Waiting for connections to close")  # for the write
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        status = served.process.wait(timeout=30)
        answers = _answers(client)
        client.close()
        lines = served.rest_of_log()
    assert status == 0
    assert re.findall(rb"HTTP/1\.1 (\d{3})", answers) == [b"201", b"200"]
    assert [x for x in lines if " ERROR " in x or "Traceback" in x] == []
    with contextlib.closing(sqlite3.connect(tmp_path / "waypost.db")) as db:
        found = db.execute("SELECT count(*) FROM knowledge WHERE title = 'queued'").fetchone()
    assert found == (1,)  # the answered write is stored


@pytest.mark.slow
def test_a_second_sigterm_does_not_force_the_quit(tmp_path: Path) -> None:
    """docs/operations.md: only SIGINT forces. A request whose body is still
    arriving at the second SIGTERM is waited for and answered."""
    with serve(tmp_path) as served:
        admin = Rest(served.url, served.admin_token)
        admin.send("POST", "/api/v1/projects", {"id": "demo", "name": "Demo"}, 201)
        host, port = served.url.removeprefix("http://").split(":")
        body = b'{"kind": "fact", "title": "slow", "body": "b"}'
        head = (
            f"POST /api/v1/projects/demo/knowledge HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {served.admin_token}\r\nIdempotency-Key: slow-1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        slow = socket.create_connection((host, int(port)), timeout=30)
        slow.sendall(head + body[:1])
        time.sleep(0.5)  # its head is read (nothing outside shows it)
        served.process.send_signal(signal.SIGTERM)
        served.wait_for("Waiting for connections to close")  # for the open request
        served.process.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # the second signal is handled (it logs nothing)
        slow.sendall(body[1:])
        answer = _answers(slow)
        slow.close()
        assert served.process.wait(timeout=30) == 0
        lines = served.rest_of_log()
    assert answer.startswith(b"HTTP/1.1 201 "), answer
    assert not any("forced quit" in x for x in lines), lines
    with contextlib.closing(sqlite3.connect(tmp_path / "waypost.db")) as db:
        found = db.execute("SELECT count(*) FROM knowledge WHERE title = 'slow'").fetchone()
    assert found == (1,)  # the answered write is stored
