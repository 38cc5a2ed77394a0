"""The writer: one thread, one connection, one queue, group commit.

Every unit of work is a plain function over the writer's `sqlite3.Connection`.
Callers put it on the queue and await a future. The writer thread takes every
unit waiting (up to `max_units`, and no more once the batch has run for
`max_seconds`), runs each inside its own `SAVEPOINT` within one
`BEGIN IMMEDIATE` transaction, and COMMITs once: one fsync for the batch
instead of one per unit. Only after that COMMIT has returned is any caller
answered, so nothing is acknowledged that is not on disk.

A unit that raises is rolled back to its savepoint alone and its caller gets
its own exception; the other units of the batch commit. Should SQLite roll
the whole transaction back itself (disk full, I/O error), the unit that hit it
gets the error and the others run again in a fresh transaction (once).

Under a lock held by another process `BEGIN IMMEDIATE` waits no longer than
the oldest waiting unit's own budget (its arrival plus the busy timeout); a
unit whose budget is spent answers `Unavailable` (503), and the next waits out
only what is left of its own. So every queued write is answered within the
busy timeout of its arrival, however many are queued.

Units are taken in turn by caller (`who`, the principal a request came
from): the writer moves what is queued into one line per caller and fills
each batch from those lines one unit of each in turn; what a batch did not
run comes first in the next (its callers' turn was not over), and a unit
waiting in a line is answered at its budget as one in the batch would be.
First come, first served, one agent's 72 heavy writes at once (64 KiB
knowledge bodies, ~20 ms of the writer each) held every batch, and another
principal's write waited behind all of them (1.2-1.7 s; past the budget,
503) (writerfair). One caller alone is served first come, first served.

Modelled on Datasette's `_execute_writes` thread (one write connection behind
a queue, replies handed back with `call_soon_threadsafe`); the batching and
savepoints are this project's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from waypost.cancelling import settle
from waypost.errors import Unavailable
from waypost.observe.conditions import ConditionLog
from waypost.storage.connection import STORAGE_RETRY_AFTER, is_busy, is_damage, storage_refusal
from waypost.storage.files import files_changed_refusal
from waypost.storage.outage import Outage
from waypost.storage.upgrades import upgraded_refusal

log = logging.getLogger("waypost.storage")

BUSY_MESSAGE = "the database is busy; retry shortly"
OVERLOADED_MESSAGE = (
    "the service is overloaded: this write waited its whole budget for its turn and was not"
    " run; retry shortly"
)
# The busy timeout is set again only when the batch's budget differs from it
# by more than this: a PRAGMA per batch would cost more than its inserts.
_TIMEOUT_SLACK_MS = 50
# SQLite's busy handler adds up the sleeps it asks for (1 ms, 2 ms, ... 100 ms),
# not the time that passes: each late wake-up on a loaded machine made a
# BEGIN's wait longer than its budget (2.8 s of 2 s beside two busy
# processes, flakehunt), and a process stopped meanwhile (SIGSTOP, a
# suspended VM) by the whole stop. BEGIN waits in slices of at most this,
# each sized from the clock, so its wait ends within one slice's lateness.
# The writer's connection keeps it as its timeout between BEGINs (nothing
# else it runs waits for a lock but the WAL restart, which sets its own):
# setting it again around every BEGIN would cost two PRAGMAs a batch.
_BUSY_SLICE = 0.25
# A WAL past this many bytes is restarted after the commit that finds it so
# (see Writer._restart_wal); SQLite's own checkpoint after each commit is
# passive, and under overlapping reads (two packet searches of 90 ms each,
# back to back) it never reached the end of the log: the file grew 11 MiB a
# second, to 1.3 GiB in two minutes, with no read held anywhere else.
WAL_RESTART_BYTES = 32 * 1024 * 1024
# How long the restart waits for the reads that began before it (a packet
# search ends within its 1 s time limit), and how long after one that could
# not finish (a read held elsewhere, an `sqlite3` shell inside BEGIN) the
# next is tried: the wait holds up writes, so it is short and rare.
WAL_RESTART_WAIT = 1.0
WAL_RESTART_BACKOFF = 30.0
# After a BEGIN refused busy, a unit whose budget ends within this much of
# now is answered (503) with the spent ones rather than after another BEGIN
# that could wait only a few milliseconds.
_GRACE = 0.02
# A write that waited this long past its busy budget for the writer itself
# (an overload, not another process's lock) is answered 503 unrun: within
# the contract's second of grace. A short budget (tests run with 5 ms) sheds
# after about half a second of queueing, then.
_LATE_GRACE = 0.5


# The writer's own statements of the batch transaction. While a unit runs, an
# authorizer refuses any statement that would begin, end or release that
# transaction (`_guard`): a unit that tried committed what ran before it, or
# made it run twice. SQLite consults an authorizer only when it prepares a
# statement, and the connection keeps prepared statements by their text, so
# these carry a comment that keeps them apart from any text a unit sends: a
# unit's `COMMIT` is prepared (and refused) on its own.
_BEGIN = "BEGIN IMMEDIATE /* writer */"
_SAVEPOINT = "SAVEPOINT unit /* writer */"
_RELEASE = "RELEASE unit /* writer */"
_ROLLBACK_TO = "ROLLBACK TO unit /* writer */"
_COMMIT = "COMMIT /* writer */"
_ROLLBACK = "ROLLBACK /* writer */"


class UnitEndedTransaction(RuntimeError):
    """A unit of work returned although the writer's transaction had ended
    under it (SQLite ended it on an error the unit swallowed)."""


def _retry_later() -> Unavailable:
    """The answer to a unit whose outcome the writer cannot vouch for."""
    return Unavailable("the write could not be completed; retry", retry_after=1)


@dataclass
class _Unit:
    fn: Callable[[sqlite3.Connection], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    deadline: float  # time.monotonic(): arrival + busy timeout
    transaction: bool = True
    retried: bool = False
    # a long unit (a sweep's batch, ~50 ms) commits in a transaction of its
    # own: joined to a batch already holding a write, it held that write's
    # answer for its whole run (a write during a sweep waited two of its
    # batches, ~120 ms; sweepbacklogaudit); nor is it shed as late (`_is_late`)
    solo: bool = False
    # whose write it is (a principal; None: the service's own): units are
    # taken into batches in turn by it (`Writer._take_waiting`)
    who: Hashable = None


_STOP = object()


def _answer(
    loop: asyncio.AbstractEventLoop,
    replies: list[tuple[_Unit, Any, BaseException | None]],
    then: Callable[[], None] | None = None,
) -> None:
    """Settle the callers' futures on their loop, in one hop; then `then()`
    (in the same callback, so it runs before any caller resumes)."""

    def run() -> None:
        for unit, result, error in replies:
            settle(unit.future, result, error)
        if then is not None:
            then()

    with contextlib.suppress(RuntimeError):  # the caller's loop closed: nobody waits
        loop.call_soon_threadsafe(run)


class Writer:
    """The single writer thread over one connection (see the module docstring)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        busy_timeout_ms: int,
        on_commit: tuple[asyncio.AbstractEventLoop, Callable[[], None]] | None = None,
        *,
        max_units: int = 64,
        max_seconds: float = 0.01,
        files_changed: Callable[[], str | None] | None = None,
        wal_bytes: Callable[[], int] | None = None,
        schema_moved: Callable[[sqlite3.Connection], str | None] | None = None,
    ) -> None:
        self._conn = conn
        # the -wal file's size (None: not looked after, e.g. in memory)
        self._wal_bytes = wal_bytes
        # after a restart that could not finish, the next is tried once the
        # back-off has passed or the file has doubled, whichever comes first
        self._next_wal_restart = 0.0
        self._next_wal_restart_bytes = 0
        # a restart that could not finish is owed: an idle writer tries it
        # again when the back-off ends (`_next_item`)
        self._wal_restart_owed = False
        # what changed among the database's files since they were opened
        # (storage/files.py): looked at before every batch
        self._files_changed = files_changed
        # whether another build migrated the file (storage/upgrades.py):
        # looked at inside every batch's transaction
        self._schema_moved = schema_moved
        self._in_unit = False  # a unit of a batch runs (read by `_guard`)
        conn.set_authorizer(self._guard)
        self._busy_timeout = busy_timeout_ms / 1000
        self._on_commit = on_commit
        self._max_units = max_units
        self._max_seconds = max_seconds
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # (the writer thread's) units taken off the queue and not yet into a
        # batch, one line per caller, the callers in turn (`_take_waiting`)
        self._lines: dict[Hashable, deque[_Unit]] = {}
        self._in_lines = 0  # how many (read by `queue_depth`)
        self._current_timeout_ms = busy_timeout_ms
        self._stopping = False
        self._stop_taken = False  # the writer thread took the stop marker
        # (units committed, seconds of the COMMIT), called on this thread (metrics)
        self.batch_observer: Callable[[int, float], None] | None = None
        # held while queueing, so that nothing is queued behind the stop marker
        self._lock = threading.Lock()
        # writes whose callers wait for their answer: queued, or taken into the
        # batch the writer runs or waits to begin (under another process's
        # lock a whole batch waits there, and the queue looks empty)
        self._unanswered = 0
        # storage refusals, told of at the next commit (after the WARNINGs held)
        self._outage = Outage(log, lambda: _conditions.flush())
        self._thread = threading.Thread(target=self._loop, name="waypost-writer", daemon=True)
        self._thread.start()

    # -- the event loop's side ---------------------------------------------------

    async def submit(
        self,
        fn: Callable[[sqlite3.Connection], Any],
        transaction: bool,
        solo: bool = False,
        who: Hashable = None,
    ) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        deadline = time.monotonic() + self._busy_timeout
        with self._lock:
            if self._stopping:
                raise Unavailable("the database is not open")
            self._queue.put(_Unit(fn, loop, future, deadline, transaction, solo=solo, who=who))
            self._unanswered += 1
        try:
            return await future
        finally:
            with self._lock:
                self._unanswered -= 1

    def queue_depth(self) -> int:
        """Units queued and not yet taken into a batch (approximate, for metrics)."""
        return self._queue.qsize() + self._in_lines

    def unanswered(self) -> int:
        """Writes whose callers wait for their answer (for metrics)."""
        return self._unanswered

    def stop(self) -> None:
        """Finish what is queued, then close the connection (blocks: call off the loop)."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            self._queue.put(_STOP)
        self._thread.join()

    # -- the writer thread ----------------------------------------------------------

    def _guard(self, action: int, arg1: str | None, arg2: str | None, *_: str | None) -> int:
        """The authorizer: while a unit runs, no BEGIN, COMMIT, ROLLBACK, nor
        a savepoint operation on the writer's `unit` (a unit's own savepoints
        of other names are fine)."""
        if self._in_unit and (
            action == sqlite3.SQLITE_TRANSACTION
            or (action == sqlite3.SQLITE_SAVEPOINT and arg2 == "unit")
        ):
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def _loop(self) -> None:
        pending: deque[_Unit] = deque()
        while not (self._stop_taken and not pending and not self._lines):
            if not pending and not self._lines:
                item = self._next_item()
                if item is None:
                    continue  # idle: an owed restart was tried
                if item is _STOP:
                    break
                pending.append(item)
            self._take_waiting(pending)
            try:
                self._step(pending)
            except BaseException:  # never let the thread die with callers waiting
                log.exception("writer step failed")
                # and never run the same units again: a step that fails the
                # same way each time spun here (99,266 lines in 2 s) while its
                # callers waited for ever; they retry with their keys
                self._end_transaction()
                self._answer_all(pending)
            self._put_back(pending)
        self._outage.close()
        self._conn.close()

    def _next_item(self) -> Any:
        """The next unit (or the stop marker), waiting for it; None when the
        writer was idle until an owed WAL restart's back-off ended and tried
        it. The restart came only after a commit: with the read that held it
        gone, a 233 MiB file stayed so on an idle service until some client
        wrote, the metric's alert firing all along (walaudit)."""
        if not self._wal_restart_owed:
            return self._queue.get()
        try:
            return self._queue.get(timeout=max(0.0, self._next_wal_restart - time.monotonic()))
        except queue.Empty:
            if self._files_changed is not None and self._files_changed() is not None:
                # the files changed under the service (docs/operations.md): a
                # checkpoint now would drop from the WAL what another process
                # wrote through its own index (review46), as a close's would
                self._wal_restart_owed = False
                return None
            self._restart_wal(idle=True)
            return None

    def _answer_all(self, pending: deque[_Unit]) -> None:
        """Answer every waiting unit 503 (the writer cannot vouch for them)."""
        while pending:
            unit = pending.popleft()
            _answer(unit.loop, [(unit, None, _retry_later())])

    def _take_waiting(self, pending: deque[_Unit]) -> None:
        """Move every unit already queued into its caller's line, then fill
        `pending` (bounded) from the lines one unit of each caller in turn.

        The stop marker, when it comes out, is noted on the writer itself:
        a batch takes more units here too, and a marker it took and dropped
        left the thread waiting for the next unit for ever, and `stop()`
        (so the server's shutdown) waiting for the thread."""
        lines = self._lines
        while not self._stop_taken:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                self._stop_taken = True
                break
            line = lines.get(item.who)
            if line is None:
                line = lines[item.who] = deque()
            line.append(item)
            self._in_lines += 1
        while len(pending) < self._max_units and lines:
            if len(lines) == 1:  # one caller alone: in order, at once
                who, line = next(iter(lines.items()))
                for _ in range(min(self._max_units - len(pending), len(line))):
                    pending.append(line.popleft())
                    self._in_lines -= 1
                if not line:
                    del lines[who]
                return
            who = next(iter(lines))
            line = lines.pop(who)
            pending.append(line.popleft())
            self._in_lines -= 1
            if line:
                lines[who] = line  # its next unit after every other caller's

    def _with_line_heads(self, pending: deque[_Unit]) -> list[_Unit]:
        """`pending` and the first unit of each line (its oldest: a line is
        in the order its units came, and what is put back goes before them)."""
        return [*pending, *(line[0] for line in self._lines.values())]

    def _spent_in_lines(self, now: float) -> list[_Unit]:
        """Take out of the lines every unit whose budget ends by `now`."""
        spent: list[_Unit] = []
        for who, line in list(self._lines.items()):
            while line and line[0].deadline <= now:
                spent.append(line.popleft())
                self._in_lines -= 1
            if not line:
                del self._lines[who]
        return spent

    def _put_back(self, pending: deque[_Unit]) -> None:
        """What a batch left of `pending` goes back to the head of its
        callers' lines, so that the next batch is filled in turn again: kept
        in `pending`, one caller's backlog taken while no other caller wrote
        was run ahead of every write that came after it. Their callers' lines
        come first, in the order the batch took them (their turn was not
        over): put back behind every other caller's, a caller with two writes
        waiting never reached the head of a batch that ends early (10 ms of
        heavy writes), and callers writing one at a time kept it from the
        writer for as long as they wrote (fairreview)."""
        if not pending:
            return
        back: dict[Hashable, deque[_Unit]] = {}
        for unit in pending:
            back.setdefault(unit.who, deque()).append(unit)
        self._in_lines += len(pending)
        pending.clear()
        for who, units in back.items():
            rest = self._lines.pop(who, None)
            if rest:
                units.extend(rest)
        back.update(self._lines)
        self._lines = back

    def _step(self, pending: deque[_Unit]) -> None:
        # units whose callers went away before their turn are not run
        while pending and pending[0].future.cancelled():
            pending.popleft()
        self._shed_late(pending)
        if not pending:
            return
        if not pending[0].transaction:
            self._run_bare(pending.popleft())
            return
        if self._files_changed is not None and self._files_changed() is not None:
            self._refuse_all(pending, files_changed_refusal)
            return
        self._end_transaction()  # one a failed ROLLBACK left open
        if self._begin(pending) and not self._migrated_elsewhere(pending):
            self._batch(pending)

    def _run_bare(self, unit: _Unit) -> None:
        """A unit outside any transaction (connection settings, e.g. a trace)."""
        try:
            _answer(unit.loop, [(unit, unit.fn(self._conn), None)])
        except BaseException as exc:
            _answer(unit.loop, [(unit, None, exc)])

    def _set_busy_timeout(self, seconds: float) -> None:
        ms = max(0, int(seconds * 1000))
        # within a few milliseconds is close enough (the answer has a second of
        # grace): a PRAGMA per batch would cost more than the batch's inserts
        if abs(ms - self._current_timeout_ms) > _TIMEOUT_SLACK_MS:
            self._conn.execute(f"PRAGMA busy_timeout = {ms}")
            self._current_timeout_ms = ms

    def _begin(self, pending: deque[_Unit]) -> bool:
        """BEGIN IMMEDIATE within the oldest unit's budget (in `_BUSY_SLICE`
        slices); on a lock held elsewhere past it, answer 503 to every unit
        whose budget is spent. Taken in turn by caller, the oldest is not
        always the first, nor in `pending` at all (past `max_units` callers,
        some wait in their lines only): the oldest of both, so none waits
        past its budget."""
        oldest = min(u.deadline for u in self._with_line_heads(pending))
        while True:
            left = oldest - time.monotonic()
            self._set_busy_timeout(min(left, _BUSY_SLICE))
            try:
                self._conn.execute(_BEGIN)
                return True
            except sqlite3.Error as exc:  # OperationalError, or DatabaseError (a damaged file)
                if is_busy(exc) and left > _BUSY_SLICE:
                    continue  # the slice ended, not the budget
                return self._begin_refused(pending, exc)

    def _begin_refused(self, pending: deque[_Unit], exc: sqlite3.Error) -> bool:
        """A BEGIN refused: busy past the oldest budget (answer 503 to every
        unit whose budget is spent), or failed (every unit gets the error)."""
        if not is_busy(exc):
            self._fail_all(pending, exc)
            return False
        now = time.monotonic() + _GRACE
        by_loop: dict[asyncio.AbstractEventLoop, list[Any]] = {}
        kept = [u for u in pending if u.deadline > now]
        for unit in pending:
            if unit.deadline <= now:
                error = Unavailable(BUSY_MESSAGE, retry_after=1)
                by_loop.setdefault(unit.loop, []).append((unit, None, error))
        pending.clear()
        pending.extend(kept)
        for unit in self._spent_in_lines(now):
            error = Unavailable(BUSY_MESSAGE, retry_after=1)
            by_loop.setdefault(unit.loop, []).append((unit, None, error))
        if by_loop:
            refused = sum(map(len, by_loop.values()))
            _conditions.warning(
                "another connection held the database's write lock past the busy"
                " timeout: %d writes answered 503 (%s)",
                refused,
                exc,
                count=refused,
            )
        for loop, replies in by_loop.items():
            _answer(loop, replies)
        return False

    def _migrated_elsewhere(self, pending: deque[_Unit]) -> bool:
        """Inside the batch's transaction: when another build has migrated the
        file (storage/upgrades.py), end it and refuse every unit, running none."""
        if self._schema_moved is None:
            return False
        try:
            moved = self._schema_moved(self._conn)
        except sqlite3.Error as exc:  # the file damaged, its storage failing
            self._end_transaction()
            self._fail_all(pending, exc)
            return True
        if moved is None:
            return False
        self._end_transaction()
        self._refuse_all(pending, upgraded_refusal)
        return True

    def _refuse_all(self, pending: deque[_Unit], refusal: Callable[[], Unavailable]) -> None:
        """Answer every waiting unit 503 without running it: the files this
        connection writes are no longer the ones at the database's path, or
        another build migrated them."""
        by_loop: dict[asyncio.AbstractEventLoop, list[Any]] = {}
        while pending and pending[0].transaction:
            unit = pending.popleft()
            by_loop.setdefault(unit.loop, []).append((unit, None, refusal()))
        for loop, replies in by_loop.items():
            _answer(loop, replies)

    def _fail_all(self, pending: deque[_Unit], exc: BaseException) -> None:
        _log_failure("the writer could not start a transaction: %s", exc)
        while pending:
            unit = pending.popleft()
            self._outage.refused(exc)
            _answer(unit.loop, [(unit, None, _for_caller(exc))])

    def _batch(self, pending: deque[_Unit]) -> None:
        conn = self._conn
        done: list[tuple[_Unit, Any]] = []
        failed: list[tuple[_Unit, BaseException]] = []
        started = time.monotonic()
        alone = False  # the batch holds a solo unit
        # a unit of the batch changed a row: an empty transaction (a sweep
        # pass with nothing to do) commits on a full or read-only disk too,
        # and told "writes are committed again" of a disk still full
        wrote = False
        while pending and pending[0].transaction:
            if len(done) + len(failed) >= self._max_units:
                break
            if done and time.monotonic() - started >= self._max_seconds:
                break
            if (done or failed) and (pending[0].solo or alone):
                break  # a long unit commits apart from the others (`_Unit.solo`)
            unit = pending.popleft()
            if unit.future.cancelled():
                continue
            if self._is_late(unit, time.monotonic()):
                # one that went past its budget while a unit ahead of it ran
                # (a slow one: the batch's time bound counts only after a
                # success); answered now, so that no way out loses it
                self._answer_late([unit])
                continue
            alone = unit.solo
            changes = conn.total_changes
            try:
                conn.execute(_SAVEPOINT)
                self._in_unit = True
                try:
                    result = unit.fn(conn)
                finally:
                    self._in_unit = False
                if not conn.in_transaction:
                    raise UnitEndedTransaction(
                        "a unit of work ended the writer's transaction itself"
                    )
                conn.execute(_RELEASE)
            except UnitEndedTransaction as exc:
                # A fault of the unit's code (it swallowed the error on which
                # SQLite ended the transaction; `_guard` refuses its own
                # COMMIT or ROLLBACK): the writer cannot vouch for what ran
                # before it, so none of it runs a second time. Its callers get
                # a 503 and retry with their idempotency keys.
                log.error("%s (%r)", exc, unit.fn)
                failed.append((unit, exc))
                self._reply(failed + [(u, _retry_later()) for u, _ in done], [])
                return
            except BaseException as exc:
                if not self._undo_unit():
                    # SQLite rolled the whole transaction back: what ran before
                    # it is gone too; they run again in a fresh transaction
                    _log_failure("transaction lost in a unit of work: %s", exc)
                    failed.append((unit, exc))
                    self._requeue(pending, done)
                    self._reply(failed, [])
                    return
                failed.append((unit, exc))
            else:
                done.append((unit, result))
                wrote = wrote or conn.total_changes != changes
            if not pending:
                self._take_waiting(pending)
        self._commit(done, failed, wrote)

    def _shed_late(self, pending: deque[_Unit]) -> None:
        """Answer 503, unrun, each write of `pending` that waited its whole
        busy budget and _LATE_GRACE more for the writer itself (more writes
        than it commits: over a hundred operations a GraphQL socket,
        thousands queued), as under another process's lock; it was answered
        201 after any wait at all. Answered as they leave `pending`, here
        before a batch begins (in one hop, not one a unit) and in `_batch`
        as each is taken, so that no way out of a batch can leave one
        unanswered. A unit run once already (requeued after a lost
        transaction) runs again."""
        now = time.monotonic()
        late = [u for u in pending if self._is_late(u, now)]
        if late:
            shed = {id(u) for u in late}
            kept = [u for u in pending if id(u) not in shed]
            pending.clear()
            pending.extend(kept)
        # and those in their callers' lines: taken in turn, a caller's write
        # behind others of its own reaches a batch one round at a time, and
        # was answered only then (1.5-2.6 s past a 0.3 s budget; fairreview)
        late += self._late_in_lines(now)
        if late:
            self._answer_late(late)

    def _late_in_lines(self, now: float) -> list[_Unit]:
        """Take out of the lines every unit `_is_late` (a line is in the
        order its units came, so only its head runs past its budget first)."""
        late: list[_Unit] = []
        for who, line in list(self._lines.items()):
            kept: list[_Unit] = []
            while line and line[0].deadline + _LATE_GRACE <= now:
                unit = line.popleft()
                if self._is_late(unit, now):
                    late.append(unit)
                    self._in_lines -= 1
                else:
                    kept.append(unit)  # retried, or the sweep's: they wait their turn
            line.extendleft(reversed(kept))
            if not line:
                del self._lines[who]
        return late

    @staticmethod
    def _is_late(unit: _Unit, now: float) -> bool:
        # The sweep's units (the only solo ones) wait their turn however long:
        # no client waits on them, and shed they let one client keeping the
        # writer busy stop every receipt purge and decision timeout for as
        # long as it liked (abusejourney)
        return (
            unit.transaction
            and not unit.retried
            and not unit.solo
            and unit.deadline + _LATE_GRACE <= now
        )

    def _answer_late(self, late: list[_Unit]) -> None:
        # counted by the write: a line per shedding pass (of up to hundreds)
        # counted the passes, a fifth of the refusals (overloadjourney)
        _conditions.warning(
            "writes waited past the busy timeout for the writer itself (more than it"
            " commits): %d answered 503 unrun",
            len(late),
            count=len(late),
        )
        self._reply([(u, Unavailable(OVERLOADED_MESSAGE, retry_after=1)) for u in late], [])

    def _undo_unit(self) -> bool:
        """Roll back to the unit's savepoint; False if the transaction is gone."""
        conn = self._conn
        if not conn.in_transaction:
            return False
        try:
            conn.execute(_ROLLBACK_TO)
            conn.execute(_RELEASE)
            return True
        except sqlite3.Error:
            log.exception("rollback to the unit's savepoint failed")
            self._end_transaction()
            return False

    def _end_transaction(self) -> None:
        """ROLLBACK whatever is open; never raises. A ROLLBACK that failed
        (failing storage) escaped the batch, leaving its units unanswered
        and the transaction open, so that every later BEGIN failed ("cannot
        start a transaction within a transaction"): the next step tries
        again (`_step`)."""
        if self._conn.in_transaction:
            try:
                self._conn.execute(_ROLLBACK)
            except sqlite3.Error:
                log.exception("ROLLBACK failed; the next batch tries again")

    def _requeue(self, pending: deque[_Unit], done: list[tuple[_Unit, Any]]) -> None:
        for unit, _ in reversed(done):
            if unit.retried:
                _answer(unit.loop, [(unit, None, _retry_later())])
            else:
                unit.retried = True
                pending.appendleft(unit)

    def _commit(
        self,
        done: list[tuple[_Unit, Any]],
        failed: list[tuple[_Unit, BaseException]],
        wrote: bool,
    ) -> None:
        conn = self._conn
        started = time.perf_counter()
        try:
            conn.execute(_COMMIT)
        except BaseException as exc:
            _log_failure("COMMIT failed: %s", exc)
            if conn.in_transaction:
                try:
                    conn.execute(_ROLLBACK)
                except sqlite3.Error:
                    log.exception("ROLLBACK after a failed COMMIT failed")
            self._reply(failed + [(unit, _commit_failure(exc)) for unit, _ in done], [])
            return
        observe = self.batch_observer
        if observe is not None:
            try:
                # every unit the transaction ran, refused ones too: counting
                # only those that wrote recorded a batch of refusals as 0 (obsaudit)
                observe(len(done) + len(failed), time.perf_counter() - started)
            except Exception:
                log.exception("batch observer failed")
        if done and wrote:
            self._outage.committed()
        self._reply(failed, done, committed=bool(done))
        self._restart_wal()  # after the answers: nobody waits for it but later writes

    def _restart_wal(self, idle: bool = False) -> None:
        """Restart a WAL grown past WAL_RESTART_BYTES: a RESTART checkpoint
        copies every frame back and waits (up to WAL_RESTART_WAIT) for the
        reads that began before it, while no write comes in (this thread is
        the writer), so the log starts again from its beginning and the next
        commit cuts the file to `journal_size_limit`. `idle`: no commit is
        coming, so a TRUNCATE checkpoint cuts the file itself."""
        if self._wal_bytes is None:
            return
        size = self._wal_bytes()
        if size <= WAL_RESTART_BYTES:
            self._wal_restart_owed = False
            return
        if time.monotonic() < self._next_wal_restart and size < self._next_wal_restart_bytes:
            return
        self._set_busy_timeout(min(self._busy_timeout, WAL_RESTART_WAIT))
        mode = "TRUNCATE" if idle else "RESTART"
        try:
            busy = self._conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()[0]
        except sqlite3.Error as exc:
            busy, reason = 1, str(exc)
        else:
            reason = "a read transaction held it"
        finally:
            self._set_busy_timeout(_BUSY_SLICE)
        self._wal_restart_owed = bool(busy)
        if busy:
            # a read that outlived the wait (a cold cache after a start made
            # one search take longer) must not leave the file to grow for the
            # whole back-off: 357 MiB in 30 s under the load that found this
            self._next_wal_restart = time.monotonic() + WAL_RESTART_BACKOFF
            self._next_wal_restart_bytes = 2 * size
            _conditions.warning(
                "the WAL file holds %d MiB and could not be restarted (%s); tried again"
                " in %d s or at twice the size",
                size // (1024 * 1024),
                reason,
                WAL_RESTART_BACKOFF,
            )

    def _reply(
        self,
        failed: list[tuple[_Unit, BaseException]],
        done: list[tuple[_Unit, Any]],
        committed: bool = False,
    ) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[Any]] = {}
        for unit, exc in failed:
            self._outage.refused(exc)
            by_loop.setdefault(unit.loop, []).append((unit, None, _for_caller(exc)))
        for unit, result in done:
            by_loop.setdefault(unit.loop, []).append((unit, result, None))
        listener_loop, listener = self._on_commit or (None, None)
        if committed and listener_loop is not None:
            by_loop.setdefault(listener_loop, [])
        for loop, replies in by_loop.items():
            _answer(loop, replies, listener if committed and loop is listener_loop else None)


