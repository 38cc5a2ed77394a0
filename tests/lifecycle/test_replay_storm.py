"""Retries of a lifecycle command that has finished: each is a replay.

lifecycle-http-contract.md: "Replays are reauthorized and return the
original event"; service-contract.md section 10: `409 idempotency_in_flight`
is for a key "while the first request is still running". Once the first
request has answered, a burst of retries (a client whose answers were lost on
a flaky network, retrying from several workers) is a burst of replays: no
retry of a finished command is told that it is still running."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.conftest import Service
from tests.lifecycle.support import Lifecycle, Member, memo
from tests.rechecks_support import Meanwhiles

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


async def test_a_retry_from_a_token_revoked_after_its_reconfirmation_is_401(
    author: Member, lifecycle: Lifecycle
) -> None:
    """The replay's point read reads the token again, as the write
    transaction did when every retry went through the writer: a token revoked
    after the route reconfirmed it hears 401, never the receipt."""
    from waypost.errors import Unauthenticated
    from waypost.resolvers.access import principals
    from waypost.resolvers.lifecycle import authz, commands
    from waypost.resolvers.lifecycle.model import Memo, RegisterBody

    rt = lifecycle.service.rt
    row = await rt.db.read(
        lambda c: c.execute(
            "SELECT id FROM tokens WHERE principal_id = ? AND audience = 'lifecycle'", (author.id,)
        ).fetchone()
    )
    caller = authz.Caller(author.id, "human", row["id"])
    body = RegisterBody(memo=Memo(id="x", version=1, title="t", question="q?", options=[]))
    req = commands.Request.make(caller, "k", "POST", URL, {"memo": "x"})
    first = await commands.register(rt, req, body)
    assert not first.replayed
    assert (await commands.register(rt, req, body)).replayed  # the point read answers it
    await rt.db.write(lambda c: principals.revoke_token(c, row["id"], "2026-11-29T18:00:00.000Z"))
    with pytest.raises(Unauthenticated):
        await commands.register(rt, req, body)


async def test_a_retry_while_the_first_still_runs_is_409_then_replays(
    author: Member, lifecycle: Lifecycle, service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The point read finds no receipt while the first request is still
    running (it has not committed): the retry meets the key's slot, held,
    and hears `idempotency_in_flight`; once the first has answered, a retry
    replays. Deterministic, where eight sent at once (test_requests.py) can
    all replay when the first commits before the others reach the slot."""
    meanwhile = Meanwhiles(service, monkeypatch)
    during: list[httpx.Response] = []

    async def retry() -> None:
        during.append(await author.post(URL, {"memo": memo()}, key="same"))

    meanwhile.before_next_write(retry)
    first = await author.post(URL, {"memo": memo()}, key="same")
    assert first.status_code == 200 and meanwhile.ran, first.text
    [r] = during
    assert (r.status_code, r.json()) == (409, {"error": "idempotency_in_flight"})
    after = await author.post(URL, {"memo": memo()}, key="same")
    assert after.status_code == 200 and after.headers["idempotent-replayed"] == "true"
    assert after.content == first.content
    assert await lifecycle.count("lifecycle_memos") == 1
