"""What every resolver is handed: the store, the clock and in-process state.

A `Runtime` is opened once per process by `open_runtime` (`serve` does it, and
so do the test fixtures) and handed to every app that process serves: the
public app (`waypost.app.create_app`) and the private lifecycle app
(`waypost.lifecycle_http.app.create_lifecycle_app`). Both therefore share one
writer, one reader pool, one clock and one sweep.

Adding a per-process resource (an HTTP client, a circuit breaker, an event
hub): give `Runtime` a field with a default, open the resource in
`open_runtime` and register its close on `rt.resources` (an
`AsyncExitStack`), which closes everything in reverse order of opening.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import stat
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, TextIO

from waypost.cancelling import cancel_and_wait
from waypost.clock import Clock, FileClock, SystemClock, format_time
from waypost.errors import WaypostError
from waypost.observe import conditions, logs
from waypost.observe.metrics import Metrics
from waypost.reranker import Reranker
from waypost.resolvers.access import store as access_store
from waypost.resolvers.core import store as core_store
from waypost.resolvers.decisions import status
from waypost.settings import Settings
from waypost.storage.coalesced import Coalesced
from waypost.storage.connection import ConnectionHook, open_to_others
from waypost.storage.db import Database

if TYPE_CHECKING:
    from waypost.live.hub import Hub

log = logging.getLogger("waypost")
_conditions = conditions.ConditionLog(log)
# the reranker circuit's state as the waypost_reranker_circuit_state gauge
CIRCUIT_STATES = {"closed": 0, "half_open": 1, "open": 2}

# Installed once on every connection when it opens (never per call): the SQL
# functions the domains' queries use. A domain that adds one appends it here.
CONNECTION_HOOKS: tuple[ConnectionHook, ...] = (status.install,)


@dataclass(frozen=True)
class Actor:
    """An authenticated caller, optionally acting inside a live agent session."""

    principal_id: str
    kind: str  # "human" | "agent"
    name: str
    token_id: str
    session_id: str | None = None

    @property
    def is_human(self) -> bool:
        return self.kind == "human"

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"


@dataclass
class _Instant:
    """A block's pinned now: its runtime and instant (moved only by `moving_now`)."""

    owner: object
    at: datetime


# while a block pins its now (contextvars follow its tasks, which share the one _Instant)
_PINNED_NOW: ContextVar[_Instant | None] = ContextVar("waypost_pinned_now", default=None)


@dataclass
class Runtime:
    db: Database
    clock: Clock
    # (principal id, idempotency key) of mutations running now in this process
    inflight: set[tuple[str, str]] = field(default_factory=set)
    settings: Settings | None = None
    # closes what open_runtime opened, last first; extensions push onto it
    resources: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)
    # context reranking (None: disabled, no TYPESAFE_API_KEY); its client,
    # limiter and circuit breaker are shared by every request of the process
    reranker: Reranker | None = None
    # Prometheus metrics of this process (GET /metrics when enabled)
    metrics: Metrics = field(default_factory=Metrics)
    # the live event fan-out, made on first use by `waypost.live.hub_for`
    hub: Hub | None = None
    # set when the server begins to stop: what holds a connection open (event
    # streams, MCP sessions) ends, or the server would wait for it for ever
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    # a bearer token's row and a receipt by (principal, key): asked together
    # by the requests of one pass of the event loop (storage/coalesced.py)
    token_rows: Coalesced[bytes, sqlite3.Row] = field(init=False)
    receipt_rows: Coalesced[tuple[str, str], sqlite3.Row] = field(init=False)

    def __post_init__(self) -> None:
        self.token_rows = Coalesced(self.db, access_store.tokens_with_principals)
        self.receipt_rows = Coalesced(self.db, core_store.receipt_rows)

    def now(self) -> datetime:
        """The service's now; inside `pinned_now()`, the block's one instant."""
        pinned = _PINNED_NOW.get()
        if pinned is not None and pinned.owner is self:
            return pinned.at
        return self.clock.now()

    def moving_now(self) -> Callable[[], datetime]:
        """For a read that may wait before its snapshot begins (a digest in the
        long reads' lane): a clock to call once the snapshot has begun, on any
        thread, which also moves the pinned block's instant there, so that
        the answer's `Waypost-Now` is the instant its snapshot was judged at.
        Pinned at the request's arrival, a digest that waited behind another
        listed writes committed after its `generated_at` (digestjourney)."""
        pinned = _PINNED_NOW.get()

        def now() -> datetime:
            at = self.clock.now()
            if pinned is not None and pinned.owner is self:
                pinned.at = at
            return at

        return now

    @contextlib.contextmanager
    def pinned_now(self) -> Iterator[None]:
        """`now()` is one instant for the whole block (its tasks included): a
        GraphQL query's answer, read from one snapshot, is judged at one
        moment too. Its lists and loaders each read the clock, so near a
        decision's expiry one answer showed a task ready and its only
        decision expired."""
        token = _PINNED_NOW.set(_Instant(self, self.clock.now()))
        try:
            yield
        finally:
            _PINNED_NOW.reset(token)

    def begin_stop(self) -> None:
        self.stopping.set()
        if self.hub is not None:
            self.hub.stop()


