"""The agent session an MCP session keeps: started on demand, heartbeated,
ended; and the idempotency keys derived for calls sent without one."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.conftest import Caller, MovableClock, Service, copy_database, serving
from tests.mcp_support import MCP_HEADERS, open_session
from waypost.mcp_server import http_endpoint
from waypost.mcp_server.backend import LocalBackend
from waypost.mcp_server.calls import ApiError
from waypost.mcp_server.server import McpState, _once_more_if_session_ended, derived_key
from waypost.mcp_server.sessions import AgentSession
from waypost.mcp_server.tools import PROJECT
from waypost.resolvers.access import principals
from waypost.resolvers.core.receipts import check_key
from waypost.runtime import Actor
from waypost.settings import Settings


async def actor_of(service: Service, caller: Caller) -> Actor:
    """The actor the public app's gate makes of the caller's token."""
    return await service.rt.db.read(lambda conn: principals.authenticate(conn, caller.token, "api"))


async def session_row(service: Service, session_id: str) -> dict[str, str | None]:
    def read(conn: object) -> dict[str, str | None]:
        row = conn.execute(  # type: ignore[attr-defined]
            "SELECT expires_at, ended_at FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        return {"expires_at": row["expires_at"], "ended_at": row["ended_at"]}

    return await service.rt.db.read(read)


async def test_an_agent_session_is_started_once_heartbeated_and_ended(service: Service) -> None:
    agent = await service.principal("agent", "keeper")
    backend = LocalBackend(service.rt, await actor_of(service, agent))
    async with anyio.create_task_group() as tasks:
        keeper = AgentSession("m1", tasks, heartbeat_seconds=0.05)
        session_id = await keeper.ensure(backend)
        assert session_id is not None
        assert await keeper.ensure(backend) == session_id
        first = await session_row(service, session_id)
        service.clock.advance(minutes=10)
        with anyio.fail_after(5):
            while (await session_row(service, session_id))["expires_at"] == first["expires_at"]:
                await anyio.sleep(0.05)
        renewed = await session_row(service, session_id)
        assert renewed["expires_at"] == "2026-11-29T18:25:00.000Z"
        await keeper.close()
        tasks.cancel_scope.cancel()
    assert (await session_row(service, session_id))["ended_at"] == service.clock.iso()


class _Outage(LocalBackend):
    """The service unreachable for the first `failures` heartbeats."""

    def __init__(self, backend: LocalBackend, failures: int) -> None:
        super().__init__(backend.rt, backend.actor)
        self.failures, self.beats = failures, 0

    async def call(self, method: str, path: str, params: dict[str, str], **kw: Any) -> Any:
        if path.endswith("/heartbeat"):
            self.beats += 1
            if self.beats <= self.failures:
                raise ApiError("unavailable", "ConnectError", {}, 503)
        return await super().call(method, path, params, **kw)


async def test_a_failed_heartbeat_is_tried_again_soon_not_an_interval_later(
    service: Service,
) -> None:
    """Waiting a whole interval after a failure, two short outages over two
    beats let the session lapse though the service was up nearly throughout."""
    agent = await service.principal("agent", "outage")
    backend = _Outage(LocalBackend(service.rt, await actor_of(service, agent)), failures=3)
    async with anyio.create_task_group() as tasks:
        keeper = AgentSession("m-out", tasks, heartbeat_seconds=0.5, retry_seconds=0.01)
        session_id = await keeper.ensure(backend)
        assert session_id is not None
        first = await session_row(service, session_id)
        service.clock.advance(minutes=10)
        # one interval, then three quick retries: at the interval's pace the
        # fourth beat would come after 2 s
        with anyio.fail_after(1.5):
            while (await session_row(service, session_id))["expires_at"] == first["expires_at"]:
                await anyio.sleep(0.02)
        assert backend.beats >= 4 and keeper.session_id == session_id
        await keeper.close()
        tasks.cancel_scope.cancel()


class _Beats(LocalBackend):
    """Counts the heartbeats sent; those numbered in `failing` (from 1) fail
    as an unreachable service's would, the others reach the service."""

    def __init__(self, backend: LocalBackend, failing: frozenset[int] = frozenset()) -> None:
        super().__init__(backend.rt, backend.actor)
        self.failing, self.beats = failing, 0

    async def call(self, method: str, path: str, params: dict[str, str], **kw: Any) -> Any:
        if path.endswith("/heartbeat"):
            self.beats += 1
            if self.beats in self.failing:
                raise ApiError("unavailable", "ConnectError", {}, 503)
        return await super().call(method, path, params, **kw)


