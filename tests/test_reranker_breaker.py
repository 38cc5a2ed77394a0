"""The circuit breaker and limiter on their own, with a hand-moved monotonic clock."""

from __future__ import annotations

import pytest

from waypost.reranker.breaker import Breaker
from waypost.reranker.limiter import Limiter


class Tick:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def opened(clock: Tick) -> Breaker:
    breaker = Breaker(threshold=3, open_seconds=60, clock=clock)
    for _ in range(3):
        ticket = breaker.admit()
        assert ticket is not None
        breaker.failed(ticket)
    assert breaker.state == "open"
    return breaker


def test_the_window_runs_on_the_given_clock() -> None:
    clock = Tick()
    breaker = opened(clock)
    clock.now += 59.9
    assert breaker.admit() is None
    clock.now += 0.1
    probe = breaker.admit()
    assert probe is not None and probe.probe and breaker.state == "half_open"
    assert breaker.admit() is None  # one probe at a time


def test_failures_must_be_consecutive() -> None:
    breaker = Breaker(threshold=3, clock=Tick())
    for outcome in ("fail", "fail", "ok", "fail", "fail"):
        ticket = breaker.admit()
        assert ticket is not None
        breaker.succeeded(ticket) if outcome == "ok" else breaker.failed(ticket)
    assert breaker.state == "closed" and breaker.failures == 2


def test_a_released_probe_lets_the_next_request_probe() -> None:
    clock = Tick()
    breaker = opened(clock)
    clock.now += 61
    first = breaker.admit()
    assert first is not None and first.probe
    breaker.release(first)
    assert breaker.state == "open"
    second = breaker.admit()
    assert second is not None and second.probe
    breaker.succeeded(second)
    assert breaker.state == "closed"


def test_completions_of_an_older_generation_change_nothing() -> None:
    clock = Tick()
    breaker = Breaker(threshold=3, open_seconds=60, clock=clock)
    old = breaker.admit()
    assert old is not None
    for _ in range(3):
        ticket = breaker.admit()
        assert ticket is not None
        breaker.failed(ticket)
    state = (breaker.state, breaker.generation, breaker.open_until)
    breaker.succeeded(old)
    breaker.failed(old)
    breaker.release(old)
    assert (breaker.state, breaker.generation, breaker.open_until) == state


def test_a_failed_probe_opens_a_fresh_window() -> None:
    clock = Tick()
    breaker = opened(clock)
    clock.now += 61
    probe = breaker.admit()
    assert probe is not None
    breaker.failed(probe)
    assert breaker.state == "open" and breaker.open_until == clock.now + 60


def test_the_limiter_never_waits_and_never_overflows() -> None:
    limiter = Limiter(2)
    assert limiter.try_acquire() and limiter.try_acquire()
    assert not limiter.try_acquire() and limiter.in_use == 2
    limiter.release()
    assert limiter.try_acquire()
    limiter.release()
    limiter.release()
    with pytest.raises(RuntimeError):
        limiter.release()
