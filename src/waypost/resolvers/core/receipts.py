"""Idempotency receipts: the one way every mutation runs.

`run_mutation` looks up the caller's receipt for the key by a point read,
without the writer, and replays it or refuses a changed request. A key with
no receipt goes to the writer, which looks again, runs the unit of work and
stores the receipt, all in one transaction with the unit's event. A request
still running with the same key answers `idempotency_in_flight`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from waypost.clock import format_time
from waypost.errors import (
    CallerSessionNotLive,
    IdempotencyInFlight,
    IdempotencyKeyReused,
    InvalidRequest,
    Unauthenticated,
)
from waypost.ids import visible_ascii
from waypost.json_text import canonical
from waypost.resolvers.access import store as access_store
from waypost.resolvers.core import events, store
from waypost.runtime import Actor, Runtime

# Receipts are kept at least this long; the sweep deletes older ones.
RECEIPT_RETENTION = timedelta(hours=48)
KEY_MAX = 256
# Receipts deleted per unit of work by the sweep at most, for about
# PURGE_UNIT_SECONDS of writer time, PURGE_CHUNK at a time: a receipt holds
# its answer, up to about 250 KB, and 500 of those held the writer a second
# or more in one unit, where small ones take a few milliseconds.
PURGE_BATCH = 500
PURGE_CHUNK = 10
PURGE_UNIT_SECONDS = 0.05


@dataclass(frozen=True)
class Idempotency:
    key: str
    fingerprint: str

    @classmethod
    def for_request(cls, key: str | None, *, operation: str, body: Any) -> Idempotency:
        """Check the key and fingerprint the request (operation + canonical body)."""
        check_key(key)
        assert key is not None
        # json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        text = canonical(body)
        try:
            digest = hashlib.sha256(f"{operation}\n{text}".encode()).hexdigest()
        except UnicodeEncodeError as exc:
            # a lone surrogate (e.g. from a GraphQL string escape) is not storable text
            raise InvalidRequest("text must not hold an unpaired surrogate", {"field": ""}) from exc
        return cls(key, digest)


def check_key(key: str | None, field: str = "Idempotency-Key") -> None:
    if key is None or key == "":
        raise InvalidRequest.field(field, "an idempotency key is required for every mutation")
    if len(key) > KEY_MAX or not visible_ascii(key):
        raise InvalidRequest.field(field, "idempotency key must be 1-256 characters from ! to ~")


@dataclass(frozen=True)
class Outcome:
    status: int
    body: dict[str, Any]
    replayed: bool = False


class Tx:
    """A writer transaction as a unit of work sees it: connection, time, actor."""

    def __init__(self, conn: sqlite3.Connection, now: datetime, actor: Actor) -> None:
        self.conn = conn
        self.now = now
        self.at = format_time(now)
        self.actor = actor

    def event(
        self,
        project_id: str | None,
        type: str,
        subject_type: str,
        subject_id: str,
        data: dict[str, Any],
    ) -> None:
        events.append(
            self.conn,
            project_id=project_id,
            type=type,
            subject_type=subject_type,
            subject_id=subject_id,
            actor_id=self.actor.principal_id,
            actor_session_id=self.actor.session_id,
            at=self.at,
            data=data,
        )


Unit = Callable[[Tx], tuple[int, dict[str, Any]]]


def slot_of(actor: Actor, idem: Idempotency) -> tuple[str, str]:
    """Where a receipt lives: the caller's principal and the key."""
    return (actor.principal_id, idem.key)


@contextlib.contextmanager
def holding(rt: Runtime, slot: tuple[str, str]) -> Iterator[None]:
    """`slot` (a caller and its key) held while its request runs: a second
    request with the key meanwhile is `409 idempotency_in_flight`, on either
    listener (the lifecycle's slots are its callers', apart)."""
    if slot in rt.inflight:
        raise IdempotencyInFlight("a request with this idempotency key is still running")
    rt.inflight.add(slot)
    try:
        yield
    finally:
        rt.inflight.discard(slot)


