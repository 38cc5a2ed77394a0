"""A real `waypost serve` process on a free loopback port with a temporary
database: the admin token from stderr, real HTTP, and the README's examples
run exactly as printed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus
from websockets.typing import Subprotocol

from tests.serve_support import START, Server, auth, free_port, serve, start, write_clock
from waypost.maintenance import verify

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    with serve(tmp_path_factory.mktemp("serve")) as srv:
        yield srv, srv.admin_token


def test_healthz_answers_over_real_http(server: tuple[Server, str]) -> None:
    srv, _ = server
    r = httpx.get(f"{srv.url}/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["x-content-type-options"] == "nosniff"


def test_the_admin_token_from_stderr_is_the_admin(server: tuple[Server, str]) -> None:
    srv, token = server
    r = httpx.get(f"{srv.url}/api/v1/me", headers=auth(token))
    assert r.status_code == 200
    assert r.json()["principal"]["name"] == "admin"
    assert r.json()["principal"]["kind"] == "human"


def test_the_clock_file_warning_is_logged(server: tuple[Server, str]) -> None:
    srv, _ = server
    assert any("WAYPOST_CLOCK_FILE is set" in line for line in srv.seen)


def test_a_start_without_the_lifecycle_listener_says_so(server: tuple[Server, str]) -> None:
    """With `--lifecycle-port 0` it said that lifecycle deliveries stay
    pending for want of a webhook (nothing is made to deliver without the
    listener), and nothing of the listener being off (triage27)."""
    srv, _ = server
    said = srv.logged()
    if not any(line.endswith("no lifecycle listener (--lifecycle-port 0)") for line in said):
        # written right after "listening on", which is all the fixture waits
        # for: its reader may not have passed it on yet (deliveryaudit: 1 run in 4)
        srv.wait_for(r"no lifecycle listener \(--lifecycle-port 0\)$")
        said = srv.logged()
    assert not any("lifecycle deliveries stay pending" in line for line in said), said


def test_graphql_over_real_http(server: tuple[Server, str]) -> None:
    srv, token = server
    r = httpx.post(
        f"{srv.url}/graphql", json={"query": "{ me { name kind } }"}, headers=auth(token)
    )
    assert r.status_code == 200
    assert r.json() == {"data": {"me": {"name": "admin", "kind": "HUMAN"}}}


def test_unauthenticated_over_real_http(server: tuple[Server, str]) -> None:
    srv, _ = server
    r = httpx.get(f"{srv.url}/api/v1/me")
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated"
    r = httpx.post(f"{srv.url}/graphql", json={"query": "{ me { name } }"})
    assert r.status_code == 401
    assert r.json() == {
        "errors": [{"message": "unauthenticated", "extensions": {"code": "unauthenticated"}}]
    }


def test_oversized_body_is_413_over_real_http(server: tuple[Server, str]) -> None:
    srv, token = server
    headers = {**auth(token), "Content-Type": "application/json", "Idempotency-Key": "big"}
    r = httpx.post(f"{srv.url}/api/v1/projects", content=b" " * (257 * 1024), headers=headers)
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"


def test_service_time_comes_from_the_clock_file(server: tuple[Server, str]) -> None:
    srv, token = server
    headers = {**auth(token), "Idempotency-Key": "clocked"}
    r = httpx.post(f"{srv.url}/api/v1/projects", json={"id": "clocked", "name": "C"},
                   headers=headers)  # fmt: skip
    assert r.status_code == 201 and r.json()["created_at"] == START
    write_clock(srv.clock, "2026-11-30T09:30:00.000Z")
    try:
        r = httpx.patch(
            f"{srv.url}/api/v1/projects/clocked/policy",
            json={"expected_revision": 1, "rules": "later"},
            headers={**auth(token), "Idempotency-Key": "clocked-2"},
        )
        assert r.json()["updated_at"] == "2026-11-30T09:30:00.000Z"
    finally:
        write_clock(srv.clock, START)


def readme_block(heading: str) -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split(f"### {heading}\n", 1)[1]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


def json_documents(output: str) -> list[Any]:
    """The JSON documents curl printed back to back."""
    decoder = json.JSONDecoder()
    docs, index = [], 0
    while index < len(output):
        if output[index].isspace():
            index += 1
            continue
        doc, index = decoder.raw_decode(output, index)
        docs.append(doc)
    return docs


def run_block(srv: Server, token: str, block: str) -> list[Any]:
    env = {**os.environ, "WAYPOST_URL": srv.url, "WAYPOST_TOKEN": token}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    return json_documents(done.stdout)


@pytest.mark.skipif(shutil.which("curl") is None, reason="the README examples use curl")
def test_readme_examples_work_as_printed(server: tuple[Server, str]) -> None:
    srv, token = server
    rest = run_block(srv, token, readme_block("REST with curl"))
    assert len(rest) == 5
    me, project, policy, history, events = rest
    assert me["principal"]["name"] == "admin"
    assert project["id"] == "demo"
    assert policy["revision"] == 2 and policy["rules"] == "Run the tests before you submit."
    assert [h["revision"] for h in history["items"]] == [2, 1]
    assert [e["type"] for e in events["items"]] == ["project.created", "policy.updated"]

    graphql = run_block(srv, token, readme_block("GraphQL with curl"))
    assert len(graphql) == 2
    query, mutation = graphql
    assert "errors" not in query and "errors" not in mutation
    assert query["data"]["me"] == {"name": "admin", "kind": "HUMAN"}
    assert query["data"]["project"]["policy"]["revision"] == 2
    assert mutation["data"]["policyUpdate"]["userErrors"] == []
    assert mutation["data"]["policyUpdate"]["policy"] == {"revision": 3, "reviewMode": "ANY"}

    # the examples carry idempotency keys, so running them again replays
    again = run_block(srv, token, readme_block("REST with curl"))
    assert again[1] == project and again[2] == policy
    assert run_block(srv, token, readme_block("GraphQL with curl"))[1]["data"]["policyUpdate"][
        "replayed"
    ]


def test_restart_on_the_same_database_prints_no_token(tmp_path: Path) -> None:
    clock = tmp_path / "clock"
    clock.write_text(START)
    first = start(tmp_path / "waypost.db", clock)
    try:
        token = first.wait_for(r"^\s+(wp_\S+)$").group(1)
        first.wait_for(r"listening on http://")
    finally:
        # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal
        assert first.stop() in (0, -signal.SIGTERM)
    first.wait_for(r"Application shutdown complete", timeout=5)
    second = start(tmp_path / "waypost.db", clock)
    try:
        second.wait_for(r"listening on http://")
        assert not any("shown once" in line or "wp_" in line for line in second.seen)
        r = httpx.get(f"{second.url}/api/v1/me", headers=auth(token))
        assert r.status_code == 200
    finally:
        second.stop()


def started_with_hang_up(tmp_path: Path, disposition: signal.Handlers) -> Server:
    """`serve` started with SIGHUP's disposition `disposition`, which a child
    inherits (this process's own is put back at once)."""
    clock = tmp_path / "clock"
    clock.write_text(START)
    previous = signal.signal(signal.SIGHUP, disposition)
    try:
        return start(tmp_path / "waypost.db", clock)
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_a_hang_up_stops_serve_as_sigterm_does(tmp_path: Path) -> None:
    """The terminal or SSH session that ran `serve` closing sends SIGHUP:
    Python's default killed the process (exit 129), its requests unanswered
    and nothing logged (logaudit)."""
    # at its default whatever this run inherited (under nohup it is
    # ignored, and an ignored SIGHUP stays ignored: below)
    srv = started_with_hang_up(tmp_path, signal.SIG_DFL)
    try:
        token = srv.wait_for(r"^\s+(wp_\S+)$").group(1)
        srv.wait_for(r"listening on http://")
        made = httpx.post(f"{srv.url}/api/v1/projects", json={"id": "hup", "name": "Hup"},
                          headers={**auth(token), "Idempotency-Key": "hup-1"})  # fmt: skip
        assert made.status_code == 201
    finally:
        status = srv.stop(signal.SIGHUP)
    assert status == 0
    logged = srv.logged()
    stopping = [i for i, line in enumerate(logged) if "SIGHUP: stopping (no new" in line]
    stopped = [i for i, line in enumerate(logged) if "stopped: the database is closed" in line]
    assert len(stopping) == 1 and len(stopped) == 1 and stopping[0] < stopped[0], logged
    assert not any("ERROR" in line for line in logged), logged
    conn = sqlite3.connect(tmp_path / "waypost.db")
    try:
        assert conn.execute("SELECT name FROM projects WHERE id = 'hup'").fetchone() == ("Hup",)
    finally:
        conn.close()


def test_a_hang_up_ignored_as_serve_starts_stays_ignored(tmp_path: Path) -> None:
    """Under `nohup` (SIGHUP ignored before the program starts) a closing
    terminal changes nothing: the stop on SIGHUP must not take that back
    (review62)."""
    srv = started_with_hang_up(tmp_path, signal.SIG_IGN)  # as nohup leaves it
    try:
        srv.wait_for(r"listening on http://")
        srv.process.send_signal(signal.SIGHUP)
        assert httpx.get(f"{srv.url}/healthz").status_code == 200
        with contextlib.suppress(subprocess.TimeoutExpired):
            srv.process.wait(timeout=1)
        assert srv.process.poll() is None  # still serving
    finally:
        status = srv.stop()
    assert status == 0
    assert not any("SIGHUP" in line for line in srv.logged())


def test_each_listeners_own_lines_name_it(tmp_path: Path) -> None:
    """Both uvicorn servers write the same start and stop lines, and a
    connection either could not read was logged alike: each such line now
    names its listener (logaudit)."""
    clock = tmp_path / "clock"
    clock.write_text(START)
    lifecycle_port = free_port()
    srv = start(tmp_path / "waypost.db", clock, lifecycle_port)
    try:
        srv.wait_for(r"listening on http://\S+ \(lifecycle\)")
        srv.wait_for(r"Application startup complete\. listener=public")
        # the second to the public listener is held back (one line per 10 s,
        # each listener's own) and written as serve stops: it names its listener too
        for port in (int(srv.url.rsplit(":", 1)[1]),) * 2 + (lifecycle_port,):
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(b"GARBAGE \x00\r\n\r\n")
                assert sock.recv(100).startswith(b"HTTP/1.1 400 ")
        srv.wait_for(r"could not read was answered 400 .* listener=lifecycle$")
    finally:
        assert srv.stop() == 0
    logged = srv.logged()
    unread = [line for line in logged if "could not read" in line]
    assert sorted(line.rpartition("listener=")[2] for line in unread) == [
        "lifecycle", "public", "public"], unread  # fmt: skip
    for said in ("Started server process", "Application startup complete.", "Shutting down",
                 "Application shutdown complete.", "Finished server process"):  # fmt: skip
        named = sorted(line.rpartition("listener=")[2] for line in logged if said in line)
        assert named == ["lifecycle", "public"], (said, logged)


def _principals(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [row[0] for row in conn.execute("SELECT name FROM principals")]
    finally:
        conn.close()


def test_a_standard_error_that_cannot_take_the_token_makes_no_admin(tmp_path: Path) -> None:
    """The first admin's token is shown once, on standard error. When that
    cannot take it (here a full device), the admin was stored anyway, its
    token lost and never offered again, and serve exited 1 without a word
    (cliaudit); now nothing is made, and the next start with a terminal
    shows the token of the admin it makes."""
    db, clock = tmp_path / "waypost.db", tmp_path / "clock"
    clock.write_text(START)
    env = {**os.environ, "WAYPOST_CLOCK_FILE": str(clock)}
    env.pop("TYPESAFE_API_KEY", None)
    with open("/dev/full", "w") as full:
        failed = subprocess.run(
            [sys.executable, "-m", "waypost.cli", "serve", "--db", str(db), "--port", "0",
             "--lifecycle-port", "0"],
            stderr=full, stdout=subprocess.PIPE, env=env, timeout=60, text=True,
        )  # fmt: skip
    assert failed.returncode != 0 and "wp_" not in failed.stdout
    assert _principals(db) == []
    second = start(db, clock)
    try:
        token = second.wait_for(r"^\s+(wp_\S+)$").group(1)
        second.wait_for(r"listening on http://")
        assert httpx.get(f"{second.url}/api/v1/me", headers=auth(token)).status_code == 200
    finally:
        second.stop()


def test_no_standard_error_makes_no_admin_and_prints_no_token(tmp_path: Path) -> None:
    """With standard error closed (`2>&-`) print() would have sent the
    token to standard output, which may be a log pipeline."""
    db, clock = tmp_path / "waypost.db", tmp_path / "clock"
    clock.write_text(START)
    env = {**os.environ, "WAYPOST_CLOCK_FILE": str(clock), "PYTHONUNBUFFERED": "1"}
    env.pop("TYPESAFE_API_KEY", None)
    port = free_port()
    process = subprocess.Popen(
        ["/bin/sh", "-c", f'exec "{sys.executable}" -m waypost.cli serve --db "{db}"'
         f" --port {port} --lifecycle-port 0 2>&-"],
        stdout=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    try:
        # it serves only once the start-up, the admin's creation included, is done
        deadline, up = time.monotonic() + 60, False
        while time.monotonic() < deadline and not up:
            with contextlib.suppress(httpx.TransportError):
                up = httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
            time.sleep(0.1)
        assert up
    finally:
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=30)
    assert "wp_" not in out and "shown once" not in out
    assert _principals(db) == []
    # uvloop took descriptor 2 for its loop and aborted as it closed it (134)
    assert process.returncode == 0


def _migrated_and_held(tmp_path: Path) -> tuple[Path, Path, sqlite3.Connection]:
    """(database, clock file, holder): a migrated database whose write lock
    another connection holds, so that a start waits in its opening (the
    admin's creation waits for the lock, up to the busy timeout of 5 s)."""
    db, clock = tmp_path / "waypost.db", tmp_path / "clock"
    clock.write_text(START)
    made = subprocess.run(
        [sys.executable, "-m", "waypost.cli", "admin", "migrate", "--db", str(db)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    return db, clock, holder


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_database_opens_stops_cleanly_once_it_is_open(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """Opening may take seconds (a migration; here another process's lock
    on the first write, the admin's creation). A SIGTERM there killed the
    process (-15) and a Ctrl-C printed "Aborted!" (exit 1), the work cut
    short (cliaudit); the stop now waits for the store to open, then ends
    as any stop does, serving nothing."""
    db, clock, holder = _migrated_and_held(tmp_path)
    served = start(db, clock)
    try:
        served.wait_for(r"opening ")
        time.sleep(0.3)
        served.process.send_signal(sig)
        served.wait_for(f"{sig.name}: stopping once the database is open")
        holder.execute("ROLLBACK")
        assert served.process.wait(timeout=30) == 0
        lines = served.rest_of_log()
    finally:
        holder.close()
        if served.process.poll() is None:
            served.stop()
    said = served.seen + lines
    assert any("created human principal 'admin'" in x for x in said), said
    assert not any("listening on" in x or "Traceback" in x or " ERROR " in x for x in said)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


def test_while_the_database_opens_the_listeners_answer_starting(tmp_path: Path) -> None:
    """Opening may take a while (a migration; here another process's lock on
    the admin's creation). A connection made meanwhile was accepted and
    answered nothing, /healthz included, until the store was open."""
    db, clock, holder = _migrated_and_held(tmp_path)
    port, lifecycle = free_port(), free_port()
    served = start(db, clock, lifecycle, "--port", str(port))
    try:
        served.wait_for(r"opening ")
        base, timeout = f"http://127.0.0.1:{port}", httpx.Timeout(2.0)
        health = httpx.get(f"{base}/healthz", timeout=timeout)
        assert (health.status_code, health.json()) == (503, {"status": "starting"})
        assert health.headers["retry-after"] == "1"
        assert health.headers["cache-control"] == "no-store"
        # a request with a body is answered whole too (not reset with it unread)
        posted = httpx.post(
            f"{base}/api/v1/projects", json={"id": "p", "name": "x" * 100_000}, timeout=timeout
        )
        assert posted.status_code == 503
        assert posted.json()["error"]["code"] == "unavailable"
        assert posted.json()["error"]["details"] == {"reason": "starting"}
        private = httpx.get(f"http://127.0.0.1:{lifecycle}/memos", timeout=timeout)
        assert (private.status_code, private.json()) == (503, {"error": "unavailable"})
        # GraphQL's shape on /graphql, also for a target in absolute form
        graphql = httpx.post(f"{base}/graphql", json={"query": "{ me { id } }"}, timeout=timeout)
        assert graphql.status_code == 503
        assert graphql.json()["errors"][0]["extensions"] == {
            "code": "unavailable", "reason": "starting", "retryAfter": 1
        }  # fmt: skip
        with socket.create_connection(("127.0.0.1", port), timeout=2) as raw:
            raw.sendall(b"HEAD http://waypost/healthz HTTP/1.1\r\nHost: waypost\r\n\r\n")
            head = _read_to_end(raw)
        assert head.startswith(b"HTTP/1.1 503 ") and head.endswith(b"\r\n\r\n")
        assert b"content-length: 21\r\n" in head.lower()  # {"status":"starting"}, not sent
        holder.execute("ROLLBACK")
        served.wait_for(r"listening on http://")
        assert httpx.get(f"{base}/healthz", timeout=timeout).json() == {"status": "ok"}
    finally:
        holder.close()
        assert served.stop() == 0


def test_the_starting_answers_come_while_the_apps_are_imported(tmp_path: Path) -> None:
    """Importing the apps (1.7 s, the GraphQL schema's build among them) ran
    on the event loop after the listeners bound: a probe then waited that
    long for its 503 (memojourney). Here the import is made to take 4 s."""
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(
        "import sys, time\n"
        "class Slow:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'waypost.app':\n"
        "            sys.meta_path.remove(self)\n"
        "            time.sleep(4)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Slow())\n"
    )
    path = os.pathsep.join(p for p in (str(slow), os.environ.get("PYTHONPATH")) if p)
    clock = tmp_path / "clock"
    clock.write_text(START)
    port = free_port()
    served = start(
        tmp_path / "waypost.db", clock, 0, "--port", str(port), env_extra={"PYTHONPATH": path}
    )
    try:
        deadline = time.monotonic() + 30
        while True:  # bound before the apps are imported
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and served.process.poll() is None
                time.sleep(0.02)
        health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2.0)
        assert (health.status_code, health.json()) == (503, {"status": "starting"})
        served.wait_for(r"listening on http://")
    finally:
        assert served.stop() == 0


def _read_to_end(sock: socket.socket) -> bytes:
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def test_while_the_database_opens_each_listener_holds_its_own_connections(
    tmp_path: Path,
) -> None:
    """Connections past a listener's cap wait in the backlog, as before the
    store opens (they were closed unanswered past 64 of both listeners
    together, and 64 idle ones locked out /healthz and the lifecycle
    listener: startaudit); the request read timeout ends the idle ones."""
    db, clock, holder = _migrated_and_held(tmp_path)
    port, lifecycle = free_port(), free_port()
    served = start(
        db, clock, lifecycle, "--port", str(port), "--max-connections", "16",
        "--request-read-timeout", "1",
    )  # fmt: skip
    idle: list[socket.socket] = []
    try:
        served.wait_for(r"opening ")
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(20)]
        private = httpx.get(f"http://127.0.0.1:{lifecycle}/memos", timeout=1.0)
        assert private.status_code == 503  # the public listener's crowd is not its own
        began = time.monotonic()
        health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=4.0)
        assert (health.status_code, health.json()) == (503, {"status": "starting"})
        assert time.monotonic() - began >= 0.5  # its turn came when idle ones were cut
        holder.execute("ROLLBACK")
        served.wait_for(r"listening on http://")
    finally:
        for sock in idle:
            sock.close()
        holder.close()
        assert served.stop() == 0


def test_acknowledged_writes_survive_a_killed_process(tmp_path: Path) -> None:
    """SIGKILL gives the process no chance to flush anything: whatever was
    acknowledged must already be in the database file (WAL, synchronous=FULL)."""
    clock = tmp_path / "clock"
    clock.write_text(START)
    first = start(tmp_path / "waypost.db", clock)
    try:
        token = first.wait_for(r"^\s+(wp_\S+)$").group(1)
        first.wait_for(r"listening on http://")
        headers = {**auth(token), "Idempotency-Key": "crash-project"}
        r = httpx.post(
            f"{first.url}/api/v1/projects", json={"id": "crash", "name": "C"}, headers=headers
        )
        assert r.status_code == 201, r.text
        for revision in range(1, 21):
            r = httpx.patch(
                f"{first.url}/api/v1/projects/crash/policy",
                json={"expected_revision": revision, "rules": f"rule {revision}"},
                headers={**auth(token), "Idempotency-Key": f"crash-{revision}"},
            )
            assert r.status_code == 200, r.text
    finally:
        first.process.kill()  # SIGKILL: no shutdown, no checkpoint
        first.stop()
    second = start(tmp_path / "waypost.db", clock)
    try:
        second.wait_for(r"listening on http://")
        r = httpx.get(f"{second.url}/api/v1/projects/crash/policy", headers=auth(token))
        assert r.json()["revision"] == 21 and r.json()["rules"] == "rule 20"
        events = httpx.get(
            f"{second.url}/api/v1/projects/crash/events", params={"limit": 200}, headers=auth(token)
        ).json()["items"]
        assert [e["type"] for e in events].count("policy.updated") == 20
        # the receipt committed with the write: the same request replays, nothing runs again
        r = httpx.patch(
            f"{second.url}/api/v1/projects/crash/policy",
            json={"expected_revision": 20, "rules": "rule 20"},
            headers={**auth(token), "Idempotency-Key": "crash-20"},
        )
        assert r.status_code == 200 and r.headers["idempotent-replayed"] == "true"
    finally:
        second.stop()


async def websocket_handshake(url: str) -> None:
    async with connect(url, open_timeout=10):
        pass


async def graphql_socket_opened_and_closed(url: str) -> None:
    async with connect(url, subprotocols=[Subprotocol("graphql-transport-ws")], open_timeout=10):
        pass


@pytest.mark.parametrize("access_log", [True, False])
def test_without_the_access_log_no_line_names_a_socket_or_a_request(
    tmp_path: Path, access_log: bool
) -> None:
    """uvicorn's own lines for each WebSocket (its address, `[accepted]`,
    `connection open`, `connection closed`) stayed under `--no-access-log`
    (logaudit)."""
    flag = "--access-log" if access_log else "--no-access-log"
    with serve(tmp_path, flag) as srv:
        assert httpx.get(f"{srv.url}/healthz").status_code == 200
        ws_url = srv.url.replace("http://", "ws://") + "/graphql"
        asyncio.run(graphql_socket_opened_and_closed(ws_url))
        if access_log:
            srv.wait_for(r"waypost\.access websocket")
    said = srv.logged()
    per_request = [line for line in said if "WebSocket /graphql" in line
                   or "connection open" in line or "waypost.access" in line]  # fmt: skip
    if access_log:
        assert len(per_request) >= 4, said  # [accepted], open, the two access lines
    else:
        assert per_request == [], said
        assert any("listening on http://" in line for line in said)


def test_one_process_serves_the_public_and_the_lifecycle_listener(tmp_path: Path) -> None:
    clock = tmp_path / "clock"
    clock.write_text(START)
    lifecycle_port = free_port()
    srv = start(tmp_path / "waypost.db", clock, lifecycle_port=lifecycle_port)
    try:
        token = srv.wait_for(r"^\s+(wp_\S+)$").group(1)
        srv.wait_for(rf"listening on http://127.0.0.1:{lifecycle_port} \(lifecycle\)")
        r = httpx.get(f"http://127.0.0.1:{lifecycle_port}/v1/anything")
        # authentication runs before routing (tests/lifecycle/test_listener.py goes further)
        assert r.status_code == 401 and r.json() == {"error": "unauthenticated"}
        assert r.headers["cache-control"] == "no-store"
        assert r.headers["x-content-type-options"] == "nosniff"
        # the public listener runs beside it, over the same database
        assert httpx.get(f"{srv.url}/api/v1/me", headers=auth(token)).status_code == 200
        # no WebSocket here: refused before the handshake (it was a 500)
        with pytest.raises(InvalidStatus) as refused:
            asyncio.run(websocket_handshake(f"ws://127.0.0.1:{lifecycle_port}/v1/decisions"))
        assert refused.value.response.status_code == 403
    finally:
        status = srv.stop()
    assert status == 0  # SIGTERM stops both listeners, and the process exits cleanly
    logged = srv.logged()
    assert any("no --lifecycle-webhook: lifecycle deliveries stay pending" in x for x in logged)
    assert not any("no lifecycle listener" in line for line in logged), logged
    assert not any("not part of this build" in line for line in logged)
    assert not any("ERROR" in line for line in logged), logged
    assert sum("Finished server process" in line for line in logged) == 2


def received_until_closed(sock: socket.socket) -> bytes:
    sock.settimeout(10)  # a server that never closes fails the test
    received = b""
    while chunk := sock.recv(4096):
        received += chunk
    return received


def test_both_listeners_close_a_client_that_never_finishes_its_request(tmp_path: Path) -> None:
    """`--request-read-timeout`: a connection that sends nothing, and one whose
    body stops short, are closed unanswered, on either listener, and the
    service goes on serving without an ERROR line."""
    clock = tmp_path / "clock"
    clock.write_text(START)
    lifecycle_port = free_port()
    srv = start(tmp_path / "waypost.db", clock, lifecycle_port, "--request-read-timeout", "0.5")
    try:
        token = srv.wait_for(r"^\s+(wp_\S+)$").group(1)
        srv.wait_for(rf"listening on http://127.0.0.1:{lifecycle_port} \(lifecycle\)")
        public_port = int(srv.url.rsplit(":", 1)[1])
        short_body = (
            f"POST /api/v1/projects HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":'
        ).encode()
        for port in (public_port, lifecycle_port):
            with socket.create_connection(("127.0.0.1", port)) as idle:
                assert received_until_closed(idle) == b""
            with socket.create_connection(("127.0.0.1", port)) as slow:
                slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # the head never ends
                assert received_until_closed(slow) == b""
        with socket.create_connection(("127.0.0.1", public_port)) as slow:
            slow.sendall(short_body)  # the lifecycle listener would refuse its token first
            assert received_until_closed(slow) == b""
        assert httpx.get(f"{srv.url}/api/v1/me", headers=auth(token)).status_code == 200
        assert httpx.get(f"{srv.url}/api/v1/projects", headers=auth(token)).json()["items"] == []
    finally:
        status = srv.stop()
    assert status == 0
    logged = srv.logged()
    assert not any("ERROR" in line or "Traceback" in line for line in logged), logged


def test_a_full_public_listener_refuses_connections_and_the_lifecycle_one_goes_on(
    tmp_path: Path,
) -> None:
    """`--max-connections`: idle connections no longer take the process to its
    open-file limit; past the public cap a connection is closed at once, and
    the lifecycle listener, with a cap of its own, still answers."""
    clock = tmp_path / "clock"
    clock.write_text(START)
    lifecycle_port = free_port()
    srv = start(tmp_path / "waypost.db", clock, lifecycle_port, "--max-connections", "3")
    try:
        srv.wait_for(rf"listening on http://127.0.0.1:{lifecycle_port} \(lifecycle\)")
        public_port = int(srv.url.rsplit(":", 1)[1])
        idle = [socket.create_connection(("127.0.0.1", public_port)) for _ in range(3)]
        try:
            time.sleep(0.3)  # all three accepted
            # closed at once, unanswered: an orderly close or a reset
            with (
                socket.create_connection(("127.0.0.1", public_port)) as refused,
                contextlib.suppress(ConnectionResetError, BrokenPipeError),
            ):
                refused.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                assert received_until_closed(refused) == b""
            r = httpx.get(f"http://127.0.0.1:{lifecycle_port}/v1/anything")
            assert r.status_code == 401  # answered: its own cap is far from full
        finally:
            for sock in idle:
                sock.close()
        for _ in range(50):  # the places come back as the idle ones close
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{srv.url}/healthz").status_code == 200:
                    break
            time.sleep(0.1)
        assert httpx.get(f"{srv.url}/healthz").status_code == 200
        srv.wait_for(r"WARNING waypost 3 connections are open on the public listener")
    finally:
        assert srv.stop() == 0


def test_sixteen_writers_and_ten_kills_lose_no_acknowledged_write(tmp_path: Path) -> None:
    """16 keep-alive clients create projects while `serve` is killed with
    SIGKILL ten times, at different moments of the flow: every 201 a client
    received is in the database afterwards, with its event and its receipt,
    and SQLite's integrity check is clean."""
    clock = tmp_path / "clock"
    clock.write_text(START)
    db = tmp_path / "waypost.db"
    acknowledged: set[str] = set()
    lock = threading.Lock()
    token = ""
    for round_ in range(10):
        srv = start(db, clock)
        try:
            if not token:
                token = srv.wait_for(r"^\s+(wp_\S+)$").group(1)
            srv.wait_for(r"listening on http://")
            clients = [
                httpx.Client(base_url=srv.url, headers=auth(token), timeout=10) for _ in range(16)
            ]
            stop = threading.Event()
            this_round: list[str] = []

            def write(
                worker: int,
                client: httpx.Client,
                stop: threading.Event,
                done: list[str],
                round_: int = round_,
            ) -> None:
                for i in range(2000):  # bounded; the kill ends it much sooner
                    if stop.is_set():
                        return
                    pid = f"r{round_}-w{worker}-{i}"
                    try:
                        r = client.post(
                            "/api/v1/projects",
                            json={"id": pid, "name": "K"},
                            headers={"Idempotency-Key": pid},
                        )
                    except httpx.HTTPError:
                        return  # the server died mid-request: not acknowledged
                    assert r.status_code == 201, r.text
                    with lock:
                        done.append(pid)

            writers = [
                threading.Thread(target=write, args=(w, c, stop, this_round))
                for w, c in enumerate(clients)
            ]
            for t in writers:
                t.start()
            # kill at a different point of the flow each round
            deadline = time.monotonic() + 20
            while len(this_round) < 20 + 15 * round_ and time.monotonic() < deadline:
                time.sleep(0.005)
            srv.process.kill()  # SIGKILL mid-flow: no shutdown, no checkpoint
            stop.set()
            for t in writers:
                t.join(timeout=20)
            for c in clients:
                c.close()
            acknowledged.update(this_round)
        finally:
            srv.stop()
        conn = sqlite3.connect(db)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        finally:
            conn.close()
    assert len(acknowledged) >= sum(20 + 15 * r for r in range(10))
    conn = sqlite3.connect(db)
    try:
        projects = {r[0] for r in conn.execute("SELECT id FROM projects")}
        created = {
            r[0] for r in conn.execute("SELECT subject_id FROM events WHERE type='project.created'")
        }
        keys = {r[0] for r in conn.execute("SELECT key FROM receipts")}
    finally:
        conn.close()
    assert acknowledged - projects == set()
    assert acknowledged - created == set()
    assert acknowledged - keys == set()
    # and the operator's own check agrees: history, receipts, events, gate state
    report = verify(Path(db))
    assert report["ok"] is True, report
