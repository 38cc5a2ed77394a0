"""decision_wait: block until a decision settles, woken by committed changes.

Nothing here polls. A waker is told when something may have changed: in
process by the live event hub (each committed event of the decision's
project), over HTTP by the project's server-sent event stream. Each wake re-reads the decision
through the backend; the only timers are the caller's bound and the
decision's own `expires_at` (expiry is a change of time, not of data, so no
commit announces it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from urllib.parse import quote

import anyio
import httpx

from waypost.cancelling import wait_at_most
from waypost.clock import parse_time
from waypost.errors import Unavailable
from waypost.live import hub_for
from waypost.live.hub import Listener, StreamEnded
from waypost.mcp_server.calls import ApiError
from waypost.resolvers.access.principals import token_revoked
from waypost.runtime import Runtime

log = logging.getLogger("waypost.mcp")

SETTLED = {
    "allowed": "answered",
    "denied": "answered",
    "deferred": "answered",
    "stale": "stale",
    "expired": "expired",
}
# never sleep less than this for a time-based wake (a clock skew between the
# service and this process must not turn into a busy loop)
MIN_TIMED_WAKE = 1.0
# How far past its bound a wait may run for a service that answers slowly
# before it answers `unavailable`: a healthy service's last read takes
# milliseconds, a busy one's may take a second or two, and its answer is
# still worth more than a refusal.
STALLED_SLACK_SECONDS = 5.0
# Over stdio a wait wakes for the stream's events and its own timers only:
# a step of the service's clock (no event announces one) that expired the
# decision was seen at the wait's bound, up to 240 s late. It re-reads at
# least this often, as the token's 15-second check re-reads over /mcp.
RECHECK_SECONDS = 15.0


class Waker(Protocol):
    # whether a re-read that cannot reach the service (a restart) is waited
    # through rather than raised: the stdio stream's waker reopens its stream
    outlasts_outages: bool

    async def wait(self, timeout: float) -> None:
        """Return when something may have changed, or after `timeout` seconds."""

    def seconds_until(self, instant: str) -> float:
        """Seconds from the service's now until `instant` (RFC 3339)."""


class _EventWaker:
    # the stream's waker rides out a restart: a re-read that cannot reach the
    # service (or finds it starting) waits for the stream's reopening instead
    outlasts_outages = True

    def __init__(self, now: Any) -> None:
        self.event = asyncio.Event()
        self._now = now

    async def wait(self, timeout: float) -> None:
        await wait_at_most(self.event, min(timeout, RECHECK_SECONDS))
        self.event.clear()

    def seconds_until(self, instant: str) -> float:
        delta: float = (parse_time(instant) - self._now()).total_seconds()
        return delta


class ServiceTime:
    """The service's now as its last answer said it (`Waypost-Now`), moved on
    by this process's monotonic clock since: `waypost mcp` judged a
    decision's `expires_at` by its own machine's clock, so a machine behind
    the service (or a service on a simulated clock) reported an expiry only
    at the wait's bound, up to 240 s late. Before any answer, or from a
    Waypost that does not say its time, this machine's clock."""

    def __init__(self) -> None:
        self._said: tuple[datetime, float] | None = None

    def saw(self, said: str | None) -> None:
        if said is None:
            return
        try:
            moment = parse_time(said)
        except ValueError:
            return  # not the service's header: keep what it said before
        self._said = (moment, time.monotonic())

    def now(self) -> datetime:
        if self._said is None:
            return datetime.now(UTC)
        moment, at = self._said
        return moment + timedelta(seconds=time.monotonic() - at)


class _ListenerWaker:
    """Woken by the hub when events of the project have committed.

    Like every stream, a wait ends once its token is revoked, looked at every
    `recheck_seconds` (section 14): a wait ran on to its bound, up to 240 s,
    and answered with what it read after the revocation."""

    # in the service's own process: a stop ends the wait ("the server is
    # stopping"), and the client calls again
    outlasts_outages = False

    def __init__(self, rt: Runtime, listener: Listener, token_id: str) -> None:
        self._rt = rt
        self._listener = listener
        self._token_id = token_id
        self._recheck = hub_for(rt).limits.recheck_seconds
        self._checked = time.monotonic()
        self._now = rt.now

    async def wait(self, timeout: float) -> None:
        due = self._checked + self._recheck - time.monotonic()
        try:
            await self._listener.next_batch(max(0.0, min(timeout, due)))
        except StreamEnded as ended:
            # a planned stop, not a fault: the agent calls again once it is back
            raise Unavailable("the server is stopping; call decision_wait again") from ended
        if time.monotonic() - self._checked >= self._recheck:
            token_id = self._token_id
            if await self._rt.db.read_point(lambda c: token_revoked(c, token_id)):
                raise ApiError("unauthenticated", "the token was revoked", {}, 401)
            self._checked = time.monotonic()

    def seconds_until(self, instant: str) -> float:
        delta: float = (parse_time(instant) - self._now()).total_seconds()
        return delta


@contextlib.asynccontextmanager
async def hub_waker(rt: Runtime, project: str, token_id: str) -> AsyncIterator[Waker]:
    """Woken by each committed event of `project` (the live hub that feeds the
    SSE stream and GraphQL subscriptions), counted against the token's streams."""
    async with hub_for(rt).listen(project, token_id, None) as listener:
        yield _ListenerWaker(rt, listener, token_id)


# Reconnecting after the stream ended (a restart of `serve` ends it first):
# the first try at once, then doubling up to the cap, while the wait lasts.
RECONNECT_FIRST, RECONNECT_CAP = 0.25, 5.0


