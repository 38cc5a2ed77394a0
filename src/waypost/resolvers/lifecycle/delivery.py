"""Delivery of lifecycle events to `serve --lifecycle-webhook URL`.

Each event enqueued a pending delivery in its own transaction. The worker
POSTs them one at a time in sequence order: a delivery that fails (network
error or a non-2xx answer) is retried with exponential backoff, and no later
event is sent before it succeeds, so the receiver sees events in order. At
least once: a receiver deduplicates by the `Waypost-Delivery-Id` header
(the delivery's own random id), not by `Waypost-Delivery` (the event's
sequence), which a restore from a backup hands out again. Without a
webhook, deliveries stay pending and `waypost admin lifecycle deliveries`
lists them. An event the receiver refuses for good is taken out of the way
by the operator (`waypost admin lifecycle skip`): it is never sent, and the
worker goes on with the next.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from dataclasses import dataclass
from typing import Any

import httpx

from waypost.cancelling import wait_at_most
from waypost.clock import format_time
from waypost.errors import NotFound, StateConflict, WaypostError
from waypost.http.failures import failure_kind
from waypost.http.urls import endpoint_url_refusal
from waypost.json_text import compact
from waypost.resolvers.lifecycle import store
from waypost.runtime import Runtime

log = logging.getLogger("waypost.lifecycle")

# One attempt, whole: httpx's own timeout bounds each read, so a receiver
# trickling a byte every few seconds kept an attempt (and every later event)
# waiting for minutes.
ATTEMPT_SECONDS = 10.0
# What is read of a receiver's answer: its status decides, and a body of
# gigabytes was read whole into the process both listeners share.
ANSWER_READ_MAX = 64 * 1024


def webhook_refusal(url: str) -> str | None:
    """Why `url` cannot be a webhook (checked when `serve` starts: an unusable
    one failed every attempt for ever, each with a traceback); None if fine."""
    return endpoint_url_refusal(url, ("http", "https"))


@dataclass(frozen=True)
class Backoff:
    first: float = 1.0
    limit: float = 300.0
    poll: float = 2.0  # how long an idle worker waits when no commit wakes it

    def delay(self, failures: int) -> float:
        # the exponent stops at 64 (far past any limit): 2 ** 1024 is no float,
        # and an outage of days must not end the worker
        doublings = min(max(0, failures - 1), 64)
        return float(min(self.limit, self.first * 2**doublings))


def delivery_json(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "event": store.event_json(row),
        "delivery_id": row["delivery_id"],
        "state": row["state"],
        "attempts": row["attempts"],
        "last_error": row["last_error"],
        "last_attempt_at": row["last_attempt_at"],
        "delivered_at": row["delivered_at"],
        "skipped_at": row["skipped_at"],
        "skip_reason": row["skip_reason"],
    }


def list_deliveries(
    conn: sqlite3.Connection, state: str | None, limit: int
) -> list[dict[str, Any]]:
    return [delivery_json(r) for r in store.deliveries(conn, state, limit)]


def skip(conn: sqlite3.Connection, sequence: int, reason: str, at: str) -> dict[str, Any]:
    """Mark a pending delivery skipped (`waypost admin lifecycle skip`): the
    worker never sends it and goes on with the next. A delivery already sent
    or skipped is refused, so a mistyped number never hides a doubt."""
    if not store.mark_skipped(conn, sequence, at, reason):
        row = store.delivery(conn, sequence)
        if row is None:
            raise NotFound("no delivery of this event", {"field": "sequence"})
        raise StateConflict(f"this delivery is {row['state']}, not pending", {"field": "sequence"})
    found = store.delivery(conn, sequence)
    assert found is not None  # updated just now, in this transaction
    return delivery_json(found)


async def _post(
    client: httpx.AsyncClient, url: str, row: sqlite3.Row, seconds: float = ATTEMPT_SECONDS
) -> str | None:
    """None when delivered, else a short reason kept on the delivery."""
    payload = compact(store.event_json(row))
    headers = {
        "Content-Type": "application/json",
        "Waypost-Delivery": str(row["sequence"]),
        "Waypost-Delivery-Id": row["delivery_id"],
    }
    try:
        # redirects not followed whatever client the worker is given (`serve`'s
        # or an embedder's): an event goes to the URL the operator named only
        request = client.stream(
            "POST", url, content=payload.encode(), headers=headers, follow_redirects=False
        )
        async with asyncio.timeout(seconds), request as response:
            # raw: a compressed answer is not inflated (one small chunk of a
            # gzip bomb inflates to gigabytes); a body already held is read
            read = 0
            if not response.is_stream_consumed:
                async for chunk in response.aiter_raw():
                    read += len(chunk)
                    if read >= ANSWER_READ_MAX:
                        break  # the rest is left unread: the connection closes
    except TimeoutError:
        return f"no answer within {seconds:g} seconds"
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return failure_kind(exc)
    return None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"


@dataclass(frozen=True)
class Attempt:
    outcome: bool | None  # True delivered, False failed, None nothing pending
    sequence: int | None = None  # the delivery tried


async def attempt_next(
    rt: Runtime, client: httpx.AsyncClient, url: str, seconds: float = ATTEMPT_SECONDS
) -> Attempt:
    """Try the oldest pending delivery (one attempt of at most `seconds`)."""
    rows = await rt.db.read(lambda conn: store.deliveries(conn, "pending", 1))
    if not rows:
        # none is failing: the last one that failed was skipped (or sent by
        # a process before this one), and its count must not stay up for ever
        rt.metrics.lifecycle_queue_empty()
        return Attempt(None)
    row = rows[0]
    error = await _post(client, url, row, seconds)
    at = format_time(rt.now())
    sequence = int(row["sequence"])
    if error is None:
        await rt.db.write(lambda conn: store.mark_delivered(conn, sequence, at))
        rt.metrics.lifecycle_attempt(True, 0)
        return Attempt(True, sequence)
    log.warning("lifecycle delivery %s failed: %s", sequence, error)
    await rt.db.write(lambda conn: store.mark_failed(conn, sequence, at, error))
    # the delivery's own count, kept with it: a restart during an outage
    # must not start the alert's count again from 0 (upgrade87)
    rt.metrics.lifecycle_attempt(False, int(row["attempts"]) + 1)
    return Attempt(False, sequence)


async def deliver_once(
    rt: Runtime, client: httpx.AsyncClient, url: str, seconds: float = ATTEMPT_SECONDS
) -> bool | None:
    """Try the oldest pending delivery (one attempt of at most `seconds`):
    True delivered, False failed, None nothing to do."""
    return (await attempt_next(rt, client, url, seconds)).outcome


async def deliver_forever(
    rt: Runtime, client: httpx.AsyncClient, url: str, backoff: Backoff = Backoff()
) -> None:
    wake = asyncio.Event()
    rt.db.add_commit_listener(wake.set)
    failures = 0
    try:
        while True:
            # cleared before the look, not after it: a commit that lands while
            # the worker looks (or before it resumes) then still wakes the
            # wait below, where clearing after the look lost it until the poll
            wake.clear()
            try:
                attempt = await attempt_next(rt, client, url)
            except WaypostError as error:  # a busy store: try again shortly
                log.warning("lifecycle delivery paused: %s", error.message)
                attempt = Attempt(False)
            except Exception:  # the worker outlives any one failure; it retries later
                log.exception("lifecycle delivery failed")
                attempt = Attempt(False)
            result = attempt.outcome
            if result is True:
                failures = 0
                continue
            if result is False:
                failures += 1
                if await _back_off(rt, backoff, failures, attempt.sequence):
                    failures = 0  # the next delivery's outage is its own
                continue
            await wait_at_most(wake, backoff.poll)
    finally:
        rt.db.remove_commit_listener(wake.set)


async def _back_off(rt: Runtime, backoff: Backoff, failures: int, stuck: int | None) -> bool:
    """Wait out the backoff after a failed attempt at delivery `stuck` (None:
    the attempt failed before it had one), looking every `backoff.poll`
    seconds whether that one is still the next to go: one skipped by
    `waypost admin lifecycle skip` (another process, whose commit wakes
    nothing here) must not hold the next event back for the rest of a
    backoff of up to 5 minutes. True when it is no longer the next."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + backoff.delay(failures)
    while (left := deadline - loop.time()) > 0:
        await asyncio.sleep(min(left, backoff.poll))
        if stuck is not None and (now := await _look(rt)) is not _UNKNOWN and now != stuck:
            return True
    return False


_UNKNOWN = object()  # a look that failed: no change can be told from it


async def _look(rt: Runtime) -> object:
    """The next delivery's sequence (None: nothing pending), or _UNKNOWN
    when the store could not be read; the worker outlives any failure."""
    try:
        return await rt.db.read(store.oldest_pending)
    except WaypostError:  # a busy or closing store: looked at again later
        return _UNKNOWN
    except Exception:
        log.exception("lifecycle delivery could not look at its queue")
        return _UNKNOWN
