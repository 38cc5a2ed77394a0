"""Retries of a lifecycle command that has finished: each is a replay.

lifecycle-http-contract.md: "Replays are reauthorized and return the
original event"; service-contract.md section 10: `409 idempotency_in_flight`
is for a key "while the first request is still running". Once the first
request has answered, a burst of retries (a client whose answers were lost on
a flaky network, retrying from several workers) is a burst of replays: no
retry of a finished command is told that it is still running."""

from __future__ import annotations

import asyncio

from tests.lifecycle.support import Lifecycle, Member, memo

URL = "/v1/decisions"


async def test_concurrent_retries_of_a_finished_register_all_replay(
    author: Member, lifecycle: Lifecycle
) -> None:
    first = await author.post(URL, {"memo": memo()}, key="register-once")
    assert first.status_code == 200, first.text
    events = await lifecycle.count("lifecycle_events")

    retries = await asyncio.gather(
        *[author.post(URL, {"memo": memo()}, key="register-once") for _ in range(16)]
    )

    statuses = [r.status_code for r in retries]
    assert statuses == [200] * 16, [(r.status_code, r.text) for r in retries]
    for r in retries:
        assert r.headers["idempotent-replayed"] == "true"
        assert r.content == first.content
    assert await lifecycle.count("lifecycle_events") == events
    assert await lifecycle.count("lifecycle_memos") == 1


async def test_concurrent_retries_of_a_finished_comment_all_replay(
    registered: Member, lifecycle: Lifecycle
) -> None:
    reviewer = await lifecycle.member("reviewer")
    path = f"{URL}/adr.payments-retry/comments"
    body = {"version": 1, "body": {"text": "Looks right."}}
    first = await reviewer.post(path, body, key="comment-once")
    assert first.status_code == 200, first.text
    events = await lifecycle.count("lifecycle_events")

    retries = await asyncio.gather(
        *[reviewer.post(path, body, key="comment-once") for _ in range(16)]
    )

    assert [r.status_code for r in retries] == [200] * 16, [r.text for r in retries]
    assert all(r.content == first.content for r in retries)
    assert await lifecycle.count("lifecycle_events") == events
