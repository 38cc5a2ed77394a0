"""A real `waypost serve` process for the tests that need one: a loopback
port it picks itself, a database in the test's directory and a file clock; a
thread reads its standard error (the log, and the first admin token) into a
queue that the test reads line by line."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

from waypost.clock import format_time, parse_time

START = "2026-11-29T18:00:00.000Z"


_UNASKED = re.compile(r"\b\w+Warning: |^Exception ignored in|Task was destroyed but it is pending"
                      r"|was never awaited|Task exception was never retrieved")  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def write_clock(path: Path, instant: str) -> None:
    """Moves a file clock in one step: written beside it and renamed over
    it. The service reads the file at every use, and one caught between
    the truncation and the write of `write_text` answers 503."""
    beside = path.with_name(path.name + ".new")
    beside.write_text(instant)
    os.replace(beside, path)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# the public listener's line, whose address is the port `serve --port 0` took
_PUBLIC = re.compile(r"listening on (http://\S+) \(public\)")


@dataclass
class Server:
    process: subprocess.Popen[str]
    db: Path
    clock: Path
    admin_token: str = ""  # once a test has read it from the log
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    seen: list[str] = field(default_factory=list)
    pump: threading.Thread | None = None
    _metrics_token: str = ""
    _url: str = ""
    _announced: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        """The public listener's base URL, once `serve` has said it listens
        (read from the log as it arrives, without taking the line from
        `wait_for`)."""
        if not self._announced.wait(timeout=30) or not self._url:
            raise AssertionError(f"serve announced no public listener; saw {self.logged()}")
        return self._url

    def read_log(self) -> None:
        """Queue every line `serve` writes to standard error (the pump's body)."""
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            line = raw.rstrip("\n")
            if not self._url and (found := _PUBLIC.search(line)) is not None:
                self._url = found.group(1)
                self._announced.set()
            self.lines.put(line)
        self._announced.set()  # it exited: `url` stops waiting

    def wait_for(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """The first stderr line (from now on) matching `pattern`."""
        regex = re.compile(pattern)
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern!r}; saw {self.seen}") from None
            self.seen.append(line)
            match = regex.search(line)
            if match:
                return match

    def logged(self) -> list[str]:
        """Every stderr line so far (once stopped: all of them)."""
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return self.seen

    def rest_of_log(self) -> list[str]:
        """The lines not read yet, to the last one the process wrote: it is
        stopped first (if it has not exited already) and its reader joined,
        since the reader may still be behind."""
        self.stop()
        read = len(self.seen)
        return self.logged()[read:]

    def wait_for_unanswered_writes(self, count: int, timeout: float = 30) -> None:
        """Until `count` writes wait for their answer in the service (its
        `waypost_writes_unanswered` gauge; it serves `--metrics`): a write
        the writer has taken but that waits for the lock counts, where from
        outside the process nothing else shows it. Ask `metrics_token()`
        before another process takes the lock: the admin command writes."""
        token = self.metrics_token()
        deadline = time.monotonic() + timeout
        while True:
            r = httpx.get(self.url + "/metrics", headers=auth(token), timeout=timeout)
            assert r.status_code == 200, r.text  # started with --metrics?
            seen = next(
                float(line.split()[-1])
                for line in r.text.splitlines()
                if line.startswith("waypost_writes_unanswered ")
            )
            if seen >= count:
                return
            assert time.monotonic() < deadline, f"{seen} writes unanswered, not {count}"
            time.sleep(0.05)

    def metrics_token(self) -> str:
        """A token of audience `metrics` (for a principal of its own), made
        with the admin CLI as an operator would; one per server."""
        if not self._metrics_token:
            made = admin_command(self.db, "principal", "create", "--kind", "human",
                                 "--name", "monitoring")  # fmt: skip
            issued = admin_command(self.db, "token", "issue", "--principal",
                                   made["principal_id"], "--audience", "metrics")  # fmt: skip
            self._metrics_token = issued["token"]
        return self._metrics_token

    def set_clock(self, **delta: float) -> None:
        """The service's now: START plus `delta`."""
        write_clock(self.clock, format_time(parse_time(START) + timedelta(**delta)))

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        """SIGTERM, as a process manager would (or `sig`); returns the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            status = self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = self.process.wait()
        if self.pump is not None:
            self.pump.join(timeout=10)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return status


def admin_command(db: Path, *args: str) -> Any:
    """`waypost admin ... --db db`: its JSON answer. The same click command
    `python -m waypost.cli` runs, invoked in this process: a test's admin
    setup (principals, tokens) beside a real `serve` needs the command's
    writes, not a new interpreter importing the app each time (1-3 s a call
    on a loaded machine). The admin CLI as its own process is tested in
    test_admin_lists.py and test_cli.py."""
    from click.testing import CliRunner

    from waypost.cli import main

    done = CliRunner().invoke(main, ["admin", *args, "--db", str(db)], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def start(
    db: Path,
    clock: Path,
    lifecycle_port: int = 0,
    *extra: str,
    env_extra: dict[str, str] | None = None,
) -> Server:
    """`waypost serve` on `db`, its clock read from `clock`, started and not
    waited for: the test waits for the lines it needs (`wait_for`)."""
    env = {**os.environ, "WAYPOST_CLOCK_FILE": str(clock), "PYTHONUNBUFFERED": "1",
           # every warning shown (once per place), DeprecationWarning and
           # ResourceWarning too: the suite's `filterwarnings = error` does not
           # reach a process of its own, whose stderr `serve` checks (warnaudit)
           "PYTHONWARNINGS": "default"}  # fmt: skip
    env.update(env_extra or {})
    env.pop("TYPESAFE_API_KEY", None)
    process = subprocess.Popen(
        # port 0: serve binds a free port itself and says which (`url`); one
        # picked here and closed could be taken by any socket before serve
        # bound it again
        [sys.executable, "-m", "waypost.cli", "serve", "--db", str(db), "--port", "0",
         "--lifecycle-port", str(lifecycle_port), *extra],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=db.parent,
    )  # fmt: skip
    server = Server(process, db, clock)
    server.pump = threading.Thread(target=server.read_log, daemon=True)
    server.pump.start()
    return server


@contextlib.contextmanager
def serve(tmp: Path, *extra: str) -> Iterator[Server]:
    """`waypost serve` on a new database in `tmp`, its admin token read."""
    clock = tmp / "clock"
    clock.write_text(START)
    served = start(tmp / "waypost.db", clock, 0, *extra)
    try:
        served.wait_for(r"created human principal 'admin'; its token \(shown once\)")
        served.admin_token = served.wait_for(r"^\s+(wp_\S+)$").group(1)
        served.wait_for(r"listening on http://")
        yield served
    finally:
        served.stop()
    # a process that ran its course said nothing a test did not ask for: no
    # warning (an unclosed socket or file, a deprecated call) and no error
    # Python could only print ("Exception ignored in ...")
    unasked = [line for line in served.logged() if _UNASKED.search(line)]
    assert not unasked, unasked
