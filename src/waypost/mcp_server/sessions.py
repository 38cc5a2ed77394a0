"""The Waypost agent session an MCP session keeps for its agent.

Started on the first tool call that needs one (claims and owner operations),
carried on every call after that, heartbeated while the MCP session lives,
ended when it closes. Humans work without one.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc

from waypost.mcp_server.backend import Backend
from waypost.mcp_server.calls import ApiError

log = logging.getLogger("waypost.mcp")

# A session lives 15 minutes from its latest heartbeat: beat well inside that.
HEARTBEAT_SECONDS = 300.0
# After a beat fails (the service restarting, busy), the next comes this
# soon, doubling up to HEARTBEAT_SECONDS: waiting a whole interval, two
# short outages that happened to cover two beats let the session lapse
# (and the agent's leases with it) though the service was up nearly throughout.
HEARTBEAT_RETRY_SECONDS = 10.0


class AgentSession:
    def __init__(
        self,
        mcp_id: str,
        tasks: anyio.abc.TaskGroup,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        retry_seconds: float = HEARTBEAT_RETRY_SECONDS,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self.mcp_id = mcp_id
        self.session_id: str | None = None
        self._backend: Backend | None = None
        self._tasks = tasks
        self._lock = anyio.Lock()
        self._serial = itertools.count(1)
        self._heartbeat_seconds = heartbeat_seconds
        self._retry_seconds = retry_seconds
        # how the keeper waits between beats (a test records the schedule of
        # minutes and seconds instead of waiting it out)
        self._sleep = sleep

    def key(self, purpose: str) -> str:
        """A fresh idempotency key for the keeper's own session calls."""
        return f"mcp-{self.mcp_id}-{purpose}-{next(self._serial)}"

    def carry(self, backend: Backend) -> None:
        """The latest tool call's token keeps the session (its heartbeats and
        its end), whatever the tool: an agent may rotate its token inside one
        MCP session and revoke the old one. Noted only by calls that needed
        the session, a rotation followed by reads kept the revoked token: the
        next beat was refused, the session dropped and the agent's lease lost."""
        self._backend = backend

    async def ensure(self, backend: Backend) -> str | None:
        """The live session id, starting one for an agent; None for a human."""
        async with self._lock:
            if self.session_id is not None:
                self._backend = backend  # see `carry`
                return self.session_id
            if await backend.principal_kind() != "agent":
                return None
            # seen through once asked (the call's own timeout bounds it): a
            # call cancelled between the start's commit and its reply left
            # the session live, unknown here, with no heartbeat and nobody
            # to end it until it expired
            with anyio.CancelScope(shield=True):
                reply = await backend.call(
                    "POST", "/api/v1/sessions", {}, body={}, idempotency_key=self.key("start")
                )
                session_id = str(reply.body["id"])
                self.session_id, self._backend = session_id, backend
                self._tasks.start_soon(self._heartbeat, session_id)
            log.info("mcp session %s: started agent session %s", self.mcp_id, session_id)
            return session_id

    def forget(self, session_id: str) -> None:
        """The session is no longer live (ended elsewhere, or expired)."""
        if self.session_id == session_id:
            self.session_id = None

    async def _heartbeat(self, session_id: str) -> None:
        path = "/api/v1/sessions/{session_id}/heartbeat"
        delay, retry = self._heartbeat_seconds, self._retry_seconds
        while True:
            await self._sleep(delay)
            backend = self._backend
            if self.session_id != session_id or backend is None:
                return
            try:
                await backend.call(
                    "POST", path, {"session_id": session_id}, idempotency_key=self.key("beat")
                )
                delay, retry = self._heartbeat_seconds, self._retry_seconds
            except ApiError as error:
                if error.code in ("forbidden", "unauthenticated"):
                    # ended elsewhere, or the token was revoked: stop keeping it
                    self.forget(session_id)
                    return
                # busy or unreachable: try again soon, well before expiry
                log.warning("heartbeat of session %s failed: %s", session_id, error.code)
                delay, retry = min(retry, self._heartbeat_seconds), retry * 2

    async def close(self) -> None:
        """End the session (the MCP session is closing)."""
        session_id, backend = self.session_id, self._backend
        self.session_id = None
        if session_id is None or backend is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                await backend.call(
                    "POST",
                    "/api/v1/sessions/{session_id}/end",
                    {"session_id": session_id},
                    idempotency_key=self.key("end"),
                )
                log.info("mcp session %s: ended agent session %s", self.mcp_id, session_id)
            except ApiError as error:
                log.warning("ending session %s failed: %s", session_id, error.code)
            except Exception:
                log.exception("ending session %s failed", session_id)
