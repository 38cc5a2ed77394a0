"""`waypost admin lifecycle skip`: the way out of an event its receiver
refuses for good (before it, that one held every later event back for ever,
and the only way out was editing the file by hand)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner

from tests.lifecycle.support import Lifecycle, Member, delivering, memo
from tests.migration_support import migration
from waypost.cli import main
from waypost.resolvers.lifecycle.delivery import Backoff
from waypost.storage import migrate

M = "/v1/decisions/adr.payments-retry"


def run(*args: str) -> Any:
    return CliRunner().invoke(main, ["admin", "lifecycle", *args])


def skip(db: str, sequence: int, reason: str = "the receiver refuses it for good") -> Any:
    result = run("skip", "--db", db, "--sequence", str(sequence), "--reason", reason)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


async def until(done: Callable[[], Any], what: str) -> None:
    for _ in range(500):  # bounded: 5 s
        answer = done()
        if await answer if asyncio.iscoroutine(answer) else answer:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not reached: {what}")


async def delivered(lifecycle: Lifecycle, sequence: int) -> bool:
    row = await lifecycle.service.rt.db.read(
        lambda c: c.execute(
            "SELECT state FROM lifecycle_deliveries WHERE event_sequence = ?", (sequence,)
        ).fetchone()
    )
    return bool(row["state"] == "delivered")


async def sequences(lifecycle: Lifecycle) -> list[int]:
    rows = await lifecycle.service.rt.db.read(
        lambda c: c.execute("SELECT event_sequence FROM lifecycle_deliveries ORDER BY 1").fetchall()
    )
    return [int(r[0]) for r in rows]


async def test_a_skipped_delivery_is_never_sent_and_the_next_goes_without_waiting_out_the_backoff(
    lifecycle: Lifecycle, author: Member
) -> None:
    """The worker is in a backoff of a minute after its second failure: the
    skip, made by another process (no commit of `serve`'s wakes the worker),
    lets the next event go within a look (`poll`), not a minute later."""
    assert (await author.register(memo())).status_code == 200
    await author.post(f"{M}/comments", {"version": 1, "body": {"text": "c0"}})
    first, second = await sequences(lifecycle)
    sent: list[int] = []

    def hook(request: httpx.Request) -> httpx.Response:
        sequence = int(request.headers["waypost-delivery"])
        sent.append(sequence)
        return httpx.Response(400 if sequence == first else 204)  # the first, never

    db = str(lifecycle.service.db_path)
    async with delivering(lifecycle, hook, Backoff(first=60.0, limit=60.0, poll=0.05)):
        await until(lambda: sent == [first], "the first attempt")
        skipped = await asyncio.to_thread(skip, db, first)
        await until(lambda: delivered(lifecycle, second), "the second event delivered")
    assert sent == [first, second]
    assert skipped["state"] == "skipped"
    assert skipped["event"]["sequence"] == first
    assert skipped["skip_reason"] == "the receiver refuses it for good"
    assert skipped["skipped_at"] is not None and skipped["attempts"] == 1
    assert skipped["last_error"] == "HTTP 400"  # what it was skipped for stays beside it
    listed = json.loads(run("deliveries", "--db", db, "--state", "all").stdout)
    assert [(d["event"]["sequence"], d["state"]) for d in listed] == [
        (first, "skipped"),
        (second, "delivered"),
    ]
    only = json.loads(run("deliveries", "--db", db, "--state", "skipped").stdout)
    assert [d["event"]["sequence"] for d in only] == [first]


async def test_skipping_the_last_failing_delivery_brings_the_alert_gauge_back_to_0(
    lifecycle: Lifecycle, author: Member
) -> None:
    """docs/operations.md says to alert on the gauge: after a skip leaves
    nothing pending, nothing is failing, and it must not stay up for ever."""
    assert (await author.register(memo())).status_code == 200
    (only,) = await sequences(lifecycle)
    rt = lifecycle.service.rt

    def gauge() -> float | None:
        return rt.metrics.registry.get_sample_value("waypost_lifecycle_delivery_failures_in_a_row")

    refusing = Backoff(first=0.05, limit=0.05, poll=0.05)
    async with delivering(lifecycle, lambda r: httpx.Response(400), refusing):
        await until(lambda: (gauge() or 0) >= 2, "two failures in a row")
        await asyncio.to_thread(skip, str(lifecycle.service.db_path), only)
        await until(lambda: gauge() == 0, "the gauge back to 0")


async def test_only_a_pending_delivery_can_be_skipped(lifecycle: Lifecycle, author: Member) -> None:
    """A delivery already sent or skipped, or one that does not exist, is
    refused by its own words and nothing changes (a mistyped number must not
    pass silently)."""
    assert (await author.register(memo())).status_code == 200
    await author.post(f"{M}/comments", {"version": 1, "body": {"text": "c0"}})
    first, second = await sequences(lifecycle)
    await lifecycle.service.rt.db.write(
        lambda c: c.execute(
            "UPDATE lifecycle_deliveries SET state = 'delivered' WHERE event_sequence = ?",
            (second,),
        )
    )
    db = str(lifecycle.service.db_path)
    skip(db, first)
    again = run("skip", "--db", db, "--sequence", str(first), "--reason", "twice")
    assert again.exit_code == 1
    assert "state_conflict: --sequence: this delivery is skipped, not pending" in again.output
    sent = run("skip", "--db", db, "--sequence", str(second), "--reason", "too late")
    assert sent.exit_code == 1
    assert "state_conflict: --sequence: this delivery is delivered, not pending" in sent.output
    missing = run("skip", "--db", db, "--sequence", "999", "--reason", "typo")
    assert missing.exit_code == 1
    assert "not_found: --sequence: no delivery of this event" in missing.output
    for blank in ("", "   ", "\u200b", " \u2066\u2069 "):
        refused = run("skip", "--db", db, "--sequence", str(first), "--reason", blank)
        assert refused.exit_code == 2 and "--reason" in refused.output, refused.output
    listed = json.loads(run("deliveries", "--db", db, "--state", "all").stdout)
    assert [(d["state"], d["skip_reason"]) for d in listed] == [
        ("skipped", "the receiver refuses it for good"),
        ("delivered", None),
    ]


def test_the_migration_keeps_every_delivery_as_it_was(tmp_path: Path) -> None:
    """0042 rebuilds the table (SQLite cannot change its CHECK in place):
    every row keeps its state, attempts, errors, times and id, and both
    indexes are there again."""
    conn = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    rebuild = migration("0042")
    for m in migrate.available():
        if m.name < rebuild.name:
            conn.executescript(m.sql)
    for sequence in (1, 2, 3):
        conn.execute(
            "INSERT INTO lifecycle_events (sequence, tenant, memo_id, version, type, actor, at,"
            " data) VALUES (?, 't', 'm', 1, 'memo.registered', 'a', 'at', '{}')",
            (sequence,),
        )
    rows = [
        (1, "delivered", 3, None, "2026-12-01T00:00:02.000Z", "2026-12-01T00:00:02.000Z", "a" * 32),
        (2, "pending", 7, "HTTP 400", "2026-12-01T00:05:00.000Z", None, "b" * 32),
        (3, "pending", 0, None, None, None, "c" * 32),
    ]
    conn.executemany(
        "INSERT INTO lifecycle_deliveries (event_sequence, state, attempts, last_error,"
        " last_attempt_at, delivered_at, delivery_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    conn.executescript(rebuild.sql)
    kept = conn.execute(
        "SELECT event_sequence, state, attempts, last_error, last_attempt_at, delivered_at,"
        " delivery_id, skipped_at, skip_reason FROM lifecycle_deliveries ORDER BY 1"
    ).fetchall()
    assert kept == [(*row, None, None) for row in rows]
    indexes = {r[1] for r in conn.execute("PRAGMA index_list(lifecycle_deliveries)")}
    assert {"lifecycle_deliveries_pending", "lifecycle_deliveries_by_id"} <= indexes
    conn.execute("UPDATE lifecycle_deliveries SET state = 'skipped' WHERE event_sequence = 2")
    try:
        conn.execute("UPDATE lifecycle_deliveries SET state = 'lost' WHERE event_sequence = 3")
        raise AssertionError("a state outside the three was taken")
    except sqlite3.IntegrityError:
        pass
    conn.close()


async def test_a_skip_made_during_an_attempt_that_then_fails_lets_the_next_go_at_once(
    lifecycle: Lifecycle, author: Member
) -> None:
    """The skip lands while the worker waits for the receiver's refusal: the
    next event is already the next one when the failure is noted, and it
    goes without waiting out the backoff the skipped one earned."""
    assert (await author.register(memo())).status_code == 200
    await author.post(f"{M}/comments", {"version": 1, "body": {"text": "c0"}})
    first, second = await sequences(lifecycle)
    attempted, skipped = asyncio.Event(), asyncio.Event()
    sent: list[int] = []

    async def hook(request: httpx.Request) -> httpx.Response:
        sequence = int(request.headers["waypost-delivery"])
        sent.append(sequence)
        if sequence == first:
            attempted.set()
            await skipped.wait()
            return httpx.Response(400)
        return httpx.Response(204)

    async with delivering(lifecycle, hook, Backoff(first=60.0, limit=60.0, poll=0.05)):
        await asyncio.wait_for(attempted.wait(), 5)
        await asyncio.to_thread(skip, str(lifecycle.service.db_path), first)
        skipped.set()
        await until(lambda: delivered(lifecycle, second), "the second event delivered")
    assert sent == [first, second]


def test_a_sequence_past_sqlites_integers_is_no_delivery_not_a_traceback(tmp_path: Path) -> None:
    """`--sequence` is `IntRange(1)` with no top: 2**63 passed click and
    reached SQLite, whose binding raised `OverflowError: Python int too large
    to convert to SQLite INTEGER`, a traceback (exit 1), where lifecycle.md
    says a sequence with no delivery is `not_found` (upgrade88). A usage
    error naming `--sequence` would do as well."""
    db = str(tmp_path / "waypost.db")
    made = CliRunner().invoke(main, ["admin", "migrate", "--db", db])
    assert made.exit_code == 0, made.output
    result = run("skip", "--db", db, "--sequence", str(2**63), "--reason", "a typo")
    assert not isinstance(result.exception, OverflowError), result.exception
    if result.exit_code == 2:  # a usage error naming the option is fine too
        assert "--sequence" in result.output, result.output
    else:
        assert result.exit_code == 1, result.output
        assert "not_found: --sequence: no delivery of this event" in result.output


async def test_the_delivery_after_a_skipped_one_has_a_backoff_of_its_own(
    lifecycle: Lifecycle, author: Member
) -> None:
    """The failures in a row that set the backoff are the skipped delivery's:
    the next one, failing once, is retried after the first delay (1 s in
    `serve`), not after the doubling the skipped one had reached (up to 5
    minutes) (review89)."""
    import time

    assert (await author.register(memo())).status_code == 200
    await author.post(f"{M}/comments", {"version": 1, "body": {"text": "c0"}})
    first, second = await sequences(lifecycle)
    tried: dict[int, list[float]] = {}

    def hook(request: httpx.Request) -> httpx.Response:
        sequence = int(request.headers["waypost-delivery"])
        tried.setdefault(sequence, []).append(time.monotonic())
        if sequence == first or len(tried[sequence]) == 1:
            return httpx.Response(400)  # the first always, the second once
        return httpx.Response(204)

    # three failures of the first: 0.5 s, then 1 s; its next would be 2 s
    async with delivering(lifecycle, hook, Backoff(first=0.5, limit=60.0, poll=0.05)):
        await until(lambda: len(tried.get(first, [])) == 3, "three failures of the first")
        await asyncio.to_thread(skip, str(lifecycle.service.db_path), first)
        await until(lambda: len(tried.get(second, [])) == 1, "the second's first attempt")
        await until(lambda: len(tried.get(second, [])) == 2, "the second's retry")
    waited = tried[second][1] - tried[second][0]
    assert waited < 1.5, f"the second was retried after {waited:.1f} s, not the first delay"


def test_a_reason_past_500_characters_is_refused(tmp_path: Path) -> None:
    """lifecycle.md: the reason is "1-500 characters, not blank"."""
    db = str(tmp_path / "waypost.db")
    made = CliRunner().invoke(main, ["admin", "migrate", "--db", db])
    assert made.exit_code == 0, made.output
    result = run("skip", "--db", db, "--sequence", "1", "--reason", "x" * 501)
    assert result.exit_code == 2 and "--reason" in result.output, result.output
    at_most = run("skip", "--db", db, "--sequence", "1", "--reason", "x" * 500)
    assert at_most.exit_code == 1 and "not_found" in at_most.output, at_most.output
