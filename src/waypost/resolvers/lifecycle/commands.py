"""Lifecycle commands: each one transaction holding its records, its event,
the event's pending delivery and the idempotency receipt.

A replay (same caller, same key, same request) is authorized again and
answers the receipt first returned, byte for byte; the same key with another
request is `409 idempotency_key_reused`; nothing is written on any refusal.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from waypost.clock import format_time
from waypost.errors import NotFound, StateConflict
from waypost.ids import visible_ascii
from waypost.json_text import compact
from waypost.resolvers.core.receipts import KEY_MAX, holding
from waypost.resolvers.core.secret_markers import password_in_url
from waypost.resolvers.lifecycle import authz, checks, documents, store
from waypost.resolvers.lifecycle.authz import Action, Caller, Grant
from waypost.resolvers.lifecycle.decode import canonical, memo_json
from waypost.resolvers.lifecycle.model import (
    CommentBody,
    EvaluationBody,
    PublicationBody,
    RegisterBody,
    ReviseBody,
    SourceBody,
)
from waypost.runtime import Runtime

WORKSPACE = "https://decisions.coulomb.social/decisions"


class IdempotencyKeyConflict(StateConflict):
    """The lifecycle listener answers a reused key with 409 (its status table has no 422)."""

    code = "idempotency_key_reused"


@dataclass(frozen=True)
class Request:
    """What every command needs besides its body: who, which key, which request."""

    caller: Caller
    key: str
    fingerprint: str

    @classmethod
    def make(cls, caller: Caller, key: str | None, method: str, path: str, value: Any) -> Request:
        # the public listener's rule for a key (receipts.check_key), in the
        # lifecycle's own error
        if key is None or not 1 <= len(key) <= KEY_MAX or not visible_ascii(key):
            raise checks.refuse(
                "invalid_idempotency_key",
                f"Idempotency-Key must be 1-{KEY_MAX} characters from ! to ~",
                "Idempotency-Key",
            )
        try:
            text = f"{method} {path}\n{canonical(value)}".encode()
        except UnicodeEncodeError as exc:  # a lone surrogate is not text
            raise checks.refuse("invalid_request", "text must be valid Unicode") from exc
        return cls(caller, key, hashlib.sha256(text).hexdigest())


@dataclass(frozen=True)
class Tx:
    """A command's view of its write transaction."""

    conn: sqlite3.Connection
    at: str
    grant: Grant
    current: int | None  # the memo's current version; None when registering

    def event(self, memo_id: str, version: int, type: str, data: dict[str, Any]) -> int:
        return store.append_event(
            self.conn,
            self.grant.tenant,
            memo_id,
            version,
            type,
            self.grant.caller.id,
            self.at,
            data,
        )


@dataclass(frozen=True)
class Receipt:
    text: str  # the exact JSON body, first time and on every replay
    replayed: bool = False


Unit = Callable[[Tx], dict[str, Any]]


# What each command needs of the tenant policy, by the command's name: the
# command asks it in its write transaction (`run`), its route before the body
# is read (`admit`).
NEEDS: dict[str, Action] = {
    "register": Action.WRITE,
    "revise": Action.WRITE,
    "comment": Action.COMMENT,
    "add_source": Action.WRITE,
    "add_evaluation": Action.WRITE,
    "publish": Action.WRITE,
    "request_review": Action.WRITE,
}


async def admit(rt: Runtime, caller: Caller, action: Action, memo_id: str | None) -> None:
    """The policy, before a command's body is read or judged: a caller
    without the right hears `policy_denied`, not what its body or its key
    lacked (which made the validators an oracle for anyone). `run` checks
    again inside the write transaction, which decides."""

    def check(conn: sqlite3.Connection) -> None:
        if memo_id is None:
            authz.authorize(conn, caller, action)
        else:
            authz.authorize_memo(conn, caller, action, memo_id)

    await rt.db.read_point(check)


async def run(
    rt: Runtime, req: Request, action: Action, memo_id: str, unit: Unit, *, new: bool = False
) -> Receipt:
    # A retry of a finished command is answered from its receipt by a point
    # read, before and without its key's slot: a receipt is visible only once
    # the COMMIT that holds it is durable, and it never changes. Through the
    # writer, every retry held the slot for a round trip, and retries sent
    # together heard "still running" about a command long finished
    # (idemjourney: 16 at once, 1 replay and 15 idempotency_in_flight).
    finished = await rt.db.read_point(lambda conn: _replay(conn, req))
    if finished is not None:
        return finished
    with holding(rt, (f"lifecycle:{req.caller.id}", req.key)):
        # the time is read in the transaction, as the public API's writes
        # read it: read before queueing, a command that waited for the
        # writer was stamped earlier than writes committed ahead of it
        return await rt.db.write(
            lambda conn: _run(conn, format_time(rt.now()), req, action, memo_id, unit, new),
            who=f"lifecycle:{req.caller.id}",
        )


