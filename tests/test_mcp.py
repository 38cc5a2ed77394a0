"""The MCP server over both transports, with the official MCP client, against
a real `waypost serve`: Streamable HTTP at /mcp, and `waypost mcp` over stdio."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCMessage

from tests.mcp_support import TRANSPORTS, Waypost, call, refused, session, text
from tests.serve_support import START, start, write_clock
from waypost.resolvers.core.receipts import Idempotency

pytestmark = pytest.mark.slow

# the tools that name no project (who you are, which projects there are)
PROJECTLESS = {"me", "project_list"}
ROUTE_TOOLS = {
    *PROJECTLESS, "context", "task_submissions", "task_checkpoints", "policy_edit",
    "policy", "policy_history", "knowledge_record", "knowledge_correct", "knowledge_feedback",
    "knowledge_search", "knowledge_get",
    "task_list", "task_get", "task_create", "task_edit", "task_claim", "task_checkpoint",
    "task_renew", "task_submit", "task_release", "task_complete", "task_recover",
    "publication_prepare", "publication_result", "publication_finalize", "decision_open",
    "decision_get", "decision_list", "decision_answer", "decision_reopen", "decision_wait",
    "digest",
}  # fmt: skip
MUTATING = {
    "policy_edit", "knowledge_record", "knowledge_correct", "knowledge_feedback",
    "task_create", "task_edit", "task_claim", "task_checkpoint", "task_renew", "task_submit",
    "task_release", "task_recover", "task_complete", "publication_prepare", "publication_result",
    "publication_finalize", "decision_open", "decision_answer", "decision_reopen",
}  # fmt: skip


@contextlib.contextmanager
def own_waypost(directory: Path, *extra: str) -> Iterator[Waypost]:
    """`waypost serve` on a database of its own, its clock file at START."""
    clock = directory / "clock"
    clock.write_text(START)
    srv = start(directory / "waypost.db", clock, 0, *extra)
    try:
        srv.wait_for(r"created human principal 'admin'; its token \(shown once\)")
        token = srv.wait_for(r"^\s+(wp_\S+)$").group(1)
        srv.wait_for(r"listening on http://")
        yield Waypost(srv, token)
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def waypost(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Waypost]:
    with own_waypost(tmp_path_factory.mktemp("mcp")) as running:
        yield running


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_every_tool_is_listed_with_a_description_and_the_rest_schema(
    waypost: Waypost, transport: str
) -> None:
    agent = waypost.principal("agent", f"lister-{transport}")
    async with session(transport, waypost.url, agent) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
    assert set(tools) == ROUTE_TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 30
        schema = tool.inputSchema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert ("project" in schema["required"]) == (tool.name not in PROJECTLESS)
        assert ("idempotency_key" in schema["properties"]) == (tool.name in MUTATING)
        assert "idempotency_key" not in schema["required"]
    # the REST body's limits, enums and required fields, as the service enforces them
    record = tools["knowledge_record"].inputSchema
    assert record["properties"]["title"]["maxLength"] == 200
    assert record["properties"]["kind"]["enum"] == ["checkpoint", "fact", "lesson",
                                                    "rejected_approach"]  # fmt: skip
    assert record["properties"]["tags"]["maxItems"] == 32
    assert set(record["required"]) == {"project", "kind", "title", "body"}
    submit = tools["task_submit"].inputSchema
    assert submit["properties"]["lessons"]["maxItems"] == 50
    # every argument of the tool an agent calls before each step says what it
    # does (contextjourney: 7 of 9 said nothing)
    context = tools["context"].inputSchema["properties"]
    assert all(p.get("description") for p in context.values()), context
    revision = submit["properties"]["expected_revision"]  # optional, as on REST
    assert revision["anyOf"][0]["minimum"] == 1 and "expected_revision" not in submit["required"]
    lesson = submit["properties"]["lessons"]["items"]
    assert set(lesson["properties"]["provenance"]["properties"]) == {"summary", "source_uri"}
    opened = tools["decision_open"].inputSchema["properties"]
    assert opened["required_actor"]["enum"] == ["agent", "either", "human"]
    assert opened["options"]["minItems"] == 2 and opened["options"]["maxItems"] == 20
    # what the REST document states beyond msgspec's schema: an argument of
    # 2**63 passed the tool's schema and was refused by the service
    feedback = tools["knowledge_feedback"].inputSchema["properties"]["expected_revision"]
    assert feedback["maximum"] == 2**63 - 1
    listed = tools["task_list"].inputSchema["properties"]["q"]
    assert [b.get("maxLength") for b in listed["anyOf"] if b.get("type") == "string"] == [1024]
    wait = tools["decision_wait"].inputSchema["properties"]["timeout_seconds"]
    assert wait["minimum"] == 1 and wait["maximum"] == 240
    assert "$ref" not in json.dumps([t.inputSchema for t in tools.values()])


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_agent_loop_end_to_end(waypost: Waypost, transport: str) -> None:
    project = waypost.project(f"loop-{transport}")
    task_id = waypost.task(project)
    agent = waypost.principal("agent", f"looper-{transport}")
    async with session(transport, waypost.url, agent) as s:
        packet = await call(s, "context", project=project, q="billing")
        assert packet["policy"]["revision"] == 1
        assert [item["id"] for item in packet["items"]] == [task_id]
        policy = await call(s, "policy", project=project)
        assert policy["revision"] == 1

        claimed = await call(s, "task_claim", project=project)
        assert claimed["task"]["id"] == task_id and claimed["lease"]["session_id"]
        session_id = claimed["lease"]["session_id"]

        lesson = await call(s, "knowledge_record", project=project, kind="fact",
                            title="Billing rows are partitioned", body="By month.")  # fmt: skip
        assert lesson["provenance"]["actor_session_id"] == session_id

        decision = await call(
            s, "decision_open", project=project, task_ids=[task_id],
            question="May the migration run against staging?", options=["Proceed", "Stop"],
            rationale="It rewrites the billing table.", required_actor="human",
            environment="staging",
        )  # fmt: skip
        assert decision["status"] == "pending"
        # checkpoints stay open while the gate is shut (service contract section 5)
        await call(s, "task_checkpoint", project=project, task_id=task_id, note="halfway")

        answer = {
            "expected_generation": 1,
            "disposition": "allow",
            "answer": "Proceed",
            "rationale": "Rollback owner recorded.",
            "conditions_confirmed": True,
        }
        answer_path = f"/api/v1/projects/{project}/decisions/{decision['id']}/answer"
        if transport == "stdio" and not _streams_events(waypost, project):
            # over stdio the wait rides the REST event stream; without it the tool
            # says so instead of polling
            message = await refused(s, "decision_wait", project=project,
                                    decision_id=decision["id"])  # fmt: skip
            assert "decision_get" in message
            assert waypost.rest("POST", answer_path, answer).status_code == 200
        else:
            waiting = asyncio.create_task(
                call(
                    s,
                    "decision_wait",
                    project=project,
                    decision_id=decision["id"],
                    timeout_seconds=60,
                )
            )
            await asyncio.sleep(1.0)
            assert not waiting.done(), "decision_wait returned before anyone answered"
            r = waypost.rest("POST", answer_path, answer)
            assert r.status_code == 200, r.text
            waited = await asyncio.wait_for(waiting, 20)
            assert waited["outcome"] == "answered"
            assert waited["decision"]["status"] == "allowed"
            assert waited["decision"]["work_allowed"] is True

        submitted = await call(
            s, "task_submit", project=project, task_id=task_id, summary="Migrated.",
            lessons=[{"kind": "lesson", "title": "Run it in staging first", "body": "It works."}],
        )  # fmt: skip
        assert submitted["task"]["status"] == "submitted"
        [recorded] = submitted["lessons"]
        assert recorded["provenance"]["source_task_id"] == task_id
        assert recorded["provenance"]["source_submission_id"] == submitted["submission"]["id"]


def _streams_events(waypost: Waypost, project: str) -> bool:
    with httpx.stream("GET", f"{waypost.url}/api/v1/projects/{project}/events/stream",
                      headers={"Authorization": f"Bearer {waypost.admin_token}"}) as r:  # fmt: skip
        return r.status_code == 200


def _gated(waypost: Waypost, name: str) -> tuple[str, str, str, str]:
    """A new project with a task and a human-required decision pending on it:
    (project, task id, the project's decisions path, decision id)."""
    project = waypost.project(name)
    task_id = waypost.task(project)
    decisions = f"/api/v1/projects/{project}/decisions"
    r = waypost.rest("POST", decisions, {
        "question": "Go?", "options": ["Yes", "No"], "rationale": "Risky.",
        "required_actor": "human", "task_ids": [task_id], "environment": "prod"})  # fmt: skip
    return project, task_id, decisions, str(r.json()["id"])


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_claim_behind_a_decision_names_it_and_says_to_wait(
    waypost: Waypost, transport: str
) -> None:
    project, task_id, _, decision_id = _gated(waypost, f"gate-{transport}")
    agent = waypost.principal("agent", f"gated-{transport}")
    async with session(transport, waypost.url, agent) as s:
        message = await refused(s, "task_claim", project=project, task_id=task_id)
    assert message.startswith("decision_required")
    assert decision_id in message and "decision_wait" in message
    assert "Traceback" not in message
    envelope = json.loads(message.splitlines()[-1])
    assert envelope["error"]["details"]["decision_ids"] == [decision_id]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_claim_behind_a_stale_decision_says_to_reopen_and_the_agent_can(
    waypost: Waypost, transport: str
) -> None:
    """The refusal said to wait for an answer, decision_wait returned `stale`
    at once, and no tool could reopen the decision: a dead end."""
    project, task_id, decisions, decision_id = _gated(waypost, f"stale-{transport}")
    answer = {"disposition": "allow", "answer": "Yes", "rationale": "Fine.",
              "conditions_confirmed": True}  # fmt: skip
    answer_path = f"{decisions}/{decision_id}/answer"
    assert waypost.rest("POST", answer_path, {**answer, "expected_generation": 1}).is_success
    edit = {"expected_revision": 1, "description": "Now with a schema change."}
    assert waypost.rest("PATCH", f"/api/v1/projects/{project}/tasks/{task_id}", edit).is_success
    agent = waypost.principal("agent", f"stale-{transport}")
    async with session(transport, waypost.url, agent) as s:
        message = await refused(s, "task_claim", project=project, task_id=task_id)
        assert message.startswith("decision_required") and "decision_reopen" in message
        # and where to read what changed, for the reopen's rationale (policyjourney)
        assert "task_get and policy_history show what changed" in message, message
        details = json.loads(message.splitlines()[-1])["error"]["details"]
        assert details["reopen"] == [decision_id]
        reopened = await call(s, "decision_reopen", project=project, decision_id=decision_id,
                              expected_generation=1, rationale="The task changed.")  # fmt: skip
        assert (reopened["generation"], reopened["status"]) == (2, "pending")
        assert waypost.rest("POST", answer_path, {**answer, "expected_generation": 2}).is_success
        claimed = await call(s, "task_claim", project=project, task_id=task_id)
        assert claimed["task"]["id"] == task_id


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_claim_behind_a_denied_decision_says_not_to_wait(
    waypost: Waypost, transport: str
) -> None:
    """The advice said to call decision_wait and retry: the wait returned at
    once (the decision is answered, deny) and the retry was refused the same
    way, a loop without end (agentflow)."""
    project, task_id, decisions, decision_id = _gated(waypost, f"denied-{transport}")
    no = {"disposition": "deny", "answer": "No", "rationale": "Not now.",
          "expected_generation": 1}  # fmt: skip
    assert waypost.rest("POST", f"{decisions}/{decision_id}/answer", no).is_success
    agent = waypost.principal("agent", f"denied-{transport}")
    async with session(transport, waypost.url, agent) as s:
        message = await refused(s, "task_claim", project=project, task_id=task_id)
    assert message.startswith("decision_required")
    assert "deny or defer" in message and "do not wait or retry" in message
    assert "to block until it is answered" not in message
    details = json.loads(message.splitlines()[-1])["error"]["details"]
    assert (details["reason"], details["declined"]) == ("declined", [decision_id])


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_agent_answers_an_agents_decision_and_not_a_humans(
    waypost: Waypost, transport: str
) -> None:
    """No tool answered a decision: one that required an agent's answer
    could only be answered over REST or GraphQL."""
    project = waypost.project(f"answer-{transport}")
    task_id = waypost.task(project)
    agent = waypost.principal("agent", f"answerer-{transport}")
    ask = {"question": "Which index?", "options": ["btree", "hash"], "rationale": "Speed.",
           "task_ids": [task_id], "environment": "staging"}  # fmt: skip
    async with session(transport, waypost.url, agent) as s:
        for_agents = await call(s, "decision_open", project=project, required_actor="agent",
                                **ask)  # fmt: skip
        for_humans = await call(s, "decision_open", project=project, required_actor="human",
                                **ask)  # fmt: skip
        answer = {"project": project, "expected_generation": 1, "disposition": "allow",
                  "answer": "btree", "rationale": "Range scans.",
                  "conditions_confirmed": True}  # fmt: skip
        answered = await call(s, "decision_answer", decision_id=for_agents["id"], **answer)
        assert (answered["status"], answered["work_allowed"]) == ("allowed", True)
        task = await call(s, "task_get", project=project, task_id=task_id)
        assert task["blocked_by"]["decisions"] == [for_humans["id"]] and not task["ready"]
        listed = await call(s, "task_list", project=project, ready=False)
        assert [t["id"] for t in listed["items"]] == [task_id]
        message = await refused(s, "decision_answer", decision_id=for_humans["id"], **answer)
        assert message.startswith("forbidden") and "Only a human answers" in message


async def test_the_context_tool_promises_advice_only_where_the_packet_gives_it(
    waypost: Waypost,
) -> None:
    """The tool's description is all an MCP agent reads about the packet: it
    promised `next_actions` whenever "nothing matched", but a query that
    matches no task or knowledge answers `[]` while an open decision is
    listed (section 8: advice when `items` is empty or `truncated`;
    contextjourney pasted an error message and got neither)."""
    project, _task_id, _, decision_id = _gated(waypost, "advice-promise")
    agent = waypost.principal("agent", "asker")
    async with session("http", waypost.url, agent) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        packet = await call(s, "context", project=project, q="OperationalError nothingmatches")
    assert [i["id"] for i in packet["items"]] == [decision_id]
    assert packet["truncated"] is False and packet["next_actions"] == []
    said = tools["context"].description or ""
    assert "nothing matched" not in said and "`items` is empty" in said, said
    assert "decisions alone" in said, said


async def test_a_reviewing_agent_completes_another_agents_work(waypost: Waypost) -> None:
    """Under review_mode `any` an agent reviews another's work; no tool completed."""
    project = waypost.project("review-any")
    task_id = waypost.task(project)
    policy = {"expected_revision": 1, "review_mode": "any"}
    assert waypost.rest("PATCH", f"/api/v1/projects/{project}/policy", policy).is_success
    worker = waypost.principal("agent", "worker")
    reviewer = waypost.principal("agent", "reviewer")
    async with session("http", waypost.url, worker) as s:
        await call(s, "task_claim", project=project, task_id=task_id)
        await call(s, "task_submit", project=project, task_id=task_id, summary="Done.")
        message = await refused(s, "task_complete", project=project, task_id=task_id)
        assert message.startswith("forbidden")  # not the submitter
    async with session("http", waypost.url, reviewer) as s:
        done = await call(s, "task_complete", project=project, task_id=task_id)
        assert done["status"] == "done", done


async def test_a_stale_revision_names_the_current_one(waypost: Waypost) -> None:
    project = waypost.project("stale")
    agent = waypost.principal("agent", "corrector")
    async with session("http", waypost.url, agent) as s:
        record = await call(s, "knowledge_record", project=project, kind="fact", title="T",
                            body="B")  # fmt: skip
        content = {k: record[k] for k in ("title", "body", "status", "scope", "tags",
                                          "applicability")}  # fmt: skip
        provenance = {k: record["provenance"][k] for k in ("summary", "source_uri",
                      "source_task_id", "source_submission_id")}  # fmt: skip
        args = {"project": project, "knowledge_id": record["id"], **content,
                "provenance": provenance}  # fmt: skip
        await call(s, "knowledge_correct", expected_revision=1, **{**args, "body": "B2"})
        message = await refused(s, "knowledge_correct", expected_revision=1, **args)
        assert message.startswith("revision_conflict")
        assert "current revision is 2" in message and "knowledge_get" in message
        # what the advice says: read it again (the REST object), then retry
        again = await call(s, "knowledge_get", project=project, knowledge_id=record["id"])
        rest = waypost.rest("GET", f"/api/v1/projects/{project}/knowledge/{record['id']}")
        assert again == rest.json()
        assert again["revision"] == 2 and again["body"] == "B2"
        assert [r["body"] for r in again["history"]["items"]] == ["B2", "B"]
        first = await call(s, "knowledge_get", project=project, knowledge_id=record["id"], limit=1)
        older = await call(s, "knowledge_get", project=project, knowledge_id=record["id"],
                           limit=1, cursor=first["history"]["next_cursor"])  # fmt: skip
        assert [r["body"] for r in older["history"]["items"]] == ["B"]
        fixed = await call(s, "knowledge_correct", expected_revision=again["revision"], **args)
        assert fixed["revision"] == 3


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_retried_mutating_call_does_not_write_twice(
    waypost: Waypost, transport: str
) -> None:
    project = waypost.project(f"retry-{transport}")
    agent = waypost.principal("agent", f"retrier-{transport}")
    args = {"project": project, "kind": "fact", "title": "Once", "body": "Only once."}
    async with session(transport, waypost.url, agent) as s:
        # an explicit key: the agent's own retry replays, and says so as
        # REST's Idempotent-Replayed does (it could not be told from a write)
        keyed = {**args, "idempotency_key": "lesson-1"}
        results = [await s.call_tool("knowledge_record", keyed) for _ in range(2)]
        assert [r.meta for r in results] == [None, {"waypost/replayed": True}]
        first, again = (json.loads(text(r)) for r in results)
        assert again == first
        # no key: the same JSON-RPC request sent twice (a transport resend) replays too
        message = {"jsonrpc": "2.0", "id": 4242, "method": "tools/call",
                   "params": {"name": "knowledge_record", "arguments": args}}  # fmt: skip
        replies = [await _raw_request(s, message) for _ in range(2)]
        assert "_meta" not in replies[0] and replies[1].pop("_meta") == {"waypost/replayed": True}
        assert replies[0] == replies[1] and not replies[0]["isError"]
        # a different request id is a different call
        other = await call(s, "knowledge_record", **args)
        assert other["id"] != first["id"]
        # the same request id with other arguments: the advice names the request
        # id, not a key this call never sent
        changed = {**message, "params": {"name": "knowledge_record",
                                         "arguments": {**args, "title": "Twice"}}}  # fmt: skip
        reused = await _raw_request(s, changed)
        said = reused["content"][0]["text"]
        assert reused["isError"] and said.startswith("idempotency_key_reused:")
        assert "request id" in said and "use a new key" not in said
        own = await s.call_tool(
            "knowledge_record", {**args, "title": "Twice", "idempotency_key": "lesson-1"}
        )
        assert own.isError and "use a new key" in own.content[0].text  # type: ignore[union-attr]
        # the field named as the tool's argument, not REST's header
        envelope = json.loads(own.content[0].text.splitlines()[-1])  # type: ignore[union-attr]
        assert envelope["error"]["details"] == {"field": "idempotency_key"}
    assert len(waypost.events(project, "knowledge.created")) == 3


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_retry_the_schema_now_refuses_gets_its_stored_answer(
    waypost: Waypost, transport: str
) -> None:
    """A write that committed under an earlier build, retried after an upgrade
    that tightened its rules: REST replays its stored answer, and the tool
    refused it `invalid_request` (its schema was checked before the key was
    looked up), so an agent would write it again under a new key. In process
    (/mcp) it replays; `waypost mcp` cannot know the decoding of the service
    it reaches (another build's, maybe), so it keeps its schema's refusal."""
    project = waypost.project(f"upgrade-{transport}")
    human = waypost.principal("human", f"upgrader-{transport}")
    me = waypost.rest("GET", "/api/v1/me", token=human).json()["principal"]["id"]
    # the body an earlier build took: without the `body` this build requires
    earlier = {"kind": "fact", "title": "Taken before"}
    stored = {"id": "made-earlier", "note": "as an earlier build answered"}
    operation = f"POST /api/v1/projects/{project}/knowledge"
    idem = Idempotency.for_request(f"up-{transport}", operation=operation, body=earlier)
    conn = sqlite3.connect(waypost.server.db)
    with conn:
        conn.execute(
            "INSERT INTO receipts (principal_id, key, fingerprint, status, body, created_at)"
            " VALUES (?, ?, ?, 201, ?, '2026-11-29T18:00:00.000Z')",
            (me, idem.key, idem.fingerprint, json.dumps(stored)),
        )
    conn.close()
    async with session(transport, waypost.url, human) as s:
        if transport == "http":
            retry = await call(s, "knowledge_record", project=project,
                               idempotency_key=idem.key, **earlier)  # fmt: skip
            assert retry == stored
        # the same arguments under another key, or others under this key:
        # refused for what they are, in the tool's words
        tries = [(f"up-{transport}-2", "Taken before"), (idem.key, "Another")]
        if transport == "stdio":
            tries.append((idem.key, "Taken before"))
        for key, title in tries:
            said = await refused(s, "knowledge_record", project=project, idempotency_key=key,
                                 kind="fact", title=title)  # fmt: skip
            assert said.startswith("invalid_request:") and "body is required" in said
    assert waypost.events(project, "knowledge.created") == []


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_refused_call_never_reaches_another_route(waypost: Waypost, transport: str) -> None:
    """Sent on for a retry's sake, a `knowledge_correct` of project `.` and
    record `policy` reached `PATCH /api/v1/projects/knowledge/policy` over
    stdio (the URL's `.` segment dropped): another project's policy was
    rewritten by a call its tool refused."""
    if waypost.rest("GET", "/api/v1/projects/knowledge").status_code == 404:
        waypost.project("knowledge")  # one project for both transports' runs
    human = waypost.principal("human", f"retargeter-{transport}")
    async with session(transport, waypost.url, human) as s:
        said = await refused(s, "knowledge_correct", project=".", knowledge_id="policy",
                             expected_revision=1, rules="rewritten")  # fmt: skip
        assert said.startswith("invalid_request:")
    policy = waypost.rest("GET", "/api/v1/projects/knowledge/policy").json()
    assert policy["revision"] == 1 and policy["rules"] != "rewritten"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_repeated_tag_under_a_used_key_is_answered_as_rest_answers_it(
    waypost: Waypost, transport: str
) -> None:
    """REST refuses a repeated tag after it looked the key up: under a used key
    it says `422 idempotency_key_reused`. The tool refused the repeat from its
    schema first, `invalid_request`, whatever the key held."""
    project = waypost.project(f"repeats-{transport}")
    human = waypost.principal("human", f"repeater-{transport}")
    args = {"project": project, "kind": "fact", "title": "t", "body": "b"}
    async with session(transport, waypost.url, human) as s:
        await call(s, "knowledge_record", idempotency_key="rep-1", **args)
        reused = await refused(s, "knowledge_record", idempotency_key="rep-1",
                               **{**args, "body": "other", "tags": ["x", "x"]})  # fmt: skip
        assert reused.startswith("idempotency_key_reused:"), reused
        fresh = await refused(s, "knowledge_record", idempotency_key="rep-2",
                              **{**args, "tags": ["x", "x"]})  # fmt: skip
        assert fresh.startswith("invalid_request:")
        # REST's refusal, naming the repeat as REST does
        assert json.loads(fresh.splitlines()[-1])["error"]["details"]["field"] == "tags[1]"
    assert len(waypost.events(project, "knowledge.created")) == 1


async def _raw_request(s: ClientSession, message: dict[str, Any]) -> dict[str, Any]:
    """Send one JSON-RPC request with a chosen id through the client's own
    transport, as a transport that resends a request does, and read its result.

    ClientSession numbers its requests itself, so the test registers the
    response waiter under the chosen id the way `send_request` does."""
    request_id = message["id"]
    send, receive = anyio.create_memory_object_stream[Any](1)
    with send, receive:
        s._response_streams[request_id] = send
        try:
            await s._write_stream.send(SessionMessage(JSONRPCMessage.model_validate(message)))
            with anyio.fail_after(30):
                response = await receive.receive()
        finally:
            s._response_streams.pop(request_id, None)
    result: dict[str, Any] = response.result
    return result


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_agent_session_ends_when_the_mcp_session_closes(
    waypost: Waypost, transport: str
) -> None:
    project = waypost.project(f"close-{transport}")
    waypost.task(project)
    agent = waypost.principal("agent", f"closer-{transport}")
    async with session(transport, waypost.url, agent) as s:
        claimed = await call(s, "task_claim", project=project)
        session_id = claimed["lease"]["session_id"]
        r = waypost.rest("GET", "/api/v1/me", token=agent, **{"Waypost-Session": session_id})
        assert r.status_code == 200 and r.json()["session"]["ended_at"] is None
    # the server ends it as the MCP session closes; give it a moment (bounded)
    for _ in range(50):
        r = waypost.rest("GET", "/api/v1/me", token=agent, **{"Waypost-Session": session_id})
        if r.status_code == 403:
            break
        await asyncio.sleep(0.1)
    assert r.status_code == 403 and r.json()["error"]["details"]["reason"] == "session_not_live"


def test_http_without_a_valid_token_is_refused(waypost: Waypost) -> None:
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream"}
    for auth in ({}, {"Authorization": "Bearer wp_not-a-token"}):
        r = httpx.post(f"{waypost.url}/mcp", json=hello, headers={**headers, **auth})
        assert r.status_code == 401
        assert r.headers["www-authenticate"] == "Bearer"
        assert r.json()["error"]["code"] == "unauthenticated"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_official_client_cannot_connect_with_a_bad_token(
    waypost: Waypost, transport: str
) -> None:
    with pytest.raises(Exception) as raised:
        async with session(transport, waypost.url, "wp_not-a-token"):
            pass
    assert "Traceback" not in str(raised.value)


async def test_resources_are_each_projects_policy_and_digest(waypost: Waypost) -> None:
    project = waypost.project("resources")
    agent = waypost.principal("agent", "reader")
    async with session("http", waypost.url, agent) as s:
        uris = {str(r.uri) for r in (await s.list_resources()).resources}
        assert {f"waypost://projects/{project}/policy",
                f"waypost://projects/{project}/digest"} <= uris  # fmt: skip
        read = await s.read_resource(f"waypost://projects/{project}/digest")  # type: ignore[arg-type]
        digest = json.loads(read.contents[0].text)
        assert digest["project_id"] == project and digest["ready_task_count"] == 0
        # a read that fails carries the JSON-RPC code the MCP specification
        # suggests (it was 0): -32002 for a resource that is not there
        for uri in ("waypost://projects/nope/policy", "waypost://elsewhere/x"):
            with pytest.raises(McpError) as failed:
                await s.read_resource(uri)  # type: ignore[arg-type]
            assert failed.value.error.code == -32002, failed.value.error


DOC = Path(__file__).resolve().parent.parent / "docs" / "mcp.md"


def doc_blocks(language: str) -> list[str]:
    parts = DOC.read_text().split(f"```{language}\n")[1:]
    return [part.split("```", 1)[0] for part in parts]


def test_every_json_snippet_of_the_mcp_page_parses() -> None:
    blocks = doc_blocks("json")
    assert len(blocks) == 3
    for block in blocks:
        json.loads(block)


def test_the_python_example_of_the_mcp_page_runs_as_printed(waypost: Waypost) -> None:
    [example] = doc_blocks("python")
    waypost.project("demo")
    agent = waypost.principal("agent", "doc-reader")
    env = {**os.environ, "WAYPOST_URL": waypost.url, "WAYPOST_TOKEN": agent}
    out = subprocess.run([sys.executable, "-c", example], env=env, capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    names, digest = out.stdout.splitlines()[:2]
    assert "'task_claim'" in names and "'decision_wait'" in names
    assert json.loads(digest)["project_id"] == "demo"


async def test_the_desktop_configuration_launches_waypost_mcp(waypost: Waypost) -> None:
    desktop = next(json.loads(b) for b in doc_blocks("json") if '"command"' in b)
    server = desktop["mcpServers"]["waypost"]
    # the snippet's placeholders: the executable's path, the URL and the token
    command = str(Path(sys.executable).parent / "waypost")
    assert server["command"] == "/path/to/waypost/.venv/bin/waypost"
    args = [waypost.url if a == "http://127.0.0.1:8080" else a for a in server["args"]]
    agent = waypost.principal("agent", "desktop")
    params = StdioServerParameters(command=command, args=args, env={"WAYPOST_TOKEN": agent})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        policy = await call(s, "policy", project=waypost.project("desktop"))
    assert policy["revision"] == 1


def test_an_mcp_session_belongs_to_the_principal_that_opened_it(waypost: Waypost) -> None:
    owner, other = waypost.principal("agent", "owner"), waypost.principal("agent", "other")
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
    accept = {"Accept": "application/json, text/event-stream"}
    r = httpx.post(f"{waypost.url}/mcp", json=hello,
                   headers={**accept, "Authorization": f"Bearer {owner}"})  # fmt: skip
    assert r.status_code == 200
    session_id = r.headers["mcp-session-id"]
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    for token, status in ((other, 404), (owner, 200)):
        headers = {**accept, "Authorization": f"Bearer {token}", "Mcp-Session-Id": session_id,
                   "Mcp-Protocol-Version": "2025-06-18"}  # fmt: skip
        assert httpx.post(f"{waypost.url}/mcp", json=ping, headers=headers).status_code == status
    httpx.delete(f"{waypost.url}/mcp", headers={**headers})


@pytest.mark.parametrize(
    ("asked", "answered"),
    [("2025-06-18", "2025-06-18"), ("2024-11-05", "2024-11-05"), ("1999-01-01", "2025-11-25")],
)
def test_initialize_answers_the_version_asked_or_the_newest_it_speaks(
    waypost: Waypost, asked: str, answered: str
) -> None:
    """docs/mcp.md, "Protocol versions": a version the server knows is
    answered as asked; one it does not know gets the newest it speaks."""
    agent = waypost.principal("agent", f"version-{asked}")
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": asked, "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {agent}"}
    r = httpx.post(f"{waypost.url}/mcp", json=hello, headers=headers)
    assert r.status_code == 200, r.text
    data = [line[5:] for line in r.text.splitlines() if line.startswith("data:")]
    answer = json.loads(data[0]) if data else r.json()
    assert answer["result"]["protocolVersion"] == answered
    close = {"Mcp-Session-Id": r.headers["mcp-session-id"], "Mcp-Protocol-Version": answered}
    httpx.delete(f"{waypost.url}/mcp", headers={**headers, **close})


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_wait_past_the_tokens_stream_cap_is_too_many_streams(
    waypost: Waypost, transport: str
) -> None:
    """A wait counts as one of the token's 16 streams (docs/mcp.md): past the
    cap it is refused with that code, never `internal` (over /mcp it was an
    internal error with a logged traceback; over stdio "cannot wait")."""
    project = waypost.project(f"capped-{transport}")
    task_id = waypost.task(project)
    agent = waypost.principal("agent", f"capped-{transport}")
    stream = f"{waypost.url}/api/v1/projects/{project}/events/stream"
    async with contextlib.AsyncExitStack() as held, httpx.AsyncClient(timeout=30) as client:
        for _ in range(16):
            r = await held.enter_async_context(
                client.stream("GET", stream, headers={"Authorization": f"Bearer {agent}"})
            )
            assert r.status_code == 200
        async with session(transport, waypost.url, agent) as s:
            decision = await call(
                s, "decision_open", project=project, task_ids=[task_id], question="Go?",
                options=["Yes", "No"], rationale="r", required_actor="human", environment="e",
            )  # fmt: skip
            message = await refused(s, "decision_wait", project=project, decision_id=decision["id"])
    assert message.startswith("too_many_streams:"), message
    # the limit as the service says it; the advice holds no figure of its own
    assert "at most 16 streams may be open per token" in message
    assert "as many open streams" in message and "unexpected server fault" not in message


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("context", {"q": "x" * 70_000}, "q"),
        ("knowledge_search", {"cursor": "c" * 65_400}, "cursor"),
        ("knowledge_search", {"q": "é" * 20_000}, "q"),
    ],
    ids=["long-q", "long-cursor", "long-unicode-q"],
)
async def test_a_query_argument_too_long_for_a_url_is_invalid_request_by_name(
    waypost: Waypost, transport: str, tool: str, arguments: dict[str, Any], field: str
) -> None:
    """Over stdio the tool puts it in a URL: httpx refused the URL (not an
    HTTPError, so `internal` with a traceback), or the server's HTTP layer
    answered 431 without JSON (`unavailable`, retry: never mends)."""
    name = f"long-{transport}-{tool}-{field}-{len(str(arguments))}".replace("_", "-")
    project = waypost.project(name)
    agent = waypost.principal("agent", name)
    async with session(transport, waypost.url, agent) as s:
        message = await refused(s, tool, project=project, **arguments)
    assert message.startswith("invalid_request:"), message
    assert field in message and "internal" not in message


