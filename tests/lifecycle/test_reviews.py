"""Review handoff: requests with their exact retained envelope, and outcomes
recorded by named human reviewers on the public listener."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import sqlite3
from typing import Any

import pytest

from tests.lifecycle.support import Lifecycle, Member, digest, memo
from tests.lifecycle.test_requests import refused
from waypost.maintenance import verify

M = "/v1/decisions/adr.payments-retry"


def request_body(*reviewers: str, version: int = 1, **options: Any) -> dict[str, Any]:
    opts = {"profile": "standard", "reviewers": list(reviewers), **options}
    return {"version": version, "options": opts}


async def test_a_review_request_returns_the_intake_envelope(
    registered: Member, reviewer: Member
) -> None:
    body = request_body(reviewer.id, due_at="2026-12-01T10:00:00+01:00", note="please")
    r = await registered.post(f"{M}/review-requests", body)
    assert r.status_code == 200, r.text
    receipt = r.json()
    envelope = receipt["envelope"]
    assert re.fullmatch(r"rr_[0-9a-f]{32}", receipt["request_id"])
    assert envelope["request_id"] == receipt["request_id"]
    stored = (await registered.get(M)).content
    assert envelope == {
        "request_id": receipt["request_id"],
        "memo_id": "adr.payments-retry",
        "version": 1,
        "profile": "standard",
        "reviewers": [reviewer.id],
        "due_at": "2026-12-01T09:00:00.000Z",
        "note": "please",
        "memo_sha256": hashlib.sha256(stored).hexdigest(),
        "packet": [{"id": "p0", "digest": digest(b"notes"), "media_type": "text/markdown"}],
        "requested_by": registered.id,
        "requested_at": "2026-11-29T18:00:00.000Z",
        "tenant": "acme",
    }


async def test_memo_sha256_is_of_the_canonical_memo_json(registered: Member) -> None:
    got = (await registered.get(M)).json()
    canonical = json.dumps(got, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert (await registered.get(M)).content == canonical.encode()


async def test_the_retained_request_comes_back_byte_for_byte(
    registered: Member, reviewer: Member
) -> None:
    first = await registered.post(f"{M}/review-requests", request_body(reviewer.id))
    second = await registered.post(f"{M}/review-requests", request_body(registered.id))
    listed = await reviewer.get(f"{M}/review-requests", version=1)
    assert listed.status_code == 200
    assert listed.content == b'{"items":[' + first.content + b"," + second.content + b"]}"
    assert (await reviewer.get(f"{M}/review-requests", version=1)).content == listed.content


async def test_review_requests_list_in_the_order_they_were_made_whatever_the_clock(
    registered: Member, reviewer: Member, lifecycle: Lifecycle
) -> None:
    """An NTP step back between two requests does not put the second first."""
    first = await registered.post(f"{M}/review-requests", request_body(reviewer.id))
    lifecycle.service.clock.advance(minutes=-1)
    second = await registered.post(f"{M}/review-requests", request_body(registered.id))
    assert second.json()["envelope"]["requested_at"] < first.json()["envelope"]["requested_at"]
    listed = await reviewer.get(f"{M}/review-requests", version=1)
    assert listed.content == b'{"items":[' + first.content + b"," + second.content + b"]}"


async def test_review_requests_need_a_version_and_list_nothing_for_other_versions(
    registered: Member, reviewer: Member
) -> None:
    refused(await registered.get(f"{M}/review-requests"), 400, "invalid_request")
    await registered.revise(memo(version=2, packet=[]), expected=1)
    assert (await registered.get(f"{M}/review-requests", version=2)).json() == {"items": []}
    refused(await registered.get(f"{M}/review-requests", version=3), 404, "not_found")


async def test_only_the_current_version_can_be_sent_for_review(
    registered: Member, reviewer: Member
) -> None:
    await registered.revise(memo(version=2, packet=[]), expected=1)
    r = await registered.post(f"{M}/review-requests", request_body(reviewer.id, version=1))
    refused(r, 409, "version_conflict")
    r = await registered.post(f"{M}/review-requests", request_body(reviewer.id, version=2))
    assert r.status_code == 200


async def test_reviewers_must_hold_a_reviewer_or_author_role_in_the_tenant(
    lifecycle: Lifecycle, registered: Member
) -> None:
    reader = await lifecycle.member("reader")
    foreign = await lifecycle.member("reviewer", tenant="globex")
    for who in [reader.id, foreign.id, "prn_unknown"]:
        r = await registered.post(f"{M}/review-requests", request_body(who))
        refused(r, 400, "invalid_reviewer")
    r = await registered.post(f"{M}/review-requests", request_body(registered.id, registered.id))
    refused(r, 400, "invalid_reviewer")


async def test_a_review_request_at_its_bounds_is_taken(
    registered: Member, lifecycle: Lifecycle
) -> None:
    """lifecycle-model.md: 1-10 reviewers, a note <= 2,000: ten reviewers and
    a note of 2,000 characters are taken (eleven and 2,001 are refused,
    pinned below)."""
    ten = [registered.id] + [(await lifecycle.member("reviewer")).id for _ in range(9)]
    r = await registered.post(f"{M}/review-requests", request_body(*ten, note="n" * 2000))
    assert r.status_code == 200, r.text
    envelope = r.json()["envelope"]
    assert envelope["reviewers"] == ten and envelope["note"] == "n" * 2000


@pytest.mark.parametrize(
    "options",
    [
        {"profile": "express", "reviewers": ["x"]},
        {"profile": "standard", "reviewers": []},
        {"profile": "standard", "reviewers": [f"r{i}" for i in range(11)]},
        {"profile": "standard", "reviewers": ["x"], "due_at": "tomorrow"},
        {"profile": "standard", "reviewers": ["x"], "note": "n" * 2001},
        {"profile": "standard", "reviewers": ["x"], "approval": True},
    ],
)
async def test_review_request_option_rules(registered: Member, options: dict[str, Any]) -> None:
    r = await registered.post(f"{M}/review-requests", {"version": 1, "options": options})
    assert r.status_code == 400
    assert r.json()["error"] in {"invalid_request", "approval_not_accepted"}


async def test_a_version_takes_a_bounded_number_of_review_requests(
    registered: Member, reviewer: Member, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request of a version comes back in one answer (the contract has
    no pages), each with the packet: 10,000 requests made one answer of
    495 MB. The bound is where they are made."""
    from waypost.resolvers.lifecycle import reviews

    monkeypatch.setattr(reviews, "MAX_REVIEW_REQUESTS_PER_VERSION", 3)
    for _ in range(3):
        await request_review(registered, reviewer.id)
    r = await registered.post(f"{M}/review-requests", request_body(reviewer.id))
    refused(r, 409, "review_request_limit")
    listed = (await registered.get(f"{M}/review-requests", version=1)).json()["items"]
    assert len(listed) == 3
    # a new version starts again
    await registered.revise(memo(version=2, packet=[]), expected=1)
    r = await registered.post(f"{M}/review-requests", request_body(reviewer.id, version=2))
    assert r.status_code == 200, r.text


