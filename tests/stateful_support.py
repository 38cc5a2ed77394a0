"""The service a stateful test drives: the app over a real SQLite file in a
temporary directory, opened as `serve` opens it, on an event loop of the
machine's own (Hypothesis calls a machine's rules synchronously), its
clock a MovableClock. Each machine builds its world in `_start`, after
`open_service`, and is torn down with its service."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Coroutine
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine

from tests.conftest import Caller, MovableClock, copy_database
from waypost.app import create_app
from waypost.resolvers.access import principals
from waypost.settings import Settings
from waypost.storage.db import connect_sync
from waypost.storage.migrate import migrate

T = TypeVar("T")
SESSION = timedelta(minutes=15)  # an agent session's life from its start or latest beat


def machine_settings(examples: int, steps: int = 40) -> settings:
    """A model's run: `examples` sequences of up to `steps` steps, each step
    a real request, so no deadline (a loaded two-core machine is slow)."""
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


Expected = tuple[int, str, str | None]  # status code, error code, details.reason


def answered_as(r: httpx.Response, refusal: Expected | None, ok: int = 200) -> bool:
    """Assert the refusal a model predicts, or success (`ok`); True on success."""
    if refusal is None:
        assert r.status_code == ok, r.text
        return True
    error = r.json().get("error", {})
    got = (r.status_code, error.get("code"), error.get("details", {}).get("reason"))
    assert got == refusal, (got, refusal, r.text)
    return False


_template_dir: tempfile.TemporaryDirectory[str] | None = None


def migrated_template() -> Path:
    """One database migrated once per process (as conftest's `migrated_template`
    is per run): each example starts from a copy, not a migration of its own
    (a fresh file's DDL and fsyncs cost ~100 ms an example on a loaded machine,
    a copy ~1 ms; the service opens both alike and makes its admin in either)."""
    global _template_dir
    if _template_dir is None:
        made = tempfile.TemporaryDirectory()
        conn = connect_sync(Path(made.name) / "template.db")
        try:
            migrate(conn)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file
        finally:
            conn.close()
        _template_dir = made
    return Path(_template_dir.name) / "template.db"


class ServiceMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.db_path = copy_database(migrated_template(), Path(self.tmp.name) / "w.db")
        self.loop = asyncio.new_event_loop()
        self.clock = MovableClock()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    async def open_service(self) -> None:
        settings = Settings(db_path=self.db_path, sweep_interval=3600)
        self.app = create_app(settings, clock=self.clock)
        self.lifespan = self.app.router.lifespan_context(self.app)
        await self.lifespan.__aenter__()
        transport = httpx.ASGITransport(app=self.app)
        self.client = httpx.AsyncClient(transport=transport, base_url="http://w.test")

    async def new_caller(self, kind: str, name: str) -> Caller:
        """A new principal with its token (an agent without a session yet)."""
        at = self.clock.iso()
        made = await self.app.state.runtime.db.write(
            lambda conn: principals.create_principal(conn, kind, name, at)
        )
        return Caller(self.client, made["principal_id"], kind, made["token"])

    async def open_team(self) -> tuple[list[Caller], dict[str, datetime]]:
        """ada and bob (agents, each in a session) and hana (a human), who
        makes the project `demo`; and each session's expiry by its id."""
        actors: list[Caller] = []
        sessions: dict[str, datetime] = {}
        for kind, name in (("agent", "ada"), ("agent", "bob"), ("human", "hana")):
            caller = await self.new_caller(kind, name)
            if kind == "agent":
                sessions[await caller.start_session()] = self.clock.now() + SESSION
            actors.append(caller)
        r = await actors[-1].post("/api/v1/projects", {"id": "demo", "name": "D"})
        assert r.status_code == 201, r.text
        return actors, sessions

    def teardown(self) -> None:
        async def stop() -> None:
            await self.client.aclose()
            await self.lifespan.__aexit__(None, None, None)

        try:
            self.run(stop())
        finally:
            self.loop.close()
            self.tmp.cleanup()
