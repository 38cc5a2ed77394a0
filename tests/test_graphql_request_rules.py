"""POST /graphql refuses malformed requests as invalid_request before anything
runs (schema/request_rules.py): each of these was once a 500 or ran the wrong
operation."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.conftest import Caller


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


async def _post(caller: Caller, body: bytes) -> tuple[int, dict[str, Any]]:
    headers = {**caller.headers(), "Content-Type": "application/json"}
    r = await caller.client.post("/graphql", content=body, headers=headers)
    return r.status_code, r.json()


def _refused(status: int, answer: dict[str, Any], words: str) -> None:
    assert status == 400, answer
    [error] = answer["errors"]
    assert error["extensions"] == {"code": "invalid_request"}, error
    assert words in error["message"], error


@pytest.mark.parametrize(
    "body", [b'"x"', b"null", b"5", b"true", b"1.5", b'[{"query": "{ me { name } }"}]']
)
async def test_a_body_that_is_not_an_object_is_400(human: Caller, body: bytes) -> None:
    _refused(*(await _post(human, body)), "must be a JSON object")


@pytest.mark.parametrize("levels", [33, 400])
async def test_deeply_nested_variables_are_400(human: Caller, levels: int) -> None:
    body = {"query": "{ me { name } }", "variables": {"a": _deep(levels)}}
    _refused(*(await _post(human, json.dumps(body).encode())), "nest more than 32")


async def test_variables_nested_near_the_interpreters_recursion_limit_are_400(
    human: Caller,
) -> None:
    """900 levels: the JSON decoder's own recursion meets Python's limit or
    not by the depth of the stack it runs on (under coverage it did), so the
    refusal is the body's nesting or the variables': a 400 either way."""
    body = {"query": "{ me { name } }", "variables": {"a": _deep(900)}}
    status, answer = await _post(human, json.dumps(body).encode())
    assert status == 400, answer
    [error] = answer["errors"]
    assert error["extensions"]["code"] == "invalid_request", error
    assert re.search("nest more than 32|the body nests too deeply", error["message"]), error


async def test_variables_nested_within_the_limit_are_fine(human: Caller) -> None:
    body = {"query": "{ me { name } }", "variables": {"a": _deep(31)}}
    assert await _post(human, json.dumps(body).encode()) == (
        200,
        {"data": {"me": {"name": "alice"}}},
    )


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("query", 5, "query must be a string"),
        ("variables", [1], "variables must be an object"),
        ("operationName", 7, "operationName must be a string"),
        ("variable", {"a": 1}, "unknown field 'variable'"),  # misspelt: it was ignored
    ],
)
async def test_fields_of_the_wrong_type_are_400(
    human: Caller, field: str, value: object, words: str
) -> None:
    body = {"query": "{ me { name } }", field: value}
    _refused(*(await _post(human, json.dumps(body).encode())), words)


async def test_a_subscription_over_http_is_400_not_a_fault(human: Caller, project: str) -> None:
    body = {"query": 'subscription { projectEvents(projectId: "demo") { sequence } }'}
    _refused(*(await _post(human, json.dumps(body).encode())), "over WebSocket")


async def test_several_operations_need_an_operation_name(human: Caller, project: str) -> None:
    """GraphQL's GetOperation: Strawberry alone ran the first operation (here a
    mutation that created a project)."""
    query = (
        'mutation M { projectCreate(input: {idempotencyKey: "k", id: "multi", name: "x"})'
        " { project { restId } } } query Q { me { name } }"
    )
    _refused(*(await _post(human, json.dumps({"query": query}).encode())), "operation name")
    assert (await human.get("/api/v1/projects/multi")).status_code == 404
    named = json.dumps({"query": query, "operationName": "Q"}).encode()
    assert await _post(human, named) == (200, {"data": {"me": {"name": "alice"}}})


async def test_the_four_request_parameters_are_accepted(human: Caller) -> None:
    body = {"query": "query Me { me { name } }", "variables": {}, "operationName": "Me",
            "extensions": {}}  # fmt: skip
    assert await _post(human, json.dumps(body).encode()) == (
        200,
        {"data": {"me": {"name": "alice"}}},
    )


async def test_global_ids_keep_to_the_id_alphabet(human: Caller) -> None:
    """Section 2: ids are 1-64 of A-Za-z0-9_- (base64 padding added `=`)."""
    found = (await human.gql("{ me { id } }"))["data"]["me"]["id"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", found), found
    again = await human.gql(
        "query ($id: ID!) { node(id: $id) { id } }", {"id": found + "=" * (-len(found) % 4)}
    )
    assert again["data"]["node"]["id"] == found  # a padded id from before still resolves
