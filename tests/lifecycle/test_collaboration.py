"""Comments, sources, evaluations, publications, events and search."""

from __future__ import annotations

import base64
import dataclasses
import unicodedata
from typing import Any

import pytest

from tests.conftest import MovableClock
from tests.lifecycle.support import Lifecycle, Member, digest, memo
from tests.lifecycle.test_requests import refused
from waypost.resolvers.lifecycle.queries import memo_match

M = "/v1/decisions/adr.payments-retry"


async def events(member: Member, **params: Any) -> list[dict[str, Any]]:
    r = await member.get(f"{M}/events", **params)
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["events"]
    return items


async def test_a_comment_is_an_event_with_a_receipt(registered: Member) -> None:
    r = await registered.post(
        f"{M}/comments", {"version": 1, "body": {"text": "hi", "locator": "L1"}}
    )
    assert r.status_code == 200
    receipt = r.json()
    assert set(receipt) == {"event_id", "memo_id", "version"}
    last = (await events(registered))[-1]
    assert last["sequence"] == receipt["event_id"]
    assert (last["type"], last["data"]) == ("comment.added", {"text": "hi", "locator": "L1"})


@pytest.mark.parametrize(
    "body",
    [
        {"version": 1, "body": {"text": ""}},
        {"version": 1, "body": {"text": "x" * 8001}},
        {"version": 1, "body": {"text": "x", "locator": "l" * 201}},
        {"version": True, "body": {"text": "x"}},
        {"version": 1, "body": {"text": "x", "by": "me"}},
        {"body": {"text": "x"}},
    ],
)
async def test_comment_body_rules(registered: Member, body: dict[str, Any]) -> None:
    refused(await registered.post(f"{M}/comments", body), 400, "invalid_request")


async def test_collaboration_bodies_at_their_bounds_are_taken(registered: Member) -> None:
    """lifecycle-model.md: comment text 1-8,000 and locator <= 200; source
    title <= 200 and note <= 2,000; evaluation criterion <= 200 and
    rationale <= 4,000; an audience of <= 100 entries of 1-256 characters.
    Past a bound is refused (pinned beside); the bound itself is taken."""
    bodies = {
        "comments": {"version": 1, "body": {"text": "t" * 8000, "locator": "l" * 200}},
        "sources": {"version": 1, "source": {"title": "t" * 200, "note": "n" * 2000}},
        "evaluations": {
            "version": 1,
            "evaluation": {
                "option_id": "a", "criterion": "c" * 200, "score": 2, "rationale": "r" * 4000,
            },
        },
        "publications": {
            "version": 1,
            "audience": {
                "subjects": [f"{i:03}" + "s" * 253 for i in range(100)],
                "groups": [f"{i:03}" + "g" * 253 for i in range(100)],
            },
        },
    }  # fmt: skip
    for route, body in bodies.items():
        r = await registered.post(f"{M}/{route}", body)
        assert r.status_code == 200, (route, r.text)
    over = {"option_id": "a", "criterion": "c", "score": 0, "rationale": "r" * 4001}
    r = await registered.post(f"{M}/evaluations", {"version": 1, "evaluation": over})
    refused(r, 400, "invalid_request")
    types = [e["type"] for e in await events(registered)][-4:]
    assert types == ["comment.added", "source.added", "evaluation.added", "publication.recorded"]


async def test_a_comment_on_a_missing_version_is_404(registered: Member) -> None:
    r = await registered.post(f"{M}/comments", {"version": 9, "body": {"text": "x"}})
    refused(r, 404, "not_found")


