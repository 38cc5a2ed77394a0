"""Register, read and revise memos: receipts, replays and compare-and-append."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from tests.conftest import Service
from tests.lifecycle.support import TABLES, Lifecycle, Member, memo, with_docs


async def test_register_answers_a_receipt_and_get_returns_the_memo_with_defaults(
    author: Member,
) -> None:
    m, docs = with_docs(memo(), b"# incident notes\n")
    r = await author.register(m, docs)
    assert r.status_code == 200, r.text
    receipt = r.json()
    assert receipt["memo_id"] == "adr.payments-retry" and receipt["version"] == 1
    assert isinstance(receipt["event_id"], int)
    assert receipt["resource"] == "/v1/decisions/adr.payments-retry?version=1"
    assert receipt["workspace_url"] == (
        "https://decisions.coulomb.social/decisions/adr.payments-retry?version=1"
    )
    got = await author.get("/v1/decisions/adr.payments-retry")
    assert got.status_code == 200
    assert got.headers["cache-control"] == "no-store"
    assert got.headers["x-content-type-options"] == "nosniff"
    assert got.json() == {**m, "highlights": []}


async def test_the_links_of_a_dot_segment_id_lead_to_its_memo(author: Member) -> None:
    """The id rule allows `.` and `..`; as written into the links, a client
    resolved them as dot-segments and `/v1/decisions/..?version=1` led to
    `/v1/?version=1` (404)."""
    for memo_id in (".", "..", "..."):
        receipt = (await author.register(memo(memo_id))).json()
        encoded = "%2E" * len(memo_id) if len(memo_id) < 3 else memo_id
        assert receipt["resource"] == f"/v1/decisions/{encoded}?version=1"
        assert receipt["workspace_url"].endswith(f"/decisions/{encoded}?version=1")
        got = await author.get(receipt["resource"])
        assert got.status_code == 200 and got.json()["id"] == memo_id, got.text


async def test_a_replay_answers_the_same_receipt_and_writes_nothing(
    author: Member, lifecycle: Lifecycle
) -> None:
    first = await author.post("/v1/decisions", {"memo": memo()}, key="same")
    counts = [await lifecycle.count(t) for t in TABLES]
    again = await author.post("/v1/decisions", {"memo": memo()}, key="same")
    assert first.status_code == again.status_code == 200
    assert again.content == first.content
    assert again.headers["idempotent-replayed"] == "true"
    assert [await lifecycle.count(t) for t in TABLES] == counts


async def test_a_replay_after_the_receipt_sweep_answers_the_original_receipt(
    author: Member, lifecycle: Lifecycle
) -> None:
    """Service contract section 10: a receipt is kept at least 24 hours;
    docs/lifecycle.md: lifecycle receipts are not swept, a replay answers the
    original receipt however late it comes. Three days later, after the
    sweep that purges the public listener's receipts (48 hours), the replay
    still runs nothing."""
    from waypost.resolvers.core import sweep

    first = await author.post("/v1/decisions", {"memo": memo()}, key="late")
    counts = [await lifecycle.count(t) for t in TABLES]
    lifecycle.service.clock.advance(hours=72)
    assert (await sweep.run_once(lifecycle.service.rt))["receipts_purged"] == 0
    again = await author.post("/v1/decisions", {"memo": memo()}, key="late")
    assert (again.status_code, again.content) == (200, first.content)
    assert again.headers["idempotent-replayed"] == "true"
    assert [await lifecycle.count(t) for t in TABLES] == counts


async def test_the_same_key_with_another_request_is_409_and_writes_nothing(
    author: Member, lifecycle: Lifecycle
) -> None:
    await author.post("/v1/decisions", {"memo": memo()}, key="k1")
    counts = [await lifecycle.count(t) for t in TABLES]
    r = await author.post("/v1/decisions", {"memo": memo("other")}, key="k1")
    assert (r.status_code, r.json()) == (409, {"error": "idempotency_key_reused"})
    assert [await lifecycle.count(t) for t in TABLES] == counts


async def test_a_reused_key_meets_the_policy_first(author: Member, lifecycle: Lifecycle) -> None:
    """Every handled command invokes the policy: a caller that lost the right
    heard 409 for another body under its old key, and 403 for the same body."""
    await author.post("/v1/decisions", {"memo": memo()}, key="k1")
    await lifecycle.grant(author.id, "acme", "reader")
    for body in ({"memo": memo()}, {"memo": memo("other")}):
        r = await author.post("/v1/decisions", body, key="k1")
        assert (r.status_code, r.json()) == (403, {"error": "policy_denied"})


async def test_revise_appends_version_two_and_both_versions_stay_readable(
    author: Member,
) -> None:
    await author.register(memo())
    r = await author.revise(memo(version=2, title="Retry policy, revised"), expected=1)
    assert r.status_code == 200, r.text
    assert r.json()["version"] == 2
    assert r.json()["resource"] == "/v1/decisions/adr.payments-retry?version=2"
    v1 = await author.get("/v1/decisions/adr.payments-retry", version=1)
    current = await author.get("/v1/decisions/adr.payments-retry")
    assert v1.json()["title"] == "Retry policy for payment webhooks"
    assert current.json()["title"] == "Retry policy, revised"
    assert (await author.get("/v1/decisions/adr.payments-retry", version=3)).status_code == 404


async def test_a_stale_expected_version_is_409_with_nothing_written(
    author: Member, lifecycle: Lifecycle
) -> None:
    await author.register(memo())
    await author.revise(memo(version=2), expected=1)
    counts = [await lifecycle.count(t) for t in TABLES]
    r = await author.revise(memo(version=2, title="late"), expected=1)
    assert (r.status_code, r.json()) == (409, {"error": "version_conflict"})
    assert [await lifecycle.count(t) for t in TABLES] == counts


async def test_revision_rules_on_id_version_and_summary_are_400(author: Member) -> None:
    await author.register(memo())
    wrong_id = await author.post(
        "/v1/decisions/adr.payments-retry/revisions",
        {"memo": memo("elsewhere", 2), "expected_version": 1, "summary": "x"},
    )
    assert (wrong_id.status_code, wrong_id.json()) == (400, {"error": "invalid_request"})
    skipped = await author.revise(memo(version=3), expected=1)
    assert skipped.status_code == 400
    empty = await author.post(
        "/v1/decisions/adr.payments-retry/revisions",
        {"memo": memo(version=2), "expected_version": 1, "summary": ""},
    )
    assert empty.status_code == 400
    assert (await author.get("/v1/decisions/adr.payments-retry")).json()["version"] == 1


async def test_registering_an_existing_memo_again_is_409(author: Member) -> None:
    await author.register(memo())
    r = await author.register(memo())
    assert (r.status_code, r.json()) == (409, {"error": "memo_exists"})


async def test_register_takes_version_one_only(author: Member) -> None:
    r = await author.register(memo(version=2))
    assert r.status_code == 400


async def test_register_writes_memo_revision_event_delivery_and_receipt(
    author: Member, lifecycle: Lifecycle, service: Service
) -> None:
    await author.register(memo())
    assert [await lifecycle.count(t) for t in TABLES] == [1, 1, 0, 1, 1, 1]
    events = (await author.get("/v1/decisions/adr.payments-retry/events")).json()["events"]
    assert [e["type"] for e in events] == ["memo.registered"]
    assert events[0]["actor"] == author.id


async def test_a_command_queued_behind_other_writes_is_stamped_as_it_commits(
    lifecycle: Lifecycle, author: Member
) -> None:
    """A command read the clock before it queued for the writer: one that
    waited (behind a batch, or a lock another process held) was stamped
    earlier than writes committed before it, and its event's `at` ran
    backwards against the sequence. The public API's writes read it inside
    the transaction."""
    rt, clock = lifecycle.service.rt, lifecycle.service.clock
    running, busy = threading.Event(), threading.Event()

    def hold(conn: Any) -> None:
        running.set()
        busy.wait(10)

    ahead = asyncio.create_task(rt.db.write(hold))
    assert await asyncio.to_thread(running.wait, 10)  # the writer runs the write ahead
    registering = asyncio.create_task(author.register(memo()))
    for _ in range(1000):
        if rt.db.queue_depth():
            break
        await asyncio.sleep(0.01)  # the command waits for the writer
    assert rt.db.queue_depth() == 1
    clock.advance(minutes=5)
    later = clock.iso()
    busy.set()
    await ahead
    assert (await registering).status_code == 200
    last = "SELECT at FROM lifecycle_events ORDER BY sequence DESC LIMIT 1"
    [at] = await rt.db.read(lambda conn: conn.execute(last).fetchone())
    assert at == later