def _run(
    conn: sqlite3.Connection,
    at: str,
    req: Request,
    action: Action,
    memo_id: str,
    unit: Unit,
    new: bool,
) -> Receipt:
    authz.recheck_identity(conn, req.caller)
    previous = store.receipt(conn, req.caller.id, req.key)
    finished = _replayed(conn, req, previous)
    if finished is not None:
        return finished
    # every handled command meets the policy first, a reused key included: a
    # caller without the right hears `policy_denied`, whatever its key
    if new:
        grant, current = authz.authorize(conn, req.caller, action), None
    else:
        grant, current = authz.authorize_memo(conn, req.caller, action, memo_id)
    if previous is not None:
        raise IdempotencyKeyConflict("this idempotency key was used for another request")
    body = unit(Tx(conn, at, grant, current))
    text = compact(body)
    store.insert_receipt(
        conn,
        req.caller.id,
        req.key,
        req.fingerprint,
        (grant.tenant, memo_id, action.value),
        text,
        at,
    )
    return Receipt(text)


def _replay(conn: sqlite3.Connection, req: Request) -> Receipt | None:
    """The answer of exactly this request, if it has run (None: not run, or
    the key holds another request, which the writer refuses after the policy)."""
    authz.recheck_identity(conn, req.caller)
    return _replayed(conn, req, store.receipt(conn, req.caller.id, req.key))


def _replayed(
    conn: sqlite3.Connection, req: Request, previous: sqlite3.Row | None
) -> Receipt | None:
    """`previous`, the receipt under the caller's key, replayed if it holds
    exactly this request (reauthorized); else None."""
    if previous is None or previous["fingerprint"] != req.fingerprint:
        return None
    # a replay is a request like any other: the caller must still hold the right
    grant = authz.authorize(conn, req.caller, Action(previous["action"]))
    if grant.tenant != previous["tenant"]:
        raise authz.denied()
    return Receipt(previous["body"], replayed=True)


def _receipt(event_id: int, memo_id: str, version: int, links: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"event_id": event_id, "memo_id": memo_id, "version": version}
    if links:
        segment = _path_segment(memo_id)
        body["resource"] = f"/v1/decisions/{segment}?version={version}"
        body["workspace_url"] = f"{WORKSPACE}/{segment}?version={version}"
    return body


def _path_segment(memo_id: str) -> str:
    """The id as a link's path segment. The id rule allows `.` and `..`,
    which a client resolves as dot-segments (RFC 3986 5.2.4): the link to
    memo `..` led to `/v1/`. Percent-encoded they stay the memo's own."""
    return "%2E" * len(memo_id) if memo_id in (".", "..") else memo_id


def _revision_fields(summary: str, memo: Any) -> dict[str, str]:
    return {
        "summary": summary,
        "title": memo.title,
        "question": memo.question,
        "context": memo.context,
    }


# -- register and revise -----------------------------------------------------


async def register(rt: Runtime, req: Request, body: RegisterBody) -> Receipt:
    memo = body.memo
    if memo.version != 1:
        raise checks.refuse("invalid_request", "a memo is registered as version 1", "memo.version")
    supplied = documents.check_documents(memo, body.documents)
    text = memo_json(memo)

    def unit(tx: Tx) -> dict[str, Any]:
        tenant = tx.grant.tenant
        if store.current_version(tx.conn, tenant, memo.id) is not None:
            raise StateConflict("this memo is already registered", {"reason": "memo_exists"})
        store.insert_memo(tx.conn, tenant, memo.id, tx.grant.caller.id, tx.at)
        store.insert_revision(
            tx.conn, tenant, memo.id, 1, text, _revision_fields("", memo), tx.grant.caller.id, tx.at
        )
        stored = documents.store_documents(tx.conn, tenant, memo.id, memo, supplied, set(), tx.at)
        seq = tx.event(memo.id, 1, "memo.registered", {"title": memo.title, "documents": stored})
        return _receipt(seq, memo.id, 1, links=True)

    return await run(rt, req, NEEDS["register"], memo.id, unit, new=True)


