"""The memories that let subscriptions share one execution per event
(schema/shared_events.py) are short and bounded by `MOST` (and the answers
by `MOST_TEXT` of text too): with no bound, every event ever handed out (and
its answer per operation) stayed in memory for the life of the process."""

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
    monkeypatch.setattr(shared_events, "_ANSWERS", shared_events._Answers())
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
    assert len(shared_events._ANSWERS.entries) == small
    # the latest answer is shared (not run again); the oldest is run again
    shared_events.answer(payloads[-1], "op", lambda: run(-1))
    shared_events.answer(payloads[0], "op", lambda: run(-2))
    assert runs == [0, 1, 2, 3, 4, -2]


def test_the_answers_remembered_hold_at_most_most_text_characters(
    small: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By count alone, 4,096 answers were kept however large, after every
    subscriber had gone: 100 MB for 1,600 events of a 64 KiB description
    (liveaudit). Past MOST_TEXT characters the oldest go, and an answer
    larger than that is not kept at all (each subscriber runs its own, as
    unshared)."""
    monkeypatch.setattr(shared_events, "MOST", 100)
    monkeypatch.setattr(shared_events, "MOST_TEXT", 10_000)
    answers = shared_events._ANSWERS
    runs: list[str] = []

    def answered(payload: object, text: str) -> None:
        def run() -> ExecutionResult:
            runs.append(text[:1])
            return ExecutionResult({"task": {"description": text}}, None)

        shared_events.answer(payload, "op", run)

    payloads = [object() for _ in range(4)]
    for payload, letter in zip(payloads, "abcd", strict=True):
        answered(payload, letter * 3_000)
    assert answers.total <= 10_000 and len(answers.entries) == 3
    assert (id(payloads[0]), "op") not in answers.entries  # the oldest went
    assert answers.total == sum(answers.sizes.values())
    answered(payloads[3], "d" * 3_000)  # the latest is shared: not run again
    assert runs == ["a", "b", "c", "d"]
    kept = list(answers.entries)
    huge = object()
    answered(huge, "h" * 20_000)
    # not kept, and the others stay (one such answer let them all go: review67)
    assert list(answers.entries) == kept and answers.total == sum(answers.sizes.values())
    answered(huge, "h" * 20_000)  # run again: nothing so large is kept
    assert runs == ["a", "b", "c", "d", "h", "h"]


def test_the_size_of_an_answer_counts_its_text_at_any_depth() -> None:
    deep: object = "x" * 1_000
    for _ in range(5_000):  # deeper than Python's recursion limit
        deep = [{"k": deep}]
    assert 1_000 < shared_events.text_size(deep) < 1_000 + 5_000 * 40
    assert shared_events.text_size({"a": "bb", "c": [1, None, "ddd"]}) > len("abbcddd")
