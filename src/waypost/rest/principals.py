"""REST routes: the caller and agent sessions."""

from __future__ import annotations

from typing import Any

from waypost.resolvers.access import sessions
from waypost.resolvers.core.receipts import Outcome
from waypost.rest.routing import Call, RouteTable

table = RouteTable("principals")


@table.get("/api/v1/me")
async def get_me(call: Call) -> dict[str, Any]:
    """The caller and its live session, if any."""
    return await sessions.me(call.rt, call.actor)


@table.post("/api/v1/sessions", status=201)
async def start_session(call: Call) -> Outcome:
    """Start an agent session (agents only); it lives 15 minutes unless renewed."""
    assert call.idem
    return await sessions.start(call.rt, call.actor, call.idem)


@table.post("/api/v1/sessions/{session_id}/heartbeat")
async def heartbeat_session(call: Call) -> Outcome:
    """Extend a live session by 15 minutes from now."""
    assert call.idem
    return await sessions.heartbeat(call.rt, call.actor, call.idem, call.params["session_id"])


@table.post("/api/v1/sessions/{session_id}/end")
async def end_session(call: Call) -> Outcome:
    """End a live session at once."""
    assert call.idem
    return await sessions.end(call.rt, call.actor, call.idem, call.params["session_id"])