async def test_resources_listed_with_a_revoked_token_fail_with_a_json_rpc_code(
    waypost: Waypost,
) -> None:
    """Over stdio `resources/list` raised a plain exception: JSON-RPC code 0
    and the bare message "unauthenticated", where a resource read and every
    tool answer in the REST form."""
    out = subprocess.run(
        [sys.executable, "-m", "waypost.cli", "admin", "principal", "create",
         "--db", str(waypost.server.db), "--kind", "agent", "--name", "lister-revoked"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    made = json.loads(out.stdout)
    async with session("stdio", waypost.url, made["token"]) as s:
        assert (await s.list_resources()).resources is not None
        subprocess.run(
            [sys.executable, "-m", "waypost.cli", "admin", "token", "revoke",
             "--token-id", made["token_id"], "--db", str(waypost.server.db)],
            check=True, capture_output=True,
        )  # fmt: skip
        with pytest.raises(McpError) as failed:
            await s.list_resources()
    assert failed.value.error.code != 0
    assert failed.value.error.message.startswith("unauthenticated:")


async def _streams_admitted(client: httpx.AsyncClient, url: str, token: str) -> int:
    """How many of 16 event streams opened at once the token is given."""
    async with contextlib.AsyncExitStack() as held:
        admitted = 0
        for _ in range(16):
            r = await held.enter_async_context(
                client.stream("GET", url, headers={"Authorization": f"Bearer {token}"})
            )
            admitted += r.status_code == 200
        return admitted


async def _until_streams_admitted(url: str, token: str, count: int) -> None:
    """Returns once `count` of 16 streams opened at once are admitted: a
    running decision_wait holds one of its token's, so this is the sign
    that the wait is listening (a fixed sleep was a guess)."""
    deadline = time.monotonic() + 20
    async with httpx.AsyncClient(timeout=30) as client:
        while await _streams_admitted(client, url, token) != count:
            assert time.monotonic() < deadline, f"never {count} streams admitted"
            await asyncio.sleep(0.1)


def _an_agent_and_a_decision(
    waypost: Waypost, project: str, agent: str
) -> tuple[str, str, dict[str, Any]]:
    """(project, a new agent's token, a pending decision on a task of the project)."""
    waypost.project(project)
    task_id = waypost.task(project)
    token = waypost.principal("agent", agent)
    question = {"question": "Go?", "options": ["Yes", "No"], "rationale": "r",
                "required_actor": "human", "task_ids": [task_id], "environment": "e"}  # fmt: skip
    decision = waypost.rest("POST", f"/api/v1/projects/{project}/decisions", question).json()
    return project, token, decision


async def _open_mcp_session(client: httpx.AsyncClient, url: str, token: str) -> dict[str, str]:
    """Headers of a new, initialized MCP session of `token`'s principal."""
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream",
               "Authorization": f"Bearer {token}"}  # fmt: skip
    r = await client.post(f"{url}/mcp", json=hello, headers=headers)
    assert r.status_code == 200, r.text
    headers |= {"Mcp-Session-Id": r.headers["mcp-session-id"],
                "Mcp-Protocol-Version": "2025-06-18"}  # fmt: skip
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await client.post(f"{url}/mcp", json=ready, headers=headers)).is_success
    return headers


