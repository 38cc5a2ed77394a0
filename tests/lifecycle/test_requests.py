"""The contract's request rules and its error table, one refusal per test, each
answered with the bounded `{"error": "code"}` envelope, `no-store` and `nosniff`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Message, Scope

from tests.conftest import Service
from tests.lifecycle.support import TABLES, Lifecycle, Member, memo
from waypost.lifecycle_http import create_lifecycle_app
from waypost.lifecycle_http.verifiers import WaypostTokenVerifier

URL = "/v1/decisions"


def refused(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    assert r.json() == {"error": code}
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-type"] == "application/json"


# -- 401: authentication runs first --------------------------------------------


async def test_no_token_is_401_before_routing(lifecycle: Lifecycle) -> None:
    for method, path in [("GET", URL), ("POST", URL), ("GET", "/nowhere"), ("DELETE", URL)]:
        r = await lifecycle.client.request(method, path)
        refused(r, 401, "unauthenticated")
        assert r.headers["www-authenticate"] == "Bearer"


async def test_an_api_token_is_401(lifecycle: Lifecycle, author: Member) -> None:
    r = await lifecycle.client.get(URL, headers={"Authorization": f"Bearer {author.api.token}"})
    refused(r, 401, "unauthenticated")


async def test_an_unknown_or_malformed_token_is_401(lifecycle: Lifecycle) -> None:
    for header in ["Bearer wp_nope", "Basic abc", "Bearer ", "bearer"]:
        refused(
            await lifecycle.client.get(URL, headers={"Authorization": header}),
            401,
            "unauthenticated",
        )


async def test_a_token_with_other_whitespace_attached_is_401(
    lifecycle: Lifecycle, author: Member
) -> None:
    """`str.strip()` took NBSP and NEL for spaces, so a token with one
    attached was trimmed into a good one (the public listener's rule since)."""
    token = author.token.encode()
    for value in (b"Bearer " + token + b"\xa0", b"Bearer \x85" + token):
        r = await lifecycle.client.get(URL, headers={"Authorization": value})
        refused(r, 401, "unauthenticated")
    spaced = {"Authorization": b"Bearer  " + token + b" \t"}
    assert (await lifecycle.client.get(URL, headers=spaced)).status_code == 200


async def _upgrade(app: ASGIApp, headers: list[tuple[bytes, bytes]]) -> list[Message]:
    """What `app` sends to a WebSocket upgrade of URL, asked straight over ASGI."""
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "websocket.connect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {
        "type": "websocket",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "scheme": "ws",
        "path": URL,
        "raw_path": URL.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"lifecycle.test"), *headers],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 80),
        "subprotocols": [],
        "state": {},
    }
    await app(scope, receive, send)
    return sent


async def test_a_websocket_is_closed_before_its_handshake_with_1008(
    lifecycle: Lifecycle, author: Member
) -> None:
    """The listener has no WebSocket route (docs/lifecycle.md): an upgrade is
    closed before it is accepted, with 1008 (policy violation), before any
    token check, a good token or none. uvicorn answers the handshake 403
    whatever the code (tests/test_serve.py), so only ASGI shows it."""
    rt = lifecycle.service.rt
    app = create_lifecycle_app(rt, WaypostTokenVerifier(rt))
    good = [(b"authorization", f"Bearer {author.token}".encode())]
    for headers in ([], good):
        sent = await _upgrade(app, headers)
        assert sent == [{"type": "websocket.close", "code": 1008}], sent


async def test_a_revoked_lifecycle_token_is_401(lifecycle: Lifecycle, author: Member) -> None:
    from waypost.resolvers.access import principals

    def revoke(conn: Any) -> None:
        row = conn.execute(
            "SELECT id FROM tokens WHERE principal_id = ? AND audience = 'lifecycle'", (author.id,)
        ).fetchone()
        principals.revoke_token(conn, row["id"], "2026-11-29T18:00:00.000Z")

    await lifecycle.service.rt.db.write(revoke)
    refused(await author.get(URL), 401, "unauthenticated")


async def test_cookies_are_not_credentials(lifecycle: Lifecycle, author: Member) -> None:
    lifecycle.client.cookies.set("session", author.token)
    r = await lifecycle.client.get(URL, headers={"Cookie": f"token={author.token}"})
    refused(r, 401, "unauthenticated")


