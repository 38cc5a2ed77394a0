"""A stream ends with the reason it ends: a revoked token or an ended
session raises its refusal out of the stream, which the SSE route writes
as an `event: error` (tests/test_live_sse.py) and a GraphQL subscription
sends as an error before its `complete`. Both ended as a stopping server
ends them, with nothing: a dashboard that subscribes again on `complete`
could not tell, and its socket closed `4401` only at its own re-check, up
to 15 seconds later (gqlwsaudit)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from tests.conftest import Caller, Service
from tests.decisions_support import new_task
from tests.live_support import QUICK, graphql_ws, running
from tests.tasks_support import open_decision
from waypost.clock import format_time
from waypost.errors import Forbidden, Unauthenticated, Unavailable
from waypost.live import hub_for
from waypost.live.streams import OPENED, decision_changes, project_event_batches
from waypost.resolvers.access import principals
from waypost.storage import files
from waypost.storage.connection import STORAGE_RETRY_AFTER


async def revoke(service: Service, caller: Caller) -> None:
    actor = await service.rt.db.read(lambda c: principals.authenticate(c, caller.token, "api"))
    at = format_time(service.clock.now())
    await service.rt.db.write(lambda c: principals.revoke_token(c, actor.token_id, at))


async def test_project_events_of_a_revoked_token_end_with_unauthenticated(
    service: Service, human: Caller, project: str
) -> None:
    hub_for(service.rt, QUICK)
    bob = await service.principal("human", "bob")
    actor = await service.rt.db.read(lambda c: principals.authenticate(c, bob.token, "api"))
    batches = project_event_batches(service.rt, actor, bob.token, "demo", None)
    assert await anext(batches) is OPENED
    await revoke(service, bob)
    with pytest.raises(Unauthenticated):
        async with asyncio.timeout(5):  # QUICK re-checks every 0.3 s
            async for _ in batches:
                pass


async def test_decision_changes_in_an_ended_session_end_with_session_not_live(
    service: Service, human: Caller, project: str
) -> None:
    hub_for(service.rt, QUICK)
    decision_id = await open_decision(human, await new_task(human, "judged"))
    agent = await service.principal("agent", "ada")
    session = await agent.start_session()
    found = await service.rt.db.read(lambda c: principals.authenticate(c, agent.token, "api"))
    actor = dataclasses.replace(found, session_id=session)
    changes = decision_changes(service.rt, actor, agent.token, decision_id)
    await anext(changes)  # the decision as it is
    ended = await agent.post(f"/api/v1/sessions/{session}/end")
    assert ended.status_code == 200, ended.text
    with pytest.raises(Forbidden) as refused:
        async with asyncio.timeout(5):
            async for _ in changes:
                pass
    assert refused.value.details == {"reason": "session_not_live"}


async def test_a_subscription_of_a_revoked_token_gets_the_refusal_before_its_socket_closes(
    service: Service, human: Caller, project: str
) -> None:
    """docs/graphql.md: once the token is revoked, open subscriptions end
    "each with a `next` carrying the refusal as its error ... then
    `complete`". The socket's own watch re-checks on the same period and
    started first (at connection_init), so it closed the socket 4401 before
    the subscription's re-check could send anything: the refusal reached
    the client only when the subscribe came late in the watch's period
    (review90)."""
    bob = await service.principal("human", "bob")
    frames: list[object] = []
    async with running(service) as base, graphql_ws(base, bob.token) as client:
        await client.subscribe(
            "subscription S($p: ID!) { projectEvents(projectId: $p) { sequence } }",
            {"p": "demo"},
        )
        await asyncio.sleep(0.1)  # the subscription is listening (QUICK re-checks every 0.3 s)
        await revoke(service, bob)
        with contextlib.suppress(ConnectionClosed):
            while True:
                frames.append(await client.receive(timeout=5))
    errors = [f["payload"]["errors"] for f in frames if isinstance(f, dict) and f["type"] == "next"]
    assert [e[0]["extensions"]["code"] for e in errors] == ["unauthenticated"], frames
    assert frames[-1] == {"id": "1", "type": "complete"}, frames


async def opened(service: Service, human: Caller, stream: str) -> Any:
    """`stream` of the demo project (or of a decision opened in it) as the
    human's, past what it sends first, re-checking its token every 0.3 s."""
    hub_for(service.rt, QUICK)
    actor = await service.rt.db.read(lambda c: principals.authenticate(c, human.token, "api"))
    if stream == "project_events":
        items: Any = project_event_batches(service.rt, actor, human.token, "demo", None)
        assert await anext(items) is OPENED
    else:
        decision_id = await open_decision(human, await new_task(human, "judged"))
        items = decision_changes(service.rt, actor, human.token, decision_id)
        await anext(items)  # the decision as it is
    return items


@pytest.mark.parametrize("stream", ["project_events", "decision_changes"])
async def test_a_stream_whose_files_changed_under_the_service_ends_with_that_503(
    service: Service,
    human: Caller,
    project: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    stream: str,
) -> None:
    """live/streams.py `refusal`: a store an operator must mend (Retry-After
    30: here the database file moved away under the service) ends the
    stream at its token re-check with that very 503, as a token revoked
    meanwhile could not be told; a busy store (Retry-After 1) does not.
    Only a stand-in read was shown ending a re-check, and only as "not
    valid": a stream carrying on, or ending with another error, went
    unnoticed (mutanttests)."""
    monkeypatch.setattr(files, "_READ_CHECK_SECONDS", 0.0)  # every read looks at the files
    items = await opened(service, human, stream)
    moved = tmp_path / "moved.db"
    service.db_path.rename(moved)
    try:
        with pytest.raises(Unavailable) as ended:
            async with asyncio.timeout(5):  # QUICK re-checks every 0.3 s
                async for _ in items:
                    pass
    finally:
        moved.rename(service.db_path)
    assert ended.value.retry_after == STORAGE_RETRY_AFTER
    assert ended.value.details == {"reason": "database_files_changed"}


@pytest.mark.parametrize("stream", ["project_events", "decision_changes"])
async def test_a_stream_whose_token_check_fails_ends_with_a_503_not_a_retry_for_ever(
    service: Service,
    human: Caller,
    project: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    stream: str,
) -> None:
    """live/streams.py `refusal`: a fault while re-checking the token is
    logged, and the stream ends with a 503 (Retry-After 5) "rather than
    trust a token nobody could check". A decision's stream rides out only
    the Retry-After 1 answers (a busy store, a clock file being rewritten):
    told Retry-After 1 for the fault, it re-checked for ever and never
    ended (mutanttests: no test made the check fail)."""
    items = await opened(service, human, stream)

    def fault(*args: Any) -> Any:
        raise RuntimeError("a fault of the token's look-up")

    monkeypatch.setattr(principals, "authenticate", fault)
    with caplog.at_level(logging.ERROR, logger="waypost.live"), pytest.raises(Unavailable) as ended:
        async with asyncio.timeout(5):  # QUICK re-checks every 0.3 s
            async for _ in items:
                pass
    assert ended.value.retry_after == 5, ended.value
    assert str(ended.value) == "the stream's token could not be checked again"
    assert "re-checking a stream's token failed" in caplog.text