async def test_sources_name_https_uris_and_packet_digests_of_that_version(
    registered: Member,
) -> None:
    ok = {"title": "RFC", "uri": "https://example.org/rfc", "digest": digest(b"notes"), "note": "n"}
    assert (await registered.post(f"{M}/sources", {"version": 1, "source": ok})).status_code == 200
    for bad in [
        {**ok, "uri": "http://example.org"},
        {**ok, "digest": digest(b"elsewhere")},
        {**ok, "title": "t" * 201},
        {**ok, "note": "n" * 2001},
        # no host, control characters, characters no URI holds: they were taken
        {**ok, "uri": "https:///"},
        {**ok, "uri": "https://@/"},
        {**ok, "uri": "https://ex\u0001ample.com"},
        {**ok, "uri": "https://a\u0000b"},
        {**ok, "uri": "https://a/<script>"},
        {**ok, "uri": "https://a b"},
        {**ok, "uri": "https://[::1/"},
        # a port that is not digits within 0-65535, a `%` not escaping two hex digits
        {**ok, "uri": "https://example.com:abc/x"},
        {**ok, "uri": "https://x:-1/"},
        {**ok, "uri": "https://x:65536/"},
        {**ok, "uri": "https://[::1]:abc/"},
        {**ok, "uri": "https://%zz/"},
        {**ok, "uri": "https://example.com/a%2"},
        # Unicode's spaces and separators, bidirectional formatting (a
        # U+202E made the link read as another URL), non-characters, a
        # private-use character outside the query: no IRI holds them
        {**ok, "uri": "https://x/\u202e"},
        {**ok, "uri": "https://x/\u2028"},
        {**ok, "uri": "https://x/\ufffe"},
        {**ok, "uri": "https://x/a\u00a0b"},
        {**ok, "uri": "https://x/a\u3000b"},
        {**ok, "uri": "https://x/a\u200eb"},
        {**ok, "uri": "https://x/\ue000"},
    ]:
        r = await registered.post(f"{M}/sources", {"version": 1, "source": bad})
        refused(r, 400, "invalid_request")
    assert (await events(registered))[-1]["type"] == "source.added"
    # the model bounds a title by 200 only; a scheme is case-insensitive (it was
    # refused); a host may be an IPv6 literal or non-ASCII, as an IRI's
    for good in [
        {"title": ""},
        {"title": "t", "uri": "HTTPS://example.com/"},
        {"title": "t", "uri": "https://[::1]:8443/x?q=1#f"},
        {"title": "t", "uri": "https://例え.jp/パス"},
        {"title": "t", "uri": "https://example.com:443/a%2Fb%c3%a9"},
        {"title": "t", "uri": "https://example.com:/empty-port"},
        {"title": "t", "uri": "https://x/\U0001f600?q=\ue000"},
    ]:
        r = await registered.post(f"{M}/sources", {"version": 1, "source": good})
        assert r.status_code == 200, (good, r.text)
        stored = {k: v for k, v in (await events(registered))[-1]["data"].items() if v is not None}
        assert stored == good


async def test_evaluations_score_an_option_of_that_version(registered: Member) -> None:
    ok = {"option_id": "a", "criterion": "cost", "score": -2, "rationale": "cheap"}
    r = await registered.post(f"{M}/evaluations", {"version": 1, "evaluation": ok})
    assert r.status_code == 200
    for bad in [
        {**ok, "option_id": "zz"},
        {**ok, "score": 3},
        {**ok, "score": True},
        {**ok, "score": 1.0},
        {**ok, "criterion": "c" * 201},
    ]:
        r = await registered.post(f"{M}/evaluations", {"version": 1, "evaluation": bad})
        refused(r, 400, "invalid_request")
    assert (await events(registered))[-1]["data"] == ok
    # "criterion": ≤ 200 in the model, no lower bound (an empty one was refused)
    unnamed = {**ok, "criterion": ""}
    r = await registered.post(f"{M}/evaluations", {"version": 1, "evaluation": unnamed})
    assert r.status_code == 200, r.text
    assert (await events(registered))[-1]["data"] == unnamed


async def test_publications_need_both_lists_and_one_entry(registered: Member) -> None:
    ok = {"version": 1, "audience": {"subjects": ["alice"], "groups": []}}
    assert (await registered.post(f"{M}/publications", ok)).status_code == 200
    for audience in [
        {"subjects": [], "groups": []},
        {"subjects": ["a"]},
        {"subjects": [""], "groups": []},
        {"subjects": ["a" * 257], "groups": []},
        {"subjects": ["a"] * 101, "groups": []},
    ]:
        r = await registered.post(f"{M}/publications", {"version": 1, "audience": audience})
        refused(r, 400, "invalid_request")
    assert (await events(registered))[-1]["type"] == "publication.recorded"


