"""Reranker outcomes and circuit state in the metrics (a real local TLS provider)."""

from __future__ import annotations

from tests.conftest import Caller, Service
from tests.provider_support import Provider
from tests.test_reranker import (  # noqa: F401  (fixtures: a provider and a reranking service)
    fail_three_times,
    provider,
    rerank_of,
    rerank_settings,
    service,
    three_records,
)


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
