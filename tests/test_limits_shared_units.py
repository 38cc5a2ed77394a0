"""Bounds shared by two transports are measured in one unit (limitsjourney).

docs/graphql.md, "Limits": the body limit is 64 KiB, "over WebSocket: a
subscribe's payload, the same document and variables". POST /graphql counts
the bytes of the body as the client sent them; a subscribe's payload is
counted after re-encoding it as compact UTF-8 JSON, so the same document and
variables, sent in the same JSON text, are refused over HTTP and run over the
socket (a variable of 15,000 emoji, escaped as JSON's \\uXXXX pairs by any
client whose encoder escapes non-ASCII, Python's json and `requests`
included: 180,085 bytes as sent, 60,081 once re-encoded)."""

from __future__ import annotations

import asyncio
import json

from tests.conftest import Caller, Service
from tests.live_support import graphql_ws, running
from tests.tasks_support import make_task, task_path
from waypost.http.auth import GRAPHQL_BODY_LIMIT

QUERY = "query ($id: String!) { project(id: $id) { id } }"
WIDE = "\U0001f600" * 15_000  # 4 bytes each as UTF-8, 12 as an escaped surrogate pair


def _as_sent() -> str:
    """The payload as json.dumps writes it (non-ASCII escaped), well past the limit."""
    text = json.dumps({"query": QUERY, "variables": {"id": WIDE}})
    assert len(text.encode()) > 2 * GRAPHQL_BODY_LIMIT
    return text


async def test_a_post_of_the_escaped_payload_is_413(human: Caller, project: str) -> None:
    """The HTTP half (holds today): the body as sent is over 64 KiB."""
    headers = {**human.headers(), "Content-Type": "application/json"}
    r = await human.client.post("/graphql", content=_as_sent().encode(), headers=headers)
    assert r.status_code == 413, r.text[:200]
    assert r.json()["errors"][0]["extensions"]["code"] == "payload_too_large"


async def test_a_subscribe_of_the_same_payload_is_refused_too(
    service: Service, human: Caller, project: str
) -> None:
    """The socket half: the same payload text, in a subscribe frame (well
    under the 1 MiB frame bound), is to be refused for its operation with
    `payload_too_large`, as docs/graphql.md's table says; it runs instead."""
    frame = '{"id": "1", "type": "subscribe", "payload": ' + _as_sent() + "}"
    async with running(service) as base, graphql_ws(base, human.token) as client:
        await client.ws.send(frame)
        message = await asyncio.wait_for(client.receive(), 10)
    assert message["id"] == "1" and message["type"] == "error", str(message)[:300]
    assert message["payload"][0]["extensions"]["code"] == "payload_too_large"


# -- a bound no test pinned (limitsjourney: DETAIL_MAX = 4097 passed
# test_tasks_publication, test_tasks_crud, test_tasks_fuzz, test_mcp_arguments,
# test_openapi*, test_docs and the gate and publication suites) -------------

EMOJI = "\U0001f600"  # one code point, four bytes, two UTF-16 units
RESULT = """mutation ($i: TaskPublicationResultInput!) {
  taskPublicationResult(input: $i) {
    task { publication { result { detail } } }
    userErrors { code field }
  }
}"""


async def test_a_publication_detail_is_4096_characters_at_most(human: Caller, project: str) -> None:
    """docs/tasks.md: publication `detail` at most 4,096 characters (code
    points: 4,096 emoji are taken, stored as sent; one more is refused naming
    `detail` and records nothing), over REST and GraphQL alike."""
    task = await make_task(human)
    r = await human.post(task_path(task["id"], "publication/prepare"))
    assert r.status_code == 200, r.text
    result = task_path(task["id"], "publication/result")
    r = await human.post(result, {"outcome": "failed", "detail": EMOJI * 4097}, key="over")
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "detail", r.text[:200]
    assert (await human.get(task_path(task["id"]))).json()["publication"]["result"] is None
    data = await human.gql(RESULT, {"i": {"idempotencyKey": "gql-over", "projectId": project,
                                          "taskId": task["id"], "outcome": "FAILED",
                                          "detail": EMOJI * 4097}})  # fmt: skip
    assert data["data"]["taskPublicationResult"]["userErrors"] == [
        {"code": "invalid_request", "field": "detail"}
    ]
    r = await human.post(result, {"outcome": "failed", "detail": EMOJI * 4096}, key="at")
    assert r.status_code == 200, r.text
    stored = (await human.get(task_path(task["id"]))).json()["publication"]["result"]
    assert stored["detail"] == EMOJI * 4096


# -- two more (limitsjourney: CRITERIA_MAX = 101 and DEPENDENCIES_MAX = 101
# passed every tests/test_tasks_*.py, test_openapi*, test_schemathesis,
# test_mcp*, test_bodies, test_docs and test_doc_examples) -------------------

CREATE = """mutation ($i: TaskCreateInput!) {
  taskCreate(input: $i) { task { restId } userErrors { code field } }
}"""


async def test_a_task_holds_100_acceptance_criteria_at_most(human: Caller, project: str) -> None:
    """docs/tasks.md: `acceptance_criteria` at most 100 entries: 100 are
    taken as sent, 101 refused naming the list, over REST and GraphQL."""
    tasks = f"/api/v1/projects/{project}/tasks"
    criteria = [f"criterion {i}" for i in range(101)]
    r = await human.post(tasks, {"title": "t", "acceptance_criteria": criteria}, key="c101")
    assert r.status_code == 400, r.text[:200]
    assert r.json()["error"]["details"]["field"] == "acceptance_criteria"
    given = {"idempotencyKey": "g101", "projectId": project, "title": "t"}
    data = await human.gql(CREATE, {"i": {**given, "acceptanceCriteria": criteria}})
    assert data["data"]["taskCreate"]["userErrors"] == [
        {"code": "invalid_request", "field": "acceptanceCriteria"}
    ]
    r = await human.post(tasks, {"title": "t", "acceptance_criteria": criteria[:100]}, key="c100")
    assert r.status_code == 201, r.text[:200]
    assert r.json()["acceptance_criteria"] == criteria[:100]


async def test_a_task_depends_on_100_tasks_at_most(human: Caller, project: str) -> None:
    """docs/tasks.md: `depends_on` at most 100 task ids: 100 are taken, 101
    refused naming the list, over REST and GraphQL."""
    tasks = f"/api/v1/projects/{project}/tasks"
    ids = [(await make_task(human, f"dependency {i}"))["id"] for i in range(101)]
    r = await human.post(tasks, {"title": "t", "depends_on": ids}, key="d101")
    assert r.status_code == 400, r.text[:200]
    assert r.json()["error"]["details"]["field"] == "depends_on"
    data = await human.gql(CREATE, {"i": {"idempotencyKey": "g-d101", "projectId": project,
                                          "title": "t", "dependsOn": ids}})  # fmt: skip
    assert data["data"]["taskCreate"]["userErrors"] == [
        {"code": "invalid_request", "field": "dependsOn"}
    ]
    r = await human.post(tasks, {"title": "t", "depends_on": ids[:100]}, key="d100")
    assert r.status_code == 201, r.text[:200]
    assert r.json()["depends_on"] == ids[:100]