# What the units of a batch whose COMMIT met an I/O error are told. SQLite
# writes the commit frame to the WAL before the fsync; when the fsync fails,
# this process rolls back, but a crash before its next commit leaves the
# frame for recovery to find, and the write (its receipt and event too) is
# there after the restart: told "not committed", it was. With the same key
# the retry runs it once either way (here, the next commit overwrites the
# frame; after a restart, the receipt answers).
OUTCOME_UNKNOWN = (
    "the database's storage failed while committing: the write may have been"
    " committed; retry it with the same Idempotency-Key, which runs it once either way"
)


def _commit_failure(exc: BaseException) -> BaseException:
    """What a unit is answered when its batch's COMMIT raised `exc`."""
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(exc, sqlite3.Error) or code is None or code & 0xFF != sqlite3.SQLITE_IOERR:
        return exc  # refused before the commit frame was written: nothing committed
    _conditions.warning(
        "a write was answered 503, its COMMIT's outcome unknown: %s", exc, key="commit ioerr"
    )
    error = Unavailable(OUTCOME_UNKNOWN, retry_after=STORAGE_RETRY_AFTER)
    error.__cause__ = exc
    return error


def _for_caller(exc: BaseException) -> BaseException:
    """What the caller sees: SQLite's busy as 503, a full or read-only disk as
    503 too (nothing was committed; log says why), a non-Exception wrapped."""
    if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
        error = Unavailable(BUSY_MESSAGE, retry_after=1)
        error.__cause__ = exc
        return error
    refused = storage_refusal(exc)
    if refused is not None:
        # the cause (a failed COMMIT also logged its own)
        _conditions.warning(
            "a write was refused with 503, nothing committed: %s", exc, key=f"refused {refused}"
        )
        error = Unavailable(
            f"{refused}: the write was not committed; retry later",
            retry_after=STORAGE_RETRY_AFTER,
        )
        error.__cause__ = exc
        return error
    if not isinstance(exc, Exception):
        wrapped = RuntimeError(f"unit of work raised {type(exc).__name__}")
        wrapped.__cause__ = exc
        return wrapped
    return exc


_conditions = ConditionLog(log)


def _log_failure(message: str, exc: BaseException) -> None:
    """A full disk, read-only or failing storage, or a lock held elsewhere is a
    condition each refused caller hears of (503), not a fault of the service:
    a WARNING, at most one every 10 s for each message and condition. Anything
    else is a fault: an ERROR, every time."""
    expected = isinstance(exc, sqlite3.Error) and (
        storage_refusal(exc) is not None or is_busy(exc) or is_damage(exc)
    )
    if expected:
        code = getattr(exc, "sqlite_errorcode", None)
        # in words first: `OperationalError('database or disk is full')` made
        # an operator read a Python repr to learn the disk was full (opsjourney)
        refused = storage_refusal(exc)
        said = f"{refused} (SQLite: {exc})" if refused else f"{exc} (SQLite)"
        _conditions.warning(message, said, key=f"{message} {code}")
    else:
        log.error(message, repr(exc))