async def test_a_wait_whose_http_client_leaves_gives_its_stream_back_at_once(
    waypost: Waypost,
) -> None:
    """The SDK runs a call on after its POST's client has gone: a dropped
    decision_wait held one of the token's 16 streams to its bound (240 s)."""
    project, agent, decision = _an_agent_and_a_decision(waypost, "left-waiting", "leaver")
    stream = f"{waypost.url}/api/v1/projects/{project}/events/stream"
    wait = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "decision_wait", "arguments": {
            "project": project, "decision_id": decision["id"],
            "timeout_seconds": 240}}}  # fmt: skip

    async with httpx.AsyncClient(timeout=30) as client:
        headers = await _open_mcp_session(client, waypost.url, agent)
        async with (
            httpx.AsyncClient(timeout=30) as caller,
            caller.stream("POST", f"{waypost.url}/mcp", json=wait, headers=headers) as waiting,
        ):
            assert waiting.status_code == 200
            # the wait holds one of the token's streams while it runs
            await _until_streams_admitted(stream, agent, 15)
        # the response left unread: its connection is closed
        await _until_streams_admitted(stream, agent, 16)
        await client.delete(f"{waypost.url}/mcp", headers=headers)


def _wait_outcome(response: httpx.Response) -> tuple[object, str]:
    """(JSON-RPC id, outcome) of a decision_wait answered as one event-stream message."""
    assert response.status_code == 200, response.text
    [data] = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    message = json.loads(data)
    outcome = json.loads(message["result"]["content"][0]["text"])["outcome"]
    return message["id"], outcome