async def test_events_page_by_sequence(registered: Member) -> None:
    for i in range(4):
        await registered.post(f"{M}/comments", {"version": 1, "body": {"text": f"c{i}"}})
    everything = await events(registered)
    assert [e["type"] for e in everything] == ["memo.registered"] + ["comment.added"] * 4
    first = await events(registered, limit=2)
    rest = await events(registered, after=first[-1]["sequence"], limit=100)
    assert first + rest == everything
    assert await events(registered, after=everything[-1]["sequence"]) == []
    for bad in [{"limit": 0}, {"limit": 101}, {"after": -1}, {"limit": "true"}]:
        refused(await registered.get(f"{M}/events", **bad), 400, "invalid_request")


async def test_events_of_one_memo_only(registered: Member) -> None:
    await registered.register(memo("other"))
    assert {e["memo_id"] for e in await events(registered)} == {"adr.payments-retry"}


# -- search -------------------------------------------------------------------


async def register_many(author: Member, clock: MovableClock, n: int) -> None:
    for i in range(n):
        clock.advance(seconds=1)
        r = await author.register(memo(f"m{i}", title=f"Memo {i} about retries"))
        assert r.status_code == 200


async def test_search_matches_title_question_and_context_of_current_revisions(
    author: Member,
) -> None:
    await author.register(memo("a", title="Kafka partitions"))
    await author.register(memo("b", question="Should we shard Postgres?"))
    await author.register(memo("c", context="about the billing ledger"))
    await author.revise(memo("c", 2, context="nothing left"), expected=1)

    async def ids(q: str) -> list[str]:
        r = await author.get("/v1/decisions", q=q)
        assert r.status_code == 200
        return [i["id"] for i in r.json()["items"]]

    assert await ids("kafka") == ["a"]
    assert await ids("postgres shard") == ["b"]
    assert await ids("ledger") == []  # only the current revision is searched
    assert await ids('"quoted" OR NEAR(') == []  # FTS syntax is text, never a 500
    item = (await author.get("/v1/decisions", q="kafka")).json()["items"][0]
    assert set(item) == {"id", "version", "title", "question", "updated_at"}


