"""One refusal, one code, whichever transport carries the request
(parityjourney): what REST refuses for the body's size, a tool call holding
the same body refuses for its size too."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from tests.conftest import Caller
from tests.mcp_support import MCP_HEADERS, messages_of, open_session
from waypost.rest.routing import BODY_LIMIT


def _task_body(size: int) -> dict[str, Any]:
    """A task body whose compact JSON is exactly `size` bytes, valid but for
    its length: criteria of 4,096 characters and a description that pads."""
    body: dict[str, Any] = {"title": "Big", "description": "", "acceptance_criteria": []}
    while len(msgspec.json.encode(body)) + 4_096 + 3 < size - 1_024:
        body["acceptance_criteria"].append("c" * 4_096)
    body["description"] = "d" * (size - len(msgspec.json.encode(body)))
    assert len(msgspec.json.encode(body)) == size
    return body


async def _tool_call(caller: Caller, session_id: str, name: str, arguments: Any) -> Any:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}  # fmt: skip
    headers = {**caller.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    r = await caller.client.post("/mcp", content=json.dumps(call), headers=headers)
    assert r.status_code == 200, r.text
    (answer,) = messages_of(r)
    return answer["result"]


@pytest.mark.parametrize(
    ("fault", "field"),
    [
        ({"priority": "high"}, "priority"),  # a type the schema refuses
        ({"kind": "Feature"}, "kind"),  # a pattern
        ({"bogus": 1}, "bogus"),  # an unknown argument
    ],
)
async def test_a_body_over_the_rest_limit_is_payload_too_large_over_mcp_as_over_rest(
    human: Caller, project: str, fault: dict[str, Any], field: str
) -> None:
    """REST refuses a body over 256 KiB `413 payload_too_large` before it
    reads a field (so does GraphQL past its own 64 KiB). The same body as a
    tool's arguments (mcp.md: "held to REST's 256 KiB (payload_too_large)
    over both transports"; "of several bad arguments the one named is the
    one REST names for the same call, in REST's order of checks") was
    refused `invalid_request` naming the field, so an agent shortened
    nothing and fixed a field, to meet the size refusal on its next call."""
    body = _task_body(BODY_LIMIT + 1 - len(msgspec.json.encode(fault)) + 1)
    body.update(fault)
    raw = msgspec.json.encode(body)
    assert len(raw) > BODY_LIMIT
    r = await human.client.post(
        f"/api/v1/projects/{project}/tasks",
        content=raw,
        headers={**human.headers("parity-1"), "Content-Type": "application/json"},
    )
    assert r.status_code == 413, r.text
    assert r.json()["error"]["code"] == "payload_too_large"

    session_id = await open_session(human)
    result = await _tool_call(human, session_id, "task_create", {"project": project, **body})
    assert result["isError"] is True
    envelope = json.loads(result["content"][0]["text"].splitlines()[-1])
    # observed: invalid_request with details.field == field
    assert envelope["error"]["code"] == "payload_too_large", (field, envelope)


@pytest.mark.parametrize("sent", ["task_id", "expected_revision", "source_task_id"])
async def test_a_graphql_refusal_quotes_the_id_as_it_was_sent(
    human: Caller, project: str, sent: str
) -> None:
    """An id is 1-64 of `A-Za-z0-9_-`, so `task_id` is one a client may send.
    REST and the MCP tool quote it back as sent ("no task 'task_id' in this
    project"); GraphQL's userError rewrote it as if it were a field name
    ("no task 'taskId' in this project", schema/errors.in_graphql_words):
    the client is told about an id it never sent."""
    body = {"kind": "fact", "title": "t", "body": "b", "scope": {"task_ids": [sent]}}
    r = await human.post(f"/api/v1/projects/{project}/knowledge", body)
    assert r.status_code == 400, r.text
    rest_message = r.json()["error"]["message"]
    assert f"'{sent}'" in rest_message, rest_message

    answer = await human.gql(
        "mutation($i: KnowledgeCreateInput!) { knowledgeCreate(input: $i) {"
        " knowledge { id } userErrors { code field message } } }",
        {"i": {"idempotencyKey": "parity-gql-1", "projectId": project, "kind": "FACT",
               "title": "t", "body": "b", "scope": {"taskIds": [sent]}}},
    )  # fmt: skip
    (error,) = answer["data"]["knowledgeCreate"]["userErrors"]
    assert (error["code"], error["field"]) == ("invalid_request", "scope.taskIds[0]")
    # observed: "no task 'taskId' in this project" for sent == "task_id"
    assert error["message"] == rest_message, error["message"]


def test_an_apostrophe_opens_no_quote_in_graphql_words() -> None:
    """Only quoted values stay as sent: a possessive's apostrophe is no quote,
    and the field after it is still named as GraphQL names it."""
    from waypost.schema.errors import in_graphql_words

    said = in_graphql_words(
        "the task's acceptance_criteria isn't 'acceptance_criteria'", "acceptance_criteria"
    )
    assert said == "the task's acceptanceCriteria isn't 'acceptance_criteria'"


async def test_a_body_of_exactly_the_rest_limit_is_no_payload_too_large_over_mcp(
    human: Caller, project: str
) -> None:
    """REST refuses a body only past BODY_LIMIT; the tool's check counts the
    body REST would get: neither the path's arguments (`project`) nor the
    `idempotency_key` (a header over REST) are in it."""
    body = _task_body(BODY_LIMIT)
    raw = msgspec.json.encode(body)
    assert len(raw) == BODY_LIMIT
    r = await human.client.post(
        f"/api/v1/projects/{project}/tasks",
        content=raw,
        headers={**human.headers("parity-exact-rest"), "Content-Type": "application/json"},
    )
    assert r.status_code != 413, r.text
    session_id = await open_session(human)
    arguments = {"project": project, "idempotency_key": "parity-exact-mcp", **body}
    result = await _tool_call(human, session_id, "task_create", arguments)
    said = result["content"][0]["text"]
    if r.status_code >= 400:
        envelope = json.loads(said.splitlines()[-1])
        assert envelope["error"]["code"] == r.json()["error"]["code"], said[:300]
    else:
        assert result.get("isError") is not True, said[:300]