async def test_a_body_near_the_transports_bound_gets_its_413(waypost: Waypost) -> None:
    """The id was looked for in bodies up to 1,088 KiB, past the 1 MiB that
    `serve`'s transport takes of any request body, which closed the
    connection under the endpoint still reading: a 1,100,000-byte body got
    its 413 or no answer at all, by how the reads fell. The id search now
    ends under 1 MiB, so such a body is refused on its declared length,
    before any of it need arrive."""
    agent = waypost.principal("agent", "large-sender")
    host, port = waypost.url.removeprefix("http://").split(":")
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {agent}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        "Content-Length: 1100000\r\n\r\n"
    ).encode()
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head + b'{"jsonrpc": "2.0", "id": 77, "method": "ping", "x": "')
        answer = await asyncio.wait_for(reader.readuntil(b"}}"), 10)  # the rest never sent
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    refusal = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert refusal["id"] is None and refusal["error"]["code"] == -32600, refusal


async def test_a_call_over_the_body_limit_is_refused_and_the_session_goes_on(
    waypost: Waypost,
) -> None:
    """Over 272 KiB the endpoint answered HTTP 413 even in a live session: the
    official client raises on any status but 2xx and 404, so the call and
    every later one of the session failed. Now the refusal is the call's
    own JSON-RPC error (HTTP 200, as a refused argument's), and the session
    works on."""
    project = waypost.project("oversized")
    agent = waypost.principal("agent", "oversized-sender")
    args = {"project": project, "kind": "fact", "title": "Big", "body": "b"}
    async with session("http", waypost.url, agent) as s:
        with pytest.raises(McpError) as refused_call:
            await s.call_tool("knowledge_record", {**args, "applicability": "y" * 290_000})
        assert refused_call.value.error.code == -32600
        assert "MCP bodies are limited to" in refused_call.value.error.message
        made = await call(s, "knowledge_record", **args)
    assert [e["subject_id"] for e in waypost.events(project, "knowledge.created")] == [made["id"]]


