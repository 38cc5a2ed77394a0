"""An attempt cut off mid-flight, and receivers' failures the worker must not read.

docs/lifecycle.md, "Events and delivery": "Delivery is at least once:
deduplicate by `Waypost-Delivery-Id` (an attempt cut off by `kill -9` is
sent again after the restart with the same id, and `attempts` does not count
it)", and "Redirects are not followed and `Retry-After` is not read (both are
non-2xx failures)"; a failure is "a network error, non-2xx, or no answer"
and "is retried after 1, 2, 4, ... seconds". webhookjourney: against a real
`serve` both held (a `kill -9` and a SIGTERM during a receiver's 15 s
answer left `attempts` as it was, and the restart sent the same id), but no
test held either rule: a worker that counted each attempt as it began (one
write before the POST, none after) passed every test."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.lifecycle.support import HOOK, Lifecycle, Member, delivering
from tests.lifecycle.test_delivery import CountingBackoff, make_events
from waypost.resolvers.lifecycle.delivery import deliver_forever, deliver_once, list_deliveries


async def deliveries(lifecycle: Lifecycle) -> list[dict[str, Any]]:
    return await lifecycle.service.rt.db.read(lambda c: list_deliveries(c, None, 10))


async def test_an_attempt_cut_off_is_not_counted_and_goes_again_with_its_id(
    lifecycle: Lifecycle, author: Member
) -> None:
    """The worker stopped while the receiver holds the request (what SIGTERM
    does to it; `kill -9` writes nothing either): the delivery is as it was
    before the attempt, and the next worker sends that event first, with the
    same `Waypost-Delivery-Id`."""
    await make_events(author, 1)  # two events
    rt = lifecycle.service.rt
    [first, second] = await deliveries(lifecycle)
    holding = asyncio.Event()
    never = asyncio.Event()

    async def hold(request: httpx.Request) -> httpx.Response:
        holding.set()
        await never.wait()
        return httpx.Response(200)

    async with httpx.AsyncClient(transport=httpx.MockTransport(hold)) as client:
        worker = asyncio.create_task(deliver_forever(rt, client, HOOK))
        await asyncio.wait_for(holding.wait(), 10)
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)
    after_cut = await deliveries(lifecycle)
    assert after_cut == [first, second]
    assert (after_cut[0]["state"], after_cut[0]["attempts"]) == ("pending", 0)
    assert after_cut[0]["last_attempt_at"] is None

    sent: list[tuple[str, str]] = []

    def hook(request: httpx.Request) -> httpx.Response:
        sent.append((request.headers["waypost-delivery"], request.headers["waypost-delivery-id"]))
        return httpx.Response(204)

    async with httpx.AsyncClient(transport=httpx.MockTransport(hook)) as client:
        while await deliver_once(rt, client, HOOK):
            pass
    assert sent == [
        (str(first["event"]["sequence"]), first["delivery_id"]),
        (str(second["event"]["sequence"]), second["delivery_id"]),
    ]
    assert [(d["state"], d["attempts"]) for d in await deliveries(lifecycle)] == [
        ("delivered", 1),
        ("delivered", 1),
    ]


def answer_429(request: httpx.Request) -> httpx.Response:
    return httpx.Response(429, headers={"Retry-After": "3600"})


def answer_503(request: httpx.Request) -> httpx.Response:
    return httpx.Response(503, headers={"Retry-After": "3600"})


def connection_reset(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadError("[Errno 104] Connection reset by peer", request=request)


def closed_port(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("[Errno 111] Connection refused", request=request)


@pytest.mark.parametrize("failing", [answer_429, answer_503, connection_reset, closed_port])
async def test_a_failing_receiver_is_retried_at_the_backoff_whatever_it_asks(
    lifecycle: Lifecycle, author: Member, failing: Any
) -> None:
    """Two failed attempts, each waited out by the backoff's own delay (here
    a moment), not by a `Retry-After` of an hour; the third succeeds, and the
    event after it goes out only then."""
    await make_events(author, 1)
    [first, second] = await deliveries(lifecycle)
    sent: list[str] = []

    def hook(request: httpx.Request) -> httpx.Response:
        sent.append(request.headers["waypost-delivery-id"])
        if len(sent) <= 2:
            return failing(request)  # type: ignore[no-any-return]
        return httpx.Response(200)

    backoff = CountingBackoff(first=0.01, limit=0.02, poll=60)
    async with delivering(lifecycle, hook, backoff) as worker:
        rows: list[dict[str, Any]] = []
        for _ in range(1000):  # until both are delivered (bounded: 10 s, not an hour)
            await asyncio.sleep(0.01)
            rows = await deliveries(lifecycle)
            if all(r["state"] == "delivered" for r in rows) or worker.done():
                break
    assert sent == [first["delivery_id"]] * 3 + [second["delivery_id"]]
    assert backoff.asked == [1, 2]
    assert [(r["state"], r["attempts"]) for r in rows] == [("delivered", 3), ("delivered", 1)]


async def test_a_failure_is_noted_by_its_kind(lifecycle: Lifecycle, author: Member) -> None:
    """What `admin lifecycle deliveries` shows of each kind of failure."""
    await make_events(author, 0)
    rt = lifecycle.service.rt
    for failing, noted in (
        (answer_429, "HTTP 429"),
        (connection_reset, "ReadError"),
        (closed_port, "ConnectError"),
    ):
        async with httpx.AsyncClient(transport=httpx.MockTransport(failing)) as client:
            assert await asyncio.wait_for(deliver_once(rt, client, HOOK), 30) is False
        [row] = await deliveries(lifecycle)
        assert (row["state"], row["last_error"]) == ("pending", noted)
    assert row["attempts"] == 3
