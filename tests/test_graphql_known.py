"""A request the pipeline answered by the fast path is answered again without
Strawberry's pipeline (schema/fastpath/known.py): the same body, byte for
byte, as graphql-core's; the same operation name on the request's log line;
the same count in the operations metric. Anything else in the body, other
variables, or a fallback at run time goes through the pipeline."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest

from bench.graphql import DASHBOARD
from tests.conftest import Caller, Service
from tests.fastpath_support import both, seed
from waypost.observe.requests import RequestLine, RequestObserver
from waypost.schema import fastpath
from waypost.schema.fastpath import known
from waypost.schema.limits import CACHED_QUERIES
from waypost.schema.memo import Memo
from waypost.schema.view import WaypostGraphQL


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    """Each test starts knowing nothing (entries outlive a service: a plan
    depends on the schema alone, the reads run on the service at hand)."""
    with mock.patch.object(known, "KNOWN", Memo(CACHED_QUERIES)):
        yield


@contextmanager
def watching() -> Iterator[dict[str, list[Any]]]:
    """Counts the pipeline's runs and notes each request's logged operation."""
    seen: dict[str, list[Any]] = {"pipeline": [], "operations": []}
    run, finish = WaypostGraphQL.run, RequestObserver._finish

    async def counted(self: WaypostGraphQL, *args: Any, **kwargs: Any) -> Any:
        seen["pipeline"].append(True)
        return await run(self, *args, **kwargs)

    def noted(self: RequestObserver, line: RequestLine) -> None:
        seen["operations"].append(line.operation)
        finish(self, line)

    with (
        mock.patch.object(WaypostGraphQL, "run", counted),
        mock.patch.object(RequestObserver, "_finish", noted),
    ):
        yield seen


def ok_count(service: Service) -> float:
    found = service.rt.metrics.registry.get_sample_value(
        "waypost_graphql_operations_total", {"type": "query", "outcome": "ok"}
    )
    return found or 0.0


async def post(caller: Caller, body: dict[str, Any]) -> bytes:
    r = await caller.client.post("/graphql", json=body, headers=caller.headers())
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    return r.content


async def known_dashboard(service: Service, human: Caller) -> dict[str, Any]:
    """Seed, then send the dashboard request twice, so that it is known; its body."""
    await seed(service, human)
    body: dict[str, Any] = {"query": DASHBOARD, "variables": {"project": "demo"}}
    await post(human, body)
    await post(human, body)
    return body


async def test_a_repeated_request_skips_the_pipeline_and_answers_the_same(
    service: Service, human: Caller
) -> None:
    await seed(service, human)
    body = {"query": DASHBOARD, "variables": {"project": "demo"}, "operationName": "Dashboard"}
    before = ok_count(service)
    with watching() as seen:
        first = await post(human, body)
        second = await post(human, body)
        third = await post(human, body)
    assert seen["pipeline"] == [True]  # the first one only
    assert seen["operations"] == ["Dashboard"] * 3
    assert ok_count(service) == before + 3
    assert first == second == third
    # and graphql-core's answer, byte for byte
    answered = await both(human, DASHBOARD, {"project": "demo"})
    assert answered.fast == answered.slow == first


async def test_other_variables_other_bodies_and_fallbacks_take_the_pipeline(
    service: Service, human: Caller
) -> None:
    body = await known_dashboard(service, human)
    with watching() as seen:
        await post(human, {"query": DASHBOARD, "variables": {"project": "other"}})
        await post(human, {**body, "extensions": {}})
        await post(human, {**body, "operationName": "Dashboard"})
    assert seen["pipeline"] == [True, True, True]
    # a known request whose fast path falls back this time: the pipeline answers
    expected = await post(human, body)
    real = fastpath._run
    runs: list[bool] = []

    async def once_none(rt: Any, plan: Any, caller: str) -> Any:
        runs.append(True)
        return None if len(runs) == 1 else await real(rt, plan, caller)

    with watching() as seen, mock.patch.object(fastpath, "_run", once_none):
        assert await post(human, body) == expected
    assert seen["pipeline"] == [True] and len(runs) == 2


async def test_a_known_text_with_an_error_is_never_known(service: Service, human: Caller) -> None:
    await seed(service, human)
    body = {"query": '{ project(id: "demo") { decisions(first: 0) { totalCount } } }'}
    with watching() as seen:
        for _ in range(2):
            r = await human.client.post("/graphql", json=body, headers=human.headers())
            assert r.json()["errors"][0]["extensions"]["code"] == "invalid_request", r.text
    assert seen["pipeline"] == [True, True]


async def test_a_streaming_accept_header_takes_the_pipeline(
    service: Service, human: Caller
) -> None:
    body = await known_dashboard(service, human)
    with watching() as seen:
        for accept in ("multipart/mixed", "text/event-stream", "application/json, multipart/mixed"):
            r = await human.client.post(
                "/graphql", json=body, headers={**human.headers(), "Accept": accept}
            )
            assert r.status_code == 200, accept
        r = await human.client.post(
            "/graphql", json=body, headers={**human.headers(), "Accept": "application/json"}
        )
        assert r.status_code == 200
    assert seen["pipeline"] == [True, True, True]  # the plain JSON one skipped it