async def test_the_keeper_beats_on_the_documented_schedule(service: Service) -> None:
    """docs/mcp.md: a beat every 5 minutes; one that fails is tried again
    after 10 seconds, then 20, 40, ... up to the 5 minutes; a beat that goes
    through goes back to the interval (the other tests set their own
    intervals: mutantaudit6). The waits are noted, not waited."""
    agent = await service.principal("agent", "schedule")
    backend = _Beats(LocalBackend(service.rt, await actor_of(service, agent)),
                     failing=frozenset({1, 2, 3, 4, 5, 6, 7, 9}))  # fmt: skip
    slept: list[float] = []
    kept: list[tuple[AgentSession, str]] = []

    async def noted(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 11:
            keeper, session_id = kept[0]
            keeper.forget(session_id)  # the beats end at the next look
        await anyio.sleep(0)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            keeper = AgentSession("m-schedule", tasks, sleep=noted)
            session_id = await keeper.ensure(backend)
            assert session_id is not None
            kept.append((keeper, session_id))
    assert slept == [300, 10, 20, 40, 80, 160, 300, 300, 300, 10, 300]
    assert backend.beats == 10


@pytest.mark.parametrize("how", ["token revoked", "session ended elsewhere"])
async def test_a_heartbeat_refused_for_good_stops_the_keeper(service: Service, how: str) -> None:
    """The agent's only token revoked (`unauthenticated`), or its session
    ended by another client of the agent (`forbidden`): every beat would be
    refused, and always will be. The keeper forgets the session after the
    first refusal instead of retrying it for ever as if the service were busy."""
    agent = await service.principal("agent", "refused")
    actor = await actor_of(service, agent)
    backend = _Beats(LocalBackend(service.rt, actor))
    refused = anyio.Event()

    async def once_refused(seconds: float) -> None:
        # no beat before the refusal is made, however slow the machine
        await refused.wait()
        await anyio.sleep(0.01)

    async with anyio.create_task_group() as tasks:
        keeper = AgentSession("m-rev", tasks, sleep=once_refused)
        session_id = await keeper.ensure(backend)
        assert session_id is not None
        if how == "token revoked":
            at = service.clock.iso()
            await service.rt.db.write(lambda c: principals.revoke_token(c, actor.token_id, at))
        else:
            ended = await agent.post(f"/api/v1/sessions/{session_id}/end", {})
            assert ended.status_code == 200, ended.text
        refused.set()
        with anyio.fail_after(5):
            while keeper.session_id is not None:
                await anyio.sleep(0.01)
        await anyio.sleep(0.2)  # twenty waits: no beat follows the refusal
        assert backend.beats == 1
        tasks.cancel_scope.cancel()


async def test_a_human_gets_no_session(service: Service, human: Caller) -> None:
    async with anyio.create_task_group() as tasks:
        keeper = AgentSession("m2", tasks)
        assert await keeper.ensure(LocalBackend(service.rt, await actor_of(service, human))) is None
        await keeper.close()
        tasks.cancel_scope.cancel()


@pytest.mark.parametrize("request_id", [7, "abc", "with space", "ü" * 300, ""])
def test_derived_keys_are_valid_keys_and_differ_per_request(request_id: object) -> None:
    state = McpState("0123abcd", None)  # type: ignore[arg-type]
    key = derived_key(state, request_id)
    check_key(key)
    assert key != derived_key(state, f"{request_id}x")
    assert key != derived_key(McpState("other", None), request_id)  # type: ignore[arg-type]


async def test_a_body_over_the_rest_limit_is_payload_too_large(
    service: Service, human: Caller, project: str
) -> None:
    """/mcp took 262 KB of arguments (its JSON-RPC envelope limit) that the
    REST route, and `waypost mcp` over it, refuse with 413."""
    backend = LocalBackend(service.rt, await actor_of(service, human))
    lesson = {"kind": "lesson", "title": "t", "body": "x" * 65_536}
    body = {"kind": "fact", "title": "Big", "body": "y", "tags": ["a" * 64] * 32,
            "lessons": [lesson] * 4}  # fmt: skip
    with pytest.raises(ApiError) as refused:
        await backend.call("POST", PROJECT + "/knowledge", {"project": project}, body=body)
    assert (refused.value.code, refused.value.status) == ("payload_too_large", 413)
    rows = await service.rt.db.read(
        lambda c: c.execute("SELECT count(*) FROM knowledge").fetchone()
    )
    assert rows[0] == 0


async def test_a_retry_forgets_only_the_session_its_own_call_sent() -> None:
    """Two calls sent with one ended session: the first to fail retried and
    started another session; the second then forgot that live one (its
    claims lost their keeper), not the ended one it had sent."""
    async with anyio.create_task_group() as tasks:
        agent = AgentSession("mcp-1", tasks)
        agent.session_id = "ses_ended"
        state = McpState("mcp-1", agent)
        answered = anyio.Event()
        sent: list[str | None] = []

        async def kept() -> str | None:
            return agent.session_id

        async def slow(session: str | None) -> str:
            sent.append(session)
            if session == "ses_ended":
                await answered.wait()
                raise ApiError("forbidden", "ended", {"reason": "session_not_live"}, 403)
            return "done"

        tasks.start_soon(_once_more_if_session_ended, state, kept, slow)
        await anyio.sleep(0.01)  # sent with the ended session, waiting for its answer
        agent.session_id = "ses_live"  # meanwhile another call's retry started this one
        answered.set()
        await anyio.sleep(0.01)
    assert agent.session_id == "ses_live"
    assert sent == ["ses_ended", "ses_live"]


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-03-26", "capabilities": {},
    "clientInfo": {"name": "flood", "version": "1"}}}  # fmt: skip


