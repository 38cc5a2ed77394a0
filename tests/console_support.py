"""A real `waypost serve` (with GraphiQL on) and headless Chromium for the
console tests: the browser is the operating system's (/usr/bin/chromium, or
WAYPOST_CHROMIUM), driven by Playwright; Playwright never downloads one."""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

from waypost.clock import format_time, parse_time

START = "2026-11-29T18:00:00.000Z"
_keys = itertools.count()


def chromium_path() -> str | None:
    """The system Chromium, or None (`make test` installs it when it can)."""
    for candidate in (os.environ.get("WAYPOST_CHROMIUM"), "/usr/bin/chromium",
                      shutil.which("chromium"), shutil.which("chromium-browser")):  # fmt: skip
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Served:
    process: subprocess.Popen[str]
    url: str
    clock: Path
    admin_token: str = ""
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    pump: threading.Thread | None = None

    def wait_for(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        regex = re.compile(pattern)
        seen = []
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern!r}; saw {seen}") from None
            seen.append(line)
            match = regex.search(line)
            if match:
                return match

    def set_clock(self, **delta: float) -> None:
        """The service's now: START plus `delta` (WAYPOST_CLOCK_FILE)."""
        self.clock.write_text(format_time(parse_time(START) + timedelta(**delta)))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.pump is not None:
            self.pump.join(timeout=10)
        assert self.process.stderr is not None
        self.process.stderr.close()

    def rest_of_log(self) -> list[str]:
        """Every line not read yet, to the last one the process wrote: it is
        stopped first (if it has not exited already) and its reader joined,
        since the reader may still be behind."""
        self.stop()
        rest = []
        while not self.lines.empty():
            rest.append(self.lines.get_nowait())
        return rest


@contextlib.contextmanager
def serve(tmp: Path, *extra: str) -> Iterator[Served]:
    clock = tmp / "clock"
    clock.write_text(START)
    port = free_port()
    env = {**os.environ, "WAYPOST_CLOCK_FILE": str(clock), "PYTHONUNBUFFERED": "1"}
    env.pop("TYPESAFE_API_KEY", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "waypost.cli", "serve", "--db", str(tmp / "waypost.db"),
         "--port", str(port), "--lifecycle-port", "0", *extra],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env, cwd=tmp,
    )  # fmt: skip
    served = Served(process, f"http://127.0.0.1:{port}", clock)

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            served.lines.put(line.rstrip("\n"))

    served.pump = threading.Thread(target=pump, daemon=True)
    served.pump.start()
    try:
        served.wait_for(r"created human principal 'admin'")
        served.admin_token = served.wait_for(r"^\s+(wp_\S+)$").group(1)
        served.wait_for(r"listening on http://")
        yield served
    finally:
        served.stop()


@dataclass
class Rest:
    """A principal speaking REST to the served process."""

    url: str
    token: str
    principal_id: str = ""

    def headers(self, key: bool = False) -> dict[str, str]:
        h = {"Authorization": f"Bearer {self.token}"}
        if key:
            h["Idempotency-Key"] = f"test-{next(_keys)}"
        return h

    def get(self, path: str) -> Any:
        r = httpx.get(self.url + path, headers=self.headers(), timeout=10)
        assert r.status_code == 200, r.text
        return r.json()

    def send(self, method: str, path: str, body: Any, expect: int = 200) -> Any:
        r = httpx.request(
            method, self.url + path, json=body, headers=self.headers(True), timeout=10
        )
        assert r.status_code == expect, r.text
        return r.json()


def admin_json(served: Served, *args: str) -> Any:
    """What an admin command prints, run on the served database as an operator would."""
    out = subprocess.run(
        [sys.executable, "-m", "waypost.cli", "admin", *args,
         "--db", str(served.clock.parent / "waypost.db")],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    import json

    return json.loads(out.stdout)


def admin_principal(served: Served, kind: str, name: str) -> Rest:
    """A principal made with the admin command."""
    created = admin_json(served, "principal", "create", "--kind", kind, "--name", name)
    return Rest(served.url, created["token"], created["principal_id"])
