"""Request ids the SDK's transport files under one key: it keys a POST's
answer stream by `str(id)`, so `5` and `"5"` (two requests, as JSON-RPC and
docs/mcp.md say) share one channel, and the string `"_GET_stream"` shares
the session's standalone GET stream's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from tests.mcp_support import Waypost
from tests.test_mcp import (
    _an_agent_and_a_decision,
    _open_mcp_session,
    _until_streams_admitted,
    _wait_outcome,
    own_waypost,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def waypost(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Waypost]:
    with own_waypost(tmp_path_factory.mktemp("mcp-ids")) as running:
        yield running


def _a_two_second_wait_with_id_5(project: str, decision_id: str) -> dict[str, object]:
    arguments = {"project": project, "decision_id": decision_id, "timeout_seconds": 2}
    params = {"name": "decision_wait", "arguments": arguments}
    return {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params}


async def test_an_integer_id_and_its_string_twin_are_both_answered(waypost: Waypost) -> None:
    """docs/mcp.md: "the ids `5` and `"5"` are two requests, as JSON-RPC
    says". A `ping` with id `"5"` sent while a `decision_wait` with id `5`
    ran took the wait's answer channel: the wait's POST was never answered
    (its stream sent keep-alive comments for minutes past its 2 s bound),
    and the id stayed "still running" in the session for ever."""
    project, agent, decision = _an_agent_and_a_decision(waypost, "twin-ids", "twin")
    wait = _a_two_second_wait_with_id_5(project, decision["id"])
    async with httpx.AsyncClient(timeout=30) as client:
        headers = await _open_mcp_session(client, waypost.url, agent)
        first = asyncio.create_task(client.post(f"{waypost.url}/mcp", json=wait, headers=headers))
        stream = f"{waypost.url}/api/v1/projects/{project}/events/stream"
        await _until_streams_admitted(stream, agent, 15)  # the wait is listening
        twin = {"jsonrpc": "2.0", "id": "5", "method": "ping"}
        pinged = await client.post(f"{waypost.url}/mcp", json=twin, headers=headers)
        # either answered as its own request or refused as still running
        assert pinged.status_code in (200, 409), pinged.text
        answered = await asyncio.wait_for(first, 15)  # bound 2 s, plus at most 5 (docs)
        assert _wait_outcome(answered) == (5, "timeout")
        await client.delete(f"{waypost.url}/mcp", headers=headers)


async def test_a_request_id_named_as_the_sdks_get_stream_leaves_that_stream_alone(
    waypost: Waypost,
) -> None:
    """The SDK keeps the session's standalone GET stream under the key
    `"_GET_stream"`, and a request's answer channel under `str(id)`: a
    `ping` with that id took the GET stream's place. A second GET was then
    admitted (one per session, else 409), and the first, no longer known to
    the session, was never ended: not by DELETE, not by SIGTERM, whose stop
    waited for as long as its client held it."""
    agent = waypost.principal("agent", "get-stream-id")
    async with httpx.AsyncClient(timeout=httpx.Timeout(30, read=5)) as client:
        headers = await _open_mcp_session(client, waypost.url, agent)
        get = {**headers, "Accept": "text/event-stream"}
        async with client.stream("GET", f"{waypost.url}/mcp", headers=get) as first:
            assert first.status_code == 200
            ping = {"jsonrpc": "2.0", "id": "_GET_stream", "method": "ping"}
            pinged = await client.post(f"{waypost.url}/mcp", json=ping, headers=headers)
            async with client.stream("GET", f"{waypost.url}/mcp", headers=get) as second:
                # refused as the one stream the session has, whatever the ping got
                assert second.status_code == 409, (pinged.status_code, pinged.text)
        await client.delete(f"{waypost.url}/mcp", headers=headers)


async def test_a_twin_id_in_another_session_is_not_still_running(waypost: Waypost) -> None:
    """Only the caller's own session's ids are looked at: `"5"` in a second
    session of the same principal runs while `5` runs in the first (the
    scan over running ids with the session left out refused it 409;
    review90)."""
    project, agent, decision = _an_agent_and_a_decision(waypost, "twin-other", "twin-other")
    wait = _a_two_second_wait_with_id_5(project, decision["id"])
    async with httpx.AsyncClient(timeout=30) as client:
        first_session = await _open_mcp_session(client, waypost.url, agent)
        second_session = await _open_mcp_session(client, waypost.url, agent)
        first = asyncio.create_task(
            client.post(f"{waypost.url}/mcp", json=wait, headers=first_session)
        )
        stream = f"{waypost.url}/api/v1/projects/{project}/events/stream"
        await _until_streams_admitted(stream, agent, 15)  # the wait is listening
        twin = {"jsonrpc": "2.0", "id": "5", "method": "ping"}
        pinged = await client.post(f"{waypost.url}/mcp", json=twin, headers=second_session)
        assert pinged.status_code == 200, pinged.text
        assert _wait_outcome(await asyncio.wait_for(first, 15)) == (5, "timeout")
        for headers in (first_session, second_session):
            await client.delete(f"{waypost.url}/mcp", headers=headers)
