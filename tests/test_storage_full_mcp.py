"""A full disk met through an MCP tool: the refusal REST answers `503`,
`Retry-After: 30` ("an operator must act", docs/api.md) must not reach the
agent as "busy ... retry in a few seconds", the advice docs/mcp.md gives a
momentary refusal (diskfulljourney: every tool call of an agent on a full
disk was told to retry within seconds, 337 calls in 35 s)."""

from __future__ import annotations

import json

from tests.conftest import Caller, Service
from tests.mcp_support import MCP_HEADERS, open_session


async def test_a_tool_call_on_a_full_disk_is_not_told_to_retry_in_seconds(
    service: Service, human: Caller, project: str
) -> None:
    session_id = await open_session(human)
    pages = await service.rt.db.read(lambda c: c.execute("PRAGMA page_count").fetchone()[0])
    # SQLITE_FULL past max_page_count, as when the filesystem runs out of
    # space (test_storage_conditions does the same)
    await service.rt.db.write(lambda c: c.execute(f"PRAGMA max_page_count = {pages + 2}"))
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    arguments = {"project": project, "title": "big", "description": "x" * 60_000,
                 "idempotency_key": "full-1"}  # fmt: skip
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "task_create", "arguments": arguments}}  # fmt: skip
    r = await human.client.post("/mcp", json=body, headers=headers)
    assert r.status_code == 200, r.text
    text = r.text
    if not text.lstrip().startswith("{"):  # an event stream: its one data line
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    answer = json.loads(text)
    assert "result" in answer, text  # a tool error, not a JSON-RPC one
    result = answer["result"]
    said = result["content"][0]["text"]
    assert result["isError"] and said.startswith("unavailable: the database's disk is full"), said
    # REST's answer to the same refusal waits 30 s for an operator
    assert "retry in a few seconds" not in said, said


async def test_the_http_backend_reads_retry_after_and_gives_the_storage_advice(
    service: Service, human: Caller, project: str
) -> None:
    """`waypost mcp` against a running service (HttpBackend) reads REST's
    `Retry-After: 30` into the refusal, so its agent gets the same advice as
    the in-process one; a momentary refusal's 1 s keeps the retry advice."""
    import httpx

    from waypost.mcp_server.advice import explain
    from waypost.mcp_server.backend import HttpBackend
    from waypost.mcp_server.calls import ApiError

    transport = httpx.ASGITransport(app=service.app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://waypost.test", headers=human.headers()
    ) as client:
        backend = HttpBackend(client)
        pages = await service.rt.db.read(lambda c: c.execute("PRAGMA page_count").fetchone()[0])
        await service.rt.db.write(lambda c: c.execute(f"PRAGMA max_page_count = {pages + 2}"))
        try:
            await backend.call(
                "POST", "/api/v1/projects/{project}/tasks", {"project": project},
                body={"title": "big", "description": "x" * 60_000}, idempotency_key="full-2",
            )  # fmt: skip
        except ApiError as refused:
            error = refused
        else:
            raise AssertionError("the write on a full disk was accepted")
    assert (error.code, error.status, error.retry_after) == ("unavailable", 503, 30)
    assert "retry in a few seconds" not in explain(error, project, True, "task_create")
    busy = ApiError("unavailable", "the database is busy", {}, 503, 1)
    assert "retry in a few seconds" in explain(busy, project, True, "task_create")
