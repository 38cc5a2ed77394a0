"""Review handoff: requests on the lifecycle listener, outcomes on the public one.

A request names the current version only (the source-revision guard) and
keeps its receipt, with the exact intake envelope, as the text first
returned. Outcomes are recorded by human principals named as reviewers, on
the public listener's protected route; they append `outcome.recorded` to the
memo's events like every other lifecycle mutation.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Any

from waypost.clock import format_time, parse_time
from waypost.errors import Forbidden, NotFound, StateConflict
from waypost.json_text import compact
from waypost.resolvers.core.receipts import Idempotency, Outcome, Tx, run_mutation
from waypost.resolvers.lifecycle import checks, store
from waypost.resolvers.lifecycle.commands import NEEDS, Receipt, Request, memo_at, run
from waypost.resolvers.lifecycle.commands import Tx as LifecycleTx
from waypost.resolvers.lifecycle.decode import canonical
from waypost.resolvers.lifecycle.model import OutcomeBody, ReviewRequestBody
from waypost.runtime import Actor, Runtime

REVIEWER_ROLES = ("reviewer", "author")
# **Choice** (docs/lifecycle.md): the contract lists every request of a version
# in one answer, so the requests of a version are bounded where they are made;
# each receipt carries the packet, up to about 50 KB (10,000 requests made one
# answer of 495 MB).
MAX_REVIEW_REQUESTS_PER_VERSION = 100


def new_request_id() -> str:
    return "rr_" + secrets.token_hex(16)


async def request_review(
    rt: Runtime, req: Request, memo_id: str, body: ReviewRequestBody
) -> Receipt:
    options = body.options
    if len(set(options.reviewers)) != len(options.reviewers):
        raise checks.refuse("invalid_reviewer", "reviewers must be distinct", "options.reviewers")
    due_at = None
    if options.due_at is not None:
        try:
            due_at = format_time(parse_time(options.due_at))
        except ValueError as exc:
            raise checks.refuse(
                "invalid_request", "due_at must be an RFC 3339 time", "options.due_at"
            ) from exc
    if options.note is not None:
        checks.check_no_secrets([options.note], "options.note")

    def unit(tx: LifecycleTx) -> dict[str, Any]:
        tenant = tx.grant.tenant
        if body.version != tx.current:
            raise StateConflict(
                "review requests name the current version", {"reason": "version_conflict"}
            )
        made = store.review_request_count(tx.conn, tenant, memo_id, body.version)
        if made >= MAX_REVIEW_REQUESTS_PER_VERSION:
            raise StateConflict(
                f"a version takes at most {MAX_REVIEW_REQUESTS_PER_VERSION} review requests",
                {"reason": "review_request_limit"},
            )
        memo = memo_at(tx.conn, tenant, memo_id, body.version)
        allowed = store.members_among(tx.conn, tenant, REVIEWER_ROLES, options.reviewers)
        if not set(options.reviewers) <= allowed:
            raise checks.refuse(
                "invalid_reviewer",
                "every reviewer must hold the reviewer or author role",
                "options.reviewers",
            )
        request_id = new_request_id()
        envelope = {
            "request_id": request_id,
            "memo_id": memo_id,
            "version": body.version,
            "profile": options.profile,
            "reviewers": list(options.reviewers),
            "due_at": due_at,
            "note": options.note,
            "memo_sha256": hashlib.sha256(canonical(memo).encode()).hexdigest(),
            "packet": [
                {"id": p["id"], "digest": p["digest"], "media_type": p["media_type"]}
                for p in memo["packet"]
            ],
            "requested_by": tx.grant.caller.id,
            "requested_at": tx.at,
            "tenant": tenant,
        }
        data = {"request_id": request_id, "reviewers": list(options.reviewers)}
        seq = tx.event(memo_id, body.version, "review.requested", data)
        receipt = {
            "event_id": seq,
            "memo_id": memo_id,
            "version": body.version,
            "request_id": request_id,
            "envelope": envelope,
        }
        text = compact(receipt)
        store.insert_review_request(
            tx.conn,
            request_id,
            tenant,
            memo_id,
            body.version,
            list(options.reviewers),
            text,
            tx.grant.caller.id,
            tx.at,
        )
        return receipt

    return await run(rt, req, NEEDS["request_review"], memo_id, unit)


def _in_tenant(tx: Tx, actor: Actor, tenant: str) -> bool:
    """Whether the caller holds a lifecycle grant in `tenant` now."""
    grant = store.grant(tx.conn, actor.principal_id)
    return grant is not None and grant["tenant"] == tenant


async def record_outcome(
    rt: Runtime, actor: Actor, idem: Idempotency, request_id: str, body: OutcomeBody
) -> Outcome:
    """`POST /api/v1/reviews/{request_id}/outcome` on the public listener."""

    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        # a public-listener rule: checked after the key's receipt was looked
        # for, so that a used key with another body is 422, as on every route
        checks.check_no_secrets([body.rationale], "rationale")
        request = store.review_request(tx.conn, request_id)
        named = request is not None and actor.principal_id in json.loads(request["reviewers"])
        if request is None or not (named or _in_tenant(tx, actor, request["tenant"])):
            # one answer for a request that is not there and one of another
            # tenant's, which told a caller outside it that the request
            # existed (lifecycle-model.md: no caller learns whether another
            # tenant's memo exists)
            raise NotFound("no such review request", {"request_id": request_id})
        if not actor.is_human:
            raise Forbidden.reason("human_reviewer_required", "outcomes are recorded by humans")
        if not named:
            raise Forbidden.reason("not_a_reviewer", "only a named reviewer records an outcome")
        if not store.insert_outcome(
            tx.conn, request_id, actor.principal_id, body.disposition, body.rationale, tx.at
        ):
            raise StateConflict(
                "this reviewer already recorded an outcome", {"reason": "outcome_recorded"}
            )
        outcome = {
            "request_id": request_id,
            "reviewer": actor.principal_id,
            "disposition": body.disposition,
            "rationale": body.rationale,
            "at": tx.at,
        }
        seq = store.append_event(
            tx.conn,
            request["tenant"],
            request["memo_id"],
            request["version"],
            "outcome.recorded",
            actor.principal_id,
            tx.at,
            outcome,
        )
        return 201, {
            **outcome,
            "event_id": seq,
            "memo_id": request["memo_id"],
            "version": request["version"],
        }

    return await run_mutation(rt, actor, idem, unit)
