"""Reranker outcomes and circuit state in the metrics (a real local TLS provider)."""

from __future__ import annotations

import asyncio
import threading

from tests.conftest import Caller, Service
from tests.context_support import CONTEXT, ids
from tests.provider_support import Provider
from tests.test_reranker import (  # noqa: F401  (fixtures: a provider and a reranking service)
    WINDOW,
    fail_three_times,
    provider,
    provider_at,
    rerank_of,
    rerank_settings,
    reranker,
    service,
    start,
    three_records,
)
from tests.test_reranker_breaker import Tick


def sample(served: Service, name: str, **labels: str) -> float:
    value = served.rt.metrics.registry.get_sample_value(name, labels or None)
    return 0.0 if value is None else value


async def test_outcomes_are_counted_and_the_open_circuit_shows(
    service: Service,  # noqa: F811
    provider: Provider,  # noqa: F811
    human: Caller,
    project: str,
) -> None:
    await three_records(human)
    assert (await rerank_of(human))[1] == "applied"
    assert sample(service, "waypost_reranker_calls_total", outcome="applied") == 1
    assert sample(service, "waypost_reranker_circuit_state") == 0
    await fail_three_times(provider, human)
    assert sample(service, "waypost_reranker_calls_total", outcome="bad_status") == 3
    assert (await rerank_of(human))[1] == "circuit_open"
    assert sample(service, "waypost_reranker_calls_total", outcome="circuit_open") == 1
    assert sample(service, "waypost_reranker_circuit_state") == 2


async def test_the_gauge_shows_a_half_open_circuit_while_the_probe_is_out(
    service: Service,  # noqa: F811
    provider: Provider,  # noqa: F811
    human: Caller,
    project: str,
) -> None:
    """operations.md: 0 closed, 1 half-open, 2 open (only 0 and 2 were read)."""
    fts = await three_records(human)
    breaker = reranker(service).breaker
    breaker._clock = tick = Tick()
    await fail_three_times(provider, human)
    assert sample(service, "waypost_reranker_circuit_state") == 2
    tick.now += WINDOW
    provider.mode = "scores"
    provider.hold = hold = threading.Event()
    probe = await start(human)
    await asyncio.to_thread(provider.wait_arrivals, 4)  # three failures, then the probe
    assert breaker.state == "half_open"
    assert sample(service, "waypost_reranker_circuit_state") == 1
    others = await asyncio.gather(*(human.get(CONTEXT, q="zebra") for _ in range(10)))
    assert {r.json()["rerank"]["reason"] for r in others} == {"circuit_open"}
    assert all(ids(r.json()) == fts for r in others)
    assert provider.calls == 4  # the probe is the one call
    hold.set()
    assert (await probe).json()["rerank"]["reason"] == "applied"
    assert sample(service, "waypost_reranker_circuit_state") == 0
