"""An agent's work loop through the MCP tools alone, as a model reads them:
what decision_wait answers for every settled status, and what a lease
holder is told when a decision answered deny holds the task it holds
(mcpjourney)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.mcp_support import TRANSPORTS, Waypost, call, refused, session
from tests.test_mcp import _gated, own_waypost

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def waypost(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Waypost]:
    with own_waypost(tmp_path_factory.mktemp("mcp-journey")) as running:
        yield running


def _decided(waypost: Waypost, name: str, disposition: str) -> tuple[str, str, str]:
    """A project with a task and a human-required decision on it answered
    `disposition` by a human over REST: (project, task id, decision id)."""
    project, task_id, decisions, decision_id = _gated(waypost, name)
    answer = {"expected_generation": 1, "disposition": disposition, "answer": "Yes",
              "rationale": "Decided.", "conditions_confirmed": disposition == "allow"}  # fmt: skip
    assert waypost.rest("POST", f"{decisions}/{decision_id}/answer", answer).is_success
    return project, task_id, decision_id


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_wait_on_a_stale_or_deferred_decision_says_so_at_once(
    waypost: Waypost, transport: str
) -> None:
    """decision_wait's description and docs/mcp.md: it "returns at once when
    the decision is not pending", outcome `answered` for an answer (deny and
    defer included) and `stale` for one whose task changed. Only `answered`
    (allow, deny), `expired` and `timeout` were pinned: a wait that took a
    stale or deferred decision for pending ran to its bound and said
    `timeout`, and the agent called it again, for ever."""
    stale_project, task_id, stale = _decided(waypost, f"wait-stale-{transport}", "allow")
    edit = {"expected_revision": 1, "description": "Now with a schema change."}
    r = waypost.rest("PATCH", f"/api/v1/projects/{stale_project}/tasks/{task_id}", edit)
    assert r.is_success, r.text
    deferred_project, _, deferred = _decided(waypost, f"wait-defer-{transport}", "defer")
    agent = waypost.principal("agent", f"waiter-{transport}")
    async with session(transport, waypost.url, agent) as s:
        waited = await call(s, "decision_wait", project=stale_project, decision_id=stale,
                            timeout_seconds=1)  # fmt: skip
        assert (waited["outcome"], waited["decision"]["status"]) == ("stale", "stale")
        waited = await call(s, "decision_wait", project=deferred_project, decision_id=deferred,
                            timeout_seconds=1)  # fmt: skip
        assert (waited["outcome"], waited["decision"]["status"]) == ("answered", "deferred")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_holder_behind_a_denied_decision_is_told_to_give_the_task_back(
    waypost: Waypost, transport: str
) -> None:
    """An agent holds a task, opens a decision on it, and a human denies it:
    its task_submit is refused and the advice said only to claim other work.
    Followed to the letter, the agent kept the blocked task's lease: once the
    decision was reconsidered and allowed, nobody could claim the task until
    that lease expired (lease_seconds, up to a day), and then only by
    task_recover. The advice now says to task_release it, and doing so
    leaves the task open for whoever takes it once the decision allows."""
    project = waypost.project(f"held-deny-{transport}")
    task_id = waypost.task(project)
    agent = waypost.principal("agent", f"holder-{transport}")
    async with session(transport, waypost.url, agent) as s:
        claimed = await call(s, "task_claim", project=project)
        assert claimed["task"]["id"] == task_id
        opened = await call(s, "decision_open", project=project, question="Go?",
                            options=["Yes", "No"], rationale="Risky.", required_actor="human",
                            task_ids=[task_id], environment="prod")  # fmt: skip
        no = {"expected_generation": 1, "disposition": "deny", "answer": "No",
              "rationale": "Not now."}  # fmt: skip
        path = f"/api/v1/projects/{project}/decisions/{opened['id']}/answer"
        assert waypost.rest("POST", path, no).is_success
        message = await refused(s, "task_submit", project=project, task_id=task_id,
                                summary="Done.")  # fmt: skip
        assert message.startswith("decision_required") and "deny or defer" in message
        details = json.loads(message.splitlines()[-1])["error"]["details"]
        assert details["declined"] == [opened["id"]]
        assert "task_release" in message, message
        released = await call(s, "task_release", project=project, task_id=task_id)
        assert (released["status"], released["lease"]) == ("open", None)
    # a claim behind the same decision is not told to task_release what it does not
    # hold (REST's words beside it say "give a task you hold back", conditionally)
    other = waypost.principal("agent", f"other-{transport}")
    async with session(transport, waypost.url, other) as s:
        message = await refused(s, "task_claim", project=project, task_id=task_id)
        assert message.startswith("decision_required") and "task_release" not in message


async def test_no_argument_description_carries_the_codes_notes(waypost: Waypost) -> None:
    """A model reads each argument's description: knowledge_correct's `scope`
    and `provenance` carried their REST model's whole docstring, the code's
    reasoning included ("Required rather than defaulted so that a client that
    forgets a dimension gets a 400 ..."), an HTTP status no tool answers."""
    agent = waypost.principal("agent", "describer")
    async with session("http", waypost.url, agent) as s:
        tools = (await s.list_tools()).tools

    def descriptions(node: object) -> Iterator[str]:
        if isinstance(node, dict):
            if isinstance(node.get("description"), str):
                yield node["description"]
            for value in node.values():
                yield from descriptions(value)
        elif isinstance(node, list):
            for value in node:
                yield from descriptions(value)

    said = [(t.name, d) for t in tools for d in descriptions(t.inputSchema)]
    assert [(name, d) for name, d in said if "\n" in d or " 400" in d] == []
    scope = next(t for t in tools if t.name == "knowledge_correct").inputSchema
    assert scope["properties"]["scope"]["description"] == (
        "A correction's complete scope: every dimension is sent, even when empty."
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_decision_gets_history_comes_newest_first_as_its_description_says(
    waypost: Waypost, transport: str
) -> None:
    """decision_get's description: its history is "newest first, paged with
    cursor and limit" (docs/decisions.md's detail route); a description
    saying "oldest first" passed every test (mutantaudit13)."""
    project, _task, decision = _decided(waypost, f"history-{transport}", "deny")
    path = f"/api/v1/projects/{project}/decisions/{decision}/reopen"
    assert waypost.rest("POST", path, {"expected_generation": 1, "rationale": "Again."}).is_success
    agent = waypost.principal("agent", f"reader-{transport}")
    async with session(transport, waypost.url, agent) as s:
        listed = await s.list_tools()
        (described,) = [t.description for t in listed.tools if t.name == "decision_get"]
        assert described is not None and "newest first, paged with cursor and limit" in described
        got = await call(s, "decision_get", project=project, decision_id=decision)
        assert [g["generation"] for g in got["history"]["items"]] == [2, 1], got["history"]
        page = await call(s, "decision_get", project=project, decision_id=decision, limit=1)
        assert [g["generation"] for g in page["history"]["items"]] == [2]
        cursor = page["history"]["next_cursor"]
        rest = await call(s, "decision_get", project=project, decision_id=decision, cursor=cursor)
        assert [g["generation"] for g in rest["history"]["items"]] == [1]
