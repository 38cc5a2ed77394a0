"""The stdio server's decision_wait listens to the project's event stream
(mcp_server/waiting.py `stream_waker`); a graceful restart of `serve` ends
every stream first, and the waker once stopped listening there, so an answer
given after the restart went unseen until the wait's own bound."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import httpx
import pytest

from tests.conftest import Caller, Service
from tests.live_support import running
from waypost.clock import parse_time
from waypost.live import hub_for
from waypost.mcp_server import waiting
from waypost.mcp_server.backend import HttpBackend
from waypost.mcp_server.calls import ApiError
from waypost.mcp_server.tools import DECISION


async def test_the_stream_is_opened_again_after_it_ends_and_wakes_the_waiter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(waiting, "RECONNECT_FIRST", 0.01)
    opened: list[int] = []

    def answer(request: httpx.Request) -> httpx.Response:
        opened.append(len(opened))
        if len(opened) == 2:
            return httpx.Response(
                503, json={"error": {"code": "unavailable", "message": "restarting", "details": {}}}
            )
        # the first stream ends at once (the server stopping), and so does the third
        body = b": stream open\n\n" if len(opened) == 1 else b": stream open\n\n: keep-alive\n\n"
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="http://w")
    async with waiting.stream_waker(client, "demo", waiting.ServiceTime().now) as waker:
        started = asyncio.get_running_loop().time()
        for _ in range(3):  # the end, the refused reopening, the reopening
            await waker.wait(5)
        waited = asyncio.get_running_loop().time() - started
    await client.aclose()
    assert len(opened) >= 3, opened
    assert waited < 2, waited  # woken by the stream's ends and reopening, never the bound


async def test_a_wait_on_a_stalled_service_ends_soon_after_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stopped service (SIGSTOP) never sent the stream's headers, and the
    wait outlived its timeout_seconds until the service came back."""
    monkeypatch.setattr(waiting, "STALLED_SLACK_SECONDS", 0.2)

    async def stalled(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(3600)
        raise AssertionError("never answers")

    async def read() -> dict[str, Any]:
        raise AssertionError("not reached: the stream never opens")

    client = httpx.AsyncClient(transport=httpx.MockTransport(stalled), base_url="http://w")
    began = time.monotonic()
    with pytest.raises(ApiError) as refused:
        await waiting.wait_for_decision(
            waiting.stream_waker(client, "demo", waiting.ServiceTime().now), read, 0.5
        )
    seconds = time.monotonic() - began
    await client.aclose()
    assert (refused.value.code, refused.value.status) == ("unavailable", 503)
    assert "call decision_wait again" in refused.value.message
    assert 0.6 <= seconds < 5, seconds


async def test_a_first_refusal_keeps_its_rest_code() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        error = {"code": "too_many_streams", "message": "16 streams are open", "details": {}}
        return httpx.Response(429, json={"error": error})

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="http://w")
    with pytest.raises(ApiError) as refused:
        async with waiting.stream_waker(client, "demo", waiting.ServiceTime().now):
            pass
    await client.aclose()
    assert (refused.value.code, refused.value.status) == ("too_many_streams", 429)


