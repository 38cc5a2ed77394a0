"""The in-process event fan-out: one reader of the event log, many listeners.

The writer calls `Hub.committed` (a commit listener on the Database) after
each committed batch, on the event loop. That call only sets a flag and wakes
the hub's own task, so the writer never waits for a listener. The task reads
the events committed since it last looked (one statement for every project,
however many listeners) into a bounded per-project window, then wakes the
listeners of the projects that got new events. A listener takes from the
window what follows its own last sequence, and reads the database itself
only when it is further behind than the window holds (a resume from an old
`after`). So a listener sees only committed rows, each once, in sequence
order, with nothing missed between its `after` and the live tail.

Writes by other processes (the admin CLI, a second server on the same file)
fire no commit hook here: a periodic re-read (`poll_seconds`) covers them.

Resources are bounded: at most `per_token` open listeners per token and
`total` in all (past that, `TooManyStreams`), and as many acknowledged
GraphQL WebSockets (`open_socket`), with or without subscriptions; the window
per project holds at most twice `window` events (it is trimmed in halves,
to `window`), and the windows of all projects together at most
`window_chars` characters of event data (past that the heaviest window
loses its older half, until they fit: with many busy projects a window
then holds fewer than `window`); a listener that had caught up and then falls behind the oldest
event the window holds is dropped (`SlowConsumer`) rather than buffered
for; it can resume from its last sequence.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import contextvars
import functools
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from waypost.cancelling import cancel_and_wait, wait_at_most
from waypost.errors import InvalidRequest, Unavailable, WaypostError
from waypost.observe.conditions import ConditionLog
from waypost.resolvers.core import events
from waypost.storage.db import Database

log = logging.getLogger("waypost.live")
_conditions = ConditionLog(log)
Event = dict[str, Any]
# events read per statement, by the hub and by a listener catching up
PAGE = 200


class TooManyStreams(WaypostError):
    code = "too_many_streams"
    status = 429


class StreamEnded(Exception):
    """The hub stopped (the server is stopping): listeners end their streams."""


class SlowConsumer(WaypostError):
    code = "slow_consumer"
    status = 409


@dataclass(frozen=True)
class LiveLimits:
    per_token: int = 16
    total: int = 1000
    window: int = 2000
    # The windows' events weighed together by their stored JSON text: the
    # count alone let each listened project hold up to 4,000 events of up to
    # 3.2 KB each (a task with 100 `depends_on`), 37 MB of Python objects,
    # so a thousand listened projects could take tens of GB (cacheaudit).
    # 16 Mi characters are some 45 MB of such objects, up to 80 MB of small
    # events (their other fields weigh 200 here and take more; review68);
    # typical events (~330) fill it only past a dozen busy projects' whole
    # windows, and then a caught-up stream has less room to fall behind.
    window_chars: int = 16 * 1024 * 1024
    poll_seconds: float = 1.0
    # The hub waits this long per open listener (at most `coalesce_max`)
    # before reading new events, so that one read and one wake per listener
    # serve many commits: every wake costs each listener a send, so the wait
    # grows with them (100 streams: 100 ms; one stream: 1 ms).
    coalesce_per_listener: float = 0.001
    coalesce_max: float = 0.1
    # streams send a comment this often (the contract: at least every 15
    # seconds; a wake comes a few milliseconds late), and re-check their token
    keepalive_seconds: float = 14.0
    recheck_seconds: float = 15.0


@dataclass
class _Window:
    """Every event of one project with a sequence in (floor, hub.position], in
    order, with their sequences beside them for a binary search."""

    floor: int
    items: list[Event] = field(default_factory=list)
    sequences: list[int] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)
    held: int = 0  # the sum of `weights`
    listeners: set[Listener] = field(default_factory=set)

    def add(self, event: Event, weight: int, limit: int) -> int:
        """Add one event; the characters held now less before (a trim may
        make it negative)."""
        self.items.append(event)
        self.sequences.append(event["sequence"])
        self.weights.append(weight)
        self.held += weight
        freed = 0
        if len(self.items) > 2 * limit:
            # trim in halves: amortized O(1) per event, never more than 2x the limit
            freed = self.trim(len(self.items) - limit)
        return weight - freed

    def trim(self, cut: int) -> int:
        """Drop the oldest `cut` events; the characters they held."""
        freed = sum(self.weights[:cut])
        self.floor = self.sequences[cut - 1]
        del self.items[:cut], self.sequences[:cut], self.weights[:cut]
        self.held -= freed
        return freed

    def after(self, sequence: int) -> list[Event]:
        start = bisect.bisect_right(self.sequences, sequence)
        return self.items[start : start + PAGE]


class Listener:
    """One stream's place in one project's events (see `Hub.listen`)."""

    def __init__(self, hub: Hub, project_id: str, token_id: str, after: int) -> None:
        self.hub = hub
        self.project_id = project_id
        self.token_id = token_id
        self.last = after
        self.caught_up = False
        # the events the window already held when this stream opened: a
        # resume replays them, it was not woken with them (see `_in_window`)
        self.replay_through = hub.position
        self.wake = asyncio.Event()

    async def next_batch(self, timeout: float) -> list[Event]:
        """The events after `last` (possibly none after `timeout` seconds)."""
        found = await self._look()
        if not found:
            self.wake.clear()
            # a wake between the look above and this clear would be lost: look again
            found = await self._look()
            if not found:
                # asyncio.timeout, not wait_for: no task per wait (100 streams
                # wake on every commit batch)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self.wake.wait()
                found = await self._look()
        if found:
            self.last = found[-1]["sequence"]
        return found

    async def _look(self) -> list[Event]:
        found = self.hub._in_window(self)
        if found is None:
            found = await self.hub._read_behind(self)
        return found


class Hub:
    def __init__(self, db: Database, limits: LiveLimits | None = None) -> None:
        self.db = db
        self.limits = limits or LiveLimits()
        self.position = 0  # highest sequence read from the log
        self._windows: dict[str, _Window] = {}
        self._held = 0  # characters of event data all windows hold
        self._per_token: dict[str, int] = {}
        self._count = 0
        self._sockets: dict[str, int] = {}  # acknowledged GraphQL WebSockets per token
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._starting: asyncio.Future[None] | None = None
        self._stopped = False

    # --- life ------------------------------------------------------------------

    async def start(self) -> None:
        """Read the log's current end and start following it (once; callers
        arriving meanwhile wait for the same start)."""
        if self._starting is None:
            # a context of its own: the first listener's request ended long
            # before the follower does, and its id stayed on every line the
            # follower logged (review62)
            loop = asyncio.get_running_loop()
            self._starting = loop.create_task(self._start(), context=contextvars.Context())
        starting = self._starting
        try:
            await asyncio.shield(starting)
        except Exception:
            # a start that failed (a busy store, ...) is tried again by the next
            # listener: kept, it refused every stream until a restart
            if self._starting is starting:
                self._starting = None
            raise

    async def _start(self) -> None:
        self.position = await self.db.read(events.last_sequence)
        if self._stopped:
            return
        self.db.add_commit_listener(self.committed)
        # a commit that landed after the read above but before the listener
        # was added woke nothing: the follower looks once now, not at its
        # first poll
        self._dirty.set()
        self._task = asyncio.create_task(self._follow(), name="waypost-live-hub")

    def stop(self) -> None:
        """Stop following the log and end every listener (the server is stopping:
        open streams must end, or the server would wait for them)."""
        self._stopped = True
        if self._task is None:
            return
        self.db.remove_commit_listener(self.committed)
        self._task.cancel()
        self._task = None
        for window in self._windows.values():
            for listener in window.listeners:
                listener.wake.set()

    async def close(self) -> None:
        task = self._task
        self.stop()
        if task is not None:
            await cancel_and_wait(task)

    @property
    def closed(self) -> bool:
        return self._stopped

    def committed(self) -> None:
        """The commit hook: O(1), never blocks the writer."""
        self._dirty.set()

    # --- listeners ---------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def listen(
        self, project_id: str, token_id: str, after: int | None, after_name: str = "after"
    ) -> AsyncIterator[Listener]:
        """A listener on `project_id` starting after sequence `after` (None: the
        live tail), counted against `token_id`'s cap while the block runs.
        A position past the log's end (named `after_name` in the refusal) is
        refused: no event of this log has it, so the client read another log
        (this database restored from an earlier backup) and resuming from it
        would skip every event up to it without a word."""
        await self.start()
        # the log's end now, not where the follower has read it to: an event
        # committed just before the stream opened is not a new one (section
        # 14), and was its first. Read before the caps are checked: from
        # there to the count below nothing may yield to another listen.
        last = max(self.position, await self.db.read_point(events.last_sequence))
        if after is None:
            after = last
        elif after > last:
            raise InvalidRequest(
                f"{after_name} {after} is past the end of the event log ({last}): the"
                " database was restored from an earlier backup, or the position is not"
                f" from this service; read the log again from 0 or from {last}",
                {"field": after_name, "last_sequence": last},
            )
        self._check_room("streams", self._count, self._per_token.get(token_id, 0))
        window = self._windows.get(project_id)
        if window is None:
            # from here on every event of the project above `position` reaches
            # the window (the follower reads everything above `position`)
            window = self._windows[project_id] = _Window(floor=self.position)
        listener = Listener(self, project_id, token_id, after)
        window.listeners.add(listener)
        self._count += 1
        self._per_token[token_id] = self._per_token.get(token_id, 0) + 1
        try:
            yield listener
        finally:
            window.listeners.discard(listener)
            self._count -= 1
            self._per_token[token_id] -= 1
            if not self._per_token[token_id]:
                del self._per_token[token_id]
            if not window.listeners:
                del self._windows[project_id]
                self._held -= window.held

    def open_socket(self, token_id: str) -> None:
        """Count one acknowledged GraphQL WebSocket of `token_id`; past
        `per_token` for the token or `total` in all, `TooManyStreams`.

        A socket holds a descriptor and some 80 KB however idle it is, and a
        subscription-less one was never closed: one token opened 20,000 and
        the process ran out of descriptors (both listeners stopped answering)."""
        self._check_room("GraphQL WebSockets", self.socket_count(), self._sockets.get(token_id, 0))
        self._sockets[token_id] = self._sockets.get(token_id, 0) + 1

    def close_socket(self, token_id: str) -> None:
        left = self._sockets.get(token_id, 0) - 1
        if left > 0:
            self._sockets[token_id] = left
        else:
            self._sockets.pop(token_id, None)

    def _check_room(self, what: str, open_now: int, of_token: int) -> None:
        """`TooManyStreams` when `open_now` of `what` are at the server's cap,
        or `of_token` of them at the token's."""
        if open_now >= self.limits.total:
            raise TooManyStreams(
                f"at most {self.limits.total} {what} may be open on this server",
                {"limit": self.limits.total},
            )
        if of_token >= self.limits.per_token:
            raise TooManyStreams(
                f"at most {self.limits.per_token} {what} may be open per token",
                {"limit": self.limits.per_token},
            )

    def socket_count(self) -> int:
        return sum(self._sockets.values())

    def open_count(self, token_id: str | None = None) -> int:
        return self._count if token_id is None else self._per_token.get(token_id, 0)

    def _in_window(self, listener: Listener) -> list[Event] | None:
        """The events after the listener's last from the window (the common
        case, no await), or None when it is behind the window."""
        if self.closed:
            raise StreamEnded("the server is stopping")
        window = self._windows[listener.project_id]
        if listener.last >= window.floor:
            listener.caught_up = True
            found = window.after(listener.last)
            if found and found[0]["sequence"] <= listener.replay_through:
                # a resume from inside the window: copies of the events it held
                # before this stream opened, so that no answer kept from their
                # first delivery (schema/shared_events.py) is handed out again:
                # a subscription's `subject` is the record as it is now, not as
                # it was when another subscriber was sent it (dashboardjourney)
                through = listener.replay_through
                found = [dict(e) if e["sequence"] <= through else e for e in found]
            return found
        if listener.caught_up:
            raise SlowConsumer(
                "this stream fell too far behind the live events and was dropped;"
                " resume after the last sequence received",
                {"after": listener.last},
            )
        return None

    async def _read_behind(self, listener: Listener) -> list[Event]:
        """A resume from before the window: read the log itself, a page at a time."""
        project_id, last = listener.project_id, listener.last
        found: list[Event] = await self.db.read(
            lambda c: events.list_events(c, project_id, last, PAGE)["items"]
        )
        return found

    # --- following the log ---------------------------------------------------------

    async def _follow(self) -> None:
        while True:
            await wait_at_most(self._dirty, self.limits.poll_seconds)
            delay = min(self.limits.coalesce_max, self.limits.coalesce_per_listener * self._count)
            if self._windows and delay > 0:
                # let the commits of the next few milliseconds join this read:
                # one read and one wake per listener for many commits
                await asyncio.sleep(delay)
            self._dirty.clear()
            if not self._windows:
                # nobody listens: only keep the position current (unless a
                # listener arrived during the read: its window starts at the old
                # position, so the events above it must still be read for it)
                position = await self._read_position()
                if not self._windows:
                    self.position = position
                    continue
            try:
                await self._read_new()
            except Unavailable as refused:  # busy, or a store an operator must mend
                _conditions.warning("reading new events: %s", refused.message)
                await asyncio.sleep(self.limits.poll_seconds)
            except Exception:  # a failing read: try again on the next wake
                log.exception("reading new events failed")
                await asyncio.sleep(self.limits.poll_seconds)

    def _fit(self) -> None:
        """Trim the heaviest window of two events or more by its older half
        until all fit in `window_chars`. Its newest event stays: a listener
        at the tail loses nothing; one that had caught up and is now behind
        the new floor is a slow consumer, as past a count trim (one that
        never caught up reads from the log)."""
        while self._held > self.limits.window_chars:
            trimmable = (w for w in self._windows.values() if len(w.items) > 1)
            # not simply the heaviest: one of a single event (a heavy one)
            # left the others over the bound untrimmed (review68)
            heaviest = max(trimmable, key=lambda w: w.held, default=None)
            if heaviest is None:
                return  # one event each: nothing left to trim
            self._held -= heaviest.trim(len(heaviest.items) // 2)

    async def _read_position(self) -> int:
        try:
            return max(self.position, await self.db.read(events.last_sequence))
        except Unavailable as refused:  # read every second: one line per 10 s
            _conditions.warning("reading the event log's end: %s", refused.message)
            return self.position
        except Exception:
            log.exception("reading the event log's end failed")
            return self.position

    async def _read_new(self) -> None:
        while True:
            rows: list[tuple[Event, int]] = await self.db.read(
                functools.partial(events.weighed_events_after, after=self.position, count=PAGE)
            )
            touched: set[str] = set()
            for event, weight in rows:
                window = self._windows.get(event["project_id"])
                if window is not None:
                    self._held += window.add(event, weight, self.limits.window)
                    touched.add(event["project_id"])
            self._fit()
            if rows:
                self.position = rows[-1][0]["sequence"]
            for project_id in touched:
                for listener in self._windows[project_id].listeners:
                    listener.wake.set()
            if len(rows) < PAGE:
                return
