"""A lifecycle command's route admits the caller before its body is read
(`commands.admit`, a read on the event loop); the write transaction asks the
policy again and decides (docs/lifecycle.md, resolvers/lifecycle/authz.py).
Here the grant changes after the admission and before the command's unit is
handed to the writer (deterministic: the change has committed first)."""

from __future__ import annotations

import pytest

from tests.conftest import Service
from tests.lifecycle.support import TABLES, Lifecycle, Member
from tests.lifecycle.test_requests import refused
from tests.rechecks_support import Meanwhiles
from waypost.resolvers.lifecycle import authz

M = "/v1/decisions/adr.payments-retry"
COMMENT = {"version": 1, "body": {"text": "looks right"}}


@pytest.fixture
def meanwhile(service: Service, monkeypatch: pytest.MonkeyPatch) -> Meanwhiles:
    return Meanwhiles(service, monkeypatch)


async def test_a_grant_revoked_after_admission_refuses_the_command(
    lifecycle: Lifecycle, registered: Member, meanwhile: Meanwhiles
) -> None:
    counts = [await lifecycle.count(t) for t in TABLES]

    async def revoke() -> None:
        await lifecycle.service.rt.db.write(lambda conn: authz.revoke(conn, registered.id))

    meanwhile.before_next_write(revoke)
    refused(await registered.post(f"{M}/comments", COMMENT), 403, "policy_denied")
    assert meanwhile.ran
    assert [await lifecycle.count(t) for t in TABLES] == counts


async def test_a_role_lowered_after_admission_refuses_the_command(
    lifecycle: Lifecycle, registered: Member, meanwhile: Meanwhiles
) -> None:
    counts = [await lifecycle.count(t) for t in TABLES]

    async def lower() -> None:
        await lifecycle.grant(registered.id, "acme", "reader")

    meanwhile.before_next_write(lower)
    refused(await registered.post(f"{M}/comments", COMMENT), 403, "policy_denied")
    assert meanwhile.ran
    assert [await lifecycle.count(t) for t in TABLES] == counts