async def revise(rt: Runtime, req: Request, memo_id: str, body: ReviseBody) -> Receipt:
    memo = body.memo
    if memo.id != memo_id:
        raise checks.refuse("invalid_request", "the memo id must match the path", "memo.id")
    if memo.version != body.expected_version + 1:
        raise checks.refuse(
            "invalid_request", "memo.version must be expected_version + 1", "memo.version"
        )
    # stored, and sent to the webhook: checked as every other text the memo carries
    checks.check_no_secrets([body.summary], "summary")
    supplied = documents.check_documents(memo, body.documents)
    text = memo_json(memo)

    def unit(tx: Tx) -> dict[str, Any]:
        tenant = tx.grant.tenant
        if tx.current != body.expected_version or not store.advance_memo(
            tx.conn, tenant, memo_id, body.expected_version, tx.at
        ):
            raise StateConflict(
                "expected_version is not the current version", {"reason": "version_conflict"}
            )
        current = memo_at(tx.conn, tenant, memo_id, body.expected_version)
        retained = {entry["digest"] for entry in current["packet"]}
        store.insert_revision(
            tx.conn,
            tenant,
            memo_id,
            memo.version,
            text,
            _revision_fields(body.summary, memo),
            tx.grant.caller.id,
            tx.at,
        )
        stored = documents.store_documents(
            tx.conn, tenant, memo_id, memo, supplied, retained, tx.at
        )
        seq = tx.event(
            memo_id, memo.version, "memo.revised", {"summary": body.summary, "documents": stored}
        )
        return _receipt(seq, memo_id, memo.version, links=True)

    return await run(rt, req, NEEDS["revise"], memo_id, unit)


def memo_at(conn: sqlite3.Connection, tenant: str, memo_id: str, version: int) -> dict[str, Any]:
    row = store.revision(conn, tenant, memo_id, version)
    if row is None:
        raise NotFound("no such version", {"reason": "not_found", "field": "version"})
    memo: dict[str, Any] = json.loads(row["memo"])
    return memo


# -- collaboration on a version ------------------------------------------------


async def comment(rt: Runtime, req: Request, memo_id: str, body: CommentBody) -> Receipt:
    checks.check_no_secrets(checks.strings(msgspec.to_builtins(body.body)), "body")

    def unit(tx: Tx) -> dict[str, Any]:
        memo_at(tx.conn, tx.grant.tenant, memo_id, body.version)
        data = {"text": body.body.text, "locator": body.body.locator}
        seq = tx.event(memo_id, body.version, "comment.added", data)
        return _receipt(seq, memo_id, body.version)

    return await run(rt, req, NEEDS["comment"], memo_id, unit)


async def add_source(rt: Runtime, req: Request, memo_id: str, body: SourceBody) -> Receipt:
    data = msgspec.to_builtins(body.source)
    checks.check_no_secrets(checks.strings(data), "source")
    # Choice: a link's own login is a credential the contract never returns
    # (it was stored, listed and delivered by every webhook of the memo).
    if body.source.uri is not None and password_in_url(body.source.uri):
        raise checks.refuse("secret_marker_detected", "source.uri holds a password", "source.uri")

    def unit(tx: Tx) -> dict[str, Any]:
        memo = memo_at(tx.conn, tx.grant.tenant, memo_id, body.version)
        digest = body.source.digest
        if digest is not None and digest not in {p["digest"] for p in memo["packet"]}:
            raise checks.refuse(
                "invalid_request",
                "digest must name a packet entry of that version",
                "source.digest",
            )
        seq = tx.event(memo_id, body.version, "source.added", data)
        return _receipt(seq, memo_id, body.version)

    return await run(rt, req, NEEDS["add_source"], memo_id, unit)


async def add_evaluation(rt: Runtime, req: Request, memo_id: str, body: EvaluationBody) -> Receipt:
    data = msgspec.to_builtins(body.evaluation)
    checks.check_no_secrets(checks.strings(data), "evaluation")

    def unit(tx: Tx) -> dict[str, Any]:
        memo = memo_at(tx.conn, tx.grant.tenant, memo_id, body.version)
        if body.evaluation.option_id not in {o["id"] for o in memo["options"]}:
            raise checks.refuse(
                "invalid_request",
                "option_id must name an option of that version",
                "evaluation.option_id",
            )
        seq = tx.event(memo_id, body.version, "evaluation.added", data)
        return _receipt(seq, memo_id, body.version)

    return await run(rt, req, NEEDS["add_evaluation"], memo_id, unit)


async def publish(rt: Runtime, req: Request, memo_id: str, body: PublicationBody) -> Receipt:
    audience = body.audience
    if not audience.subjects and not audience.groups:
        raise checks.refuse("invalid_request", "name at least one subject or group", "audience")
    data = {"audience": msgspec.to_builtins(audience)}
    checks.check_no_secrets(checks.strings(data), "audience")

    def unit(tx: Tx) -> dict[str, Any]:
        memo_at(tx.conn, tx.grant.tenant, memo_id, body.version)
        seq = tx.event(memo_id, body.version, "publication.recorded", data)
        return _receipt(seq, memo_id, body.version)

    return await run(rt, req, NEEDS["publish"], memo_id, unit)