async def test_search_pages_with_signed_cursors(author: Member, clock: MovableClock) -> None:
    await register_many(author, clock, 5)
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, "q": "retries"}
        if cursor:
            params["cursor"] = cursor
        page = (await author.get("/v1/decisions", **params)).json()
        seen += [i["id"] for i in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["m4", "m3", "m2", "m1", "m0"]


async def test_a_memo_revised_after_the_clock_stepped_back_is_not_walked_twice(
    author: Member, clock: MovableClock
) -> None:
    """Revised under a clock stepped back (an NTP correction), a memo's
    `updated_at` moved it behind a walk that had passed it, which then
    returned it a second time; `updated_at` now never moves back."""
    await register_many(author, clock, 3)
    first = (await author.get("/v1/decisions", q="retries", limit=2)).json()
    assert [i["id"] for i in first["items"]] == ["m2", "m1"]
    clock.advance(hours=-1)
    revised = await author.revise(memo("m2", version=2, title="Memo 2 about retries"), 1)
    assert revised.status_code == 200, revised.text
    cursor = {"cursor": first["next_cursor"]}
    rest = (await author.get("/v1/decisions", q="retries", limit=2, **cursor)).json()
    assert [i["id"] for i in rest["items"]] == ["m0"]
    current = (await author.get("/v1/decisions", q="retries")).json()["items"]
    assert (current[0]["id"], current[0]["version"]) == ("m2", 2)
    assert current[0]["updated_at"] == first["items"][0]["updated_at"]


async def test_a_cursor_is_bound_to_its_caller_tenant_and_query(
    lifecycle: Lifecycle, author: Member, clock: MovableClock
) -> None:
    await register_many(author, clock, 3)
    cursor = (await author.get("/v1/decisions", limit=1, q="retries")).json()["next_cursor"]
    colleague = await lifecycle.member("reader")
    refused(
        await colleague.get("/v1/decisions", limit=1, q="retries", cursor=cursor),
        400,
        "invalid_cursor",
    )
    refused(
        await author.get("/v1/decisions", limit=1, q="memo", cursor=cursor), 400, "invalid_cursor"
    )
    tampered = cursor[:-2] + ("AA" if not cursor.endswith("AA") else "BB")
    refused(
        await author.get("/v1/decisions", limit=1, q="retries", cursor=tampered),
        400,
        "invalid_cursor",
    )
    refused(await author.get("/v1/decisions", cursor="garbage"), 400, "invalid_cursor")
    # altered to any length: one past 4,000 characters was `invalid_request`
    for padded in (cursor + "A" * (4_001 - len(cursor)), cursor + "A" * 20_000):
        refused(await author.get("/v1/decisions", cursor=padded), 400, "invalid_cursor")
    # junk the base64 decoder skipped: the signature still matched
    for junk in (cursor[:4] + "$$$$" + cursor[4:], cursor + "****"):
        refused(
            await author.get("/v1/decisions", limit=1, q="retries", cursor=junk),
            400,
            "invalid_cursor",
        )
    await lifecycle.grant(author.id, "globex", "author")
    refused(
        await author.get("/v1/decisions", limit=1, q="retries", cursor=cursor),
        400,
        "invalid_cursor",
    )


async def test_a_cursor_stays_short_for_the_longest_tenant_and_query(
    lifecycle: Lifecycle, clock: MovableClock
) -> None:
    """A tenant of 256 CJK characters and a query of 200 made a cursor of
    over 4,000 characters, which the route refused: page 2 was unreachable.
    Nor does a cursor show its caller or tenant any more."""
    tenant, q = "中" * 256, "中" * 200
    member = await lifecycle.member("author", tenant=tenant)
    for i in range(3):
        clock.advance(seconds=1)
        r = await member.register(memo(f"{i}" * 256, title=q))
        assert r.status_code == 200, r.text
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 1, "q": q}
    while True:
        page = await member.get("/v1/decisions", **params)
        assert page.status_code == 200, page.text
        seen += [item["id"] for item in page.json()["items"]]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
        assert len(cursor) < 1000
        decoded = base64.urlsafe_b64decode(cursor.split(".")[0] + "==").decode()
        assert member.id not in decoded and "\\u4e2d" not in decoded
        params["cursor"] = cursor
    assert seen == [f"{i}" * 256 for i in (2, 1, 0)]


async def test_a_cursor_expires_after_five_minutes(author: Member, clock: MovableClock) -> None:
    await register_many(author, clock, 3)
    cursor = (await author.get("/v1/decisions", limit=1)).json()["next_cursor"]
    clock.advance(minutes=4, seconds=59)
    assert (await author.get("/v1/decisions", limit=1, cursor=cursor)).status_code == 200
    clock.advance(seconds=1)
    refused(await author.get("/v1/decisions", limit=1, cursor=cursor), 400, "invalid_cursor")


async def test_a_cursor_dies_with_the_app_that_signed_it(
    lifecycle: Lifecycle, author: Member, clock: MovableClock
) -> None:
    import httpx

    from waypost.lifecycle_http import create_lifecycle_app
    from waypost.lifecycle_http.verifiers import WaypostTokenVerifier

    await register_many(author, clock, 3)
    cursor = (await author.get("/v1/decisions", limit=1)).json()["next_cursor"]
    rt = lifecycle.service.rt
    restarted = create_lifecycle_app(rt, WaypostTokenVerifier(rt))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=restarted), base_url="http://l.test"
    ) as client:
        r = await client.get(
            "/v1/decisions", params={"limit": 1, "cursor": cursor}, headers=author.headers()
        )
    refused(r, 400, "invalid_cursor")


async def test_search_shows_only_the_callers_tenant(lifecycle: Lifecycle, author: Member) -> None:
    await author.register(memo("ours"))
    other = await lifecycle.member("author", tenant="globex")
    await other.register(memo("theirs"))
    ids = [i["id"] for i in (await author.get("/v1/decisions")).json()["items"]]
    assert ids == ["ours"]