async def test_one_principal_holds_at_most_16_mcp_sessions(service: Service) -> None:
    """The SDK caps sessions for the whole server only: one agent's token
    filled all 10,000 and every other principal was refused."""
    from waypost.mcp_server.http_endpoint import SESSIONS_PER_PRINCIPAL

    agent, other = await service.agent(), await service.agent("other")

    async def initialize(caller: Caller) -> httpx.Response:
        headers = {**caller.headers(session=False), "Accept": "application/json, text/event-stream"}
        return await caller.client.post("/mcp", json=INITIALIZE, headers=headers)

    opened = [await initialize(agent) for _ in range(SESSIONS_PER_PRINCIPAL)]
    assert all(r.status_code == 200 for r in opened)
    refused = await initialize(agent)
    assert refused.status_code == 429 and "at most 16" in refused.json()["error"]["message"]
    assert refused.json()["id"] == INITIALIZE["id"]  # it was null
    assert (await initialize(other)).status_code == 200  # another principal is not held up
    first = opened[0].headers["mcp-session-id"]
    headers = {**agent.headers(session=False), "Mcp-Session-Id": first}
    closed = await agent.client.delete("/mcp", headers=headers)
    assert closed.status_code == 200
    assert (await initialize(agent)).status_code == 200


async def test_sessions_of_a_revoked_token_free_their_principals_places(
    service: Service,
) -> None:
    """Sixteen sessions opened with a leaked token, revoked at once, kept the
    principal's new token out of MCP until they idled out, 15 minutes
    (tokenjourney): the cap counts the principal's sessions, whichever token
    opened them. A revoked token's idle sessions stop counting; a live
    token's still do."""
    from waypost.mcp_server.http_endpoint import SESSIONS_PER_PRINCIPAL

    leaked = await service.agent("leaky")
    actor = await actor_of(service, leaked)
    at = service.clock.iso()
    issued = await service.rt.db.write(
        lambda c: principals.issue_token(c, actor.principal_id, "api", at)
    )
    accept = {"Accept": "application/json, text/event-stream"}
    old = {**leaked.headers(session=False), **accept}
    new = {"Authorization": f"Bearer {issued['token']}", **accept}
    opened = [await leaked.client.post("/mcp", json=INITIALIZE, headers=old)]
    # one opened with the new token, which stays counted
    kept = await leaked.client.post("/mcp", json=INITIALIZE, headers=new)
    assert kept.status_code == 200
    for _ in range(SESSIONS_PER_PRINCIPAL - 2):
        opened.append(await leaked.client.post("/mcp", json=INITIALIZE, headers=old))
    assert all(r.status_code == 200 for r in opened)
    assert (await leaked.client.post("/mcp", json=INITIALIZE, headers=new)).status_code == 429
    await service.rt.db.write(lambda c: principals.revoke_token(c, actor.token_id, at))
    # the fifteen places of the revoked token are free; the kept one is not
    again = [await leaked.client.post("/mcp", json=INITIALIZE, headers=new) for _ in range(15)]
    assert [r.status_code for r in again] == [200] * 15
    refused = await leaked.client.post("/mcp", json=INITIALIZE, headers=new)
    assert refused.status_code == 429 and "at most 16" in refused.json()["error"]["message"]
    # and the revoked token's own sessions take no request
    first = opened[0].headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    gone = await leaked.client.post("/mcp", json=listing, headers={**old, "Mcp-Session-Id": first})
    assert gone.status_code == 401


async def test_any_post_without_a_session_at_the_cap_is_refused_429_with_its_id(
    service: Service,
) -> None:
    """docs/mcp.md: past the 16, an `initialize` "and any other `POST` without
    an `Mcp-Session-Id`, which could only open a session" answers 429 with a
    JSON-RPC `-32600` carrying the request's id (mcpdocaudit: only the
    initialize was pinned; the SDK's own answer would be a 400 with a null id)."""
    from waypost.mcp_server.http_endpoint import SESSIONS_PER_PRINCIPAL

    agent = await service.agent()
    both = {**agent.headers(session=False), "Accept": "application/json, text/event-stream"}
    for _ in range(SESSIONS_PER_PRINCIPAL):
        assert (await agent.client.post("/mcp", json=INITIALIZE, headers=both)).status_code == 200
    listing = {"jsonrpc": "2.0", "id": "past-the-cap", "method": "tools/list"}
    refused = await agent.client.post("/mcp", json=listing, headers=both)
    assert refused.status_code == 429, refused.text
    error = refused.json()
    assert error["id"] == "past-the-cap" and error["error"]["code"] == -32600
    assert "at most 16" in error["error"]["message"]


