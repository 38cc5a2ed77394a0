"""Tenant policy: roles, tenants, and the same 403 for foreign and missing memos."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from tests.lifecycle.support import TABLES, Lifecycle, Member, memo, with_docs
from tests.lifecycle.test_requests import refused
from waypost.cli import main

M = "/v1/decisions/adr.payments-retry"
COMMENT = {"version": 1, "body": {"text": "looks right"}}


async def test_a_caller_without_a_grant_is_denied_everything(lifecycle: Lifecycle) -> None:
    nobody = await lifecycle.member(role=None)
    refused(await nobody.get("/v1/decisions"), 403, "policy_denied")
    refused(await nobody.register(memo()), 403, "policy_denied")
    refused(await nobody.get(M), 403, "policy_denied")


async def test_another_tenants_memo_and_a_missing_memo_answer_alike(
    lifecycle: Lifecycle, author: Member
) -> None:
    await author.register(memo())
    outsider = await lifecycle.member("author", tenant="globex")
    for path in [M, f"{M}/events", f"{M}/outcomes?version=1", f"{M}/review-requests?version=1"]:
        foreign = await outsider.client.get(path, headers=outsider.headers())
        missing = await outsider.client.get(
            path.replace("adr.payments-retry", "never-registered"), headers=outsider.headers()
        )
        refused(foreign, 403, "policy_denied")
        assert (missing.status_code, missing.content) == (foreign.status_code, foreign.content)
    refused(await outsider.post(f"{M}/comments", COMMENT), 403, "policy_denied")
    refused(await outsider.revise(memo(version=2), expected=1), 403, "policy_denied")


async def test_a_get_hears_the_policy_before_its_query(
    lifecycle: Lifecycle, author: Member
) -> None:
    """A caller who may not read the memo (or a memo that does not exist)
    heard what a GET's query or digest lacked (400) where the POST routes
    answer the policy first; a reader still hears it."""
    await author.register(memo())
    outsider = await lifecycle.member("author", tenant="globex")
    reader = await lifecycle.member("reader")
    for path in [f"{M}?version=0", f"{M}/outcomes", f"{M}/review-requests?version=x",
                 f"{M}/events?limit=0", f"{M}/documents/xyz"]:  # fmt: skip
        refused(await outsider.get(path), 403, "policy_denied")
        missing = path.replace("adr.payments-retry", "never-registered")
        refused(await reader.get(missing), 403, "policy_denied")
        refused(await reader.get(path), 400, "invalid_request")


async def test_memo_ids_are_scoped_by_tenant(lifecycle: Lifecycle, author: Member) -> None:
    acme, docs = with_docs(memo(), b"acme's own notes")
    assert (await author.register(acme, docs)).status_code == 200
    assert (await author.post(f"{M}/comments", COMMENT)).status_code == 200
    other = await lifecycle.member("author", tenant="globex")
    # the other tenant registers the same id without learning that it exists elsewhere
    assert (await other.register(memo(title="Globex's own"))).status_code == 200
    assert (await author.get(M)).json()["title"] == "Retry policy for payment webhooks"
    assert (await other.get(M)).json()["title"] == "Globex's own"
    # and each reads its own memo's events and documents only (the event
    # list lost its tenant term unnoticed: mutantaudit2)
    theirs = (await other.get(f"{M}/events")).json()["events"]
    assert [(e["type"], e["actor"]) for e in theirs] == [("memo.registered", other.id)]
    ours = (await author.get(f"{M}/events")).json()["events"]
    assert [e["type"] for e in ours] == ["memo.registered", "comment.added"]
    assert {e["actor"] for e in ours} == {author.id}
    digest = docs[0]["digest"]
    assert (await author.get(f"{M}/documents/{digest}", version="1")).status_code == 200
    assert (await other.get(f"{M}/documents/{digest}", version="1")).status_code == 404


async def test_a_reader_reads_but_cannot_write_or_comment(
    lifecycle: Lifecycle, author: Member
) -> None:
    await author.register(memo())
    reader = await lifecycle.member("reader")
    assert (await reader.get(M)).status_code == 200
    assert (await reader.get("/v1/decisions")).status_code == 200
    refused(await reader.register(memo("mine")), 403, "policy_denied")
    refused(await reader.post(f"{M}/comments", COMMENT), 403, "policy_denied")


async def test_the_policy_comes_before_the_body_and_the_key(
    lifecycle: Lifecycle, author: Member
) -> None:
    """A caller without the right heard what its body or key lacked (400
    question_check_failed, secret_marker_detected, invalid_idempotency_key):
    the validators answered anyone. The policy answers first."""
    await author.register(memo())
    reader, nobody = await lifecycle.member("reader"), await lifecycle.member(role=None)
    refused(await reader.post(f"{M}/comments", COMMENT, key=""), 403, "policy_denied")
    refused(await reader.register(memo("mine", question="no")), 403, "policy_denied")
    refused(await nobody.register(memo(context="password=abcdefghijk")), 403, "policy_denied")
    refused(await reader.post(f"{M}/revisions", b"{not json"), 403, "policy_denied")
    # a caller with the right still hears what its body lacks
    refused(await author.post(f"{M}/comments", COMMENT, key=""), 400, "invalid_idempotency_key")


async def test_a_reviewer_reads_and_comments_only(lifecycle: Lifecycle, author: Member) -> None:
    await author.register(memo())
    reviewer = await lifecycle.member("reviewer")
    assert (await reviewer.post(f"{M}/comments", COMMENT)).status_code == 200
    refused(await reviewer.revise(memo(version=2), expected=1), 403, "policy_denied")
    pub = {"version": 1, "audience": {"subjects": ["a"], "groups": []}}
    refused(await reviewer.post(f"{M}/publications", pub), 403, "policy_denied")


@pytest.mark.parametrize("new_role", [None, "reader"])
async def test_a_replay_is_authorized_again(
    lifecycle: Lifecycle, author: Member, new_role: str | None
) -> None:
    first = await author.post("/v1/decisions", {"memo": memo()}, key="replayed")
    assert first.status_code == 200
    if new_role is None:
        await lifecycle.service.rt.db.write(
            lambda c: c.execute("DELETE FROM lifecycle_grants WHERE principal_id = ?", (author.id,))
        )
    else:
        await lifecycle.grant(author.id, "acme", new_role)
    again = await author.post("/v1/decisions", {"memo": memo()}, key="replayed")
    refused(again, 403, "policy_denied")


async def test_a_replay_after_moving_tenant_is_denied(lifecycle: Lifecycle, author: Member) -> None:
    await author.post("/v1/decisions", {"memo": memo()}, key="moved")
    await lifecycle.grant(author.id, "globex", "author")
    refused(await author.post("/v1/decisions", {"memo": memo()}, key="moved"), 403, "policy_denied")


async def test_a_denied_command_writes_nothing(lifecycle: Lifecycle, author: Member) -> None:
    await author.register(memo())
    counts = [await lifecycle.count(t) for t in TABLES]
    reader = await lifecycle.member("reader")
    await reader.post(f"{M}/comments", COMMENT)
    await reader.revise(memo(version=2), expected=1)
    assert [await lifecycle.count(t) for t in TABLES] == counts


async def test_a_token_revoked_before_the_write_is_401(
    lifecycle: Lifecycle, author: Member
) -> None:
    # the write transaction checks the token again: the verifier's answer is not enough
    from waypost.resolvers.lifecycle import authz, commands

    caller = authz.Caller(author.id, "human", "tok_revoked_meanwhile")
    req = commands.Request.make(caller, "k", "POST", "/v1/decisions", {})
    from waypost.errors import Unauthenticated
    from waypost.resolvers.lifecycle.model import Memo, RegisterBody

    body = RegisterBody(memo=Memo(id="x", version=1, title="t", question="q?", options=[]))
    with pytest.raises(Unauthenticated):
        await commands.register(lifecycle.service.rt, req, body)
    assert await lifecycle.count("lifecycle_memos") == 0


async def test_an_operator_lists_and_revokes_grants_from_the_command_line(
    lifecycle: Lifecycle, author: Member
) -> None:
    """There was no way to take a grant away: a TokenReview username (no
    Waypost token to revoke) kept its role until granted another tenant's."""
    db = str(lifecycle.service.db_path)
    reader = await lifecycle.member("reader", tenant="zeta")
    assert (await author.register(memo())).status_code == 200

    def admin(*args: str) -> Any:
        result = CliRunner().invoke(main, ["admin", "lifecycle", *args, "--db", db])
        return result.exit_code, result.stdout, result.stderr

    code, out, _ = admin("grants")
    listed = json.loads(out)
    assert code == 0 and [(g["tenant"], g["role"]) for g in listed] == [
        ("acme", "author"),
        ("zeta", "reader"),
    ]
    assert {g["principal_id"] for g in listed} == {author.id, reader.id}
    assert set(listed[0]) == {"principal_id", "tenant", "role", "granted_at"}
    code, out, _ = admin("grants", "--tenant", "zeta")
    assert [g["principal_id"] for g in json.loads(out)] == [reader.id]

    code, out, _ = admin("revoke", "--principal", author.id)
    assert code == 0 and json.loads(out) == {"principal_id": author.id, "revoked": True}
    refused(await author.get("/v1/decisions/adr.payments-retry"), 403, "policy_denied")
    code, _, err = admin("revoke", "--principal", author.id)
    assert code == 1 and err.startswith("Error: not_found: --principal: ")
    assert [g["tenant"] for g in json.loads(admin("grants")[1])] == ["zeta"]