async def test_a_request_id_still_running_in_its_session_is_refused_not_lost(
    waypost: Waypost,
) -> None:
    """docs/mcp.md: a proxy re-sends a request with its id. Sent while the
    first still ran, the SDK filed the second's answer channel over the
    first's: one of the two was never answered, and `serve` did not stop on
    SIGTERM while its client waited."""
    project, agent, decision = _an_agent_and_a_decision(waypost, "same-id", "resender")
    wait = {"jsonrpc": "2.0", "id": "same", "method": "tools/call", "params": {
        "name": "decision_wait", "arguments": {
            "project": project, "decision_id": decision["id"], "timeout_seconds": 60}}}  # fmt: skip
    answer = {"expected_generation": 1, "disposition": "deny", "answer": "No",
              "rationale": "Not now."}  # fmt: skip
    async with httpx.AsyncClient(timeout=30) as client:
        headers = await _open_mcp_session(client, waypost.url, agent)
        first = asyncio.create_task(client.post(f"{waypost.url}/mcp", json=wait, headers=headers))
        stream = f"{waypost.url}/api/v1/projects/{project}/events/stream"
        await _until_streams_admitted(stream, agent, 15)  # the first is waiting for an answer
        assert not first.done()
        again = await client.post(f"{waypost.url}/mcp", json=wait, headers=headers)
        assert again.status_code == 409, again.text
        assert again.json()["id"] == "same" and "still running" in again.json()["error"]["message"]
        # the same id as a number is another request: not refused by this rule
        other = {**wait, "id": 5, "params": {**wait["params"], "arguments": {
            **wait["params"]["arguments"], "timeout_seconds": 1}}}  # fmt: skip
        assert (
            await client.post(f"{waypost.url}/mcp", json=other, headers=headers)
        ).status_code == 200
        path = f"/api/v1/projects/{project}/decisions/{decision['id']}/answer"
        assert waypost.rest("POST", path, answer).status_code == 200
        answered = await asyncio.wait_for(first, 20)
        assert _wait_outcome(answered) == ("same", "answered")
        # once it has answered, the id may be sent again
        resent = await client.post(f"{waypost.url}/mcp", json=wait, headers=headers)
        assert _wait_outcome(resent) == ("same", "answered")
        await client.delete(f"{waypost.url}/mcp", headers=headers)