async def run_mutation(rt: Runtime, actor: Actor, idem: Idempotency, unit: Unit) -> Outcome:
    slot = slot_of(actor, idem)
    # A retry is answered from its receipt by a point read on the event
    # loop, without queueing behind the writer (or waiting out another
    # process's lock): a receipt is visible only once the COMMIT that holds
    # it is durable, and it never changes. The read is asked with the other
    # requests of this pass of the loop (storage/coalesced.py), so it is made
    # before the key's slot is taken: held across it, retries of a finished
    # request sent together heard "still running" while other writes ran
    # (as the lifecycle listener's did: resolvers/lifecycle/commands.py).
    earlier = _replayed(await rt.receipt_rows.get(slot), idem)
    if earlier is not None:
        return earlier
    # A key with no receipt goes to the writer, which looks again and
    # decides; a second request with the key meanwhile is in flight.
    with holding(rt, slot):
        return await rt.db.write(
            lambda conn: _run(conn, rt, actor, idem, unit), who=actor.principal_id
        )


def _replay(conn: sqlite3.Connection, actor: Actor, idem: Idempotency) -> Outcome | None:
    """The stored answer under the caller's key (None: the key is new);
    422 when the key holds a different request."""
    return _replayed(store.receipt_row(conn, actor.principal_id, idem.key), idem)


def _replayed(row: sqlite3.Row | None, idem: Idempotency) -> Outcome | None:
    """The answer stored in `row`, the receipt under the caller's key (None:
    no receipt); 422 when the key holds a different request."""
    if row is None:
        return None
    if row["fingerprint"] != idem.fingerprint:
        raise IdempotencyKeyReused(
            "this idempotency key was used for a different request: send a new key for a"
            " new request (the same request again, under the same key, replays its answer)",
            {"field": "Idempotency-Key"},
        )
    return Outcome(row["status"], json.loads(row["body"]), replayed=True)


def _run(
    conn: sqlite3.Connection, rt: Runtime, actor: Actor, idem: Idempotency, unit: Unit
) -> Outcome:
    earlier = _replay(conn, actor, idem)
    if earlier is not None:
        return earlier
    tx = Tx(conn, rt.now(), actor)
    recheck_actor(conn, actor, tx.at)
    status, body = unit(tx)
    store.insert_receipt(conn, slot_of(actor, idem), idem.fingerprint, (status, body), tx.at)
    return Outcome(status, body)


async def stored_answer(rt: Runtime, actor: Actor, idem: Idempotency) -> Outcome | None:
    """The stored answer of exactly this request, if it has run.

    For a retry this build refuses before it could reach `run_mutation`: an
    upgrade that tightened validation (a field now required) would otherwise
    tell a client whose answer was lost in the restart that its committed
    write was invalid. A different request under the key is not answered
    here: its own refusal stands."""

    try:
        return await rt.db.read_point(lambda conn: _replay(conn, actor, idem))
    except IdempotencyKeyReused:
        return None


def recheck_actor(conn: sqlite3.Connection, actor: Actor, at: str) -> None:
    """Re-check, under the writer lock, what authentication checked before it."""
    token = access_store.token_revocation(conn, actor.token_id)
    if token is None or token["revoked_at"] is not None:
        raise Unauthenticated("unauthenticated")
    if actor.session_id is not None:
        session = access_store.session_liveness(conn, actor.principal_id, actor.session_id)
        if session is None or session["ended_at"] is not None or session["expires_at"] <= at:
            raise CallerSessionNotLive


def purge_receipts(conn: sqlite3.Connection, now: datetime, limit: int = PURGE_BATCH) -> int:
    """Delete up to `limit` of the oldest receipts past retention, for about
    PURGE_UNIT_SECONDS at most; how many.

    Bounded so that one purge never holds the writer for long (a day of
    receipts can be millions of rows, and a receipt holds its answer: 500 of
    250 KB each held it 1-2.5 s in one unit, where the decision timeouts stop
    at 50 ms); the sweep calls it again, each call its own unit of work,
    until it deletes none.
    """
    cutoff = format_time(now - RECEIPT_RETENTION)
    deadline = time.monotonic() + PURGE_UNIT_SECONDS
    done = 0
    while done < limit:
        asked = min(PURGE_CHUNK, limit - done)
        deleted = store.delete_receipts_before(conn, cutoff, asked)
        done += deleted
        if deleted < asked or time.monotonic() >= deadline:
            break
    return done
