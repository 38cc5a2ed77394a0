"""Reranking of context items by a third-party provider (TypeSafe).

`Reranker.rerank` is all the context packet sees: it takes the packet's
items (already selected and budgeted in FTS order) and returns them either
reordered by the provider's scores or unchanged, with the reason. Any
failure keeps the FTS order, the same items and the same budget; nothing
here raises to the caller except cancellation.

One Reranker lives per process (on the Runtime): its httpx client, its
limiter (`limiter.py`) and its circuit breaker (`breaker.py`) are shared by
every request. See docs/context.md for the states.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx

from waypost.reranker.breaker import Breaker, Ticket
from waypost.reranker.client import ProviderFailure, make_client, score
from waypost.reranker.limiter import Limiter
from waypost.reranker.reasons import Reason
from waypost.settings import RerankSettings

log = logging.getLogger("waypost.reranker")

MIN_CANDIDATES = 2
MAX_CANDIDATES = 40
EXCERPT_CHARS = 1800
FAILURE_THRESHOLD = 3


def excerpt(item: dict[str, Any]) -> str:
    """Title, description or body, acceptance criteria or applicability: ≤ 1,800 chars.

    When they do not fit, the description or body gives way to the last
    part up to a third of the room left by the title: cut at the end, a
    long description kept the acceptance criteria (and a long body the
    applicability) from the provider, which the contract's excerpt is
    "made of" (kdcontract)."""
    if item["type"] == "task":
        title, middle, last = (
            item["title"],
            item["description"],
            "\n".join(item["acceptance_criteria"]),
        )
    else:
        title, middle, last = item["title"], item["body"], item["applicability"]
    whole = "\n".join(p for p in (title, middle, last) if p)
    if len(whole) <= EXCERPT_CHARS:
        return whole
    room = EXCERPT_CHARS - len(title) - 2  # two line breaks between the three
    last = last[: max(room - len(middle), min(len(last), room // 3))]
    middle = middle[: max(room - len(last), 0)]
    return "\n".join(p for p in (title, middle, last) if p)[:EXCERPT_CHARS]


class Reranker:
    def __init__(
        self,
        settings: RerankSettings,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not settings.api_key:
            raise ValueError("the reranker needs an API key")
        self._key = settings.api_key
        self._url = settings.url
        self.limiter = Limiter(settings.max_concurrency)
        self.breaker = Breaker(FAILURE_THRESHOLD, settings.circuit_open_seconds, clock)
        self._client = client or make_client(settings.ca_bundle, settings.max_concurrency)
        # the recovery probe's call, running whoever still waits for it
        self._probes: set[asyncio.Task[dict[str, float] | Reason]] = set()

    async def aclose(self) -> None:
        """Cancel a probe still out (the server stopping: a fresh window,
        as for any cancelled probe), then close the client."""
        # one turn of the loop first: a probe cancelled before its first step
        # never reached the `try` that settles it, and left the circuit half
        # open with its permit held (a task's first step is already scheduled)
        await asyncio.sleep(0)
        for probe in self._probes:
            probe.cancel()
        await asyncio.gather(*self._probes, return_exceptions=True)
        await self._client.aclose()

    async def rerank(
        self, query: str, items: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], Reason]:
        """(items, reason): reordered when reason is `applied`, else unchanged."""
        started = time.monotonic()
        positions = [i for i, item in enumerate(items) if item["type"] != "decision"]
        count = len(positions)
        if count < MIN_CANDIDATES:
            return self._skip(items, "too_few", count, started)
        if count > MAX_CANDIDATES:
            return self._skip(items, "too_many", count, started)
        if self._client.is_closed:
            # closed with the runtime, before the store: a packet still
            # running then (a forced quit's) met httpx's RuntimeError, an
            # ERROR and a failure counted against the provider (stopaudit)
            return self._skip(items, "disabled", count, started)
        # built before a ticket and a permit are taken: nothing between
        # taking them and `_call`, which gives them back, may raise (a
        # permit lost so, on a probe, held the circuit half open for good)
        candidates = [items[i] for i in positions]
        documents = [{"id": c["id"], "text": excerpt(c)} for c in candidates]
        ticket = self.breaker.admit()
        if ticket is None:
            return self._skip(items, "circuit_open", count, started)
        if not self.limiter.try_acquire():
            self.breaker.release(ticket)
            return self._skip(items, "busy", count, started)
        call = self._call(ticket, query, documents, started)
        if ticket.probe:
            # the probe runs to its end whoever waits for it: a GraphQL
            # WebSocket client that ended its operation cancelled it, and a
            # cancelled probe opens a fresh window, so one client could keep
            # reranking off for everyone (only `aclose` cancels it now)
            probe = asyncio.create_task(call)
            self._probes.add(probe)
            probe.add_done_callback(self._probes.discard)
            outcome = await asyncio.shield(probe)
        else:
            outcome = await call
        if not isinstance(outcome, dict):
            return items, outcome
        scores = outcome
        # descending score; ties (and equal scores) keep their FTS order
        order = sorted(range(count), key=lambda j: (-scores[candidates[j]["id"]], j))
        result = list(items)
        for position, j in zip(positions, order, strict=True):
            result[position] = candidates[j]
        return result, "applied"

    async def _call(
        self, ticket: Ticket, query: str, documents: list[dict[str, str]], started: float
    ) -> dict[str, float] | Reason:
        """The provider's scores by id, or why there are none; the breaker
        told the outcome, the permit given back, and the attempt logged."""
        count = len(documents)
        try:
            scores = await score(self._client, self._url, self._key, query, documents)
        except ProviderFailure as failure:
            self._settle(ticket, failure.reason)
            _log("failed", failure.reason, count, started, failure.__cause__)
            return failure.reason
        except Exception:
            # a fault of ours (no failure the contract names): the packet
            # still keeps its FTS order, and a probe still settles the circuit
            log.exception("rerank failed unexpectedly")
            self._settle(ticket, "connect_error")
            _log("failed", "connect_error", count, started)
            return "connect_error"
        except asyncio.CancelledError:
            # an ordinary request's client went away, which says nothing of
            # the provider; a probe is cancelled only as the server stops,
            # and must not leave the circuit half open for ever
            if ticket.probe:
                self._settle(ticket, "cancelled")
            _log("cancelled", "cancelled", count, started)
            raise
        finally:
            self.limiter.release()
        self._settle(ticket, None)
        _log("applied", "applied", count, started)
        return scores

    def _settle(self, ticket: Ticket, failure: str | None) -> None:
        """Tell the breaker how a call ended (`failure` None: it succeeded),
        and log a transition it makes: the attempt lines are INFO, one per
        request, and an operator who watches WARNING learned nothing when
        reranking went off for every packet (logaudit)."""
        before = self.breaker.state
        if failure is None:
            self.breaker.succeeded(ticket)
        else:
            self.breaker.failed(ticket)
        after = self.breaker.state
        if after == before:
            return
        window = self.breaker.open_seconds
        if before == "closed":
            log.warning(
                "reranker circuit opened after %d failures in a row (the last: %s):"
                " packets keep their full-text order for %g s, then one request probes",
                self.breaker.threshold,
                failure,
                window,
            )
        elif failure == "cancelled":
            # only `aclose` cancels a probe: the server is stopping, and the
            # provider was not found down (review62)
            log.info("reranker probe cancelled: the server is stopping")
        elif after == "open":
            said = "reranker probe failed (%s): the circuit stays open %g s more"
            log.info(said, failure, window)
        else:
            # at the opening's level: whoever saw that line sees this one
            log.warning("reranker circuit closed: the probe succeeded, packets are reranked again")

    def _skip(
        self, items: list[dict[str, Any]], reason: Reason, count: int, started: float
    ) -> tuple[list[dict[str, Any]], Reason]:
        _log("skipped", reason, count, started)
        return items, reason


def _log(
    outcome: str, reason: str, count: int, started: float, cause: BaseException | None = None
) -> None:
    # never the query, item text or the key: counts and times only, and for
    # a connection that failed what the network said (refused, a TLS
    # verification, a name that does not resolve: `connect_error` is each)
    elapsed_ms = (time.monotonic() - started) * 1000
    line = "rerank outcome=%s reason=%s candidates=%d elapsed_ms=%.1f"
    args: list[object] = [outcome, reason, count, elapsed_ms]
    said = _network_said(cause) if reason == "connect_error" else ""
    if said:
        line += " error=%r"
        args.append(said)
    log.info(line, *args)


def _network_said(cause: BaseException | None) -> str:
    """What the network said under a transport error, cut at 200 characters:
    the first error of its chain (httpx's own words for a refused connection
    are "All connection attempts failed"; the socket's under them say
    `ConnectionRefusedError: [Errno 111] ...`), which quote no header. A
    request h11 refused to send is said nothing of: its words quote the
    header it refused (`Illegal header value b'Bearer <the key>'`, for a
    key holding a line break, which `serve` refuses at start but a runtime
    built otherwise took; rerankeraudit)."""
    if not isinstance(cause, httpx.TransportError) or isinstance(cause, httpx.LocalProtocolError):
        return ""
    first: BaseException = cause
    for _ in range(8):  # a chain is short; a loop in one must not hang a log line
        under = first.__cause__ or first.__context__
        if under is None:
            break
        first = under
    # every address of a name failed (a host with an IPv4 and an IPv6
    # address): each one's words, not "multiple connection attempts failed"
    errors = first.exceptions if isinstance(first, BaseExceptionGroup) else (first,)
    said = "; ".join(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__ for e in errors)
    return said if len(said) <= 200 else said[:200] + "..."