async def test_concurrent_initializes_open_at_most_16_sessions(waypost: Waypost) -> None:
    """The cap was checked before the SDK answered, and a session counted once
    it had: 40 initializes sent at once all opened one."""
    from waypost.mcp_server.http_endpoint import SESSIONS_PER_PRINCIPAL

    agent = waypost.principal("agent", "flood")
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream",
               "Authorization": f"Bearer {agent}"}  # fmt: skip
    limits = httpx.Limits(max_connections=40)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        answers = await asyncio.gather(
            *[client.post(f"{waypost.url}/mcp", json=hello, headers=headers) for _ in range(40)]
        )
        codes = sorted(r.status_code for r in answers)
        assert codes == [200] * SESSIONS_PER_PRINCIPAL + [429] * (40 - SESSIONS_PER_PRINCIPAL)
        for r in answers:
            if r.status_code == 200:
                session = {**headers, "Mcp-Session-Id": r.headers["mcp-session-id"]}
                assert (
                    await client.delete(f"{waypost.url}/mcp", headers=session)
                ).status_code == 200


async def test_serve_stops_on_sigterm_with_an_mcp_client_connected_and_a_wait_running(
    tmp_path: Path,
) -> None:
    """The SDK client's open GET /mcp stream kept uvicorn waiting for ever, and
    the running decision_wait answered `internal` with a logged traceback."""
    with own_waypost(tmp_path) as waypost:
        srv = waypost.server
        project = waypost.project("stopping")
        task_id = waypost.task(project)
        agent = waypost.principal("agent", "stopper")
        client = contextlib.AsyncExitStack()
        try:
            s = await client.enter_async_context(session("http", waypost.url, agent))
            decision = await call(
                s, "decision_open", project=project, task_ids=[task_id], question="Go?",
                options=["Yes", "No"], rationale="r", required_actor="human", environment="e",
            )  # fmt: skip
            arguments = {"project": project, "decision_id": decision["id"], "timeout_seconds": 120}
            waiting = asyncio.create_task(s.call_tool("decision_wait", arguments))
            stream = f"{waypost.url}/api/v1/projects/{project}/events/stream"
            await _until_streams_admitted(stream, agent, 15)  # the wait is listening
            began = time.monotonic()
            srv.process.send_signal(signal.SIGTERM)
            result = await asyncio.wait_for(waiting, 15)
            status = await asyncio.to_thread(srv.process.wait, 15)
            seconds = time.monotonic() - began
        finally:
            with contextlib.suppress(Exception):  # the client meets a server that went away
                await client.aclose()
    assert result.isError and text(result).startswith("unavailable:"), text(result)
    assert status == 0 and seconds < 10
    logged = "\n".join(srv.logged())
    assert " ERROR " not in logged and "Traceback" not in logged, logged


