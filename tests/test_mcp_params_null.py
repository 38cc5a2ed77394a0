"""`"params": null` is taken as no params (**Choice**, docs/mcp.md): JSON-RPC
2.0 (4.2) asks for a structured value when params are present, but a client
that writes `null` for "none" means nothing else, and refusing it would
break such a client's `notifications/initialized` as well as its requests.
Any other value that is no object is refused (mcpconformance found the docs
saying every non-object was refused)."""

from __future__ import annotations

import pytest

from tests.conftest import Caller
from tests.mcp_support import MCP_HEADERS, open_session


@pytest.mark.parametrize("method", ["ping", "tools/list"])
async def test_params_null_is_taken_as_no_params(human: Caller, method: str) -> None:
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    message = {"jsonrpc": "2.0", "id": 4, "method": method, "params": None}
    r = await human.client.post("/mcp", json=message, headers=headers)
    assert r.status_code == 200, r.text
    assert '"result"' in r.text and '"error"' not in r.text, r.text


@pytest.mark.parametrize("params", [[], "x", 5, True])
async def test_params_of_another_kind_than_an_object_are_refused(
    human: Caller, params: object
) -> None:
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    message = {"jsonrpc": "2.0", "id": 4, "method": "ping", "params": params}
    r = await human.client.post("/mcp", json=message, headers=headers)
    assert r.status_code == 400, r.text
    answer = r.json()
    assert answer["id"] == 4 and answer["error"]["code"] == -32600, answer
    assert "params must be an object" in answer["error"]["message"]