async def request_review(author: Member, *reviewers: str) -> str:
    r = await author.post(f"{M}/review-requests", request_body(*reviewers))
    assert r.status_code == 200, r.text
    request_id: str = r.json()["request_id"]
    return request_id


async def test_outcomes_progress_from_not_requested_to_decided(
    registered: Member, reviewer: Member
) -> None:
    state = (await reviewer.get(f"{M}/outcomes", version=1)).json()
    assert state["submission_state"] == "not_requested"
    assert (state["requests"], state["outcomes"], state["version"]) == ([], [], 1)
    request_id = await request_review(registered, reviewer.id)
    assert (await reviewer.get(f"{M}/outcomes", version=1)).json()["submission_state"] == (
        "requested"
    )
    r = await reviewer.api.post(
        f"/api/v1/reviews/{request_id}/outcome",
        {"disposition": "accepted", "rationale": "sound"},
    )
    assert r.status_code == 201, r.text
    state = (await reviewer.get(f"{M}/outcomes", version=1)).json()
    assert state["submission_state"] == "decided"
    assert state["requests"][0]["request_id"] == request_id
    assert state["outcomes"] == [
        {
            "request_id": request_id,
            "reviewer": reviewer.id,
            "disposition": "accepted",
            "rationale": "sound",
            "at": "2026-11-29T18:00:00.000Z",
        }
    ]
    types = [e["type"] for e in (await reviewer.get(f"{M}/events")).json()["events"]]
    assert types[-2:] == ["review.requested", "outcome.recorded"]


async def test_admin_verify_finds_the_outcomes_receipt_and_its_lifecycle_event(
    registered: Member, reviewer: Member, lifecycle: Lifecycle
) -> None:
    """The outcome route's receipt sits with the public ones, its event in the
    lifecycle log: `admin verify` once reported it as a receipt with no event."""
    request_id = await request_review(registered, reviewer.id)
    r = await reviewer.api.post(
        f"/api/v1/reviews/{request_id}/outcome", {"disposition": "accepted", "rationale": "ok"}
    )
    assert r.status_code == 201, r.text
    report = await asyncio.to_thread(verify, lifecycle.service.db_path)
    assert report["checks"]["receipts"] == {"ok": True, "problems": 0, "shown": []}, report