def make_clock(settings: Settings) -> Clock:
    return FileClock(settings.clock_file) if settings.clock_file else SystemClock()


@contextlib.asynccontextmanager
async def open_runtime(settings: Settings, clock: Clock | None = None) -> AsyncIterator[Runtime]:
    """Open the process's runtime: database (migrated), clock, bootstrap admin,
    sweep task. Everything is closed again when the block exits."""
    db = Database(
        settings.db_path, settings.readers, settings.busy_timeout_ms, hooks=CONNECTION_HOOKS
    )
    async with contextlib.AsyncExitStack() as stack:
        # last of all: the condition lines held back in their window (a
        # full disk's, a lock's) are logged with their count, not lost
        stack.callback(conditions.flush_all)
        # said first: a migration may take seconds, and a lock another
        # process holds up to the busy timeout
        log.info("opening %s", settings.db_path)
        _make_owner_only(settings)  # before SQLite makes a -wal or -shm
        await db.open()
        stack.push_async_callback(db.close)
        rt = Runtime(db=db, clock=clock or make_clock(settings), settings=settings)
        await stack.enter_async_context(rt.resources)
        # the writer's metrics: batch sizes and COMMIT times, the writes waiting
        db.observe_batches(rt.metrics.observe_commit)
        rt.metrics.set_queue_depth(db.queue_depth)
        rt.metrics.set_unanswered_writes(db.unanswered_writes)
        rt.metrics.set_wal_bytes(db.wal_bytes)
        # the hub is made on first use: nothing open until then
        rt.metrics.set_live(
            lambda: rt.hub.open_count() if rt.hub is not None else 0,
            lambda: rt.hub.socket_count() if rt.hub is not None else 0,
        )
        if settings.rerank.enabled:
            rt.reranker = Reranker(settings.rerank)
            rt.resources.push_async_callback(rt.reranker.aclose)
            breaker = rt.reranker.breaker
            rt.metrics.set_circuit_state(lambda: CIRCUIT_STATES[breaker.state])
        await _bootstrap(rt)
        sweeper = asyncio.create_task(_sweep_forever(rt, settings.sweep_interval))
        stack.push_async_callback(cancel_and_wait, sweeper)
        yield rt


