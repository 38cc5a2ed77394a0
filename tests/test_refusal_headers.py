"""docs/api.md ("Responses"): every response, errors included, carries
`Cache-Control: no-store` and `X-Content-Type-Options: nosniff`. Here the
refusals whose own tests look at their status and body only: a busy store's
503 (REST, and GraphQL's 200 that says `unavailable`) and an event stream's
429, on GET and on HEAD."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Caller, MovableClock, Service, copy_database, serving
from tests.test_storage import POLICY, hold_write_lock
from waypost.live import LiveLimits, hub_for
from waypost.settings import Settings

STREAM = "/api/v1/projects/demo/events/stream"


def carries_the_security_headers(r: httpx.Response) -> None:
    assert r.headers.get("cache-control") == "no-store", (r.request.url, r.status_code)
    assert r.headers.get("x-content-type-options") == "nosniff", (r.request.url, r.status_code)


@pytest.fixture
async def impatient(
    tmp_path: Path, clock: MovableClock, migrated_template: Path
) -> AsyncIterator[Service]:
    """The service with a 50 ms busy timeout, so a held lock refuses at once."""
    db_path = copy_database(migrated_template, tmp_path / "busy.db")
    settings = Settings(db_path=db_path, sweep_interval=3600, busy_timeout_ms=50)
    async with serving(settings, clock) as made:
        yield made


async def test_a_busy_stores_refusals_carry_the_security_headers(impatient: Service) -> None:
    human = await impatient.principal("human")
    await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
    mutation = (
        'mutation { policyUpdate(input: {idempotencyKey: "g", projectId: "demo",'
        ' expectedRevision: 1, rules: "x"}) { policy { revision } } }'
    )
    other = hold_write_lock(impatient.db_path)
    try:
        rest = await human.patch(POLICY, {"expected_revision": 1, "rules": "x"}, key="busy")
        graphql = await human.client.post(
            "/graphql", json={"query": mutation}, headers=human.headers()
        )
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert rest.status_code == 503 and rest.headers["retry-after"] == "1"
    assert rest.json()["error"]["code"] == "unavailable"
    assert graphql.status_code == 200 and graphql.headers["retry-after"] == "1"
    assert graphql.json()["errors"][0]["extensions"]["code"] == "unavailable"
    for r in (rest, graphql):
        carries_the_security_headers(r)


async def test_an_event_streams_429_carries_the_security_headers(
    service: Service, human: Caller, project: str
) -> None:
    # a hub whose cap is reached before any stream opens: refused at once
    hub_for(service.rt, LiveLimits(per_token=0, total=0))
    for method in ("GET", "HEAD"):
        r = await service.client.request(method, STREAM, headers=human.headers())
        assert r.status_code == 429, (method, r.text)
        if method == "GET":
            assert r.json()["error"]["code"] == "too_many_streams"
        carries_the_security_headers(r)
