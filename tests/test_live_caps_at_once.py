"""The stream caps hold for streams that open at the same moment (fanoutjourney).

A wall of dashboards reconnects all at once (after a deploy, a network blip):
many streams of one token ask for a place in the same instant. `Hub.listen`
checks the caps and counts the new listener with nothing awaited between
the two, so the caps are exact however many ask together. With an await
between them (an `asyncio.sleep(0)` put there as a mutant), ten listens of
one token all got a place, twelve of six tokens all twelve, and eight SSE
requests eight streams, while every test that opens streams one by one
(test_live_sse, test_live_graphql, test_live_metrics) still passed."""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest

from tests.conftest import Caller, Service
from tests.live_support import QUICK, running
from waypost.live import Hub, TooManyStreams


async def _try_listen(
    hub: Hub, token_id: str, project: str, stack: contextlib.AsyncExitStack
) -> bool:
    try:
        await stack.enter_async_context(hub.listen(project, token_id, None))
    except TooManyStreams:
        return False
    return True


async def test_listeners_asking_together_get_exactly_the_tokens_places(
    service: Service, project: str
) -> None:
    """Ten listens of one token at once (QUICK: 3 per token): three places, seven refusals."""
    hub = Hub(service.rt.db, QUICK)
    try:
        async with contextlib.AsyncExitStack() as stack:
            got = await asyncio.gather(*(_try_listen(hub, "t", project, stack) for _ in range(10)))
            assert sorted(got) == [False] * 7 + [True] * 3
            assert hub.open_count("t") == 3
        assert hub.open_count() == 0
    finally:
        await hub.close()


async def test_listeners_of_many_tokens_asking_together_get_exactly_the_servers_places(
    service: Service, project: str
) -> None:
    """Twelve listens of six tokens at once (QUICK: 5 in all): five places."""
    hub = Hub(service.rt.db, QUICK)
    try:
        async with contextlib.AsyncExitStack() as stack:
            got = await asyncio.gather(
                *(_try_listen(hub, f"t{i % 6}", project, stack) for i in range(12))
            )
            assert got.count(True) == 5 and hub.open_count() == 5
    finally:
        await hub.close()


@pytest.mark.parametrize("verb", ["GET", "HEAD"])
async def test_sse_streams_opened_together_past_the_cap_are_429(
    service: Service, human: Caller, project: str, verb: str
) -> None:
    """Eight SSE requests of one token at once (QUICK: 3): three streams, five
    `429 too_many_streams` (docs/graphql.md, "Bounded resources")."""
    path = f"/api/v1/projects/{project}/events/stream"
    async with running(service) as base, httpx.AsyncClient(base_url=base, timeout=10) as client:

        async def one() -> int:
            if verb == "HEAD":
                return (await client.head(path, headers=human.headers())).status_code
            async with client.stream("GET", path, headers=human.headers()) as r:
                if r.status_code == 200:
                    await held.wait()  # hold the stream until all have answered
                return r.status_code

        held = asyncio.Event()
        tasks = [asyncio.create_task(one()) for _ in range(8)]
        if verb == "GET":
            refused: list[asyncio.Task[int]] = []
            while len(refused) < 5:  # (past the cap, the streams all held: none comes)
                done, _ = await asyncio.wait([t for t in tasks if t not in refused], timeout=5,
                                             return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
                if not done:
                    break
                refused.extend(done)
            held.set()
        statuses = await asyncio.wait_for(asyncio.gather(*tasks), 10)
    if verb == "GET":
        assert sorted(statuses) == [200] * 3 + [429] * 5
    else:  # a HEAD holds no stream: each is answered as the first would be
        assert statuses == [200] * 8
