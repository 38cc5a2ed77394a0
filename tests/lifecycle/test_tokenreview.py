"""The Kubernetes TokenReview verifier against a local HTTPS stand-in for the
API server (a real TLS server with a trustme CA), composed into the app."""

from __future__ import annotations

import gzip
import json
import logging
import ssl
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme

from tests.conftest import Service, own_condition_log
from tests.lifecycle.support import Lifecycle, memo
from tests.lifecycle.test_requests import refused
from waypost.lifecycle_http import create_lifecycle_app, verifiers
from waypost.lifecycle_http.verifiers import TOKENREVIEW_PATH, TokenReviewVerifier
from waypost.observe.logs import FIELDS

SA = "system:serviceaccount:state-hub:lifecycle-client"


class StandIn:
    """What the stand-in API server answers, and what it was sent."""

    def __init__(self) -> None:
        self.status = 200
        self.answer: dict[str, Any] = {}
        self.seen: list[tuple[str, dict[str, str], Any]] = []
        self.revoked: set[str] = set()
        self.body: bytes | None = None  # an answer of these bytes instead of a review
        self.encoding: str | None = None  # a Content-Encoding header to send with it
        self.trickle = 0.0  # seconds between the answer's bytes (0: all at once)

    def review(self, token: str) -> dict[str, Any]:
        if token == "good-sa-token" and token not in self.revoked:
            return {"authenticated": True, "user": {"username": SA}, "audiences": ["lifecycle"]}
        if token == "other-audience":
            return {"authenticated": True, "user": {"username": SA}, "audiences": ["intake"]}
        return {"authenticated": False, "error": "token expired: internal detail"}


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def api(ca: trustme.CA, tmp_path: Path) -> Iterator[tuple[str, Path, StandIn]]:
    state = StandIn()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            body = json.loads(self.rfile.read(length))
            state.seen.append((self.path, dict(self.headers), body))
            if state.body is not None:
                payload = state.body
            elif state.status != 200:
                payload = b"upstream stack trace: secret internals"
            else:
                status = state.review(body["spec"]["token"])
                payload = json.dumps({**body, "status": status}).encode()
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            if state.encoding is not None:
                self.send_header("Content-Encoding", state.encoding)
            self.end_headers()
            if not state.trickle:
                self.wfile.write(payload)
                return
            for byte in payload:  # each within any read timeout, the whole not
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(state.trickle)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    # shutdown() waits for serve_forever's next poll: half a second by default,
    # which was most of this file's time
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    ca_file = tmp_path / "k8s-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", ca_file, state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
async def k8s(
    service: Service, api: tuple[str, Path, StandIn], tmp_path: Path
) -> AsyncIterator[tuple[Lifecycle, StandIn]]:
    url, ca_file, state = api
    credential = tmp_path / "sa-token"
    credential.write_text("waypost-own-token\n")
    verifier = TokenReviewVerifier(url, ca_file, credential)
    app = create_lifecycle_app(service.rt, verifier)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://l.test") as client:
        yield Lifecycle(service, client), state
    await verifier.aclose()


async def _register_changing_midway(
    lifecycle: Lifecycle, midway: Callable[[], object]
) -> tuple[httpx.Response, bytes, dict[str, str]]:
    """A registration whose body comes in two parts, `midway` run between
    them: the answer, the body and the headers (to send it again)."""
    payload = json.dumps({"memo": memo()}).encode()

    async def slow_upload() -> AsyncIterator[bytes]:
        yield payload[:10]
        midway()
        yield payload[10:]

    headers = {
        **bearer("good-sa-token"),
        "Idempotency-Key": "k",
        "Content-Type": "application/json",
        "Content-Length": str(len(payload)),
    }
    r = await lifecycle.client.post("/v1/decisions", content=slow_upload(), headers=headers)
    return r, payload, headers


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_reviewed_service_account_acts_under_its_grant(
    k8s: tuple[Lifecycle, StandIn],
) -> None:
    lifecycle, state = k8s
    await lifecycle.grant(SA, "acme", "author")
    headers = {
        **bearer("good-sa-token"),
        "Idempotency-Key": "k",
        "Content-Type": "application/json",
    }
    r = await lifecycle.client.post(
        "/v1/decisions", content=json.dumps({"memo": memo()}), headers=headers
    )
    assert r.status_code == 200, r.text
    events = await lifecycle.client.get(
        "/v1/decisions/adr.payments-retry/events", headers=bearer("good-sa-token")
    )
    assert events.json()["events"][0]["actor"] == SA
    path, sent_headers, body = state.seen[0]
    assert path == TOKENREVIEW_PATH
    assert body["spec"] == {"token": "good-sa-token", "audiences": ["lifecycle"]}
    assert body["kind"] == "TokenReview" and body["apiVersion"] == "authentication.k8s.io/v1"
    assert sent_headers["Authorization"] == "Bearer waypost-own-token"