def _stream_refusal(status: int, body: bytes) -> ApiError:
    """What the stream's refusal says, with its REST code when it sent one
    (`too_many_streams`: the token's 16 streams are open)."""
    try:
        error = json.loads(body)["error"]
        details = error.get("details") or {}
        return ApiError(str(error["code"]), str(error["message"]), details, status)
    except (ValueError, KeyError, TypeError, AttributeError):
        return ApiError(
            "unavailable",
            f"the event stream answered HTTP {status}; this Waypost cannot wait for"
            " decisions (use decision_get)",
            {},
            503,
        )


@contextlib.asynccontextmanager
async def stream_waker(
    client: httpx.AsyncClient, project: str, now: Callable[[], datetime]
) -> AsyncIterator[Waker]:
    """Woken by each event on the project's event stream (GET .../events/stream).

    The stream is opened again whenever it ends (a graceful restart of `serve`
    ends every stream first), and each reopening wakes the waiter too: what
    committed in the gap is then read like any change. Only the first opening
    can refuse the wait; later refusals (a revoked token) stop reconnecting.
    `now` is the service's clock as this process knows it (`ServiceTime`)."""
    waker = _EventWaker(now)
    opened: asyncio.Future[ApiError | None] = asyncio.get_running_loop().create_future()
    url = f"/api/v1/projects/{quote(project, safe='')}/events/stream"

    async def listen() -> str:
        """One attempt: "ran" (a stream was open until it ended), "refused"
        (momentarily: a cap, a stopping server) or "final" (stop trying)."""
        async with client.stream(
            "GET", url, headers={"Accept": "text/event-stream"}, timeout=httpx.Timeout(None)
        ) as response:
            if response.status_code != 200:
                refusal = _stream_refusal(response.status_code, await response.aread())
                if not opened.done():
                    opened.set_result(refusal)
                    return "final"
                # the caps are momentary; anything else (401, 404) is final
                momentary = refusal.code in ("too_many_streams", "unavailable")
                return "refused" if momentary else "final"
            if opened.done():
                waker.event.set()  # reopened: read what may have committed meanwhile
            else:
                opened.set_result(None)
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    waker.event.set()
        return "ran"

    async def pump() -> None:
        delay = RECONNECT_FIRST
        while True:
            began = time.monotonic()
            try:
                outcome = await listen()
            except httpx.HTTPError:
                outcome = "refused"
            except Exception:
                # whatever else ends the stream must not leave the wait unresolved
                log.exception("the event stream of %s failed", project)
                outcome = "final"
            lasted = time.monotonic() - began
            if not opened.done():
                opened.set_result(ApiError("unavailable", "cannot open the event stream", {}, 503))
                return
            if outcome == "final":
                waker.event.set()  # the waiter re-reads once more; its bound still holds
                return
            # a stream that ends does not wake the waiter: it ends first as
            # `serve` stops, and a read then met a stopping service and ended
            # the whole wait `unavailable` (restartjourney); its reopening
            # wakes it (above), to read what committed in the gap
            # a stream that had been up a while starts the delays afresh; a
            # refusal, a failure or a stream that ended at once waits longer
            if outcome == "ran" and lasted >= RECONNECT_CAP:
                delay = RECONNECT_FIRST
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_CAP)

    task = asyncio.create_task(pump())
    try:
        failure = await opened
        if failure is not None:
            raise failure
        yield waker
    finally:
        task.cancel()
        # shielded: inside a cancelled anyio scope (the MCP SDK cancelling a
        # request) an unshielded await returned at once, before the stream
        # closed, and its connection held one of the token's stream slots
        with anyio.move_on_after(5, shield=True), contextlib.suppress(asyncio.CancelledError):
            await task


async def wait_for_decision(
    waker_scope: contextlib.AbstractAsyncContextManager[Waker],
    read: Callable[[], Awaitable[dict[str, Any]]],
    timeout: float,
) -> dict[str, Any]:
    """`{"outcome", "decision"}` once `read()` shows a settled decision or time is up.

    The bound holds however the service answers: a service that stalls (its
    process stopped, its host swapping) never sent the event stream's
    headers, and the wait outlived its `timeout_seconds` until the service
    came back (90 s in an audit, for a bound of 5). Past the bound and
    STALLED_SLACK_SECONDS, the wait answers `unavailable`."""
    try:
        async with asyncio.timeout(timeout + STALLED_SLACK_SECONDS):
            return await _wait_for_decision(waker_scope, read, timeout)
    except TimeoutError:
        raise ApiError(
            "unavailable",
            f"the service did not answer within the {timeout:g} seconds of the wait;"
            " call decision_wait again",
            {}, 503,
        ) from None  # fmt: skip


async def _wait_for_decision(
    waker_scope: contextlib.AbstractAsyncContextManager[Waker],
    read: Callable[[], Awaitable[dict[str, Any]]],
    timeout: float,
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    # subscribe first, then read: a change committed in between still wakes us
    async with waker_scope as waker:
        decision = await read()
        while True:
            outcome = SETTLED.get(str(decision.get("status")))
            if outcome is not None:
                return {"outcome": outcome, "decision": decision}
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return {"outcome": "timeout", "decision": decision}
            expires_at = (decision.get("current") or {}).get("expires_at")
            if expires_at:
                remaining = min(remaining, max(waker.seconds_until(expires_at), MIN_TIMED_WAKE))
            await waker.wait(remaining)
            try:
                decision = await read()
            except ApiError as error:
                # a re-read that met a restart (the periodic one, RECHECK_SECONDS,
                # comes whatever the stream does): the stream's reopening wakes
                # the wait again, to read what committed in the gap
                momentary = error.code == "unavailable" and error.details.get("reason") in (
                    None, "starting")  # fmt: skip
                if not (momentary and waker.outlasts_outages):
                    raise
                if deadline - time.monotonic() <= 0:
                    raise