async def test_a_body_is_not_read_before_authentication(lifecycle: Lifecycle) -> None:
    async def never() -> Any:
        raise AssertionError("the body was read")
        yield b""  # pragma: no cover

    r = await lifecycle.client.post(
        URL, content=never(), headers={"Content-Type": "application/json"}
    )
    refused(r, 401, "unauthenticated")


async def test_the_public_listener_answers_no_lifecycle_route(
    service: Service, author: Member
) -> None:
    r = await service.client.get(URL, headers={"Authorization": f"Bearer {author.api.token}"})
    assert r.status_code == 404
    r = await service.client.get(URL, headers={"Authorization": f"Bearer {author.token}"})
    assert r.status_code == 401


# -- 404 / 405 -----------------------------------------------------------------


async def test_no_disposition_route_is_exposed(author: Member, lifecycle: Lifecycle) -> None:
    """lifecycle-http-contract.md: "Disposition routes are not exposed" (an
    outcome is recorded on the public listener's protected route only): a
    POST to a memo's outcomes is 405, and no other path takes a disposition."""
    await author.register(memo())
    counts = [await lifecycle.count(t) for t in TABLES]
    body = {"disposition": "accepted", "rationale": "fine"}
    r = await author.post(f"{URL}/adr.payments-retry/outcomes", body)
    refused(r, 405, "method_not_allowed")
    assert set(r.headers["allow"].split(", ")) == {"GET", "HEAD"}
    for path in [
        f"{URL}/adr.payments-retry/dispositions",
        f"{URL}/adr.payments-retry/review-requests/rr_{'0' * 32}/outcome",
        "/v1/reviews/rr_x/outcome",
    ]:
        refused(await author.post(path, body), 404, "not_found")
    assert [await lifecycle.count(t) for t in TABLES] == counts


