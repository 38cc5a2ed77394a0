"""Introspection: one `__schema` per operation, and operations that only
introspect are answered from a memo keyed by text, name and variables (or
built on a worker thread), never from another operation's answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from graphql import get_introspection_query, parse

from tests.conftest import Caller
from waypost.schema import introspection, schema
from waypost.schema.limits import check_limits

TYPE_NAME = "query T($n: String!) { __type(name: $n) { name fields { name } } }"


async def gql(caller: Caller, body: dict[str, Any]) -> dict[str, Any]:
    r = await caller.client.post("/graphql", json=body, headers=caller.headers())
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()
    return data


def test_one_schema_field_per_operation() -> None:
    two = "{ a: __schema { queryType { name } } b: __schema { queryType { name } } }"
    [error] = check_limits(schema._schema, parse(two))
    assert "__schema under 2 response keys" in error.message
    # fields under one key merge into one: it runs once
    merged = "{ __schema { queryType { name } } __schema { types { name } } }"
    assert check_limits(schema._schema, parse(merged)) == []
    # counted through fragments and inline fragments
    spread = """query Q { ...F ... on Query { t: __schema { queryType { name } } } }
        fragment F on Query { s: __schema { queryType { name } } }"""
    [error] = check_limits(schema._schema, parse(spread))
    assert "'Q' selects __schema under 2 response keys" in error.message


async def test_aliased_schema_fields_are_refused_as_invalid_request(human: Caller) -> None:
    query = get_introspection_query()
    fragments = query[query.index("fragment") :]
    inner = query[query.index("__schema") : query.index("fragment")].rstrip().rstrip("}")
    aliased = "query Q { " + " ".join(f"a{i}: {inner}" for i in range(3)) + " }\n" + fragments
    data = await gql(human, {"query": aliased})
    assert data.get("data") is None
    [error] = data["errors"]
    assert error["extensions"]["code"] == "invalid_request"
    assert "3 response keys" in error["message"]


async def test_the_standard_query_is_answered_alike_and_kept(human: Caller) -> None:
    query = get_introspection_query()
    first = await gql(human, {"query": query})
    assert "errors" not in first
    assert first["data"]["__schema"]["queryType"]["name"] == "Query"
    kept = [key for key in introspection._RESULTS.items if key[0] == query]  # type: ignore[index]
    assert len(kept) == 1
    again = await gql(human, {"query": query})
    assert again == first


async def test_answers_differ_by_variables_and_operation(human: Caller) -> None:
    task = await gql(human, {"query": TYPE_NAME, "variables": {"n": "Task"}})
    project = await gql(human, {"query": TYPE_NAME, "variables": {"n": "Project"}})
    assert task["data"]["__type"]["name"] == "Task"
    assert project["data"]["__type"]["name"] == "Project"
    assert (await gql(human, {"query": TYPE_NAME, "variables": {"n": "Task"}})) == task
    two = 'query A { __type(name: "Task") { name } } query B { __type(name: "Decision") { name } }'
    a = await gql(human, {"query": two, "operationName": "A"})
    b = await gql(human, {"query": two, "operationName": "B"})
    assert a["data"]["__type"]["name"] == "Task"
    assert b["data"]["__type"]["name"] == "Decision"


async def test_an_unknown_type_answers_null_and_errors_are_not_shared(human: Caller) -> None:
    data = await gql(human, {"query": TYPE_NAME, "variables": {"n": "Nope"}})
    assert data == {"data": {"__type": None}}
    # a missing variable is the request's own error, not a kept answer
    missing = await gql(human, {"query": TYPE_NAME})
    assert missing.get("data") is None and missing["errors"]
    data = await gql(human, {"query": TYPE_NAME, "variables": {"n": "Nope"}})
    assert data == {"data": {"__type": None}}


async def test_root_fragments_are_followed(human: Caller) -> None:
    query = """query Q { ...F ... on Query { __typename } }
        fragment F on Query { __type(name: "Task") { name } }"""
    data = await gql(human, {"query": query})
    assert data == {"data": {"__type": {"name": "Task"}, "__typename": "Query"}}
    assert [key for key in introspection._RESULTS.items if key[0] == query]  # type: ignore[index]
    data = await gql(human, {"query": query.replace("__typename }", "me { name } }")})
    assert data["data"]["__type"] == {"name": "Task"} and data["data"]["me"]["name"]


async def test_a_query_that_also_reads_data_is_not_kept(human: Caller) -> None:
    query = '{ me { name } __type(name: "Task") { name } }'
    data = await gql(human, {"query": query})
    assert data["data"]["__type"] == {"name": "Task"} and data["data"]["me"]["name"]
    assert not [key for key in introspection._RESULTS.items if key[0] == query]  # type: ignore[index]


async def test_a_result_past_the_cached_size_is_answered_not_kept(human: Caller) -> None:
    # some 9,300 objects: within the execution limit, past what is kept
    one = (
        '__type(name: "Task") { fields { name args { name type { name } }'
        " type { name ofType { name fields { name type { name ofType { name } } } } } } }"
    )
    query = "{ " + " ".join(f"a{i}: {one}" for i in range(30)) + " }"
    data = await gql(human, {"query": query})
    assert data["data"]["a29"]["fields"]
    assert not [key for key in introspection._RESULTS.items if key[0] == query]  # type: ignore[index]


def _counted_builds(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The introspection builds run from here on, each noted as it starts."""
    builds: list[object] = []
    real = introspection.off_loop

    async def counted(work: Any, *args: object, lane: str) -> Any:
        builds.append(work)
        return await real(work, *args, lane=lane)

    monkeypatch.setattr(introspection, "off_loop", counted)
    return builds


async def test_requests_for_one_new_text_share_one_build(
    human: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten copies of a new text that arrived together were built one after
    another on the lane (120 ms each, the tenth answered after 1.65 s)."""
    builds = _counted_builds(monkeypatch)
    query = get_introspection_query().replace("query IntrospectionQuery", "query Shared")
    answers = await asyncio.gather(*(gql(human, {"query": query}) for _ in range(10)))
    assert len(builds) == 1
    assert all(a == answers[0] for a in answers) and "errors" not in answers[0]
    assert introspection._BUILDING == {}


async def test_sixteen_texts_are_kept_and_the_least_recently_used_let_go(
    human: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/graphql.md: an introspection answer is kept (16 texts are kept,
    the least recently used are dropped); the next request with the same
    text is answered from what was kept, without a build."""
    builds = _counted_builds(monkeypatch)
    texts = [f'{{ lru{i}: __type(name: "Task") {{ name }} }}' for i in range(17)]
    for i, text in enumerate(texts):
        assert await gql(human, {"query": text}) == {"data": {f"lru{i}": {"name": "Task"}}}
    assert len(builds) == 17
    kept = {key[0] for key in introspection._RESULTS.items}  # type: ignore[index]
    assert len(introspection._RESULTS.items) == 16
    assert texts[0] not in kept and set(texts[1:]) <= kept
    await gql(human, {"query": texts[16]})  # kept: no build
    assert len(builds) == 17
    await gql(human, {"query": texts[0]})  # let go: built again
    assert len(builds) == 18
