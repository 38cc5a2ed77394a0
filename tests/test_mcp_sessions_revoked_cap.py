"""The principal's cap of 16 MCP sessions when a token is revoked
(docs/mcp.md): the idle sessions opened with a revoked token stop counting,
but never so that the principal holds more than 16 sessions it can use.
Any of a principal's tokens may use its sessions (an agent rotates its
token inside one session, then revokes the old one)."""

from __future__ import annotations

import asyncio

from tests.conftest import Service
from tests.test_mcp_sessions import INITIALIZE, actor_of
from waypost.mcp_server.http_endpoint import SESSIONS_PER_PRINCIPAL
from waypost.resolvers.access import principals

ACCEPT = {"Accept": "application/json, text/event-stream"}
LISTING = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


async def test_a_session_rotated_to_a_new_token_is_not_freed_while_it_still_serves(
    service: Service,
) -> None:
    agent = await service.agent("rotating")
    actor = await actor_of(service, agent)
    at = service.clock.iso()
    issued = await service.rt.db.write(
        lambda c: principals.issue_token(c, actor.principal_id, "api", at)
    )
    old = {**agent.headers(session=False), **ACCEPT}
    new = {"Authorization": f"Bearer {issued['token']}", **ACCEPT}
    opened = [
        await agent.client.post("/mcp", json=INITIALIZE, headers=old)
        for _ in range(SESSIONS_PER_PRINCIPAL)
    ]
    assert [r.status_code for r in opened] == [200] * SESSIONS_PER_PRINCIPAL
    # the agent goes on in its first session with its new token
    rotated = opened[0].headers["mcp-session-id"]
    in_rotated = {**new, "Mcp-Session-Id": rotated, "Mcp-Protocol-Version": "2025-03-26"}
    assert (await agent.client.post("/mcp", json=LISTING, headers=in_rotated)).status_code == 200
    await service.rt.db.write(lambda c: principals.revoke_token(c, actor.token_id, at))
    fresh = 0
    for _ in range(SESSIONS_PER_PRINCIPAL + 1):
        r = await agent.client.post("/mcp", json=INITIALIZE, headers=new)
        if r.status_code != 200:
            assert r.status_code == 429, r.text
            break
        fresh += 1
    served = await agent.client.post("/mcp", json=LISTING, headers=in_rotated)
    # either the rotated session still counts, or it no longer serves
    usable = fresh + (1 if served.status_code == 200 else 0)
    assert usable <= SESSIONS_PER_PRINCIPAL, (fresh, served.status_code)


async def test_two_initializes_at_the_cap_take_one_freed_place_once(service: Service) -> None:
    """One session of a revoked token frees one place: two initializes sent
    at once, both at the cap when they read the revocation, get it once."""
    agent = await service.agent("racing")
    actor = await actor_of(service, agent)
    at = service.clock.iso()
    issued = await service.rt.db.write(
        lambda c: principals.issue_token(c, actor.principal_id, "api", at)
    )
    old = {**agent.headers(session=False), **ACCEPT}
    new = {"Authorization": f"Bearer {issued['token']}", **ACCEPT}
    first = await agent.client.post("/mcp", json=INITIALIZE, headers=old)
    assert first.status_code == 200
    for _ in range(SESSIONS_PER_PRINCIPAL - 1):
        assert (await agent.client.post("/mcp", json=INITIALIZE, headers=new)).status_code == 200
    await service.rt.db.write(lambda c: principals.revoke_token(c, actor.token_id, at))
    both = await asyncio.gather(
        *(agent.client.post("/mcp", json=INITIALIZE, headers=new) for _ in range(2))
    )
    assert sorted(r.status_code for r in both) == [200, 429]


async def test_an_initialize_refused_at_the_cap_reads_each_token_once(
    service: Service, monkeypatch: object
) -> None:
    """Each idle session's token was read on its own: sixteen reads for each
    initialize refused at the cap, however many times a client retried
    (review76). One token in use: one read."""
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    agent = await service.agent("retrying")
    both = {**agent.headers(session=False), **ACCEPT}
    for _ in range(SESSIONS_PER_PRINCIPAL):
        assert (await agent.client.post("/mcp", json=INITIALIZE, headers=both)).status_code == 200
    reads = 0
    real = service.rt.db.read

    async def counted(fn: object) -> object:
        nonlocal reads
        reads += 1
        return await real(fn)  # type: ignore[arg-type]

    monkeypatch.setattr(service.rt.db, "read", counted)
    refused = await agent.client.post("/mcp", json=INITIALIZE, headers=both)
    assert refused.status_code == 429
    assert reads <= 2, reads  # the gate's authentication and the one token's check
