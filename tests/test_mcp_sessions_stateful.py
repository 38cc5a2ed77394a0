"""A stateful model of MCP sessions over /mcp, as a client sees them:
opened, used, deleted and used again (mcpsessionmodel)."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import httpx
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, invariant, precondition, rule
from starlette.routing import Route

from tests.conftest import Caller
from tests.mcp_support import MCP_HEADERS, messages_of
from tests.stateful_support import ServiceMachine, machine_settings
from waypost.live import hub_for
from waypost.mcp_server import http_endpoint
from waypost.mcp_server.http_endpoint import McpEndpoint

CAP = 2  # places per principal in the model (16 in the service), so the cap is met
HELLO = {"jsonrpc": "2.0", "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "model", "version": "1"}}}  # fmt: skip
# session ids no service ever gave: empty, the SDK's shape, short, long
NEVER = ["", "0" * 32, "nope", "x" * 200]


def _session_not_found(r: httpx.Response) -> None:
    """The SDK's answer to a session id it does not hold (docs/mcp.md)."""
    assert r.status_code == 404, r.text
    assert r.json() == {"jsonrpc": "2.0", "id": None,
                        "error": {"code": -32600, "message": "Session not found"}}  # fmt: skip


class McpSessionMachine(ServiceMachine):
    """Two agents open MCP sessions (at most CAP each), call tools in them,
    start their agent sessions, wait on a pending decision, delete them and
    use them after; every request names a session id of either agent,
    deleted or live, or one never given. The model: which sessions are live
    and whose, and which keep an agent session. Invariants: the service's
    count of MCP sessions, the hub's listeners and the
    agent sessions left live all agree with it between steps."""

    sessions = Bundle("sessions")

    def __init__(self) -> None:
        super().__init__()
        self.saved_cap = http_endpoint.SESSIONS_PER_PRINCIPAL
        http_endpoint.SESSIONS_PER_PRINCIPAL = CAP
        self.run(self._start())
        self.live: dict[str, str] = {}  # MCP session id -> its owner's name
        self.kept: dict[str, str] = {}  # MCP session id -> the agent session it keeps
        self.ids = 100

    async def _start(self) -> None:
        await self.open_service()
        self.callers = {name: await self.new_caller("agent", name) for name in ("ada", "bob")}
        hana = await self.new_caller("human", "hana")
        r = await hana.post("/api/v1/projects", {"id": "demo", "name": "D"})
        assert r.status_code == 201, r.text
        r = await hana.post("/api/v1/projects/demo/tasks", {"title": "t"})
        assert r.status_code == 201, r.text
        question = {"question": "Go?", "options": ["Yes", "No"], "rationale": "r",
                    "required_actor": "human", "task_ids": [r.json()["id"]],
                    "environment": "e"}  # fmt: skip
        r = await hana.post("/api/v1/projects/demo/decisions", question)
        assert r.status_code == 201, r.text
        self.decision = r.json()["id"]
        [endpoint] = [route.endpoint for route in self.app.routes
                      if isinstance(route, Route) and route.path == "/mcp"]  # fmt: skip
        assert isinstance(endpoint, McpEndpoint)
        self.endpoint = endpoint

    def teardown(self) -> None:
        http_endpoint.SESSIONS_PER_PRINCIPAL = self.saved_cap

        async def stop() -> None:
            await self.client.aclose()
            await self.lifespan.__aexit__(None, None, None)
            # what the SDK's event streams leave behind them (sse_starlette's
            # watcher of the server's stop) ends with the loop, not destroyed
            left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in left:
                task.cancel()
            await asyncio.gather(*left, return_exceptions=True)

        try:
            self.run(stop())
        finally:
            self.loop.close()
            self.tmp.cleanup()

    def _next_id(self) -> int:
        self.ids += 1
        return self.ids

    def _headers(self, caller: Caller, session_id: str | None) -> dict[str, str]:
        headers = {**caller.headers(session=False), **MCP_HEADERS}
        if session_id is not None:
            headers |= {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-06-18"}
        return headers

    async def _post(
        self, who: str, session_id: str | None, message: dict[str, Any]
    ) -> httpx.Response:
        caller = self.callers[who]
        return await self.client.post(
            "/mcp", json=message, headers=self._headers(caller, session_id)
        )

    async def _tool(self, who: str, session_id: str, name: str, **arguments: Any) -> httpx.Response:
        call = {"jsonrpc": "2.0", "id": self._next_id(), "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}  # fmt: skip
        return await self._post(who, session_id, call)

    def _mine(self, who: str, session_id: str) -> bool:
        return self.live.get(session_id) == who

    # --- rules -----------------------------------------------------------------

    @rule(target=sessions, who=st.sampled_from(["ada", "bob"]))
    def open(self, who: str) -> str:
        request_id = self._next_id()
        r = self.run(self._post(who, None, {**HELLO, "id": request_id}))
        if sum(owner == who for owner in self.live.values()) >= CAP:
            assert r.status_code == 429, r.text
            assert r.json()["error"]["code"] == -32600 and r.json()["id"] == request_id
            return "0" * 32  # a session id that names no session
        assert r.status_code == 200, r.text
        assert messages_of(r)[0]["id"] == request_id
        session_id = r.headers["mcp-session-id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        done = self.run(self._post(who, session_id, initialized))
        assert done.status_code == 202, done.text
        self.live[session_id] = who
        return session_id

    @rule(session_id=st.one_of(sessions, st.sampled_from(NEVER)),
          who=st.sampled_from(["ada", "bob"]))  # fmt: skip
    def me(self, session_id: str, who: str) -> None:
        """`me` names the agent session this MCP session keeps, or null."""
        r = self.run(self._tool(who, session_id, "me"))
        if not self._mine(who, session_id):
            _session_not_found(r)
            return
        assert r.status_code == 200, r.text
        result = messages_of(r)[0]["result"]
        assert not result.get("isError"), result
        kept = result["structuredContent"]["session"]
        assert (kept and kept["id"]) == self.kept.get(session_id)

    @rule(session_id=sessions, who=st.sampled_from(["ada", "bob"]))
    def claim(self, session_id: str, who: str) -> None:
        """A claim starts the agent session (nothing is ready: the only task
        is behind the pending decision, so the claim itself is refused)."""
        r = self.run(self._tool(who, session_id, "task_claim", project="demo"))
        if not self._mine(who, session_id):
            _session_not_found(r)
            return
        assert r.status_code == 200, r.text
        assert messages_of(r)[0]["result"]["isError"] is True
        if session_id not in self.kept:
            me = self.run(self._tool(who, session_id, "me"))
            kept = messages_of(me)[0]["result"]["structuredContent"]["session"]
            assert kept is not None
            self.kept[session_id] = kept["id"]

    @rule(session_id=sessions, who=st.sampled_from(["ada", "bob"]))
    def initialize_again(self, session_id: str, who: str) -> None:
        """A second initialize in a live session is answered in it and
        opens no other (it takes no place); in any other, the 404."""
        r = self.run(self._post(who, session_id, {**HELLO, "id": self._next_id()}))
        if not self._mine(who, session_id):
            _session_not_found(r)
            return
        assert r.status_code == 200, r.text
        assert r.headers.get("mcp-session-id", session_id) == session_id

    @rule(session_id=st.one_of(sessions, st.sampled_from(NEVER)),
          who=st.sampled_from(["ada", "bob"]))  # fmt: skip
    def delete(self, session_id: str, who: str) -> None:
        caller = self.callers[who]
        r = self.run(self.client.delete("/mcp", headers=self._headers(caller, session_id)))
        if not self._mine(who, session_id):
            _session_not_found(r)
            return
        assert r.status_code == 200, r.text
        self._closed(session_id)

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    def wait_then_delete(self, data: st.DataObject) -> None:
        """A decision_wait running as its session is deleted ends with the
        session, giving its listener back (docs/mcp.md)."""
        session_id = data.draw(st.sampled_from(sorted(self.live)))
        who = self.live[session_id]
        caller = self.callers[who]
        hub = hub_for(self.app.state.runtime)

        async def wait_and_delete() -> tuple[httpx.Response, httpx.Response]:
            async with anyio.create_task_group() as tasks:
                answers: list[httpx.Response] = []

                async def wait() -> None:
                    answers.append(await self._tool(
                        who, session_id, "decision_wait", project="demo",
                        decision_id=self.decision, timeout_seconds=60))  # fmt: skip

                tasks.start_soon(wait)
                with anyio.fail_after(10):  # a bound, not a timing: it listens soon
                    while hub.open_count() < 1:
                        await anyio.sleep(0.01)
                deleted = await self.client.delete(
                    "/mcp", headers=self._headers(caller, session_id)
                )
                # far below the wait's 60 s: the wait ends with its session
                with anyio.fail_after(10):
                    while not answers:
                        await anyio.sleep(0.01)
            return deleted, answers[0]

        deleted, waited = self.run(wait_and_delete())
        assert deleted.status_code == 200, deleted.text
        # the POST ends without an answer: its client closed the session
        assert waited.status_code == 200 and messages_of(waited) == [], waited.text
        self._closed(session_id)

    def _closed(self, session_id: str) -> None:
        """The model after a session's DELETE: the agent session it kept is
        ended (as the MCP session's server winds down, soon after)."""
        del self.live[session_id]
        kept = self.kept.pop(session_id, None)
        if kept is None:
            return

        async def until_ended() -> None:
            db = self.app.state.runtime.db
            query = "SELECT ended_at FROM sessions WHERE id = ?"
            with anyio.fail_after(10):
                while (await db.read(lambda c: c.execute(query, (kept,)).fetchone()))[0] is None:
                    await anyio.sleep(0.01)

        self.run(until_ended())

    # --- invariants ------------------------------------------------------------

    @invariant()
    def the_books_agree(self) -> None:
        rt = self.app.state.runtime
        assert self.endpoint.session_count() == len(self.live)
        assert not self.endpoint._running
        assert hub_for(rt).open_count() == 0
        query = "SELECT id FROM sessions WHERE ended_at IS NULL"
        open_ids = self.run(rt.db.read(lambda c: {row[0] for row in c.execute(query)}))
        assert open_ids == set(self.kept.values())


# about 4 s of steps when it passes; a failure shrinks one bug, not each it finds
McpSessionMachine.TestCase.settings = settings(
    machine_settings(8, steps=25), report_multiple_bugs=False
)
TestMcpSessions = McpSessionMachine.TestCase
