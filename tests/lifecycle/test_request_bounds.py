"""lifecycle listener rules the suite left unpinned."""

from __future__ import annotations

import json

from tests.lifecycle.support import Lifecycle, Member, memo
from tests.lifecycle.test_requests import refused


async def test_two_authorization_headers_are_401_even_when_the_first_is_good(
    lifecycle: Lifecycle, author: Member
) -> None:
    """auth.py: the request must carry one `Authorization: Bearer <token>`; a
    proxy that merged or appended a second must not have the first taken."""
    for pair in (
        [("Authorization", f"Bearer {author.token}"), ("Authorization", "Bearer other")],
        [("Authorization", f"Bearer {author.token}"), ("Authorization", f"Bearer {author.token}")],
    ):
        r = await lifecycle.client.get("/v1/decisions", headers=pair)
        refused(r, 401, "unauthenticated")


async def test_a_body_of_exactly_256_kib_is_read(author: Member) -> None:
    """docs/lifecycle.md: a `Content-Length` "of at most 256 KiB" (`413` for
    any larger number): 262,144 bytes is within the bound."""
    raw = json.dumps({"memo": memo()}).encode()
    body = raw[:-1] + b" " * (256 * 1024 - len(raw)) + b"}"  # JSON whitespace
    assert len(body) == 256 * 1024
    r = await author.post("/v1/decisions", body)
    assert r.status_code == 200, r.text
    over = raw[:-1] + b" " * (256 * 1024 + 1 - len(raw)) + b"}"
    refused(await author.post("/v1/decisions", over), 413, "payload_too_large")


async def test_an_idempotency_key_sent_twice_is_400(lifecycle: Lifecycle, author: Member) -> None:
    """body.py: a header the rules read takes one value; taking the first
    would store a receipt under one key while a proxy that merged them sent
    another (docs/api.md's rule for the public listener)."""
    headers = [
        ("Authorization", f"Bearer {author.token}"),
        ("Content-Type", "application/json"),
        ("Idempotency-Key", "k1"),
        ("Idempotency-Key", "k2"),
    ]
    r = await lifecycle.client.post(
        "/v1/decisions", content=json.dumps({"memo": memo()}).encode(), headers=headers
    )
    refused(r, 400, "invalid_request")
    assert await lifecycle.count("lifecycle_events") == 0