def _make_owner_only(settings: Settings) -> None:
    """Section 14: the database's `-wal` and `-shm` are created 0600. SQLite
    gives those it creates the database file's mode, so beside a file an
    older build made 0644 this build made them 0644 too (until 2026-12-07 it
    only warned, leaving the modes to the operator). Such a file, and the
    companions that build left, are made 0600 first, each said with its old
    mode; one this user may not change is still named for the operator."""
    for name, mode in open_to_others(settings.db_path).items():
        try:
            if not _an_older_builds_file(name):
                continue  # refused as it opens, or made 0600 anew: its mode stays
            os.chmod(name, 0o600)
        except OSError as exc:
            log.warning(
                "%s is open to other users (mode %04o) and could not be made owner-only"
                " (%s): it holds every record and token hash; `chmod 600 %s*` while the"
                " service is stopped (docs/operations.md \"File permissions\")",
                name, mode, exc.strerror, settings.db_path,
            )  # fmt: skip
            continue
        log.warning(
            "%s was open to other users (mode %04o): made it 0600, as the service"
            " creates its files (docs/operations.md \"File permissions\")", name, mode,
        )  # fmt: skip


def _an_older_builds_file(name: str) -> bool:
    """Whether `name` is a database file (or a companion) this service would
    open: a regular file of one name, a database holding SQLite's header. A
    directory, a FIFO, a file of two names or one that is no database is
    refused as it opens, with its mode as the operator left it."""
    found = os.stat(name)
    if not stat.S_ISREG(found.st_mode) or found.st_nlink > 1:
        return False
    if name.endswith(("-wal", "-shm")):
        return True
    with open(name, "rb") as file:
        return file.read(16) == b"SQLite format 3\x00"


async def _sweep_forever(rt: Runtime, interval: float) -> None:
    from waypost.resolvers.core import sweep  # resolvers import this module

    while True:
        await asyncio.sleep(interval)
        try:
            report = await sweep.run_once(rt)
            # a pass that did nothing is no news: one INFO line every
            # --sweep-interval buried the lines that say something
            log.log(logging.INFO if any(report.values()) else logging.DEBUG, "sweep: %s", report)
            rt.metrics.sweep_runs.labels(outcome="ok").inc()
        except WaypostError as error:
            # a full disk or another process's lock refuses every pass: one
            # line per pass flooded the log at a short --sweep-interval; one
            # window per cause, so a busy store's lines never hide a full disk's
            _conditions.warning(
                "sweep skipped: %s", error.message, key=f"sweep skipped: {error.message}"
            )
            rt.metrics.sweep_runs.labels(outcome="skipped").inc()
        except Exception:
            log.exception("sweep failed")
            rt.metrics.sweep_runs.labels(outcome="failed").inc()


class CannotShowToken(Exception):
    """Standard error could not take the first admin's token: nothing was made."""


async def _bootstrap(rt: Runtime) -> None:
    """On a database with no principals, create `admin` and print its token once.

    Printed straight to standard error (the operator's terminal), never through
    the log handler, so the token cannot reach a log pipeline or file. It is
    printed inside the write, before its COMMIT: when standard error cannot
    take it (a full disk, a closed pipe) the admin is not made, and the next
    start with a terminal makes it; before, an admin whose token nobody saw
    was stored and never offered again. With no standard error at all
    (`2>&-`) nothing is made: print() would have sent the token to standard
    output, which may be a log pipeline."""
    from waypost.resolvers.access import principals  # resolvers import this module

    at = format_time(rt.now())
    stderr = sys.stderr
    if stderr is None:
        if not await rt.db.read(principals.has_principals):
            log.warning("no standard error to show the first admin's token on: no admin made")
        return

    def bootstrap(conn: sqlite3.Connection) -> None:
        created = principals.bootstrap_admin(conn, at)
        if created:
            _show_admin_token(stderr, created["token"], created["token_id"])

    await rt.db.write(bootstrap)


def _show_admin_token(stderr: TextIO, token: str, token_id: str) -> None:
    logs.settle(1.0)  # after the lines logged before it (they go by a thread)
    try:
        print(
            "waypost: created human principal 'admin'; its token (shown once):\n"
            f"  {token}\n"
            f"waypost: its token_id is {token_id} (for `admin token revoke`)",
            file=stderr,
            flush=True,
        )
    except (OSError, ValueError) as error:  # ValueError: a closed file object
        raise CannotShowToken(
            f"standard error cannot take the first admin's token: {error}"
        ) from error