def test_an_idle_mcp_session_closes_after_the_agent_sessions_15_minutes() -> None:
    """docs/mcp.md: an MCP session closes over HTTP after 15 minutes without
    any request in flight or stream open (Choice: as long as a Waypost session
    lives without a heartbeat). The other tests shorten it, so its value was
    pinned nowhere (mcpdocaudit)."""
    from waypost.resolvers.access.sessions import SESSION_LIFETIME

    assert http_endpoint.IDLE_SECONDS == 15 * 60 == SESSION_LIFETIME.total_seconds()


async def test_requests_the_sdk_refuses_take_no_session_place(service: Service) -> None:
    """The SDK answers a refused request without a session (a call before
    initialize, an initialize with a bad Accept) with a session id it then
    drops; counting those, sixteen mistakes shut the principal out of new
    sessions until the 15-minute idle close."""
    from waypost.mcp_server.http_endpoint import SESSIONS_PER_PRINCIPAL

    agent = await service.agent()
    both = {**agent.headers(session=False), "Accept": "application/json, text/event-stream"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    for _ in range(SESSIONS_PER_PRINCIPAL):
        early = await agent.client.post("/mcp", json=call, headers=both)
        assert early.status_code == 400
        json_only = {**both, "Accept": "application/json"}
        assert (
            await agent.client.post("/mcp", json=INITIALIZE, headers=json_only)
        ).status_code == 406
    opened = await agent.client.post("/mcp", json=INITIALIZE, headers=both)
    assert opened.status_code == 200, opened.text


async def test_an_initialize_with_bad_params_takes_no_session_place(service: Service) -> None:
    """The SDK answered it 200 with an error and kept the session it opened
    until the idle timeout: sixteen bad initializes shut the principal out."""
    from waypost.mcp_server.http_endpoint import SESSIONS_PER_PRINCIPAL

    agent = await service.agent()
    both = {**agent.headers(session=False), "Accept": "application/json, text/event-stream"}
    wrong: list[dict[str, Any]] = [
        {**INITIALIZE, "params": {}},
        {**INITIALIZE, "params": {**INITIALIZE["params"], "clientInfo": {"version": "1"}}},
        {key: value for key, value in INITIALIZE.items() if key != "params"},
    ]
    for n in range(SESSIONS_PER_PRINCIPAL):
        r = await agent.client.post("/mcp", json=wrong[n % 3], headers=both)
        assert r.status_code == 400 and "mcp-session-id" not in r.headers, r.text
        error = r.json()["error"]
        assert error["code"] == -32602 and error["message"].startswith("Invalid params: ")
        assert r.json()["id"] == 1
    opened = await agent.client.post("/mcp", json=INITIALIZE, headers=both)
    assert opened.status_code == 200, opened.text


def _both(caller: Caller) -> dict[str, str]:
    return {**caller.headers(session=False), "Accept": "application/json, text/event-stream"}


async def test_a_session_with_its_stream_open_keeps_its_place(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's idle timer stops while a request of the session is in
    flight, its GET stream included (the official client keeps one open);
    this endpoint aged sessions by the end of their requests alone, so after
    15 minutes such sessions dropped out of the count and four more opened."""
    from tests.live_support import running

    monkeypatch.setattr(http_endpoint, "SESSIONS_PER_PRINCIPAL", 2)
    monkeypatch.setattr(http_endpoint, "IDLE_SECONDS", 0.3)
    agent = await service.agent()
    async with running(service) as base, httpx.AsyncClient(base_url=base, timeout=10) as client:

        async def initialize() -> httpx.Response:
            return await client.post("/mcp", json=INITIALIZE, headers=_both(agent))

        sessions = [(await initialize()).headers["mcp-session-id"] for _ in range(2)]
        async with contextlib.AsyncExitStack() as streams:
            for session in sessions:
                headers = {**agent.headers(session=False), "Accept": "text/event-stream",
                           "Mcp-Session-Id": session}  # fmt: skip
                stream = await streams.enter_async_context(
                    client.stream("GET", "/mcp", headers=headers)
                )
                assert stream.status_code == 200
            await asyncio.sleep(0.6)  # past the idle time, both streams open
            assert (await initialize()).status_code == 429
        await asyncio.sleep(0.6)  # streams closed: idle now, and past the idle time
        assert (await initialize()).status_code == 200


async def test_a_delete_the_sdk_refuses_frees_no_place(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DELETE refused for its protocol version left the session open and
    freed its place all the same: eight such rounds held 24 sessions."""

    monkeypatch.setattr(http_endpoint, "SESSIONS_PER_PRINCIPAL", 2)
    agent = await service.agent()

    async def initialize() -> httpx.Response:
        return await agent.client.post("/mcp", json=INITIALIZE, headers=_both(agent))

    first = (await initialize()).headers["mcp-session-id"]
    assert (await initialize()).status_code == 200
    headers = {**agent.headers(session=False), "Mcp-Session-Id": first}
    refused = await agent.client.delete(
        "/mcp", headers={**headers, "MCP-Protocol-Version": "1999-01-01"}
    )
    assert refused.status_code == 400
    assert (await initialize()).status_code == 429
    assert (await agent.client.delete("/mcp", headers=headers)).status_code == 200
    assert (await initialize()).status_code == 200


async def test_an_answered_initialize_holds_one_place_not_two(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client has its answer before the SDK's handler returns; until
    then the new session was counted twice (a session and an opening), and
    the next initialize, sent at once, was refused with one place free (4
    of 10 runs over HTTP)."""

    monkeypatch.setattr(http_endpoint, "SESSIONS_PER_PRINCIPAL", 3)
    agent = await service.agent()
    body = json.dumps(INITIALIZE).encode()
    headers = [(k.lower().encode(), v.encode()) for k, v in _both(agent).items()]
    headers += [(b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode())]  # fmt: skip
    statuses: list[int] = []

    async def initialize(on_answer: Callable[[], Awaitable[None]] | None = None) -> None:
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "POST", "scheme": "http", "path": "/mcp", "raw_path": b"/mcp",
                 "root_path": "", "query_string": b"", "headers": headers,
                 "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5000)}  # fmt: skip
        sent = False
        forever = asyncio.Event()

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await forever.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])
            last = message["type"] == "http.response.body" and not message.get("more_body")
            if last and on_answer is not None:
                await on_answer()  # the client has its whole answer: it goes on

        await service.app(scope, receive, send)

    await initialize()
    await initialize(on_answer=initialize)  # the third, sent once the second is answered
    assert statuses == [200, 200, 200]


async def test_a_wait_ends_when_its_token_is_revoked(service: Service, human: Caller) -> None:
    """Like every stream (section 14), looked at every `recheck_seconds`: a
    wait ran on to its bound and answered what it read after the revocation."""
    from tests.live_support import QUICK
    from waypost.live import hub_for
    from waypost.mcp_server.waiting import wait_for_decision

    hub_for(service.rt, QUICK)  # a recheck every 0.3 s
    r = await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
    assert r.status_code == 201
    agent = await service.agent()
    backend = LocalBackend(service.rt, await actor_of(service, agent))

    async def pending() -> dict[str, str]:
        return {"status": "pending"}

    async def revoke_soon() -> None:
        await anyio.sleep(0.1)
        token_id = backend.actor.token_id
        at = service.clock.iso()
        await service.rt.db.write(lambda c: principals.revoke_token(c, token_id, at))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(revoke_soon)
        with anyio.fail_after(5), pytest.raises(ApiError) as ended:
            await wait_for_decision(backend.changes("demo"), pending, 60)
    assert (ended.value.code, ended.value.status) == ("unauthenticated", 401)


async def test_a_session_stream_ends_when_its_token_is_revoked(service: Service) -> None:
    """The standalone `GET /mcp` stream ran on after its token was revoked
    (185 s in an audit), and so its session never idled out; every stream
    ends within `recheck_seconds` of a revocation (section 14)."""
    from tests.live_support import running
    from tests.test_mcp import _open_mcp_session

    agent = await service.agent()
    actor = await actor_of(service, agent)
    async with running(service) as base, httpx.AsyncClient(base_url=base, timeout=10) as client:
        headers = await _open_mcp_session(client, base, agent.token)
        listen = {**headers, "Accept": "text/event-stream"}
        async with client.stream("GET", "/mcp", headers=listen) as stream:
            assert stream.status_code == 200
            ended = anyio.Event()

            async def read_to_the_end() -> None:
                async for _ in stream.aiter_bytes():
                    pass
                ended.set()

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(read_to_the_end)
                await anyio.sleep(1)  # three rechecks: the token is good, it stays open
                assert not ended.is_set(), "the stream ended before its token was revoked"
                at = service.clock.iso()
                await service.rt.db.write(lambda c: principals.revoke_token(c, actor.token_id, at))
                with anyio.fail_after(5):  # a recheck every 0.3 s
                    await ended.wait()


async def test_the_session_is_kept_with_the_latest_token(service: Service) -> None:
    """An agent rotates its token inside one MCP session, then revokes the old
    one: the heartbeat went on with the first token and lost the session."""
    agent = await service.agent()
    first = await actor_of(service, agent)
    at = service.clock.iso()
    issued = await service.rt.db.write(
        lambda c: principals.issue_token(c, first.principal_id, "api", at)
    )
    second = await service.rt.db.read(lambda c: principals.authenticate(c, issued["token"], "api"))
    async with anyio.create_task_group() as tasks:
        keeper = AgentSession("m3", tasks, heartbeat_seconds=0.05)
        session_id = await keeper.ensure(LocalBackend(service.rt, first))
        assert await keeper.ensure(LocalBackend(service.rt, second)) == session_id
        await service.rt.db.write(lambda c: principals.revoke_token(c, first.token_id, at))
        before = await session_row(service, session_id)
        service.clock.advance(minutes=10)
        with anyio.fail_after(5):
            while (await session_row(service, session_id))["expires_at"] == before["expires_at"]:
                await anyio.sleep(0.05)
        assert keeper.session_id == session_id
        await keeper.close()
        tasks.cancel_scope.cancel()


async def test_any_tool_call_carries_its_token_to_the_sessions_end(
    service: Service, project: str
) -> None:
    """docs/mcp.md: the session is kept with the token of the latest tool
    call. Only calls that needed the session noted theirs: an agent that
    claimed with its first token, revoked it and went on reading with its
    second could not end its session (DELETE /mcp: `unauthenticated`, the
    session stayed live), and its heartbeat lost the session and the lease."""
    from tests.live_support import running
    from tests.test_mcp import _open_mcp_session

    agent = await service.principal("agent", "rotator")
    first = await actor_of(service, agent)
    at = service.clock.iso()
    issued = await service.rt.db.write(
        lambda c: principals.issue_token(c, first.principal_id, "api", at)
    )

    def call(request_id: int, name: str) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                "params": {"name": name, "arguments": {"project": project}}}  # fmt: skip

    def sessions(conn: Any) -> list[tuple[str, str | None]]:
        rows = conn.execute(
            "SELECT id, ended_at FROM sessions WHERE principal_id = ?", (first.principal_id,)
        ).fetchall()
        return [(row["id"], row["ended_at"]) for row in rows]

    async with running(service) as base, httpx.AsyncClient(base_url=base, timeout=10) as client:
        headers = await _open_mcp_session(client, base, agent.token)
        # a claim starts the agent session, whatever it finds (nothing is ready)
        r = await client.post("/mcp", json=call(2, "task_claim"), headers=headers)
        assert r.status_code == 200 and "nothing_ready" in r.text, r.text
        [(session_id, ended)] = await service.rt.db.read(sessions)
        assert ended is None
        await service.rt.db.write(lambda c: principals.revoke_token(c, first.token_id, at))
        headers["Authorization"] = f"Bearer {issued['token']}"
        r = await client.post("/mcp", json=call(3, "policy"), headers=headers)
        assert r.status_code == 200 and '"isError":false' in r.text.replace(" ", ""), r.text
        assert (await client.delete("/mcp", headers=headers)).status_code == 200
        with anyio.fail_after(5):
            while (await service.rt.db.read(sessions))[0][1] is None:
                await anyio.sleep(0.05)
    assert await service.rt.db.read(sessions) == [(session_id, service.clock.iso())]


async def test_a_request_id_sent_again_as_its_answer_ends_stays_refused_while_it_runs(
    service: Service, human: Caller, project: str
) -> None:
    """Request A frees its id just before its last part goes out (its client
    may send the id again at once), and freed it again when its handler
    returned: a re-send B that began in between lost its place, a third
    request C with the same id was taken while B ran (200, not 409), and the
    SDK filed C's answer channel over B's, so B was never answered."""
    from tests.decisions_support import new_task, open_decision
    from waypost.mcp_server.http_endpoint import McpEndpoint

    [endpoint] = [r.endpoint for r in service.app.routes if getattr(r, "path", "") == "/mcp"]
    assert isinstance(endpoint, McpEndpoint)
    decision = await open_decision(human, [await new_task(human)])
    agent = await service.principal("agent", "resender")
    base = {"Accept": "application/json, text/event-stream", **agent.headers(session=False)}
    wait = {"jsonrpc": "2.0", "id": "same", "method": "tools/call", "params": {
        "name": "decision_wait", "arguments": {
            "project": project, "decision_id": decision["id"], "timeout_seconds": 3}}}  # fmt: skip
    url, headers = "http://waypost.test/mcp", dict[str, str]()
    resent: list[asyncio.Task[httpx.Response]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        is_a = scope["type"] == "http" and (b"x-first", b"A") in scope["headers"]

        async def sending(message: Any) -> None:
            last = message["type"] == "http.response.body" and not message.get("more_body")
            if is_a and last and not resent:  # A's last part: B is sent, and begins
                resent.append(asyncio.create_task(client.post(url, json=wait, headers=headers)))
                for _ in range(500):
                    if endpoint._running:
                        break
                    await asyncio.sleep(0.01)
                assert endpoint._running, "the re-send never began"
            await send(message)

        await service.app(scope, receive, sending)

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), timeout=30) as client:
        r = await client.post(url, json=INITIALIZE, headers=base)
        assert r.status_code == 200, r.text
        headers.update(base, **{"Mcp-Session-Id": r.headers["mcp-session-id"],
                                "Mcp-Protocol-Version": "2025-03-26"})  # fmt: skip
        ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await client.post(url, json=ready, headers=headers)).is_success
        ping = {"jsonrpc": "2.0", "id": "same", "method": "ping"}
        a = await client.post(url, json=ping, headers={**headers, "x-first": "A"})
        assert a.status_code == 200, a.text
        [b_task] = resent
        assert not b_task.done()  # B: a wait of 3 s
        c = await client.post(url, json=wait, headers=headers)
        assert c.status_code == 409, (c.status_code, c.text[:200])
        b = await asyncio.wait_for(b_task, 15)
    assert b.status_code == 200 and '"id":"same"' in b.text.replace(" ", ""), b.text


class _SlowReply(LocalBackend):
    """The session's start committed, its reply on the way back when the
    call is cancelled (an MCP client's notifications/cancelled, a stop)."""

    def __init__(self, backend: LocalBackend) -> None:
        super().__init__(backend.rt, backend.actor)
        self.committed, self.reply = anyio.Event(), anyio.Event()

    async def call(self, method: str, path: str, params: dict[str, str], **kw: Any) -> Any:
        result = await super().call(method, path, params, **kw)
        if path == "/api/v1/sessions":
            self.committed.set()
            await self.reply.wait()
        return result


async def test_a_call_cancelled_as_its_session_starts_leaves_no_session_behind(
    service: Service,
) -> None:
    """Cancelled between the start's commit and its reply, the keeper never
    learnt the session's id: the session stayed live with no heartbeat and
    nobody to end it until it expired (15 minutes)."""
    agent = await service.principal("agent", "cancelled")
    backend = _SlowReply(LocalBackend(service.rt, await actor_of(service, agent)))
    async with anyio.create_task_group() as tasks:
        keeper = AgentSession("m-cancel", tasks)
        with anyio.CancelScope() as call:

            async def cancel_once_committed() -> None:
                await backend.committed.wait()
                call.cancel()
                backend.reply.set()

            tasks.start_soon(cancel_once_committed)
            await keeper.ensure(backend)
        assert keeper.session_id is not None  # it knows the session it started
        await keeper.close()
        tasks.cancel_scope.cancel()
    rows = await service.rt.db.read(
        lambda conn: conn.execute("SELECT ended_at FROM sessions").fetchall()
    )
    assert [row["ended_at"] for row in rows] == [service.clock.iso()]


async def test_a_stream_whose_last_part_fails_to_go_out_still_idles_out(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end of a GET stream sends its last part and then does its
    book-keeping; a last part that failed to go out skipped the book-keeping,
    and the session stayed in flight for ever: never idle, counted against
    its principal's sixteen places until the process ended."""
    agent = await service.agent()
    session_id = await open_session(agent)
    headers = {**agent.headers(session=False), "Accept": "text/event-stream",
               "Mcp-Session-Id": session_id, "Mcp-Protocol-Version": "2025-06-18"}  # fmt: skip
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"",
        "root_path": "", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5000),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }  # fmt: skip
    started = asyncio.Event()
    asked: list[str] = []

    async def receive() -> dict[str, Any]:
        asked.append("receive")
        if len(asked) == 1:
            return {"type": "http.request", "body": b"", "more_body": False}
        await started.wait()  # the client leaves once the stream has begun
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200
            started.set()
        elif not message.get("more_body", False):
            raise RuntimeError("the connection broke under the last part")

    with pytest.raises(RuntimeError, match="last part"):
        await asyncio.wait_for(service.app(scope, receive, send), 10)
    monkeypatch.setattr(http_endpoint, "IDLE_SECONDS", 0)  # any session not in flight is idle
    await asyncio.sleep(0.01)
    assert service.rt.metrics.registry.get_sample_value("waypost_mcp_sessions") == 0


async def test_what_the_sdk_sends_after_its_response_ended_is_dropped() -> None:
    """A notification racing its session's DELETE was answered 202; the SDK's
    write into the closed session then failed and it started a 500 as well:
    uvicorn raised on the second start (an ERROR with a traceback) and
    dropped the keep-alive connection (boundsaudit, about 1 in 50 tries)."""
    from waypost.mcp_server.http_sending import OneResponse

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    once = OneResponse(send)
    await once.send({"type": "http.response.start", "status": 202, "headers": []})
    await once.send({"type": "http.response.body", "body": b"", "more_body": True})
    assert not once.ended
    await once.send({"type": "http.response.body", "body": b""})
    assert once.ended
    await once.send({"type": "http.response.start", "status": 500, "headers": []})
    await once.send({"type": "http.response.body", "body": b"Internal Server Error"})
    assert [(m["type"], m.get("status")) for m in sent] == [
        ("http.response.start", 202),
        ("http.response.body", None),
        ("http.response.body", None),
    ]


@pytest.mark.parametrize("session_open", [False, True])
async def test_a_stop_gives_its_grace_only_where_an_mcp_session_is_open(
    tmp_path: Path,
    clock: MovableClock,
    migrated_template: Path,
    monkeypatch: pytest.MonkeyPatch,
    session_open: bool,
) -> None:
    """A stop gives the MCP calls in flight half a second to answer before
    the sessions end. With no session open, none opening and no call
    running there is nothing to give it to: every stop of a service that no
    MCP client had used took that half second more."""
    # where no grace is due, one that would fail the test by far
    grace = 0.3 if session_open else 30.0
    monkeypatch.setattr(http_endpoint, "STOP_GRACE_SECONDS", grace)
    db = copy_database(migrated_template, tmp_path / "w.db")
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(60):
        async with serving(Settings(db_path=db, sweep_interval=3600), clock) as svc:
            if session_open:
                await open_session(await svc.agent("ada"))
            svc.rt.stopping.set()
            stopped = loop.time()
        took = loop.time() - stopped
    if session_open:
        assert took >= grace
    else:
        assert took < grace


async def test_a_request_after_the_stop_ended_the_sessions_is_told_it_is_stopping(
    tmp_path: Path, clock: MovableClock, migrated_template: Path
) -> None:
    """Once a stop has ended the SDK's session manager, the SDK takes no
    request (a body still arriving, a keep-alive connection's next one):
    it raised "Task group is not initialized" and the client got a 500 and
    the log an ERROR. It is now the 503 `unavailable` of a service stopping."""
    db = copy_database(migrated_template, tmp_path / "w.db")
    async with serving(Settings(db_path=db, sweep_interval=3600), clock) as svc:
        agent = await svc.agent("ada")
        svc.rt.stopping.set()
        # no session open: the manager ends at once (waited for, not slept:
        # review67 delayed the stop 150 ms and a sleep of 100 saw it serve)
        endpoint = next(r.endpoint for r in svc.app.routes if getattr(r, "path", "") == "/mcp")
        async with asyncio.timeout(10):
            while not endpoint._ended:
                await asyncio.sleep(0.01)
        hello = {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
        r = await svc.client.post("/mcp", json=hello, headers={**agent.headers(), **MCP_HEADERS})
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] == "1"
        error = r.json()["error"]
        assert error["code"] == -32603 and r.json()["id"] == 7
        assert "the server is stopping" in error["message"]


async def test_a_session_opening_as_the_stop_begins_gets_the_grace(
    tmp_path: Path, clock: MovableClock, migrated_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An initialize the SDK holds as the stop begins is no session yet, but
    an opening: the stop gives it the grace, and it is answered with its
    session, not cut off by a manager ended at once (review67)."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    monkeypatch.setattr(http_endpoint, "STOP_GRACE_SECONDS", 5.0)
    held, gate, entered = asyncio.Event(), asyncio.Event(), asyncio.Event()
    handle = StreamableHTTPSessionManager.handle_request
    calls_answered = http_endpoint.McpEndpoint._calls_answered

    async def gated(self: Any, scope: Any, receive: Any, send: Any) -> None:
        held.set()
        await gate.wait()
        await handle(self, scope, receive, send)

    async def marked(self: Any) -> None:
        entered.set()
        await calls_answered(self)

    monkeypatch.setattr(StreamableHTTPSessionManager, "handle_request", gated)
    monkeypatch.setattr(http_endpoint.McpEndpoint, "_calls_answered", marked)
    db = copy_database(migrated_template, tmp_path / "w.db")
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
    async with asyncio.timeout(60):
        async with serving(Settings(db_path=db, sweep_interval=3600), clock) as svc:
            agent = await svc.agent("ada")
            headers = {**agent.headers(), **MCP_HEADERS}
            opening = asyncio.create_task(svc.client.post("/mcp", json=hello, headers=headers))
            await held.wait()  # in the SDK's hands, not yet answered
            svc.rt.stopping.set()
            await entered.wait()  # the stop has come to the grace
            gate.set()
            r = await opening
    assert r.status_code == 200, r.text
    assert "mcp-session-id" in r.headers
