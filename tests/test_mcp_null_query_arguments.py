"""A read tool's argument sent as null is left out of
the REST query (the schemas allow `T or null`), never sent as the text
"None" (server._route_call's `if v is not None`).
(Unpinned before: mutantaudit5.)"""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import Caller
from tests.context_support import knowledge
from tests.mcp_support import MCP_HEADERS, open_session


async def _tool(caller: Caller, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    session_id = await open_session(caller)
    headers = {**caller.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}  # fmt: skip
    r = await caller.client.post("/mcp", json=body, headers=headers)
    assert r.status_code == 200, r.text
    text = r.text
    if not text.lstrip().startswith("{"):  # an event stream: its one data line
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    result = json.loads(text)["result"]
    assert not result.get("isError"), result
    found: dict[str, Any] = json.loads(result["content"][0]["text"])
    return found


async def test_null_arguments_of_a_read_tool_are_not_sent(human: Caller, project: str) -> None:
    record = await knowledge(human, "zebra crossing")
    packet = await _tool(human, "context", {
        "project": project, "q": "zebra", "component": None, "environment": None,
        "version": None, "task_id": None,
    })  # fmt: skip
    assert [i["id"] for i in packet["items"]] == [record["id"]]
    listed = await _tool(human, "knowledge_search", {"project": project, "tag": None, "q": None})
    assert [i["id"] for i in listed["items"]] == [record["id"]]