async def test_a_token_revoked_during_the_upload_is_401_and_writes_nothing(
    k8s: tuple[Lifecycle, StandIn],
) -> None:
    """lifecycle-http-contract: identity is rechecked before the write. The
    review at the request's start passed; the token was revoked while the body
    was still coming, and the command was committed under it."""
    lifecycle, state = k8s
    await lifecycle.grant(SA, "acme", "author")
    # revoked at the API server while the body is still coming
    r, payload, headers = await _register_changing_midway(
        lifecycle, lambda: state.revoked.add("good-sa-token")
    )
    refused(r, 401, "unauthenticated")
    assert len(state.seen) == 2  # reviewed at the start, and again after the upload
    state.revoked.clear()
    again = await lifecycle.client.post("/v1/decisions", content=payload, headers=headers)
    assert again.status_code == 200, again.text
    assert "Idempotent-Replayed" not in again.headers  # the first stored no receipt
    events = await lifecycle.client.get(
        "/v1/decisions/adr.payments-retry/events", headers=bearer("good-sa-token")
    )
    assert [e["type"] for e in events.json()["events"]] == ["memo.registered"]


async def test_a_review_once_the_verifier_has_closed_is_503_and_no_fault(
    service: Service, api: tuple[str, Path, StandIn], caplog: pytest.LogCaptureFixture
) -> None:
    """`serve` closes the verifier's client with the runtime's resources, before
    the store: a forced quit's lifecycle write whose upload ended while the
    store closed met the closed client at its second review, httpx's
    RuntimeError, a 500 and an ERROR with a traceback (stopaudit). It is the
    identity service being unavailable: 503, and nothing written."""
    url, ca_file, _ = api
    verifier = TokenReviewVerifier(url, ca_file)
    lifecycle = Lifecycle(service, httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_lifecycle_app(service.rt, verifier)),
        base_url="http://l.test"))  # fmt: skip
    await lifecycle.grant(SA, "acme", "author")
    payload = json.dumps({"memo": memo()}).encode()

    async def upload_ending_after_the_close() -> AsyncIterator[bytes]:
        yield payload[:10]
        await verifier.aclose()  # the stop, while the body still comes
        yield payload[10:]

    headers = {**bearer("good-sa-token"), "Idempotency-Key": "k",
               "Content-Type": "application/json", "Content-Length": str(len(payload))}  # fmt: skip
    with caplog.at_level(logging.WARNING):
        r = await lifecycle.client.post(
            "/v1/decisions", content=upload_ending_after_the_close(), headers=headers
        )
        refused(r, 503, "unavailable")
        assert r.headers["retry-after"] == "1"
        # a request that starts after the close is refused at authentication
        later = await lifecycle.client.get("/v1/decisions", headers=bearer("good-sa-token"))
        refused(later, 503, "unavailable")
    await lifecycle.client.aclose()
    assert [x for x in caplog.records if x.levelno >= logging.ERROR] == []
    count = await service.rt.db.read(
        lambda conn: conn.execute("SELECT count(*) FROM lifecycle_memos").fetchone()[0]
    )
    assert count == 0


async def test_an_unauthenticated_review_is_401(k8s: tuple[Lifecycle, StandIn]) -> None:
    lifecycle, _ = k8s
    r = await lifecycle.client.get("/v1/decisions", headers=bearer("expired"))
    refused(r, 401, "unauthenticated")
    assert "expired" not in r.text


async def test_another_audience_is_401(k8s: tuple[Lifecycle, StandIn]) -> None:
    lifecycle, _ = k8s
    await lifecycle.grant(SA, "acme", "author")
    refused(
        await lifecycle.client.get("/v1/decisions", headers=bearer("other-audience")),
        401,
        "unauthenticated",
    )


