"""A real `waypost serve` (with GraphiQL on) and headless Chromium for the
console tests: the browser is the operating system's (/usr/bin/chromium, or
WAYPOST_CHROMIUM), driven by Playwright; Playwright never downloads one."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from tests.serve_support import Server, admin_command
from waypost.console import STATIC

_keys = itertools.count()


def chromium_path() -> str | None:
    """The system Chromium, or None (`make test` installs it when it can)."""
    for candidate in (os.environ.get("WAYPOST_CHROMIUM"), "/usr/bin/chromium",
                      shutil.which("chromium"), shutil.which("chromium-browser")):  # fmt: skip
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@dataclass
class Rest:
    """A principal speaking REST to the served process."""

    url: str
    token: str
    principal_id: str = ""
    # while set (`pooled`), every Rest sends on this client's kept-alive
    # connections; else each request opens a client and a connection of its
    # own (~40 ms each on a loaded two-core machine, SSL context included)
    pool: ClassVar[httpx.Client | None] = None

    def headers(self, key: bool = False) -> dict[str, str]:
        h = {"Authorization": f"Bearer {self.token}"}
        if key:
            h["Idempotency-Key"] = f"test-{next(_keys)}"
        return h

    def get(self, path: str) -> Any:
        r = (Rest.pool or httpx).get(self.url + path, headers=self.headers(), timeout=10)
        assert r.status_code == 200, r.text
        return r.json()

    def send(self, method: str, path: str, body: Any, expect: int = 200) -> Any:
        r = (Rest.pool or httpx).request(
            method, self.url + path, json=body, headers=self.headers(True), timeout=10
        )
        assert r.status_code == expect, r.text
        return r.json()


@contextlib.contextmanager
def pooled() -> Iterator[None]:
    """Every Rest request on one client's kept-alive connections meanwhile
    (the browser tests': none of them counts the service's connections)."""
    # idle connections dropped after 2 s: `serve` (uvicorn) closes one idle
    # for 5 s, httpx's default keep-alive expiry, and a request sent on one
    # just as the service closes it fails (reset or disconnected)
    with httpx.Client(timeout=10, limits=httpx.Limits(keepalive_expiry=2)) as client:
        Rest.pool = client
        try:
            yield
        finally:
            Rest.pool = None


NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="no Node.js to run the console's modules")


def run_console_module(name: str, script: str, argument: Any) -> Any:
    """Run `script` (an ES module) under Node with the URL of the console's
    module `js/<name>` as argv[1] and `argument` as JSON in argv[2]: what
    it prints, read as JSON."""
    assert NODE is not None
    done = subprocess.run(
        [NODE, "--input-type=module", "-e", script, (STATIC / "js" / name).as_uri(),
         json.dumps(argument)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def admin_json(served: Server, *args: str) -> Any:
    """What an admin command prints, run on the served database as an operator
    would (in this process: serve_support.admin_command)."""
    return admin_command(served.clock.parent / "waypost.db", *args)


def admin_principal(served: Server, kind: str, name: str) -> Rest:
    """A principal made with the admin command."""
    created = admin_json(served, "principal", "create", "--kind", kind, "--name", name)
    return Rest(served.url, created["token"], created["principal_id"])


@contextlib.contextmanager
def launched_chromium(path: str) -> Iterator[Any]:
    """The OS's Chromium at `path` under Playwright's sync API, as the
    console's browser tests drive it (each imports-or-skips Playwright first)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()