async def test_search_pages_twenty_by_default(author: Member, clock: MovableClock) -> None:
    """lifecycle-model.md: "Search takes `limit` 1-100 (default 20)"."""
    await register_many(author, clock, 21)
    page = (await author.get("/v1/decisions")).json()
    assert [item["id"] for item in page["items"]] == [f"m{i}" for i in range(20, 0, -1)]
    assert page["next_cursor"] is not None
    rest = (await author.get("/v1/decisions", cursor=page["next_cursor"])).json()
    assert rest == {"items": [rest["items"][0]], "next_cursor": None}
    assert rest["items"][0]["id"] == "m0"


async def test_search_limits(author: Member) -> None:
    for bad in [{"limit": 0}, {"limit": 101}, {"q": "x" * 201}]:
        refused(await author.get("/v1/decisions", **bad), 400, "invalid_request")


async def test_search_finds_text_in_either_unicode_form(author: Member) -> None:
    """A term sent decomposed (NFD, as a macOS client may) found no memo
    written composed, and the other way round; the context packet's search
    matched either form already."""
    await author.register(memo("nfc", title=unicodedata.normalize("NFC", "Việt データ")))
    await author.register(memo("nfd", title=unicodedata.normalize("NFD", "한국어 ledger")))
    for word, expected in (("Việt", ["nfc"]), ("データ", ["nfc"]), ("한국어", ["nfd"])):
        for form in ("NFC", "NFD"):
            r = await author.get("/v1/decisions", q=unicodedata.normalize(form, word))
            assert [i["id"] for i in r.json()["items"]] == expected, (word, form)


def test_a_term_given_twice_is_searched_once() -> None:
    # ASCII without case, as the tokenizer folds it
    assert memo_match("mu mu Mu\x00mu") == '"mu"'
    assert memo_match(" \x00 ") is None


async def test_a_search_past_its_time_limit_is_503(lifecycle: Lifecycle, author: Member) -> None:
    for n in range(40):
        r = await author.register(memo(f"z{n}", context="zebra crossing " * 300))
        assert r.status_code == 200
    rt = lifecycle.service.rt
    settings = rt.settings
    assert settings is not None
    rt.settings = dataclasses.replace(settings, search_time_limit_ms=0)
    try:
        r = await author.get("/v1/decisions", q="zebra crossing")
        refused(r, 503, "unavailable")
        assert r.headers["retry-after"] == "1"
    finally:
        rt.settings = settings
    r = await author.get("/v1/decisions", q="zebra crossing", limit=100)
    assert r.status_code == 200 and len(r.json()["items"]) == 40


async def test_a_source_link_holding_its_own_password_is_refused(registered: Member) -> None:
    """Choice (docs/lifecycle.md): credentials are never returned, and the
    source's link was stored, listed and delivered with its login in it."""
    before = await events(registered)
    for uri in ["https://ci:hunter2@example.org/rfc", "https://x:y@[::1]:8443/"]:
        r = await registered.post(
            f"{M}/sources", {"version": 1, "source": {"title": "t", "uri": uri}}
        )
        refused(r, 400, "secret_marker_detected")
        assert r.json() == {"error": "secret_marker_detected"}
    assert await events(registered) == before
    # a user name alone, or a colon after the host, is no password
    for uri in ["https://reader@example.org/rfc", "https://example.org:8443/a@b"]:
        r = await registered.post(
            f"{M}/sources", {"version": 1, "source": {"title": "t", "uri": uri}}
        )
        assert r.status_code == 200, (uri, r.text)


async def test_a_source_link_holding_a_password_without_a_user_name_is_refused(
    registered: Member,
) -> None:
    """`https://:hunter2@host/` carries a password as much as `ci:hunter2@`
    does (docs/lifecycle.md: "a `uri` holding a password ... is 400
    secret_marker_detected"; only "a user name alone is taken")."""
    before = await events(registered)
    r = await registered.post(
        f"{M}/sources",
        {"version": 1, "source": {"title": "t", "uri": "https://:hunter2@example.org/rfc"}},
    )
    refused(r, 400, "secret_marker_detected")
    assert await events(registered) == before
