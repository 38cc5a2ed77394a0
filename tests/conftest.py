"""Shared fixtures: a migrated temporary SQLite file, the app with its lifespan
entered, an ASGI client, and principals with tokens."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib.util import find_spec
from pathlib import Path
from typing import Any

if find_spec("sniffio") is None:
    # httpx's ASGITransport tries `import sniffio` for every request it sends
    # (to tell trio from asyncio); absent (anyio no longer needs it), each try
    # searched sys.path again, ~0.1 ms a request over the suite's in-process
    # requests. None in sys.modules is Python's own "no such module": the
    # same ImportError at once.
    sys.modules["sniffio"] = None  # type: ignore[assignment]

import httpx
import hypothesis
import pytest

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # Run as a background job of a script (`make test &`, nohup, some CI
    # runners), the suite inherits SIGINT ignored, and so does every process
    # a test starts, whose Ctrl-C then does nothing: the tests that send one
    # failed there only (mutanttests). Python's own handler here is reset to
    # the default in each child at exec, as at a terminal.
    signal.signal(signal.SIGINT, signal.default_int_handler)

from waypost.app import create_app
from waypost.clock import format_time, parse_time
from waypost.observe.conditions import ConditionLog
from waypost.resolvers.access import principals
from waypost.runtime import Runtime, open_runtime
from waypost.settings import Settings
from waypost.storage.db import connect_sync
from waypost.storage.migrate import Migration, available, migrate

_keys = itertools.count()
_condition_logs = itertools.count()


def own_condition_log(monkeypatch: pytest.MonkeyPatch, module: Any) -> ConditionLog:
    """A fresh ConditionLog in place of `module._conditions`, logging to a
    child of the module's logger that is this test's alone. A ConditionLog
    logs the lines it held back by a timer when its window ends, so one an
    earlier test used (or the module's own) may log into this test's capture
    up to 10 s late: a test that counts lines counts those of its own."""
    conditions = ConditionLog(module.log.getChild(f"test{next(_condition_logs)}"))
    monkeypatch.setattr(module, "_conditions", conditions)
    return conditions


# CI replays the same examples every run (a red build is then reproducible and
# never a coin toss); developers' runs explore new examples each time.
hypothesis.settings.register_profile("ci", derandomize=True, database=None, deadline=None)
hypothesis.settings.register_profile("dev", deadline=None)
hypothesis.settings.load_profile("ci" if os.environ.get("CI") else "dev")


class MovableClock:
    """A clock the tests move by hand (the service reads it at every use)."""

    def __init__(self, start: str = "2026-11-29T18:00:00.000Z") -> None:
        self.moment = parse_time(start)

    def now(self) -> datetime:
        return self.moment

    def advance(self, **delta: float) -> None:
        self.moment = self.moment + timedelta(**delta)

    def iso(self) -> str:
        return format_time(self.moment)


@dataclass
class Caller:
    """A principal with its token; helpers send requests as it."""

    client: httpx.AsyncClient
    principal_id: str
    kind: str
    token: str
    session_id: str | None = None

    def headers(self, key: str | None = None, session: bool = True) -> dict[str, str]:
        h = {"Authorization": f"Bearer {self.token}"}
        if session and self.session_id:
            h["Waypost-Session"] = self.session_id
        if key is not None:
            h["Idempotency-Key"] = key
        return h

    async def get(self, path: str, **params: Any) -> httpx.Response:
        return await self.client.get(path, params=params or None, headers=self.headers())

    async def send(
        self, method: str, path: str, body: Any = None, key: str | None = None, **kw: Any
    ) -> httpx.Response:
        """A mutation with a fresh idempotency key unless one is given."""
        key = key if key is not None else f"k-{next(_keys)}"
        return await self.client.request(
            method, path, json=body, headers={**self.headers(key), **kw.pop("headers", {})}, **kw
        )

    async def post(self, path: str, body: Any = None, **kw: Any) -> httpx.Response:
        return await self.send("POST", path, {} if body is None else body, **kw)

    async def patch(self, path: str, body: Any, **kw: Any) -> httpx.Response:
        return await self.send("PATCH", path, body, **kw)

    async def gql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        r = await self.client.post(
            "/graphql", json={"query": query, "variables": variables or {}}, headers=self.headers()
        )
        assert r.status_code == 200, r.text
        data: dict[str, Any] = r.json()
        return data

    async def start_session(self) -> str:
        r = await self.post("/api/v1/sessions")
        assert r.status_code == 201, r.text
        self.session_id = r.json()["id"]
        return self.session_id


@dataclass
class Service:
    app: Any
    client: httpx.AsyncClient
    rt: Runtime
    clock: MovableClock
    db_path: Path
    made: int = 0  # principals made by default name

    async def principal(self, kind: str = "human", name: str | None = None) -> Caller:
        at = self.clock.iso()
        # names are unique (principals.create_principal): a default one each time
        self.made += 1
        named = name or f"{kind}-{self.made}"
        created = await self.rt.db.write(
            lambda conn: principals.create_principal(conn, kind, named, at)
        )
        return Caller(self.client, created["principal_id"], kind, created["token"])

    async def agent(self, name: str | None = None) -> Caller:
        caller = await self.principal("agent", name)
        await caller.start_session()
        return caller


@pytest.fixture
def clock() -> MovableClock:
    return MovableClock()


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One database migrated once per test run; each test starts from a copy
    (migrating costs ~50 ms of DDL and fsyncs, a copy ~1 ms)."""
    path = tmp_path_factory.mktemp("template") / "template.db"
    conn = connect_sync(path)
    try:
        migrate(conn)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file
    finally:
        conn.close()
    return path


def copy_database(template: Path, dest: Path) -> Path:
    """Copy `template` to `dest`, created owner-only as the service creates it."""
    fd = os.open(dest, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "wb") as out, template.open("rb") as source:
        shutil.copyfileobj(source, out)
    return dest


@pytest.fixture
async def service(
    tmp_path: Path, clock: MovableClock, migrated_template: Path
) -> AsyncIterator[Service]:
    db_path = copy_database(migrated_template, tmp_path / "waypost.db")
    settings = Settings(db_path=db_path, sweep_interval=3600)
    async with serving(settings, clock) as made:
        yield made


@contextlib.asynccontextmanager
async def serving(
    settings: Settings, clock: MovableClock, base_url: str = "http://waypost.test"
) -> AsyncIterator[Service]:
    """The runtime opened as `serve` opens it, the public app over it, a client."""
    async with open_runtime(settings, clock) as rt:
        app = create_app(rt)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url=base_url) as client:
                yield Service(app, client, rt, clock, settings.db_path)


@pytest.fixture
async def human(service: Service) -> Caller:
    return await service.principal("human", "alice")


@pytest.fixture
async def project(human: Caller) -> str:
    r = await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
    assert r.status_code == 201, r.text
    return "demo"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def earlier_builds_file(path: Path, before: str = "0010") -> list[Migration]:
    """A database as a build with only the migrations named before `before`
    left it (rollback journal, so a test may edit its pages); returns them."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute(
        "CREATE TABLE schema_migrations ("
        " name TEXT PRIMARY KEY, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    early = [m for m in available() if m.name < before]
    for migration in early:
        conn.executescript(migration.sql)
        conn.execute(
            "INSERT INTO schema_migrations VALUES (?, ?, '2026-11-30T07:00:00.000Z')",
            (migration.name, migration.checksum),
        )
    conn.close()
    return early
