"""An operator's first production run, step by step from docs/operations.md
(operatorjourney): what the docs promise at start and at stop, checked
against a real `waypost serve` process on a real SQLite file."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
from click.testing import CliRunner, Result

from tests.serve_support import START, auth, start
from waypost.cli import main

# another process's write through its own -shm, as an `admin` command makes
_FOREIGN_WRITE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA busy_timeout = 5000")
conn.execute("CREATE TABLE IF NOT EXISTS foreign_note (x TEXT)")
conn.execute("INSERT INTO foreign_note VALUES ('from another process')")
conn.close()
"""


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def test_a_stop_that_leaves_the_database_open_does_not_say_it_closed_it(
    tmp_path: Path,
) -> None:
    """docs/operations.md, "The database's files": once the `-shm` path names
    another file, `serve` "exits with status 1 without closing the
    database". It does, but its log first says `stopped: the database is
    closed` (the line of a clean stop) and only then the ERROR that it is
    exiting *without* closing it: an operator reading the log's last INFO
    line, or alerting on it, is told the opposite of what happened."""
    clock = tmp_path / "clock"
    clock.write_text(START)
    srv = start(tmp_path / "waypost.db", clock)
    try:
        token = srv.wait_for(r"^\s+(wp_\S+)$").group(1)
        srv.wait_for(r"listening on http://")
        with httpx.Client(base_url=srv.url, headers=auth(token)) as client:
            made = client.post(
                "/api/v1/projects",
                json={"id": "demo", "name": "Demo"},
                headers={"Idempotency-Key": "p"},
            )
            assert made.status_code == 201
            os.unlink(f"{srv.db}-shm")
            subprocess.run([sys.executable, "-c", _FOREIGN_WRITE, str(srv.db)], check=True)
            late = client.post(
                "/api/v1/projects",
                json={"id": "late", "name": "Late"},
                headers={"Idempotency-Key": "late"},
            )
            assert late.status_code == 503, late.text
    finally:
        status = srv.stop()
    assert status == 1
    logged = srv.logged()
    assert any("exiting without closing the database" in line for line in logged)
    assert not any("stopped: the database is closed" in line for line in logged), logged


def test_serve_refuses_a_typesafe_url_holding_a_user_name_or_password(tmp_path: Path) -> None:
    """docs/operations.md, "Environment": a `TYPESAFE_*` value `serve`
    cannot use stops it at start, "never a server whose context requests
    fail later" (`reranker.client.check_settings`: "a provider setting no
    request could be sent with"). A `TYPESAFE_URL` with user info
    (`https://user:pw@host/...`) is accepted, and httpx then sends those
    credentials as `Authorization: Basic ...` in place of the
    `Bearer TYPESAFE_API_KEY` the client sets, so the key never reaches the
    provider and every rerank fails. `--k8s-api` is refused for the same
    reason ("would be sent in place of the token")."""
    db = tmp_path / "w.db"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        env = {"TYPESAFE_API_KEY": "k", "TYPESAFE_URL": "https://user:pw@rerank.example/v1"}
        result = run("serve", "--db", str(db), "--port", port, env=env)
    assert result.exit_code == 2, result.output
    assert "TYPESAFE_URL" in result.output, result.output
    assert not db.exists()
