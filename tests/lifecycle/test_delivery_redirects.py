"""a redirect is a failed delivery, never a delivered one.

docs/lifecycle.md: "Redirects are not followed and `Retry-After` is not
read (both are non-2xx failures)"."""

from __future__ import annotations

import httpx
import pytest

from tests.lifecycle.support import Lifecycle, Member
from tests.lifecycle.test_delivery import HOOK, make_events
from waypost.resolvers.lifecycle.delivery import deliver_once


@pytest.mark.parametrize("status", [300, 301, 302, 303, 307, 308, 304])
@pytest.mark.parametrize("client_follows", [False, True])
async def test_a_redirect_is_a_failure_and_the_event_stays_pending(
    lifecycle: Lifecycle, author: Member, status: int, client_follows: bool
) -> None:
    """Also from a client made to follow redirects (the worker's rule, not
    only `serve`'s client: mutantaudit6); a 300 is no 2xx either."""
    await make_events(author, 0)
    sent: list[str] = []

    def hook(request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url))
        return httpx.Response(status, headers={"Location": "https://elsewhere.example/"})

    rt = lifecycle.service.rt
    transport = httpx.MockTransport(hook)
    async with httpx.AsyncClient(transport=transport, follow_redirects=client_follows) as client:
        assert await deliver_once(rt, client, HOOK) is False
    assert sent == [HOOK]  # not followed
    rows = await rt.db.read(
        lambda c: c.execute(
            "SELECT state, attempts, last_error FROM lifecycle_deliveries"
        ).fetchall()
    )
    assert [(r["state"], r["attempts"], r["last_error"]) for r in rows] == [
        ("pending", 1, f"HTTP {status}")
    ]