async def test_unknown_route_is_404_and_wrong_method_405(author: Member) -> None:
    refused(await author.get("/v1/nothing"), 404, "not_found")
    r = await author.client.delete(URL, headers=author.headers())
    refused(r, 405, "method_not_allowed")
    # RFC 9110: a 405 names what is allowed
    assert set(r.headers["allow"].split(", ")) == {"GET", "HEAD", "POST"}
    r = await author.client.put(f"{URL}/x/revisions", headers=author.headers())
    refused(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "POST"


async def test_a_trailing_slash_is_404_never_a_redirect(author: Member) -> None:
    # Starlette's 307 put the client's own Host header in Location
    for path in (f"{URL}/", f"{URL}/x/events/", f"{URL}/x//"):
        r = await author.client.get(path, headers={**author.headers(), "Host": "evil.example"})
        refused(r, 404, "not_found")
        assert "location" not in r.headers


async def test_an_encoded_slash_is_no_segment_boundary(author: Member) -> None:
    """Decoded before routing, `adr.x%2Fevents` answered the memo's events,
    and a comment POSTed to `adr.x%2Fcomments` was stored (httpsemaudit)."""
    m = memo()
    assert (await author.register(m)).status_code == 200
    memo_url = f"{URL}/{m['id']}"
    for path in (f"{URL}/{m['id']}%2Fevents", f"{URL}/{m['id']}%2fevents", "/v1%2Fdecisions"):
        refused(await author.get(path), 404, "not_found")
    comment = {"version": 1, "body": {"text": "looks right"}}
    refused(await author.post(f"{URL}/{m['id']}%2Fcomments", comment), 404, "not_found")
    events = (await author.get(f"{memo_url}/events")).json()["events"]
    assert [e["type"] for e in events] == ["memo.registered"], events


async def test_nul_in_any_text_is_refused_and_nothing_is_stored(author: Member) -> None:
    """It was stored and came back in the memo, its events and webhook
    deliveries (jsonedgeaudit); the public API refuses it (docs/api.md)."""
    for over in ({"title": "a\u0000b"}, {"tags": ["ok", "x\u0000"]}):
        m = memo("adr.nul", **over)
        refused(await author.register(m), 400, "invalid_request")
    # nothing was stored: the id is still free
    assert (await author.register(memo("adr.nul"))).status_code == 200
    m = memo()
    assert (await author.register(m)).status_code == 200
    comment = {"version": 1, "body": {"text": "hi\u0000there"}}
    refused(await author.post(f"{URL}/{m['id']}/comments", comment), 400, "invalid_request")
    events = (await author.get(f"{URL}/{m['id']}/events")).json()["events"]
    assert [e["type"] for e in events] == ["memo.registered"], events


# -- 415 / 413 / 400 on the envelope of a POST ---------------------------------


async def test_content_type_must_be_exactly_application_json(author: Member) -> None:
    body = {"memo": memo()}
    # "exactly": the contract's words (section 13 repeats them), case included
    for ctype in ["text/plain", "application/json; charset=utf-8", "application/jsonx", "",
                  "Application/JSON", "APPLICATION/JSON"]:  # fmt: skip
        r = await author.post(URL, body, headers={"Content-Type": ctype})
        refused(r, 415, "unsupported_media_type")


async def test_a_body_with_a_content_coding_is_415(author: Member) -> None:
    """No coding is decoded: a plain body labelled gzip was registered, a
    real gzip body refused as not valid JSON."""
    body = {"memo": memo()}
    for coding in ["gzip", "br", "identity, gzip", "x-made-up"]:
        r = await author.post(URL, body, headers={"Content-Encoding": coding})
        refused(r, 415, "unsupported_media_type")
    r = await author.post(URL, body, headers={"Content-Encoding": "identity"})
    assert r.status_code == 200, r.text


async def test_a_declared_length_over_256_kib_is_413(author: Member) -> None:
    raw = b'{"memo": ' + b" " * (256 * 1024) + b"{}}"
    refused(await author.post(URL, raw), 413, "payload_too_large")


@pytest.mark.parametrize("declared", ["1000000000000", str(2**63), "9" * 5000])
async def test_a_declared_length_of_any_size_past_256_kib_is_413(
    author: Member, declared: str
) -> None:
    raw = json.dumps({"memo": memo()}).encode()
    r = await author.post(URL, raw, headers={"Content-Length": declared})
    refused(r, 413, "payload_too_large")


async def test_leading_zeros_and_non_ascii_digits_in_the_declared_length(author: Member) -> None:
    raw = json.dumps({"memo": memo()}).encode()
    padded = str(len(raw)).rjust(16, "0")  # 16 characters, still the body's length
    assert (await author.post(URL, raw, headers={"Content-Length": padded})).status_code == 200
    # "²" is a digit to str.isdigit(), not to HTTP (nor to int())
    h = {"Content-Length": "\u00b2".encode("latin-1")}
    refused(await author.post(URL, raw, headers=h), 400, "length_required")  # type: ignore[dict-item]


async def test_a_body_without_declared_length_is_400(author: Member) -> None:
    async def chunks() -> Any:
        yield json.dumps({"memo": memo()}).encode()

    h = {**author.headers("no-length"), "Content-Type": "application/json"}
    r = await author.client.post(URL, content=chunks(), headers=h)
    refused(r, 400, "length_required")


async def test_a_body_shorter_or_longer_than_declared_is_400(author: Member) -> None:
    raw = json.dumps({"memo": memo()}).encode()
    for declared in [len(raw) + 10, len(raw) - 1]:
        h = {"Content-Length": str(declared)}
        refused(await author.post(URL, raw, headers=h), 400, "truncated_body")


@pytest.mark.parametrize("key", [None, "", "x" * 257, "has space"])
async def test_the_idempotency_key_is_required_and_bounded(
    author: Member, lifecycle: Lifecycle, key: str | None
) -> None:
    h = {"Authorization": f"Bearer {author.token}", "Content-Type": "application/json"}
    if key is not None:
        h["Idempotency-Key"] = key
    r = await author.client.post(URL, content=json.dumps({"memo": memo()}), headers=h)
    refused(r, 400, "invalid_idempotency_key")
    assert await lifecycle.count("lifecycle_memos") == 0


async def test_a_256_character_key_is_accepted(author: Member) -> None:
    assert (await author.post(URL, {"memo": memo()}, key="k" * 256)).status_code == 200


async def test_a_key_still_running_is_409_in_flight_and_one_memo_is_made(
    author: Member, lifecycle: Lifecycle
) -> None:
    """Eight at once with one key: one registers, the others are told it is
    still running or get its receipt (the public listener's rule, held by
    the same `receipts.holding`)."""
    sent = [author.post(URL, {"memo": memo()}, key="same") for _ in range(8)]
    answers = await asyncio.gather(*sent)
    statuses = sorted(r.status_code for r in answers)
    assert statuses.count(200) >= 1 and set(statuses) <= {200, 409}, statuses
    for r in answers:
        if r.status_code == 409:
            assert r.json() == {"error": "idempotency_in_flight"}
    # not `409 in statuses`: since a finished command's retry is answered by a
    # point read (001d2fb), all eight replay when the first commits before
    # the others reach the key's slot (4 runs in 20); the 409 while the first
    # still runs is pinned deterministically in test_replay_storm.py
    assert await lifecycle.count("lifecycle_memos") == 1


@pytest.mark.parametrize(
    "raw",
    [
        b'{"memo": {"id": "a", "id": "b"}}',  # duplicate key
        b'{"memo": ' + json.dumps(memo()).encode()[:-1],  # truncated
        b'{"memo": {"version": NaN}}',
        b'{"memo": {"version": Infinity}}',
        b'{"memo": {"version": 1e999}}',
        b"\xff\xfe",
        b"",
        b"[]",
    ],
)
async def test_malformed_json_is_400(author: Member, raw: bytes) -> None:
    refused(await author.post(URL, raw), 400, "invalid_request")


@pytest.mark.parametrize(
    "edit",
    [
        {"version": True},
        {"version": 1.0},
        {"version": "1"},
        {"unknown": 1},
        {"options": [{"id": "a", "title": "A", "extra": 1}, {"id": "b", "title": "B"}]},
        {"recommendation": {"option_id": "a", "rationale": "", "deep": {}}},
        {"title": ""},
        {"options": [{"id": "a", "title": "A"}]},
        {"recommendation": {"option_id": "zzz"}},
        {"packet": [{"id": "p", "digest": "sha256:ABC", "media_type": "text/plain", "title": "t"}]},
        {"highlights": [{"id": "h", "packet_id": "nope", "locator": "", "text": ""}]},
    ],
)
async def test_memo_type_and_shape_refusals_are_400(author: Member, edit: dict[str, Any]) -> None:
    refused(await author.register(memo(**edit)), 400, "invalid_request")


async def test_unknown_top_level_fields_are_400(author: Member) -> None:
    refused(await author.post(URL, {"memo": memo(), "tenant": "other"}), 400, "invalid_request")


async def test_a_boolean_expected_version_is_400(author: Member) -> None:
    await author.register(memo())
    body = {"memo": memo(version=2), "expected_version": True, "summary": "s"}
    refused(await author.post(f"{URL}/adr.payments-retry/revisions", body), 400, "invalid_request")


async def test_excessive_nesting_is_400(author: Member) -> None:
    deep: Any = "x"
    for _ in range(40):
        deep = [deep]
    refused(await author.register(memo(tags=deep)), 400, "invalid_request")


@pytest.mark.parametrize("name", ["approval", "approval_pin", "seal"])
async def test_approvals_pins_and_seals_are_refused_by_name(author: Member, name: str) -> None:
    refused(await author.register(memo(**{name: {"by": "x"}})), 400, "approval_not_accepted")
    nested = memo(recommendation={"option_id": "a", "rationale": "", name: "x"})
    refused(await author.register(nested), 400, "approval_not_accepted")


async def test_a_memo_takes_two_to_twenty_options_and_a_question_of_500(
    author: Member,
) -> None:
    """lifecycle-model.md: `options`: 2-20; the question is 1-500 characters.
    Only the refusals past the bounds were pinned: the bounds themselves
    must be taken."""
    options = [
        {"id": "a" if i == 0 else f"o{i}", "title": f"Option {i}", "summary": ""} for i in range(21)
    ]
    refused(await author.register(memo("m21", options=options)), 400, "invalid_request")
    r = await author.register(memo("m20", options=options[:20]))
    assert r.status_code == 200, r.text
    question = "x" * 499 + "?"
    r = await author.register(memo("q500", question=question))
    assert r.status_code == 200, r.text
    got = await author.get(f"{URL}/q500")
    assert got.json()["question"] == question


@pytest.mark.parametrize(
    "question",
    ["", "No question mark here.", "Two? Questions?", "Is it? not at the end", "x" * 500 + "?"],
)
async def test_the_one_question_check(author: Member, question: str) -> None:
    refused(await author.register(memo(question=question)), 400, "question_check_failed")


async def test_a_question_ending_with_spaces_after_the_mark_passes(author: Member) -> None:
    assert (await author.register(memo(question="Ship it?  "))).status_code == 200


@pytest.mark.parametrize(
    "secret",
    [
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----BEGIN PRIVATE KEY-----",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----",
        "AKIA" + "ABCDEFGHIJKLMNOP",
        "AKIAIOSFODNN7EXAMPLE",  # AWS's own example: alphanumerics, digits too
        "ghp_" + "a" * 36,
        "gho_" + "B" * 36,
        "ghs_" + "1" * 36,
        "xoxb-123",
        "xoxa-1",
        "xoxp-1",
        "xoxr-1",
        "xoxs-1",
        "sk-" + "a" * 20,
        "password=hunter2hunter2",
        "secret=abcdefgh",
        "token=12345678",
        "PASSWORD=hunter2hunter2",
        "Secret=abcdefgh",
        "wp_" + "Ab1_-" * 8 + "xyz",
    ],
)
async def test_secret_markers_anywhere_in_the_memo_are_400(author: Member, secret: str) -> None:
    refused(
        await author.register(memo(context=f"note {secret} end")), 400, "secret_marker_detected"
    )
    refused(await author.register(memo(tags=[secret[:64]])), 400, "secret_marker_detected")


async def test_a_long_wp_identifier_is_no_token(author: Member) -> None:
    """The marker for Waypost's tokens matched any `wp_` identifier of 43
    characters or more (WordPress hooks are full of them)."""
    hook = "wp_ajax_nopriv_woocommerce_checkout_update_order_review"
    assert (await author.register(memo(context=f"see {hook}"))).status_code == 200
    # nor one that only ends with `wp_` and 43 characters (mutantaudit11)
    hook = "my_wp_" + "Ab1_-" * 8 + "xyz"
    assert (await author.register(memo("adr.hook", context=f"see {hook}"))).status_code == 200


@pytest.mark.parametrize(
    "secret", ["AKIA" + "ABCDEFGHIJKLMNOP", "ghp_" + "a" * 36, "sk-" + "a" * 20, "xoxb-1"]
)
async def test_a_secret_marker_inside_a_word_is_400_in_the_memo(
    author: Member, secret: str
) -> None:
    """The lifecycle's markers are refused wherever they appear
    (lifecycle-model.md), glued to a word too: only a task's free text asks
    that a marker start a word (mutantaudit11: no test told the two apart)."""
    refused(await author.register(memo(context=f"key{secret}")), 400, "secret_marker_detected")


async def test_a_revision_summary_and_an_audience_are_checked_for_secrets_too(
    author: Member, lifecycle: Lifecycle
) -> None:
    """Both are stored and sent to the webhook; both passed unchecked."""
    assert (await author.register(memo())).status_code == 200
    counts = [await lifecycle.count(t) for t in TABLES]
    revised = {"memo": memo(version=2), "expected_version": 1, "summary": "ghp_" + "a" * 36}
    at = "/v1/decisions/adr.payments-retry"
    refused(await author.post(f"{at}/revisions", revised), 400, "secret_marker_detected")
    audience = {"version": 1, "audience": {"subjects": ["token=abcdefghijk"], "groups": []}}
    refused(await author.post(f"{at}/publications", audience), 400, "secret_marker_detected")
    assert [await lifecycle.count(t) for t in TABLES] == counts


@pytest.mark.parametrize(
    "field",
    [
        {"options": [{"id": "a", "title": "A"}, {"id": "b", "title": "B"}]},  # no summary
        {"recommendation": {"option_id": "a"}},  # no rationale
    ],
)
async def test_an_options_summary_and_a_recommendations_rationale_are_required(
    author: Member, field: dict[str, Any]
) -> None:
    """The model gives defaults to six named fields only (they defaulted to "")."""
    r = await author.register(memo(**field))
    refused(r, 400, "invalid_request")


async def test_near_misses_of_secret_markers_pass(author: Member) -> None:
    text = "password=short sk-short AKIAlower ghp_tooShort token: x"
    assert (await author.register(memo(context=text))).status_code == 200


@pytest.mark.parametrize(
    "field",
    [
        {"options": [{"id": "a", "title": "A", "summary": ""}] * 2},
        {"highlights": [{"id": "h", "packet_id": "p0", "locator": "", "text": ""}] * 2},
    ],
)
async def test_duplicate_ids_are_400(author: Member, field: dict[str, Any]) -> None:
    from tests.lifecycle.support import with_docs

    m, docs = with_docs(memo(**field), b"doc")
    refused(await author.register(m, docs), 400, "duplicate_id")


async def test_duplicate_packet_ids_are_400(author: Member) -> None:
    from tests.lifecycle.support import document, packet_entry

    m = memo(packet=[packet_entry("p", b"one"), packet_entry("p", b"two")])
    refused(await author.register(m, [document(b"one"), document(b"two")]), 400, "duplicate_id")


async def test_two_packet_entries_may_cite_one_document(author: Member) -> None:
    """Ids must be unique, digests need not be: one source cited by two
    entries was refused as `duplicate_id` though no id repeated."""
    from tests.lifecycle.support import document, packet_entry

    m = memo(packet=[packet_entry("p1", b"one"), packet_entry("p2", b"one")])
    r = await author.register(m, [document(b"one")])
    assert r.status_code == 200, r.text
    got = await author.get(f"/v1/decisions/{m['id']}")
    assert [e["id"] for e in got.json()["packet"]] == ["p1", "p2"]
    # as two media types, the same bytes are refused
    m = memo("adr.two-types", packet=[packet_entry("p1", b"two"),
                                      packet_entry("p2", b"two", "text/plain")])  # fmt: skip
    r = await author.register(m, [document(b"two")])
    refused(r, 400, "invalid_request")


@pytest.mark.parametrize("bad", ["has space", "x" * 257, "a/b", "é", ""])
async def test_memo_id_syntax_in_the_body(author: Member, bad: str) -> None:
    refused(await author.register(memo(bad)), 400, "invalid_request")


@pytest.mark.parametrize("bad", ["has%20space", "x" * 257, "%C3%A9", "a%0A"])
async def test_memo_id_syntax_in_the_path(author: Member, bad: str) -> None:
    refused(await author.get(f"{URL}/{bad}"), 400, "invalid_id")


async def test_id_characters_the_contract_allows(author: Member) -> None:
    r = await author.register(memo("A.z_0:9-x"))
    assert r.status_code == 200
    assert (await author.get(f"{URL}/A.z_0:9-x")).status_code == 200


# -- query strings -------------------------------------------------------------


async def test_duplicate_and_unknown_query_keys_are_400(author: Member) -> None:
    await author.register(memo())
    path = f"{URL}/adr.payments-retry"
    refused(
        await author.client.get(f"{path}?version=1&version=1", headers=author.headers()),
        400,
        "invalid_request",
    )
    refused(await author.get(path, other="x"), 400, "invalid_request")
    refused(await author.get(URL, q="a", limit="0"), 400, "invalid_request")


@pytest.mark.parametrize(
    "version", ["true", "0", "-1", "1.5", "x", "", "1.0", "1e0", "+1", str(2**63), str(10**30)]
)
async def test_version_must_be_a_positive_integer(author: Member, version: str) -> None:
    await author.register(memo())
    memo_path = f"{URL}/adr.payments-retry"
    for path in (memo_path, f"{memo_path}/outcomes", f"{memo_path}/review-requests"):
        refused(await author.get(path, version=version), 400, "invalid_request")


@pytest.mark.parametrize("after", ["1.0", "1e0", str(2**63), "-1"])
async def test_events_after_is_a_decimal_integer_in_range(author: Member, after: str) -> None:
    await author.register(memo())
    r = await author.get(f"{URL}/adr.payments-retry/events", after=after)
    refused(r, 400, "invalid_request")


async def test_post_routes_take_no_query_parameters(author: Member) -> None:
    refused(await author.post(f"{URL}?tenant=x", {"memo": memo()}), 400, "invalid_request")


async def test_no_refusal_writes_anything(author: Member, lifecycle: Lifecycle) -> None:
    await author.register(memo(question="no"))
    await author.register(memo(context="token=abcdefghijk"))
    assert [await lifecycle.count(t) for t in TABLES] == [0] * len(TABLES)


async def test_spaces_around_a_header_value_are_not_part_of_it(author: Member) -> None:
    raw = json.dumps({"memo": memo()}).encode()
    h = {"Content-Length": f"{len(raw)} \t", "Idempotency-Key": " spaced-key "}
    assert (await author.post(URL, raw, headers=h)).status_code == 200
    replay = await author.post(URL, raw, key="spaced-key")
    assert replay.status_code == 200 and replay.headers["idempotent-replayed"] == "true"


async def test_a_query_parameter_that_is_not_utf_8_is_refused(author: Member) -> None:
    """`q=%FF` searched for U+FFFD; now it is refused like any bad parameter."""
    r = await author.client.get("/v1/decisions?q=%FF", headers=author.headers())
    refused(r, 400, "invalid_request")


async def test_only_spaces_and_tabs_around_the_content_type_are_trimmed(
    author: Member,
) -> None:
    """docs/lifecycle.md: exactly `Content-Type: application/json`; RFC 9110
    5.5 trims SP and HTAB only. NBSP and NEL are obs-text, which h11 passes
    through (mutantaudit10)."""
    body = {"memo": memo()}
    for media_type in [b"application/json\xa0", b"\xa0application/json", b"application/json\x85"]:
        r = await author.post(URL, body, headers={"Content-Type": media_type})
        refused(r, 415, "unsupported_media_type")
    r = await author.post(URL, body, headers={"Content-Type": " \tapplication/json\t "})
    assert r.status_code == 200, r.text


def test_an_error_of_a_status_outside_the_table_is_answered_internal() -> None:
    """docs/lifecycle.md: the codes are a closed set and `500 {"error":
    "internal"}` is a bug; a 422 (the public listener's reused key) escaped
    as Starlette's text/plain 500 through a KeyError under the mutant
    (mutantaudit10)."""
    from waypost.errors import IdempotencyKeyReused
    from waypost.lifecycle_http.envelope import error_response, status_and_code

    assert status_and_code(IdempotencyKeyReused("reused")) == (500, "internal")
    r = error_response(IdempotencyKeyReused("reused"))
    assert (r.status_code, r.body) == (500, b'{"error": "internal"}')


async def test_a_verifier_fault_is_a_plain_500_with_the_security_headers(
    lifecycle: Lifecycle, author: Member, caplog: pytest.LogCaptureFixture
) -> None:
    """A fault inside the verifier (no refusal of the token: a bug, a library
    raising) is the envelope's bare 500 with `no-store` and `nosniff`, its
    text in the log only; nothing is routed. It escaped the ASGI app (the
    server's own 500, without the headers)."""
    rt = lifecycle.service.rt

    class Faulty(WaypostTokenVerifier):
        async def verify(self, token: str) -> Any:
            raise RuntimeError("/secret/path/of/the/verifier")

    app = create_lifecycle_app(rt, Faulty(rt))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://l") as c:
        r = await c.get("/v1/decisions", headers={"Authorization": f"Bearer {author.token}"})
    assert r.status_code == 500
    assert r.json() == {"error": "internal"}
    assert "secret" not in r.text
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["x-content-type-options"] == "nosniff"


async def test_a_recommendation_naming_no_option_is_refused_with_nothing_written(
    author: Member, lifecycle: Lifecycle
) -> None:
    """`recommendation.option_id` names one of the options (lifecycle-model.md
    §memo): one naming none is 400 before anything is written."""
    counts = [await lifecycle.count(t) for t in TABLES]
    bad = memo(recommendation={"option_id": "c", "rationale": "no such option"})
    refused(await author.register(bad), 400, "invalid_request")
    assert [await lifecycle.count(t) for t in TABLES] == counts
    assert (await author.register(memo())).status_code == 200  # the same memo, named right
