"""Heavy GraphQL documents are parsed once, off the event loop, and their
parsing and validation run one at a time (schema/documents.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from graphql import DocumentNode, GraphQLError, parse

from tests.conftest import Caller
from waypost.schema import documents, limits
from waypost.schema.documents import INLINE_PARSE_CHARS


def heavy_document(salt: str, spreads: int = 40) -> str:
    """Fragment spreads of one field, and a long comment: past the length
    parsed on the loop, and valid (within the validation complexity limit)."""
    body = " ".join(f"...P{i}" for i in range(spreads))
    fragments = " ".join(f"fragment P{i} on Principal {{ name }}" for i in range(spreads))
    padding = "#" + "x" * INLINE_PARSE_CHARS + "\n"
    return f"{padding}query Heavy{salt} {{ me {{ {body} }} }} {fragments}"


async def test_a_long_document_is_parsed_once_and_off_the_loop(
    human: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = heavy_document("Once")
    assert len(query) > INLINE_PARSE_CHARS
    parsed_on: list[int] = []

    def observed_parse(text: str, **options: Any) -> DocumentNode:
        if text == query:
            parsed_on.append(threading.get_ident())
        return parse(text, **options)

    monkeypatch.setattr(documents, "parse", observed_parse)
    for _ in range(2):
        response = await human.client.post(
            "/graphql", json={"query": query}, headers=human.headers()
        )
        assert response.status_code == 200, response.text
        assert response.json()["data"]["me"]["name"]
    # once for the request rules and the pipeline together, and not again
    # for the same text; on a worker thread, not the loop's
    assert len(parsed_on) == 1
    assert parsed_on[0] != threading.get_ident()


async def test_a_short_document_is_parsed_on_the_loop_without_waiting(
    human: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = "query ShortOne { me { name } }"
    parsed_on: list[int] = []

    def observed_parse(text: str, **options: Any) -> DocumentNode:
        if text == query:
            parsed_on.append(threading.get_ident())
        return parse(text, **options)

    monkeypatch.setattr(documents, "parse", observed_parse)
    response = await human.client.post("/graphql", json={"query": query}, headers=human.headers())
    assert response.json()["data"]["me"]["name"]
    assert parsed_on == [threading.get_ident()]


async def test_heavy_documents_are_validated_one_at_a_time_off_the_loop(
    human: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_validate = limits.validate_document
    running = 0
    most = 0
    threads: set[int] = set()
    lock = threading.Lock()

    def observed_validate(*args: Any) -> Any:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            threads.add(threading.get_ident())
        try:
            time.sleep(0.02)  # widens the window in which two could overlap
            return real_validate(*args)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(limits, "validate_document", observed_validate)

    async def send(salt: str) -> Any:
        response = await human.client.post(
            "/graphql", json={"query": heavy_document(salt)}, headers=human.headers()
        )
        return response.json()

    answers = await asyncio.gather(*(send(f"N{n}") for n in range(6)))
    assert all(a["data"]["me"]["name"] for a in answers), answers
    assert most == 1
    assert threading.get_ident() not in threads


async def test_a_syntax_error_in_a_long_document_is_answered_with_its_location(
    human: Caller,
) -> None:
    query = heavy_document("Broken") + " }"
    for _ in range(2):  # the second answer comes from the memo
        response = await human.client.post(
            "/graphql", json={"query": query}, headers=human.headers()
        )
        error = response.json()["errors"][0]
        assert error["message"].startswith("Syntax Error")
        assert error["locations"] == [{"line": 2, "column": len(query.splitlines()[1])}]
        assert error["extensions"]["code"] == "invalid_request"
    # the memo's error is never raised itself: each raise would chain that
    # request's frames (its whole execution context) onto its traceback
    cached = documents._DOCUMENTS.get(query)
    assert isinstance(cached, GraphQLError) and cached.__traceback__ is None