async def test_an_authenticated_account_without_a_grant_is_403(
    k8s: tuple[Lifecycle, StandIn],
) -> None:
    lifecycle, _ = k8s
    refused(
        await lifecycle.client.get("/v1/decisions", headers=bearer("good-sa-token")),
        403,
        "policy_denied",
    )


async def test_an_upstream_failure_is_503_without_its_diagnostics(
    k8s: tuple[Lifecycle, StandIn],
) -> None:
    lifecycle, state = k8s
    state.status = 500
    r = await lifecycle.client.get("/v1/decisions", headers=bearer("good-sa-token"))
    refused(r, 503, "unavailable")
    assert "internals" not in r.text


@pytest.mark.parametrize(
    "body",
    [b'{"kind": "TokenReview"}', b'{"status": null}', b'{"status": "ok"}', b'{"status": [1]}',
     b"[]", b"not json",
     # nested past Python's recursion limit: a 500 and a traceback (tokenreviewaudit)
     b"[" * 3000 + b"]" * 3000],
)  # fmt: skip
async def test_an_answer_without_a_status_object_is_503_and_logged(
    k8s: tuple[Lifecycle, StandIn],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    body: bytes,
) -> None:
    """A null, string or list status was 401, as if the token were refused,
    and nothing reached the log."""
    own = own_condition_log(monkeypatch, verifiers)
    lifecycle, state = k8s
    state.body = body
    with caplog.at_level(logging.WARNING, "waypost.lifecycle"):
        r = await lifecycle.client.get("/v1/decisions", headers=bearer("good-sa-token"))
    refused(r, 503, "unavailable")
    lines = [r.getMessage() for r in caplog.records if r.name == own.log.name]
    assert len(lines) == 1 and lines[0].startswith("TokenReview answered no status object")