async def test_admin_verify_holds_the_lifecycle_receipts_to_their_events(
    registered: Member, reviewer: Member, lifecycle: Lifecycle
) -> None:
    """docs/operations.md: "every idempotency receipt has the event its
    transaction wrote"; the lifecycle listener's own receipts went unchecked
    (mutanttests): one with no event, or whose stored answer is no JSON
    object, passed."""
    await request_review(registered, reviewer.id)
    path = lifecycle.service.db_path
    report = await asyncio.to_thread(verify, path)
    assert report["checks"]["receipts"] == {"ok": True, "problems": 0, "shown": []}, report
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        (caller, count) = conn.execute(
            "SELECT caller, count(*) FROM lifecycle_receipts GROUP BY caller"
        ).fetchone()
        assert count >= 2  # the registration's and the review request's
        conn.execute(
            "INSERT INTO lifecycle_receipts SELECT caller, 'no-event', fingerprint, tenant,"
            " memo_id, action, body, '2020-01-01T00:00:00.000Z' FROM lifecycle_receipts LIMIT 1"
        )
        (key,) = conn.execute(
            "SELECT key FROM lifecycle_receipts WHERE key <> 'no-event' LIMIT 1"
        ).fetchone()
        conn.execute("UPDATE lifecycle_receipts SET body = '[1]' WHERE key = ?", (key,))
    finally:
        conn.close()
    receipts = (await asyncio.to_thread(verify, path))["checks"]["receipts"]
    assert receipts["problems"] == 2, receipts
    assert sorted(receipts["shown"]) == sorted([
        f"lifecycle receipt 'no-event' of {caller} at 2020-01-01T00:00:00.000Z has no"
        " lifecycle event",
        f"lifecycle receipt {key!r} of {caller}: its stored answer is not a JSON object"
        " (a replay could not send it)",
    ])  # fmt: skip


async def test_only_named_human_reviewers_record_outcomes(
    lifecycle: Lifecycle, registered: Member, reviewer: Member
) -> None:
    bot = await lifecycle.member("reviewer", kind="agent")
    request_id = await request_review(registered, bot.id)
    url = f"/api/v1/reviews/{request_id}/outcome"
    body = {"disposition": "rejected", "rationale": "no"}
    r = await reviewer.api.post(url, body)  # a human, but not named
    assert (r.status_code, r.json()["error"]["details"]["reason"]) == (403, "not_a_reviewer")
    await bot.api.start_session()
    r = await bot.api.post(url, body)  # named, but not human
    assert r.status_code == 403
    r = await reviewer.api.post("/api/v1/reviews/rr_missing/outcome", body)
    assert r.status_code == 404
    assert r.json()["error"]["details"] == {"request_id": "rr_missing"}  # as every 404 names its id


async def test_a_named_reviewer_records_an_outcome_whatever_their_grant_now(
    lifecycle: Lifecycle, registered: Member, reviewer: Member
) -> None:
    """lifecycle-model.md: recording an outcome "needs only" a human principal
    named among the request's reviewers; the grant is not looked at again
    (docs/lifecycle.md says so, and that the api token is what shuts one out)."""
    moved = await lifecycle.member("reviewer")
    request_id = await request_review(registered, moved.id)
    await lifecycle.grant(moved.id, "other", "reader")
    url = f"/api/v1/reviews/{request_id}/outcome"
    r = await moved.api.post(url, {"disposition": "accepted", "rationale": "ok"})
    assert r.status_code == 201, r.text
    state = (await registered.get(f"{M}/outcomes", version=1)).json()
    assert [o["reviewer"] for o in state["outcomes"]] == [moved.id]


async def test_an_outcome_follows_public_conventions(registered: Member, reviewer: Member) -> None:
    request_id = await request_review(registered, reviewer.id)
    url = f"/api/v1/reviews/{request_id}/outcome"
    body = {"disposition": "changes_requested", "rationale": "more data"}
    first = await reviewer.api.post(url, body, key="o1")
    again = await reviewer.api.post(url, body, key="o1")
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
    # a used key with another body is another request, whatever its body holds
    secret = {**body, "rationale": "see password=hunter2222"}
    reused = await reviewer.api.post(url, secret, key="o1")
    assert (reused.status_code, reused.json()["error"]["code"]) == (422, "idempotency_key_reused")
    refused = (await reviewer.api.post(url, secret)).json()["error"]
    assert (refused["code"], refused["details"]) == (
        "invalid_request",
        {"reason": "secret_marker_detected", "field": "rationale"},
    )
    second = await reviewer.api.post(url, {**body, "disposition": "accepted"})
    assert (second.status_code, second.json()["error"]["code"]) == (409, "state_conflict")
    bad = await reviewer.api.post(url, {"disposition": "maybe", "rationale": "x"})
    assert bad.status_code == 400 and bad.json()["error"]["details"]["field"] == "disposition"
    no_key = await reviewer.api.client.post(url, json=body, headers=reviewer.api.headers())
    assert no_key.status_code == 400
    lifecycle_token = await reviewer.api.client.post(
        url,
        json=body,
        headers={"Authorization": f"Bearer {reviewer.token}", "Idempotency-Key": "z"},
    )
    assert lifecycle_token.status_code == 401