async def test_a_write_queued_behind_a_lock_when_serve_stops_still_gets_its_answer(
    tmp_path: Path,
) -> None:
    """The MCP sessions ended half a second after SIGTERM: a call still
    waiting for the write lock then had its stream closed with no answer,
    and the SDK client waited for ever (331 s in an audit). The call is
    waited for, as a REST request is, up to the busy timeout and a second."""
    with own_waypost(tmp_path, "--metrics") as waypost:
        srv = waypost.server
        srv.metrics_token()  # made before the lock is taken: it writes
        project = waypost.project("draining")
        agent = waypost.principal("agent", "drainer")
        lesson = {"project": project, "kind": "lesson", "body": "b"}
        async with contextlib.AsyncExitStack() as stack:
            s = await stack.enter_async_context(session("http", waypost.url, agent))
            await call(s, "knowledge_record", title="first, to start the session", **lesson)
            lock = sqlite3.connect(tmp_path / "waypost.db", isolation_level=None)
            lock.execute("BEGIN IMMEDIATE")  # another process's writer, as an operator's
            try:
                queued = asyncio.create_task(
                    s.call_tool("knowledge_record", {"title": "queued", **lesson})
                )
                await asyncio.to_thread(srv.wait_for_unanswered_writes, 1)  # for the lock
                srv.process.send_signal(signal.SIGTERM)
                await asyncio.sleep(1.0)  # past the half second that ended it
            finally:
                lock.execute("ROLLBACK")
                lock.close()
            result = await asyncio.wait_for(queued, 15)
            status = await asyncio.to_thread(srv.process.wait, 15)
            with contextlib.suppress(Exception):  # the client meets a server that went away
                await stack.aclose()
    assert not result.isError, text(result)
    assert json.loads(text(result))["title"] == "queued"
    assert status == 0
    titles = sqlite3.connect(tmp_path / "waypost.db").execute("SELECT title FROM knowledge")
    assert sorted(t for (t,) in titles) == ["first, to start the session", "queued"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_wait_after_the_kept_session_ended_elsewhere_goes_on_without_it(
    waypost: Waypost, transport: str
) -> None:
    """decision_wait read with the ended session and answered `session_not_live`
    on every call, while its advice said that calling again would do."""
    project = waypost.project(f"ended-{transport}")
    task_id = waypost.task(project)
    agent = waypost.principal("agent", f"ended-{transport}")
    async with session(transport, waypost.url, agent) as s:
        claimed = await call(s, "task_claim", project=project)
        ended = waypost.rest(
            "POST", f"/api/v1/sessions/{claimed['lease']['session_id']}/end", token=agent
        )
        assert ended.status_code == 200, ended.text
        question = {"question": "Go?", "options": ["Yes", "No"], "rationale": "r",
                    "required_actor": "human", "task_ids": [task_id],
                    "environment": "e"}  # fmt: skip
        decision = waypost.rest("POST", f"/api/v1/projects/{project}/decisions", question).json()
        waited = await call(s, "decision_wait", project=project, decision_id=decision["id"],
                            timeout_seconds=1)  # fmt: skip
    assert waited["outcome"] == "timeout" and waited["decision"]["status"] == "pending"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_unknown_tool_is_a_protocol_error(waypost: Waypost, transport: str) -> None:
    """MCP 2025-06-18, server/tools, "Error Handling": an unknown tool is a
    protocol error (`-32602`), not a tool's result; it was a `not_found`
    tool error. The refusal names what it refused, clipped, not echoed."""
    agent = waypost.principal("agent", f"lost-{transport}")
    async with session(transport, waypost.url, agent) as s:
        with pytest.raises(McpError) as unknown:
            await s.call_tool("no_such_tool", {})
        with pytest.raises(McpError) as long:
            await s.call_tool("n" * 5000, {})
        assert (await s.list_tools()).tools  # the session goes on
    assert unknown.value.error.code == -32602
    assert unknown.value.error.message.startswith("Unknown tool: no_such_tool")
    assert long.value.error.message.startswith("Unknown tool: " + "n" * 40 + "...")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_agent_plans_and_publishes_its_work_with_tools(
    waypost: Waypost, transport: str
) -> None:
    """An agent could not create or edit a task over MCP, nor publish as the
    integration owner the policy names: those were REST-only (parityaudit's
    table), so an MCP agent that split its work or owned integration was
    stuck. Each is now a tool over the same route, with advice on refusal."""
    project = waypost.project(f"plans-{transport}")
    owner = waypost.principal("agent", f"integrator-{transport}")
    other = waypost.principal("agent", f"bystander-{transport}")
    owner_id = waypost.rest("GET", "/api/v1/me", token=owner).json()["principal"]["id"]
    policy = waypost.rest("GET", f"/api/v1/projects/{project}/policy").json()
    edited = waypost.rest("PATCH", f"/api/v1/projects/{project}/policy",
                          {"expected_revision": policy["revision"],
                           "integration_owner": owner_id})  # fmt: skip
    assert edited.status_code == 200, edited.text
    async with session(transport, waypost.url, owner) as s:
        made = await call(s, "task_create", project=project, title="Ship the release notes",
                          acceptance_criteria=["Lists every migration"])  # fmt: skip
        task_id = made["id"]
        assert (made["revision"], made["status"]) == (1, "open")
        changed = await call(s, "task_edit", project=project, task_id=task_id,
                             expected_revision=1, priority=5)  # fmt: skip
        assert (changed["revision"], changed["priority"]) == (2, 5)
        stale = await refused(s, "task_edit", project=project, task_id=task_id,
                              expected_revision=1, priority=6)  # fmt: skip
        assert stale.startswith("revision_conflict") and "current revision is 2" in stale
        early = await refused(s, "publication_result", project=project, task_id=task_id,
                              outcome="succeeded")  # fmt: skip
        assert early.startswith("state_conflict") and "publication_prepare first" in early
        held = await call(s, "publication_prepare", project=project, task_id=task_id)
        assert held["publication"]["holder_id"] == owner_id
        async with session(transport, waypost.url, other) as bystander:
            refusal = await refused(bystander, "publication_prepare", project=project,
                                    task_id=task_id)  # fmt: skip
        assert refusal.startswith("forbidden") and f"integration owner ({owner_id})" in refusal
        me = await call(s, "me")
        assert me["principal"]["id"] == held["publication"]["holder_id"]
        again = await refused(s, "publication_prepare", project=project, task_id=task_id)
        assert "go on with publication_result" in again, again
        result = await call(s, "publication_result", project=project, task_id=task_id,
                            outcome="succeeded", detail="merged 1f2e3d")  # fmt: skip
        assert result["publication"]["result"]["detail"] == "merged 1f2e3d"
        given_back = await call(s, "publication_finalize", project=project, task_id=task_id)
        # a retry whose answer was lost must not lead to a second publication
        over = await refused(s, "publication_finalize", project=project, task_id=task_id)
        assert "do not publish again" in over, over
        listed = await call(s, "project_list")
        assert project in [p["id"] for p in listed["items"]]
    assert given_back["publication"] is None
    stored = waypost.rest("GET", f"/api/v1/projects/{project}/tasks/{task_id}").json()
    assert (stored["revision"], stored["priority"], stored["publication"]) == (2, 5, None)
    assert [e["data"] for e in waypost.events(project, "task.publication_result_recorded")] == [
        {"outcome": "succeeded"}
    ]


async def test_a_changed_integration_owner_is_told_how_authority_is_given_back(
    waypost: Waypost,
) -> None:
    """Told to "leave publication to them", the holder the policy no longer
    named kept its authority, and the new owner was told to wait for a
    holder that may have gone (review51)."""
    project = waypost.project("owner-changed")
    old, new = waypost.principal("agent", "old-owner"), waypost.principal("agent", "new-owner")
    ids = [waypost.rest("GET", "/api/v1/me", token=t).json()["principal"]["id"] for t in (old, new)]

    def name_owner(owner_id: str) -> None:
        policy = waypost.rest("GET", f"/api/v1/projects/{project}/policy").json()
        edited = waypost.rest("PATCH", f"/api/v1/projects/{project}/policy",
                              {"expected_revision": policy["revision"],
                               "integration_owner": owner_id})  # fmt: skip
        assert edited.status_code == 200, edited.text

    name_owner(ids[0])
    async with session("stdio", waypost.url, old) as s:
        task_id = (await call(s, "task_create", project=project, title="Publish"))["id"]
        await call(s, "publication_prepare", project=project, task_id=task_id)
        name_owner(ids[1])
        refusal = await refused(s, "publication_result", project=project, task_id=task_id,
                                outcome="succeeded")  # fmt: skip
        assert refusal.startswith("forbidden") and "call publication_finalize" in refusal
    async with session("stdio", waypost.url, new) as s:
        waiting = await refused(s, "publication_prepare", project=project, task_id=task_id)
        assert "you may end its authority with publication_finalize" in waiting, waiting
        ended = await call(s, "publication_finalize", project=project, task_id=task_id)
        assert ended["publication"] is None
        held = await call(s, "publication_prepare", project=project, task_id=task_id)
    assert held["publication"]["holder_id"] == ids[1]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_agent_edits_the_rules_where_the_policy_delegates_it(
    waypost: Waypost, transport: str
) -> None:
    """Policy: "agents only the rules, only when delegated". An MCP agent had
    no tool to do it even where delegated; the refusals say what to do."""
    project = waypost.project(f"rules-{transport}")
    agent = waypost.principal("agent", f"ruler-{transport}")
    async with session(transport, waypost.url, agent) as s:
        read = await call(s, "policy", project=project)
        off = await refused(s, "policy_edit", project=project, rules="Run tests first.",
                            expected_revision=read["revision"])  # fmt: skip
        assert off.startswith("forbidden") and "propose the change" in off, off
        delegated = waypost.rest("PATCH", f"/api/v1/projects/{project}/policy",
                                 {"expected_revision": read["revision"],
                                  "agent_rule_editing": True})  # fmt: skip
        assert delegated.status_code == 200, delegated.text
        edited = await call(s, "policy_edit", project=project,
                            expected_revision=delegated.json()["revision"],
                            rules="Run tests first.", provenance="after the outage")  # fmt: skip
        wider = await refused(s, "policy_edit", project=project,
                              expected_revision=edited["revision"], review_mode="none")  # fmt: skip
        history = await call(s, "policy_history", project=project, limit=1)
    assert edited["rules"] == "Run tests first."
    assert edited["revision"] == delegated.json()["revision"] + 1
    # what changed is readable where it changed (policyjourney): MCP had no
    # history, so an agent saw a decision stale with no way to see why
    assert [(i["revision"], i["rules"]) for i in history["items"]] == [
        (edited["revision"], "Run tests first.")
    ]
    assert history["next_cursor"] is not None
    assert wider.startswith("forbidden") and "rules text only" in wider, wider
    stored = waypost.rest("GET", f"/api/v1/projects/{project}/policy").json()
    assert (stored["revision"], stored["review_mode"]) == (edited["revision"], "human")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_me_names_the_session_this_mcp_session_keeps(
    waypost: Waypost, transport: str
) -> None:
    """REST's `/me` names the caller's latest live session when the request
    names none: `me` in a second MCP session of the same agent showed the
    first one's, whose lease the second is refused on (review32)."""
    project = waypost.project(f"whoami-{transport}")
    waypost.task(project)
    agent = waypost.principal("agent", f"twice-{transport}")
    async with (
        session(transport, waypost.url, agent) as first,
        session(transport, waypost.url, agent) as second,
    ):
        claimed = await call(first, "task_claim", project=project)
        mine = await call(first, "me")
        other = await call(second, "me")
    assert mine["session"]["id"] == claimed["lease"]["session_id"]
    assert other["session"] is None and other["principal"] == mine["principal"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_reviewer_reads_the_work_it_completes(waypost: Waypost, transport: str) -> None:
    """`task_complete` asked a reviewer to judge work no tool showed: the
    submission's summary and the owner's checkpoints were REST-only
    (mcpteamflow), so an agent reviewer approved blind."""
    project = waypost.project(f"review-{transport}")
    task_id = waypost.task(project)
    worker = waypost.principal("agent", f"worker-{transport}")
    async with session(transport, waypost.url, worker) as s:
        await call(s, "task_claim", project=project, task_id=task_id)
        await call(s, "task_checkpoint", project=project, task_id=task_id, note="schema first")
        await call(s, "task_submit", project=project, task_id=task_id,
                   summary="Applied migration 0042.")  # fmt: skip
    reviewer = waypost.principal("agent", f"reviewer-{transport}")
    async with session(transport, waypost.url, reviewer) as s:
        submissions = await call(s, "task_submissions", project=project, task_id=task_id)
        checkpoints = await call(s, "task_checkpoints", project=project, task_id=task_id)
    assert [i["summary"] for i in submissions["items"]] == ["Applied migration 0042."]
    assert [i["note"] for i in checkpoints["items"]] == ["schema first"]
    rest = waypost.rest("GET", f"/api/v1/projects/{project}/tasks/{task_id}/submissions")
    assert submissions == rest.json()


async def test_a_notification_racing_its_sessions_delete_is_no_error(waypost: Waypost) -> None:
    """The official client sends `notifications/initialized` and, leaving at
    once, the session's DELETE: about 1 in 50 times the notification was
    answered 202, then the SDK started a 500 and raised into uvicorn (an
    ERROR with a traceback, the keep-alive connection dropped; boundsaudit)."""
    agent = waypost.principal("agent", "quick-leaver")
    headers = {"Authorization": f"Bearer {agent}", "Accept": "application/json, text/event-stream"}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "quick", "version": "1"}}}  # fmt: skip
    read_from = len(waypost.server.logged())
    async with httpx.AsyncClient(base_url=waypost.url, timeout=30) as client:
        for _ in range(250):  # one keep-alive connection each side
            opened = await client.post("/mcp", json=hello, headers=headers)
            assert opened.status_code == 200, opened.text
            named = {**headers, "Mcp-Session-Id": opened.headers["mcp-session-id"],
                     "MCP-Protocol-Version": "2025-06-18"}  # fmt: skip
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            noted, ended = await asyncio.gather(
                client.post("/mcp", json=note, headers=named),
                client.delete("/mcp", headers=named),
            )
            assert (noted.status_code in (202, 404), ended.status_code) == (True, 200)
    logged = "\n".join(waypost.server.logged()[read_from:])
    assert " ERROR " not in logged and "status=500" not in logged, logged[-3000:]