@pytest.mark.parametrize("kind", ["large", "compressed"])
async def test_an_answer_past_its_bound_is_503_unread(
    k8s: tuple[Lifecycle, StandIn],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:
    """An answer of 300 MB was read whole into the process both listeners
    share (815 MB of memory), and 1 MB of gzip inflated to 1 GB there,
    stalling the public listener for seconds (tokenreviewaudit). A review
    is a few hundred bytes: past 64 KiB, or compressed, it is no review."""
    own = own_condition_log(monkeypatch, verifiers)
    lifecycle, state = k8s
    review = {"status": state.review("good-sa-token")}
    if kind == "large":
        state.body = json.dumps({**review, "pad": "x" * (verifiers.REVIEW_READ_MAX + 1)}).encode()
    else:
        state.body, state.encoding = gzip.compress(json.dumps(review).encode()), "gzip"
    with caplog.at_level(logging.WARNING, "waypost.lifecycle"):
        r = await lifecycle.client.get("/v1/decisions", headers=bearer("good-sa-token"))
    refused(r, 503, "unavailable")
    said = {"large": "answered more than 65536 bytes", "compressed": "answered a compressed"}
    lines = [r.getMessage() for r in caplog.records if r.name == own.log.name]
    assert len(lines) == 1 and said[kind] in lines[0], lines
    assert state.seen[-1][1]["Accept-Encoding"] == "identity"


@pytest.mark.parametrize(("extra", "status"), [(0, 200), (1, 503)])
async def test_an_answer_of_exactly_64_kib_is_read_and_one_byte_more_is_not(
    k8s: tuple[Lifecycle, StandIn], extra: int, status: int
) -> None:
    """The bound is on what is read: 65,536 bytes is a review (padded with the
    whitespace JSON allows), 65,537 is not."""
    lifecycle, state = k8s
    await lifecycle.grant(SA, "acme", "author")
    review = json.dumps({"status": state.review("good-sa-token")}).encode()
    state.body = review + b" " * (verifiers.REVIEW_READ_MAX - len(review) + extra)
    r = await lifecycle.client.get("/v1/decisions", headers=bearer("good-sa-token"))
    assert r.status_code == status, r.text


async def test_a_review_is_bounded_whole_not_read_by_read(
    service: Service, api: tuple[str, Path, StandIn]
) -> None:
    """httpx's timeout bounds each read: an API server answering a byte
    every 2 s held a request for 30 s against "up to its 5 s timeout"
    (tokenreviewaudit). The whole review is bounded now."""
    url, ca_file, state = api
    state.trickle = 0.1  # a review of some 200 bytes: 20 s
    verifier = TokenReviewVerifier(url, ca_file, timeout=1.0)
    app = create_lifecycle_app(service.rt, verifier)
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://l.test") as client:
            started = time.monotonic()
            r = await client.get("/v1/decisions", headers=bearer("good-sa-token"))
            took = time.monotonic() - started
    finally:
        await verifier.aclose()
    refused(r, 503, "unavailable")
    assert took < 3, took


async def test_an_identity_service_that_is_down_is_logged_once_for_many_requests(
    k8s: tuple[Lifecycle, StandIn],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A WARNING per lifecycle request while the API server failed."""
    own = own_condition_log(monkeypatch, verifiers)
    lifecycle, state = k8s
    state.status = 500
    with caplog.at_level(logging.WARNING, "waypost.lifecycle"):
        for _ in range(5):
            r = await lifecycle.client.get("/v1/decisions", headers=bearer("good-sa-token"))
            refused(r, 503, "unavailable")
    lines = [r.getMessage() for r in caplog.records if r.name == own.log.name]
    assert lines == ["TokenReview answered HTTP 500"], lines


@pytest.mark.parametrize(
    "content",
    [
        "own-token-\u00e9\n".encode(),
        b"own-\xff-token",
        b"own token",
        b"own-token\ninjected: 1",
        None,
    ],
)
async def test_a_credential_no_header_can_carry_is_503_and_never_logged(
    service: Service, api: tuple[str, Path, StandIn], tmp_path: Path,
    caplog: pytest.LogCaptureFixture, content: bytes | None,
) -> None:  # fmt: skip
    """A credential file with a non-ASCII letter was a 500 and an ERROR
    traceback (httpx could not encode the header); one not UTF-8 too. The
    file is read at every call (it rotates): one gone for a moment (None
    here) is the identity service unavailable too, and no review is sent
    without it (covgapsB)."""
    url, ca_file, state = api
    credential = tmp_path / "sa-token"
    if content is not None:
        credential.write_bytes(content)
    verifier = TokenReviewVerifier(url, ca_file, credential)
    app = create_lifecycle_app(service.rt, verifier)
    with caplog.at_level(logging.WARNING):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://l"
        ) as c:
            r = await c.get("/v1/decisions", headers=bearer("good-sa-token"))
    await verifier.aclose()
    refused(r, 503, "unavailable")
    assert state.seen == []  # nothing was sent with it
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert "own" not in caplog.text


async def test_an_unreachable_api_is_503(service: Service, ca: trustme.CA, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    verifier = TokenReviewVerifier(f"https://127.0.0.1:{port}", ca_file)
    app = create_lifecycle_app(service.rt, verifier)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://l") as c:
        refused(await c.get("/v1/decisions", headers=bearer("good-sa-token")), 503, "unavailable")
    await verifier.aclose()


async def test_an_api_server_with_an_untrusted_certificate_is_503(
    service: Service, api: tuple[str, Path, StandIn], tmp_path: Path
) -> None:
    url, _, _ = api
    stranger = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(stranger))
    verifier = TokenReviewVerifier(url, stranger)
    app = create_lifecycle_app(service.rt, verifier)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://l") as c:
        refused(await c.get("/v1/decisions", headers=bearer("good-sa-token")), 503, "unavailable")
    await verifier.aclose()


def test_the_verifier_demands_https(tmp_path: Path, ca: trustme.CA) -> None:
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with pytest.raises(ValueError):
        TokenReviewVerifier("http://127.0.0.1:1", ca_file)


def test_the_app_cannot_be_composed_without_a_verifier(service: Service) -> None:
    with pytest.raises(TypeError):
        create_lifecycle_app(service.rt, None)  # type: ignore[arg-type]


@pytest.mark.slow
def test_serve_selects_tokenreview_with_its_flags(
    api: tuple[str, Path, StandIn], tmp_path: Path
) -> None:
    import subprocess
    import sys

    from tests.serve_support import START, free_port, start

    url, ca_file, state = api
    clock = tmp_path / "clock"
    clock.write_text(START)
    db = tmp_path / "waypost.db"
    port = free_port()
    srv = start(
        db,
        clock,
        port,
        "--lifecycle-auth",
        "tokenreview",
        "--k8s-api",
        url,
        "--k8s-ca",
        str(ca_file),
    )
    try:
        srv.wait_for(rf"listening on http://127.0.0.1:{port} ")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "waypost.cli",
                "admin",
                "lifecycle",
                "grant",
                "--principal",
                SA,
                "--tenant",
                "acme",
                "--role",
                "reader",
                "--db",
                str(db),
            ],
            check=True,
            capture_output=True,
        )
        base = f"http://127.0.0.1:{port}/v1/decisions"
        r = httpx.get(base, headers=bearer("good-sa-token"))
        assert r.status_code == 200 and r.json() == {"items": [], "next_cursor": None}
        refused(httpx.get(base, headers=bearer("expired")), 401, "unauthenticated")
        assert state.seen[0][2]["spec"]["audiences"] == ["lifecycle"]
        state.status = 500  # the 503 row of the error table, over the real listener
        refused(httpx.get(base, headers=bearer("good-sa-token")), 503, "unavailable")
    finally:
        assert srv.stop() == 0


def test_serve_refuses_tokenreview_without_its_flags(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from waypost.cli import main

    result = CliRunner().invoke(
        main, ["serve", "--db", str(tmp_path / "x.db"), "--lifecycle-auth", "tokenreview"]
    )
    assert result.exit_code == 2 and "--k8s-api" in result.output
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    result = CliRunner().invoke(
        main,
        [
            "serve",
            "--db",
            str(tmp_path / "x.db"),
            "--lifecycle-auth",
            "tokenreview",
            "--k8s-api",
            "http://insecure",
            "--k8s-ca",
            str(ca),
        ],
    )
    assert result.exit_code == 2 and "https://" in result.output
    for api in ("https://", "https://k8s api/", "https://[::1/"):
        result = CliRunner().invoke(
            main,
            ["serve", "--db", str(tmp_path / "x.db"), "--lifecycle-auth", "tokenreview",
             "--k8s-api", api, "--k8s-ca", str(ca)],
        )  # fmt: skip
        assert result.exit_code == 2 and "--k8s-api" in result.output, (api, result.output)
    assert not (tmp_path / "x.db").exists()


# What a TokenReview answer must hold to name a caller (docs/lifecycle.md: a
# review that is not `authenticated`, lacks the `lifecycle` audience or a
# username is 401; an answer other than 200/201 is the identity service
# failing, 503). Unpinned before: mutantaudit4.
def answer(status: dict[str, Any]) -> bytes:
    return json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                       "status": status}).encode()  # fmt: skip


@pytest.mark.parametrize(
    "status",
    [
        # only the JSON `true` authenticates (a string or a number is no boolean)
        {"authenticated": "true", "user": {"username": SA}, "audiences": ["lifecycle"]},
        {"authenticated": 1, "user": {"username": SA}, "audiences": ["lifecycle"]},
        # an empty username names nobody
        {"authenticated": True, "user": {"username": ""}, "audiences": ["lifecycle"]},
    ],
)
async def test_a_review_that_names_no_authenticated_user_is_401(
    k8s: tuple[Lifecycle, StandIn], status: dict[str, Any]
) -> None:
    lifecycle, state = k8s
    await lifecycle.grant(SA, "acme", "author")
    await lifecycle.grant("", "acme", "author")
    state.body = answer(status)
    r = await lifecycle.client.get("/v1/decisions", headers=bearer("good-sa-token"))
    refused(r, 401, "unauthenticated")


@pytest.mark.parametrize("code", [202, 203, 204, 302])
async def test_a_review_answered_with_another_status_is_503(
    k8s: tuple[Lifecycle, StandIn], code: int
) -> None:
    lifecycle, state = k8s
    await lifecycle.grant(SA, "acme", "author")
    state.status = code
    state.body = answer({"authenticated": True, "user": {"username": SA},
                         "audiences": ["lifecycle"]})  # fmt: skip
    r = await lifecycle.client.get("/v1/decisions", headers=bearer("good-sa-token"))
    refused(r, 503, "unavailable")


REVIEWED = {"authenticated": True, "user": {"username": SA}, "audiences": ["lifecycle"]}


async def test_a_review_answered_201_names_the_caller(k8s: tuple[Lifecycle, StandIn]) -> None:
    """docs/lifecycle.md: a status other than 200 or 201 is 503; 201 is what
    an API server answers a created TokenReview (mutantaudit10)."""
    lifecycle, state = k8s
    await lifecycle.grant(SA, "acme", "author")
    state.status = 201
    state.body = answer(REVIEWED)
    r = await lifecycle.client.get("/v1/decisions", headers=bearer("good-sa-token"))
    assert r.status_code == 200, r.text


async def test_a_token_that_names_another_user_after_the_upload_is_401(
    k8s: tuple[Lifecycle, StandIn],
) -> None:
    """The second review must name the same caller, not merely someone, even
    one with a grant of their own (mutantaudit10)."""
    lifecycle, state = k8s
    other = "system:serviceaccount:state-hub:someone-else"
    await lifecycle.grant(SA, "acme", "author")
    await lifecycle.grant(other, "acme", "author")

    def names_another() -> None:
        state.body = answer({**REVIEWED, "user": {"username": other}})

    r, _, _ = await _register_changing_midway(lifecycle, names_another)
    refused(r, 401, "unauthenticated")
    assert len(state.seen) == 2


async def test_a_reviewed_callers_access_line_names_no_principal(
    k8s: tuple[Lifecycle, StandIn], caplog: pytest.LogCaptureFixture
) -> None:
    """docs/operations.md: `principal_id` is the caller's when a Waypost token
    of audience `lifecycle` named it, `null` under TokenReview (mutantaudit10)."""
    lifecycle, _ = k8s
    caplog.set_level(logging.INFO, logger="waypost")
    await lifecycle.grant(SA, "acme", "author")
    r = await lifecycle.client.get("/v1/decisions", headers=bearer("good-sa-token"))
    assert r.status_code == 200, r.text
    lines = [getattr(x, FIELDS) for x in caplog.records if x.name == "waypost.lifecycle.access"]
    assert [x["principal_id"] for x in lines] == [None]


@pytest.mark.parametrize(("length", "status"), [(256, 200), (257, 401)])
async def test_a_username_of_up_to_256_characters_names_the_caller(
    k8s: tuple[Lifecycle, StandIn], length: int, status: int
) -> None:
    """docs/lifecycle.md: a review that "names no username of 1 to 256
    characters ... is `401`" (granted, so that a 403 cannot stand in)."""
    lifecycle, state = k8s
    name = "system:serviceaccount:ns:" + "a" * (length - 25)
    assert len(name) == length
    await lifecycle.grant(name, "acme", "author")
    state.body = answer({**REVIEWED, "user": {"username": name}})
    r = await lifecycle.client.get("/v1/decisions", headers=bearer("good-sa-token"))
    if status == 200:
        assert r.status_code == 200, r.text
    else:
        refused(r, 401, "unauthenticated")


async def test_a_review_is_bounded_at_5_seconds_by_default(
    api: tuple[str, Path, StandIn],
) -> None:
    """docs/lifecycle.md: a review that "takes longer than 5 s for the whole
    review" is 503; serve composes the verifier without a timeout of its own
    (compose.lifecycle_verifier), so the default is the bound (mutantaudit10)."""
    url, ca_file, _ = api
    verifier = TokenReviewVerifier(url, ca_file)
    try:
        assert verifier.timeout == 5.0
        assert verifier.client.timeout.read == 5.0
    finally:
        await verifier.aclose()


async def test_a_token_past_8192_characters_is_401_without_a_review(
    k8s: tuple[Lifecycle, StandIn],
) -> None:
    """lifecycle_http/auth.py: a bearer token longer than 8,192 characters is
    refused before any verifier sees it. The API server failing here, a
    reviewed token answers 503; one past the bound is 401 and never sent."""
    lifecycle, state = k8s
    state.status = 500
    at_bound = await lifecycle.client.get("/v1/decisions", headers=bearer("t" * 8192))
    refused(at_bound, 503, "unavailable")
    assert [len(body["spec"]["token"]) for _, _, body in state.seen] == [8192]
    past = await lifecycle.client.get("/v1/decisions", headers=bearer("t" * 8193))
    refused(past, 401, "unauthenticated")
    assert past.headers["www-authenticate"] == "Bearer"
    assert len(state.seen) == 1  # no review of it


async def test_a_bearer_scheme_without_a_token_is_401_without_a_review(
    k8s: tuple[Lifecycle, StandIn],
) -> None:
    """A scheme with nothing after it names no token: 401, and the API
    server is never asked about an empty one (mutantaudit11)."""
    lifecycle, state = k8s
    for value in ("Bearer", "Bearer ", "Bearer \t", "bearer  "):
        r = await lifecycle.client.get("/v1/decisions", headers={"Authorization": value})
        refused(r, 401, "unauthenticated")
    assert state.seen == []
