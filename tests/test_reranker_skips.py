"""Skips of the reranker as an operator sees them (rerankerjourney).

docs/context.md: `busy` skips "are not failures", and "each attempt (every
context request while enabled) logs one line on the `waypost.reranker`
logger": the skips an operator sees most under a misbehaving provider
(`circuit_open`, `busy`) included. Against the real HTTPS provider of
tests/provider_support.py, as in tests/test_reranker.py.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.conftest import Caller, Service
from tests.provider_support import Provider
from tests.test_reranker import (  # noqa: F401  (fixtures)
    KEY,
    WINDOW,
    fail_three_times,
    provider,
    provider_at,
    rerank_of,
    rerank_settings,
    reranker,
    service,
    three_records,
)


async def test_busy_skips_in_a_row_never_open_the_circuit(
    service: Service,  # noqa: F811
    provider: Provider,  # noqa: F811
    human: Caller,
    project: str,
) -> None:
    """Three `busy` skips in a row (every permit held by calls still out)
    count nothing against the provider: the circuit stays closed with no
    failure counted, and the next request with a free permit is reranked."""
    fts = await three_records(human)
    rr = reranker(service)
    while rr.limiter.try_acquire():  # every permit held, as by slow calls
        pass
    for _ in range(3):
        assert await rerank_of(human) == (fts, "busy")
    assert (rr.breaker.state, rr.breaker.failures) == ("closed", 0)
    for _ in range(rr.limiter.permits):
        rr.limiter.release()
    order, reason = await rerank_of(human)
    assert reason == "applied" and order == list(reversed(fts))
    assert provider.calls == 1  # the busy skips sent nothing


async def test_circuit_open_and_busy_skips_each_log_their_line(
    service: Service,  # noqa: F811
    provider: Provider,  # noqa: F811
    human: Caller,
    project: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One INFO line per attempt, skips included, without the key or text."""
    await three_records(human)
    caplog.set_level(logging.INFO, logger="waypost.reranker")
    await fail_three_times(provider, human)
    assert (await rerank_of(human))[1] == "circuit_open"
    await asyncio.sleep(WINDOW + 0.05)
    rr = reranker(service)
    while rr.limiter.try_acquire():
        pass
    assert (await rerank_of(human))[1] == "busy"  # the would-be probe
    for _ in range(rr.limiter.permits):
        rr.limiter.release()
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name == "waypost.reranker" and r.getMessage().startswith("rerank outcome=")
    ]
    assert [line.split(" elapsed_ms=")[0] for line in lines] == [
        *["rerank outcome=failed reason=bad_status candidates=3"] * 3,
        "rerank outcome=skipped reason=circuit_open candidates=3",
        "rerank outcome=skipped reason=busy candidates=3",
    ]
    assert all(
        r.levelno == logging.INFO for r in caplog.records if r.getMessage().startswith("rerank ")
    )
    assert not any(KEY in line or "zebra" in line for line in lines)