async def test_a_lapsed_lease_is_taken_over_with_task_recover(tmp_path: Path) -> None:
    """A lease belongs to the session that claimed it: an agent whose MCP
    session closed (a restarted client, the idle close) had no way back to
    its task over MCP, and the refusal pointed at `recover`, which no tool was."""
    with own_waypost(tmp_path) as waypost:
        project = waypost.project("lapsed")
        task_id = waypost.task(project)
        agent = waypost.principal("agent", "restarted")
        async with session("http", waypost.url, agent) as s:
            first = await call(s, "task_claim", project=project)
            await call(s, "task_checkpoint", project=project, task_id=task_id, note="halfway")
        write_clock(waypost.server.clock, "2026-11-29T18:16:00.000Z")  # past the 900-s lease
        async with session("http", waypost.url, agent) as s:
            message = await refused(s, "task_claim", project=project, task_id=task_id)
            assert message.startswith("state_conflict") and "task_recover" in message, message
            taken = await call(s, "task_recover", project=project, task_id=task_id)
            done = await call(s, "task_submit", project=project, task_id=task_id,
                              summary="Finished after a restart.")  # fmt: skip
    assert taken["previous_lease"]["session_id"] == first["lease"]["session_id"]
    assert taken["lease"]["session_id"] != first["lease"]["session_id"]
    assert [c["note"] for c in taken["checkpoints"]] == ["halfway"]
    assert done["task"]["status"] == "submitted"


async def test_stdio_answers_each_line_it_cannot_use_in_json_rpc_terms(waypost: Waypost) -> None:
    """The SDK's stdio transport answered every such line with a log
    notification ("Internal Server Error"), let duplicate keys and invalid
    UTF-8 through, and took a request whose id is null for a notification;
    the line's sender waited for ever. Each line now gets what `POST /mcp`
    answers (or nothing, for a blank line)."""
    agent = waypost.principal("agent", "stdio-lines")
    log = waypost.server.db.parent / "stdio-lines.log"
    with log.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "waypost.cli", "mcp", "--url", waypost.url,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
            env={**os.environ, "WAYPOST_TOKEN": agent, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None

    async def answer(line: bytes) -> dict[str, Any]:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(line + b"\n")
        await process.stdin.drain()
        got: dict[str, Any] = json.loads(await asyncio.wait_for(process.stdout.readline(), 30))
        return got

    hello = {"jsonrpc": "2.0", "id": 10, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
    try:
        process.stdin.write(b"\n   \n")  # blank lines: no answer (the next line's comes first)
        assert (await answer(json.dumps(hello).encode()))["id"] == 10
        cases = [
            (b"{not json", None, -32700),
            # a byte no UTF-8 reading takes: the id is found all the same,
            # unless it is the id that holds it
            (b'{"jsonrpc": "2.0", "id": 4, "method": "tools/list", "x": "\xff"}', 4, -32700),
            (b'{"jsonrpc": "2.0", "id": "caf\xe9", "method": "ping"}', None, -32700),
            # the id a lenient reading finds, else null (null left the official
            # client waiting for ever on its call)
            (b'{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "tools/list"}', None, -32700),
            # an id no answer could carry (it stopped the process)
            (b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}', None, -32700),
            # a value the parser refuses inside params: -32602 for a request of
            # a method this server has, a parse error for any other
            (b'{"jsonrpc": "2.0", "id": 3, "method": "x", "params": {"n": 1e999}}', 3, -32700),
            (b'{"jsonrpc": "2.0", "id": 8, "method": "ping", "params": {"n": 1e999}}', 8, -32602),
            (b'{"jsonrpc": "2.0", "id": 5, "params": {"s": "\\ud800"}}', None, -32700),
            (b'"str"', None, -32600),
            (b'[{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}]', None, -32600),
            (b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', None, -32600),
            (b'{"jsonrpc": "1.0", "id": 6, "method": "tools/list"}', 6, -32600),
            (b'{"jsonrpc": "2.0", "id": 7, "method": "no/such"}', 7, -32601),
            (
                b'{"jsonrpc": "2.0", "id": 9, "method": "ping", "y": "' + b"y" * 300_000 + b'"}',
                9,
                -32600,
            ),
        ]
        for line, request_id, code in cases:
            got = await answer(line)
            assert got["id"] == request_id and got["error"]["code"] == code, (line, got)
            assert "Internal Server Error" not in got["error"]["message"], got
        # a client's responses are not answered (this server asks nothing; an
        # error would carry an id of the server's numbering, and the SDK said
        # "Internal Server Error"): the next line's answer comes first
        process.stdin.write(b'{"jsonrpc": "2.0", "id": 9, "result": 5}\n')
        process.stdin.write(b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32700}}\n')
        process.stdin.write(b'{"jsonrpc": "2.0", "id": 999, "result": {}}\n')
        # and the session still serves; a lone \r ends a line too
        process.stdin.write(b'{"jsonrpc": "2.0", "id": 14, "method": "ping"}\r')
        assert (await answer(b'{"jsonrpc": "2.0", "id": 15, "method": "ping"}'))["id"] == 14
        assert json.loads(await asyncio.wait_for(process.stdout.readline(), 30))["id"] == 15
        listed = await answer(b'{"jsonrpc": "2.0", "id": 8, "method": "tools/list"}')
        assert listed["id"] == 8 and listed["result"]["tools"]
        call = {"jsonrpc": "2.0", "id": 12, "method": "tools/call",
                "params": {"name": "n" * 10_000, "arguments": {}}}  # fmt: skip
        unknown = await answer(json.dumps(call).encode())  # a protocol error, clipped
        assert unknown["id"] == 12 and unknown["error"]["code"] == -32602, unknown
        assert len(unknown["error"]["message"]) < 120
    finally:
        process.stdin.close()
        await asyncio.wait_for(process.wait(), 30)
    # what the SDK logs of it (the unknown tool's name) is cut, as in `serve`
    assert max(len(line) for line in log.read_text().splitlines() or [""]) < 2_200


async def test_a_response_to_no_request_is_accepted_and_dropped(waypost: Waypost) -> None:
    """This server sends no requests: the SDK logged an ERROR for any answer a
    client sent and put "Internal Server Error" down the session's stream."""
    agent = waypost.principal("agent", "answers-nothing")
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
    base = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {agent}"}
    async with httpx.AsyncClient(base_url=waypost.url, timeout=30) as client:
        r = await client.post("/mcp", json=hello, headers=base)
        headers = {**base, "Mcp-Session-Id": r.headers["mcp-session-id"],
                   "Mcp-Protocol-Version": "2025-06-18"}  # fmt: skip
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await client.post("/mcp", json=done, headers=headers)).status_code == 202
        listen = {**headers, "Accept": "text/event-stream"}
        async with client.stream("GET", "/mcp", headers=listen) as stream:
            assert stream.status_code == 200
            answer = {"jsonrpc": "2.0", "id": 999, "result": {}}
            r = await client.post("/mcp", json=answer, headers=headers)
            assert (r.status_code, r.content) == (202, b"")
            said: list[str] = []
            lines = stream.aiter_lines()
            with contextlib.suppress(TimeoutError):
                while True:
                    said.append(await asyncio.wait_for(anext(lines), 1.5))
        await client.delete("/mcp", headers=headers)
    assert not [line for line in said if "Internal Server Error" in line], said
