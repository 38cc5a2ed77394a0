"""Orders and bounds docs/lifecycle.md states that no other test held to
their documented value (lifedocaudit): the grants list's order, the order of
outcomes recorded at one instant, and the 100 review requests of a version."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from tests.lifecycle.support import Lifecycle, Member
from tests.lifecycle.test_requests import refused
from tests.lifecycle.test_reviews import M, request_body, request_review
from waypost.cli import main


async def test_grants_are_listed_by_tenant_then_principal(lifecycle: Lifecycle) -> None:
    """docs/lifecycle.md: `admin lifecycle grants` lists them "by tenant then
    principal". The principal that sorts first holds the tenant that sorts
    last, so an order by principal alone lists them the other way round."""
    first, second = sorted([(await lifecycle.member(None)).id for _ in range(2)])
    await lifecycle.grant(first, "zeta", "reader")
    await lifecycle.grant(second, "acme", "author")
    third = (await lifecycle.member(None)).id
    await lifecycle.grant(third, "acme", "reviewer")
    db = str(lifecycle.service.db_path)
    result = CliRunner().invoke(main, ["admin", "lifecycle", "grants", "--db", db])
    assert result.exit_code == 0, result.output
    listed = [(g["tenant"], g["principal_id"]) for g in json.loads(result.stdout)]
    assert listed == [("acme", second), ("acme", third), ("zeta", first)]


async def test_outcomes_at_one_instant_go_by_request_then_reviewer(
    lifecycle: Lifecycle, registered: Member, reviewer: Member
) -> None:
    """docs/lifecycle.md: `outcomes` are "by their `at` ..., then request id
    and reviewer". The test clock stands still, so every outcome here has one
    `at`; they are recorded in the reverse of the documented order, and an
    order by reviewer before request id differs from it too."""
    other = await lifecycle.member("reviewer")
    requests = sorted([await request_review(registered, reviewer.id, other.id) for _ in range(2)])
    people = sorted([reviewer, other], key=lambda m: m.id)
    expected = [(q, p.id) for q in requests for p in people]
    for request_id, person in reversed(expected):
        who = next(p for p in people if p.id == person)
        r = await who.api.post(
            f"/api/v1/reviews/{request_id}/outcome", {"disposition": "accepted", "rationale": "ok"}
        )
        assert r.status_code == 201, r.text
    state: dict[str, Any] = (await reviewer.get(f"{M}/outcomes", version=1)).json()
    assert len({o["at"] for o in state["outcomes"]}) == 1
    assert [(o["request_id"], o["reviewer"]) for o in state["outcomes"]] == expected


async def test_a_version_takes_one_hundred_review_requests(
    registered: Member, reviewer: Member
) -> None:
    """docs/lifecycle.md: "A version takes at most 100 review requests ...
    the 101st is `409 review_request_limit`". test_reviews.py checks the
    refusal with the bound patched to 3; this one holds the bound itself."""
    for _ in range(100):
        await request_review(registered, reviewer.id)
    r = await registered.post(f"{M}/review-requests", request_body(reviewer.id))
    refused(r, 409, "review_request_limit")
    listed = (await registered.get(f"{M}/review-requests", version=1)).json()["items"]
    assert len(listed) == 100
