"""One validation of a new query text for every client that sends it at
once (schema/limits.py, `_validated`).

graphql-core's rules run on a worker thread, one document at a time
(schema/offload.py), and a text's result was kept only once its validation
ended: clients that sent one new text together (a console page after a
restart, a fleet of agents) each queued a validation of their own behind
the others'. Beside a REST load, 40 such clients waited 20 s for their first
answers, and 12 got theirs 2 to 11.5 s apart (overloadjourney)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest

from tests.conftest import Caller
from waypost.schema import limits


def _new_text() -> str:
    # a comment makes the text new to the process's caches, whatever ran before
    return (
        f'# {uuid.uuid4()}\n{{ project(id: "demo") {{ name tasks(first: 2) {{ totalCount }} }} }}'
    )


def _counted(monkeypatch: pytest.MonkeyPatch, seconds: float = 0.0) -> list[str]:
    """Count (and slow down) graphql-core's validation as limits.py calls it."""
    calls: list[str] = []
    validate = limits.validate_document
    lock = threading.Lock()

    def counting(*args: Any) -> Any:
        with lock:
            calls.append("validate")
        time.sleep(seconds)  # on the worker thread: a validation in progress
        return validate(*args)

    monkeypatch.setattr(limits, "validate_document", counting)
    return calls


async def test_twelve_clients_sending_one_new_text_wait_for_one_validation(
    human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counted(monkeypatch, seconds=0.05)
    query = _new_text()
    answers = await asyncio.gather(*(human.gql(query) for _ in range(12)))
    assert all(a == {"data": {"project": answers[0]["data"]["project"]}} for a in answers)
    assert answers[0]["data"]["project"]["name"] == "Demo"
    assert len(calls) == 1, calls
    await human.gql(query)  # and the text's result is kept: no validation again
    assert len(calls) == 1, calls


async def test_a_client_that_leaves_leaves_the_validation_to_the_others(
    human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counted(monkeypatch, seconds=0.3)
    query = _new_text()
    first = asyncio.create_task(human.gql(query))
    await asyncio.sleep(0.1)  # its validation has begun
    second = asyncio.create_task(human.gql(query))
    await asyncio.sleep(0.05)
    first.cancel()  # its client gone
    answer = await second
    assert answer["data"]["project"]["name"] == "Demo", answer
    assert len(calls) == 1, calls
    assert first.cancelled()


async def test_an_invalid_text_sent_together_is_refused_alike_after_one_validation(
    human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counted(monkeypatch, seconds=0.05)
    query = f'# {uuid.uuid4()}\n{{ project(id: "demo") {{ noSuchField }} }}'
    answers = await asyncio.gather(*(human.gql(query) for _ in range(5)))
    assert all(a == answers[0] for a in answers)
    assert "noSuchField" in answers[0]["errors"][0]["message"], answers[0]
    assert len(calls) == 1, calls


async def test_a_validation_that_fails_fails_its_waiters_and_is_not_kept(
    human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault inside the one validation is each waiter's (an internal error,
    as it was for each request's own), and it is forgotten with it: the next
    request of the text validates it again, and is answered."""
    calls = _counted(monkeypatch, seconds=0.05)
    counted = limits.validate_document

    def failing_once(*args: Any) -> Any:
        found = counted(*args)
        if len(calls) == 1:
            raise RuntimeError("a fault inside graphql-core's rules")
        return found

    monkeypatch.setattr(limits, "validate_document", failing_once)
    query = _new_text()
    answers = await asyncio.gather(*(human.gql(query) for _ in range(4)))
    assert all(a["errors"][0]["extensions"]["code"] == "internal" for a in answers), answers
    assert len(calls) == 1, calls
    assert not limits._RUNNING.get(asyncio.get_running_loop())
    answer = await human.gql(query)
    assert answer["data"]["project"]["name"] == "Demo", answer
    assert len(calls) == 2, calls


async def test_a_text_validated_once_is_not_validated_again(
    human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The result of the one validation is kept by the text. (The fast path
    answers `_new_text()`'s query again without validating it whatever
    `_RESULTS` holds; an introspection field keeps this one off it.)"""
    calls = _counted(monkeypatch)
    query = (
        f'# {uuid.uuid4()}\n{{ project(id: "demo") {{ name }} __type(name: "Task") {{ name }} }}'
    )
    for _ in range(3):
        answer = await human.gql(query)
        assert answer["data"]["project"]["name"] == "Demo", answer
    assert len(calls) == 1, calls
