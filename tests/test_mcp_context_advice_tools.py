"""The `context` tool's `next_actions` over MCP (agentmcpjourney).

The tool's description tells an agent to "Follow `next_actions` when
`truncated` is true", and an MCP agent knows Waypost only through its tools.
When open decisions fill the largest budget, the packet's advice sends it to
"the decisions route (status=pending, stale or expired)" and "the tasks and
knowledge routes with q": REST routes, which an MCP client cannot call. The
same class of advice was fixed for GraphQL (`GRAPHQL_WORDS` in
`resolvers/context/packet.py`: "a dashboard on GraphQL was told
`include_shared=true` and 'the policy route', names its API does not have");
MCP got `REST_WORDS`. Its tools for the same reads are `task_list` and `knowledge_search`
with `q`, `policy`, and `decision_list`, which MCP lacked.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp_support import TRANSPORTS, Waypost, call, session
from tests.test_mcp import own_waypost

pytestmark = pytest.mark.slow

# a question of 3,990 four-byte characters: about 16 KB of the packet each
BIG = "\U0001f600" * 3990


@pytest.fixture(scope="module")
def waypost(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Waypost]:
    with own_waypost(tmp_path_factory.mktemp("mcp-context-advice")) as running:
        yield running


def _crowded(waypost: Waypost, name: str) -> str:
    """A project whose open decisions alone fill a packet of the largest
    budget, and one knowledge record that matches `sharding`."""
    project = waypost.project(name)
    task_id = waypost.task(project, "Hold the decisions")
    for n in range(9):
        r = waypost.rest("POST", f"/api/v1/projects/{project}/decisions", {
            "question": f"{BIG} {n}", "options": ["Yes", "No"], "rationale": "Big.",
            "required_actor": "human", "task_ids": [task_id], "environment": "dev"})  # fmt: skip
        assert r.status_code == 201, r.text
    r = waypost.rest("POST", f"/api/v1/projects/{project}/knowledge", {
        "kind": "lesson", "title": "Sharding by tenant", "body": "Reports break."})  # fmt: skip
    assert r.status_code == 201, r.text
    return project


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_context_advice_over_mcp_names_tools_not_rest_routes(
    waypost: Waypost, transport: str, tmp_path: Path
) -> None:
    project = _crowded(waypost, f"crowded-{transport}")
    agent = waypost.principal("agent", f"reader-{transport}")
    async with session(transport, waypost.url, agent) as s:
        tools = {t.name for t in (await s.list_tools()).tools}
        packet = await call(s, "context", project=project, q="sharding", budget=131072)
        # and the tool it names lists what the packet left out
        listed = await call(s, "decision_list", project=project, status="pending")
    assert packet["truncated"] is True
    assert all(item["type"] == "decision" for item in packet["items"])
    advice = " ".join(packet["next_actions"])
    assert advice, packet["next_actions"]
    # nothing an MCP agent cannot do: no REST route, no HTTP method or path
    assert "route" not in advice, advice
    assert "/api/v1" not in advice, advice
    # and what it can do instead is named by its tool
    for tool in ("decision_list", "task_list", "knowledge_search"):
        assert tool in tools and tool in advice, advice
    assert len(listed["items"]) == 9 > len(packet["items"])
