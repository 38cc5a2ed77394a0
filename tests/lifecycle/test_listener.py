"""The lifecycle listener of a real `waypost serve`: the admin commands of
docs/lifecycle.md, the error table over real HTTP, and webhook delivery."""

from __future__ import annotations

import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.lifecycle.support import digest, memo, with_docs
from tests.serve_support import START, free_port, start
from tests.test_serve import json_documents

pytestmark = pytest.mark.slow


def admin(db: Path, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "waypost.cli", "admin", *args, "--db", str(db)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


@pytest.fixture
def hook() -> Iterator[tuple[str, queue.Queue[dict[str, Any]]]]:
    got: queue.Queue[dict[str, Any]] = queue.Queue()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.put(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # shutdown() waits for serve_forever's next poll: half a second by default,
    # which was most of this file's time
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", got
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def raw_request(port: int, data: bytes) -> bytes:
    """Send bytes as they are (a lying Content-Length) and read the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_the_real_lifecycle_listener(
    tmp_path: Path, hook: tuple[str, queue.Queue[dict[str, Any]]]
) -> None:
    hook_url, delivered = hook
    db = tmp_path / "waypost.db"
    clock = tmp_path / "clock"
    clock.write_text(START)
    port = free_port()
    srv = start(db, clock, port, "--lifecycle-webhook", hook_url)
    try:
        srv.wait_for(rf"listening on http://127.0.0.1:{port} ")
        base = f"http://127.0.0.1:{port}"
        person = admin(db, "principal", "create", "--kind", "human", "--name", "ann")
        pid = person["principal_id"]
        token = admin(db, "token", "issue", "--principal", pid, "--audience", "lifecycle")["token"]
        admin(db, "lifecycle", "grant", "--principal", pid, "--tenant", "acme", "--role", "author")
        auth = {"Authorization": f"Bearer {token}"}
        post = {**auth, "Content-Type": "application/json"}
        m, docs = with_docs(memo(), b"notes")
        body = json.dumps({"memo": m, "documents": docs})

        r = httpx.post(
            f"{base}/v1/decisions", content=body, headers={**post, "Idempotency-Key": "a"}
        )
        assert r.status_code == 200, r.text
        assert r.headers["cache-control"] == "no-store"
        assert r.headers["x-content-type-options"] == "nosniff"
        again = httpx.post(
            f"{base}/v1/decisions", content=body, headers={**post, "Idempotency-Key": "a"}
        )
        assert again.content == r.content
        doc = httpx.get(f"{base}/v1/decisions/{m['id']}/documents/{digest(b'notes')}", headers=auth)
        assert doc.content == b"notes"

        def code(resp: httpx.Response) -> tuple[int, Any]:
            assert resp.headers["cache-control"] == "no-store"
            assert resp.headers["x-content-type-options"] == "nosniff"
            return resp.status_code, resp.json()

        api_token = {"Authorization": f"Bearer {person['token']}"}
        assert code(httpx.get(f"{base}/v1/decisions", headers=api_token)) == (
            401,
            {"error": "unauthenticated"},
        )
        assert code(httpx.get(f"{base}/v1/decisions/other", headers=auth)) == (
            403,
            {"error": "policy_denied"},
        )
        assert code(httpx.get(f"{base}/v1/nothing", headers=auth)) == (404, {"error": "not_found"})
        assert code(httpx.delete(f"{base}/v1/decisions", headers=auth)) == (
            405,
            {"error": "method_not_allowed"},
        )
        stale = json.dumps({"memo": memo(version=2), "expected_version": 2, "summary": "s"})
        assert code(
            httpx.post(
                f"{base}/v1/decisions/{m['id']}/revisions",
                content=stale,
                headers={**post, "Idempotency-Key": "b"},
            )
        ) == (400, {"error": "invalid_request"})
        stale = json.dumps({"memo": memo(version=3), "expected_version": 2, "summary": "s"})
        assert code(
            httpx.post(
                f"{base}/v1/decisions/{m['id']}/revisions",
                content=stale,
                headers={**post, "Idempotency-Key": "c"},
            )
        ) == (409, {"error": "version_conflict"})
        big = b'{"memo":' + b" " * (256 * 1024) + b"{}}"
        assert code(
            httpx.post(
                f"{base}/v1/decisions", content=big, headers={**post, "Idempotency-Key": "d"}
            )
        ) == (413, {"error": "payload_too_large"})
        assert code(
            httpx.post(
                f"{base}/v1/decisions",
                content=body,
                headers={**auth, "Content-Type": "text/plain", "Idempotency-Key": "e"},
            )
        ) == (415, {"error": "unsupported_media_type"})
        # a body shorter than its declared length, then the client hangs up
        short = (
            f"POST /v1/decisions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nIdempotency-Key: f\r\n"
            "Content-Length: 100\r\n\r\n"
        ).encode() + b'{"memo": {'
        answer = raw_request(port, short)
        # the client is gone before an answer can reach it; the service must not fail
        assert answer == b"" or answer.startswith(b"HTTP/1.1 400"), answer
        # the public listener answers none of the lifecycle routes
        assert httpx.get(f"{srv.url}/v1/decisions", headers=auth).status_code == 401

        first = delivered.get(timeout=20)
        assert (first["type"], first["memo_id"], first["actor"]) == (
            "memo.registered",
            m["id"],
            pid,
        )
        pending = admin(db, "lifecycle", "deliveries")
        assert pending == [] or all(d["event"]["sequence"] > first["sequence"] for d in pending)
    finally:
        status = srv.stop()
    assert status == 0
    logged = srv.logged()
    assert not any("Traceback" in line or " ERROR " in line for line in logged), logged


def doc_blocks() -> list[str]:
    page = (Path(__file__).resolve().parents[2] / "docs" / "lifecycle.md").read_text()
    section = page.split("## A first memo with curl\n", 1)[1]
    return [b.split("```", 1)[0] for b in section.split("```sh\n")[1:3]]


@pytest.mark.skipif(
    shutil.which("curl") is None or shutil.which("jq") is None,
    reason="the docs' example uses curl and jq",
)
def test_the_docs_example_works_as_printed(tmp_path: Path) -> None:
    setting, block = doc_blocks()
    assert setting.strip() == "export LIFECYCLE_URL=http://127.0.0.1:8081"
    db = tmp_path / "waypost.db"
    clock = tmp_path / "clock"
    clock.write_text(START)
    port = free_port()
    srv = start(db, clock, port)
    try:
        srv.wait_for(rf"listening on http://127.0.0.1:{port} ")
        env = {
            **os.environ,
            "LIFECYCLE_URL": f"http://127.0.0.1:{port}",
            "WAYPOST_DB": str(db),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        }
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, (done.stdout, done.stderr)
        grant, receipt, got, events = json_documents(done.stdout)
        assert (grant["tenant"], grant["role"]) == ("acme", "author")
        assert receipt["resource"] == "/v1/decisions/adr.payments-retry?version=1"
        assert got["id"] == "adr.payments-retry" and got["packet"][0]["id"] == "p1"
        assert [e["type"] for e in events["events"]] == ["memo.registered"]
    finally:
        srv.stop()
