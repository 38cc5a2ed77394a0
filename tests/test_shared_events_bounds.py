"""The memories that let subscriptions share one execution per event
(schema/shared_events.py) are short and bounded by `MOST`: with no bound,
every event ever handed out (and its answer per operation) stayed in memory
for the life of the process."""

from __future__ import annotations

from collections import OrderedDict

import pytest
from graphql import ExecutionResult

from waypost.schema import shared_events


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(shared_events, "MOST", 3)
    monkeypatch.setattr(shared_events, "_PAYLOADS", OrderedDict())
    monkeypatch.setattr(shared_events, "_SHARED", {})
    monkeypatch.setattr(shared_events, "_ANSWERS", OrderedDict())
    return 3


def test_the_payloads_remembered_are_the_latest_most(small: int) -> None:
    items = [{"sequence": n} for n in range(small + 2)]
    payloads = [shared_events.shared_payload(item, dict) for item in items]
    assert len(shared_events._PAYLOADS) == small
    assert len(shared_events._SHARED) == small
    # the oldest were let go, the latest are shared still (the same object again)
    assert [shared_events.is_shared(p) for p in payloads] == [False, False, True, True, True]
    assert shared_events.shared_payload(items[-1], dict) is payloads[-1]


def test_the_answers_remembered_are_the_latest_most(small: int) -> None:
    runs: list[int] = []

    def run(n: int) -> ExecutionResult:
        runs.append(n)
        return ExecutionResult({"n": n}, None)

    payloads = [object() for _ in range(small + 2)]
    for n, payload in enumerate(payloads):
        shared_events.answer(payload, "op", lambda n=n: run(n))  # type: ignore[misc]
    assert len(shared_events._ANSWERS) == small
    # the latest answer is shared (not run again); the oldest is run again
    shared_events.answer(payloads[-1], "op", lambda: run(-1))
    shared_events.answer(payloads[0], "op", lambda: run(-2))
    assert runs == [0, 1, 2, 3, 4, -2]