OUTCOME_MUTATION = """mutation ($input: ReviewOutcomeInput!) {
  reviewOutcome(input: $input) {
    outcome { requestId reviewerId disposition rationale at memoId version eventId }
    userErrors { code field message reason }
    replayed
  }
}"""


async def test_graphql_records_an_outcome_by_the_same_rules(
    lifecycle: Lifecycle, registered: Member, reviewer: Member
) -> None:
    """Section 12: every REST mutation has a GraphQL mutation with the same rules."""
    request_id = await request_review(registered, reviewer.id)

    async def record(who: Member, key: str, **fields: Any) -> dict[str, Any]:
        data = await who.api.gql(OUTCOME_MUTATION, {"input": {
            "idempotencyKey": key, "requestId": request_id, "disposition": "ACCEPTED",
            "rationale": "sound", **fields}})  # fmt: skip
        assert "errors" not in data, data
        payload: dict[str, Any] = data["data"]["reviewOutcome"]
        return payload

    other = await lifecycle.member("reviewer")
    refused = await record(other, "g0")  # a human, but not named
    assert refused["outcome"] is None
    assert refused["userErrors"][0]["reason"] == "not_a_reviewer"
    first = await record(reviewer, "g1")
    assert first["userErrors"] == [] and first["replayed"] is False
    outcome = first["outcome"]
    assert (outcome["requestId"], outcome["reviewerId"], outcome["disposition"]) == (
        request_id, reviewer.id, "ACCEPTED")  # fmt: skip
    assert (outcome["memoId"], outcome["version"]) == (M.rsplit("/", 1)[-1], 1)
    again = await record(reviewer, "g1")
    assert again["replayed"] is True and again["outcome"] == outcome
    twice = await record(reviewer, "g2", disposition="REJECTED")
    assert twice["userErrors"][0]["code"] == "state_conflict"
    state = (await reviewer.get(f"{M}/outcomes", version=1)).json()
    assert [o["disposition"] for o in state["outcomes"]] == ["accepted"]


async def test_graphql_names_the_request_id_of_a_missing_review_request(
    reviewer: Member,
) -> None:
    """A review outcome's 404 names the id looked up; GraphQL's userError
    carries the REST `details` as REST names them."""
    query = OUTCOME_MUTATION.replace("reason }", "reason details }")
    data = await reviewer.api.gql(query, {"input": {
        "idempotencyKey": "g", "requestId": "rr_missing", "disposition": "ACCEPTED",
        "rationale": "sound"}})  # fmt: skip
    assert "errors" not in data, data
    payload = data["data"]["reviewOutcome"]
    assert payload["outcome"] is None
    [error] = payload["userErrors"]
    assert (error["code"], error["details"]) == ("not_found", {"request_id": "rr_missing"})


async def test_a_request_of_another_tenant_reads_as_one_that_is_not_there(
    lifecycle: Lifecycle, registered: Member, reviewer: Member
) -> None:
    """A human of another tenant, not named, got `403 not_a_reviewer` for a
    request that exists and `404` for one that does not: whether another
    tenant's review request exists, told (lifeload). A human of the same
    tenant who is not named is still told `not_a_reviewer`."""
    request_id = await request_review(registered, reviewer.id)
    body = {"disposition": "rejected", "rationale": "no"}
    outsiders = [
        await lifecycle.member("reviewer", tenant="globex"),
        await lifecycle.member("author", tenant="globex", kind="agent"),
        await lifecycle.member(None),  # no grant at all
    ]
    for who in outsiders:
        if who.api.kind == "agent":
            await who.api.start_session()
        missing = await who.api.post("/api/v1/reviews/rr_missing/outcome", body)
        there = await who.api.post(f"/api/v1/reviews/{request_id}/outcome", body)
        assert there.status_code == missing.status_code == 404, there.text
        # the same answer, but for the id each names
        assert there.json()["error"]["details"] == {"request_id": request_id}
        assert missing.json()["error"]["details"] == {"request_id": "rr_missing"}
        assert there.json()["error"]["message"] == missing.json()["error"]["message"]
    insider = await lifecycle.member("reviewer")
    r = await insider.api.post(f"/api/v1/reviews/{request_id}/outcome", body)
    assert (r.status_code, r.json()["error"]["details"]["reason"]) == (403, "not_a_reviewer")