async def test_refused_reopenings_back_off_and_do_not_wake_the_waiter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The token's streams taken during a restart, or a proxy answering 502:
    each retry waits longer, and only a stream that ran wakes the waiter."""
    monkeypatch.setattr(waiting, "RECONNECT_FIRST", 0.05)
    monkeypatch.setattr(waiting, "RECONNECT_CAP", 0.4)
    opened: list[int] = []

    def answer(request: httpx.Request) -> httpx.Response:
        opened.append(1)
        if len(opened) == 1:
            return httpx.Response(200, content=b": stream open\n\n")  # ends at once
        error = {"code": "too_many_streams", "message": "16 streams are open", "details": {}}
        return httpx.Response(429, json={"error": error})

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="http://w")
    async with waiting.stream_waker(client, "demo", waiting.ServiceTime().now) as waker:
        await waker.wait(1)  # the first stream's end
        loop = asyncio.get_running_loop()
        started = loop.time()
        await waker.wait(1.2)  # nothing wakes it: the refusals are not changes
        assert loop.time() - started >= 1.1
    await client.aclose()
    # 0.05, 0.1, 0.2, 0.4, 0.4 ... seconds apart: a handful, not one every 50 ms
    assert 3 <= len(opened) <= 8, len(opened)


async def test_an_error_body_of_another_shape_refuses_the_wait_at_once() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, json={"error": "Bad Gateway"})  # a proxy's own shape

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="http://w")
    with pytest.raises(ApiError) as refused:
        async with (
            asyncio.timeout(2),
            waiting.stream_waker(client, "demo", waiting.ServiceTime().now),
        ):
            pass
    await client.aclose()
    assert refused.value.code == "unavailable" and "HTTP 502" in refused.value.message


async def test_a_wait_cancelled_by_the_sdk_closes_its_stream(
    service: Service, human: Caller, project: str
) -> None:
    """The MCP SDK cancels a request (`notifications/cancelled`) by cancelling
    its anyio scope. Leaving the waker then returned before its event stream
    closed: the connection stayed open and held one of the token's 16 stream
    slots until `waypost mcp` exited."""
    hub = hub_for(service.rt)
    async with running(service) as base:
        client = httpx.AsyncClient(base_url=base, headers=human.headers(), timeout=10)
        async with client:
            with anyio.CancelScope() as scope:
                async with waiting.stream_waker(client, "demo", waiting.ServiceTime().now) as waker:
                    for _ in range(100):  # the service has the stream open
                        if hub.open_count() == 1:
                            break
                        await asyncio.sleep(0.02)
                    assert hub.open_count() == 1
                    asyncio.get_running_loop().call_later(0.1, scope.cancel)
                    await waker.wait(30)
            assert scope.cancelled_caught
            for _ in range(100):  # the client closed it, while still open itself
                if hub.open_count() == 0:
                    break
                await asyncio.sleep(0.02)
            assert hub.open_count() == 0


async def _decision_expiring(human: Caller, expires_at: str) -> str:
    """A pending decision of the demo project that expires at `expires_at`."""
    task = await human.post("/api/v1/projects/demo/tasks", {"title": "ship"}, key="t")
    r = await human.post(
        "/api/v1/projects/demo/decisions",
        {"question": "Ship it?", "options": ["Proceed", "Stop"], "rationale": "risky",
         "required_actor": "human", "task_ids": [task.json()["id"]], "environment": "staging",
         "expires_at": expires_at},
        key="d",
    )  # fmt: skip
    assert r.status_code == 201, r.text
    decision: str = r.json()["id"]
    return decision


async def _stdio_wait_across(
    service: Service, human: Caller, decision: str, bound: float, step: Callable[[], None]
) -> dict[str, Any]:
    """The answer of a stdio-style wait (HTTP backend, event stream) on
    `decision`, with `step()` run half a second into it."""
    async with running(service) as base:
        client = httpx.AsyncClient(base_url=base, headers=human.headers(), timeout=10)
        async with client:
            backend = HttpBackend(client)

            async def read() -> dict[str, Any]:
                params = {"project": "demo", "decision": decision}
                body: dict[str, Any] = (await backend.call("GET", DECISION, params)).body
                return body

            waiting_for = asyncio.create_task(
                waiting.wait_for_decision(backend.changes("demo"), read, bound)
            )
            await asyncio.sleep(0.5)
            step()
            return await asyncio.wait_for(waiting_for, 10)


async def test_an_expiry_is_judged_by_the_services_clock_not_this_machines(
    service: Service, human: Caller, project: str
) -> None:
    """`waypost mcp` judged `expires_at` by its own machine's clock: with the
    service's clock ahead (another machine, or a simulated clock), a decision
    that expired was reported only at the wait's bound. REST answers now say
    the service's time (`Waypost-Now`), and the wait wakes by it."""
    service.clock.moment = parse_time("2027-06-01T00:00:00.000Z")  # months ahead of the machine
    decision = await _decision_expiring(human, "2027-06-01T00:00:02.000Z")
    started = time.monotonic()
    # past the expiry; no event says so
    answer = await _stdio_wait_across(
        service, human, decision, 30, lambda: service.clock.advance(seconds=3)
    )
    assert answer["outcome"] == "expired"
    assert time.monotonic() - started < 6  # woken at the expiry, not at the 30 s bound


async def test_a_step_of_the_services_clock_that_expires_the_decision_is_seen(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over stdio a wait woke for events and its own timers only, reckoning
    the service's clock from its last answer: a step of that clock (the
    clock file rewritten) past the expiry was seen at the bound, up to
    240 s late (mcpclockaudit; /mcp re-reads every 15 s). It re-reads at
    least every RECHECK_SECONDS now."""
    monkeypatch.setattr(waiting, "RECHECK_SECONDS", 0.5)
    expires = service.clock.moment + timedelta(hours=1)
    decision = await _decision_expiring(human, expires.isoformat().replace("+00:00", "Z"))
    # past the expiry, in one step
    answer = await _stdio_wait_across(
        service, human, decision, 60, lambda: service.clock.advance(hours=2)
    )
    assert answer["outcome"] == "expired"


def test_service_time_moves_on_from_what_the_service_said() -> None:
    service_time = waiting.ServiceTime()
    before = service_time.now()
    assert abs((before - datetime.now(UTC)).total_seconds()) < 1  # nothing said yet
    service_time.saw("2030-01-01T00:00:00.000Z")
    service_time.saw("not a time")  # ignored: what was said stands
    said = service_time.now()
    assert timedelta(0) <= said - parse_time("2030-01-01T00:00:00.000Z") < timedelta(seconds=1)
