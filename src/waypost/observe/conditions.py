"""WARNINGs for a condition that refuses many requests in a row.

A full disk logged a line per refused write and another per failed COMMIT:
11,500 lines in 35 s, on the disk that was full. A condition's line is logged
at once the first time, then at most once per `seconds`, saying how many it
stands for. Lines are told apart by a key (by default their format string),
so one condition never hides another.

The lines held back in a window are not left for a next occurrence that may
never come (the condition cleared): when the window ends, a timer logs the
last of them with their number, so the log always says how many there were.
The timer is a daemon, which a process stopping within the window never
waits for: `flush_all` logs what every ConditionLog holds, as the runtime
closes.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
import weakref
from dataclasses import dataclass

CONDITION_LOG_SECONDS = 10.0


@dataclass
class _Held:
    """Lines of one kind held back in the current window: how many refusals
    (or whatever the lines count) they stand for, and the last, with the
    context it was logged in (a timer's thread has none: the line it writes
    names what the held one would have, its listener) and its own count."""

    count: int
    last: int
    message: str
    args: tuple[object, ...]
    context: contextvars.Context


class ConditionLog:
    def __init__(self, log: logging.Logger, seconds: float = CONDITION_LOG_SECONDS) -> None:
        self.log = log
        self.seconds = seconds
        self._lock = threading.Lock()  # the writer thread and the event loop both log
        self._last: dict[str, float] = {}
        self._held: dict[str, _Held] = {}
        self._timers: dict[str, threading.Timer] = {}
        _EVERY.add(self)

    def warning(self, message: str, *args: object, key: str | None = None, count: int = 1) -> None:
        """Log `message` (a line that stands for `count` of what it tells of:
        the writes one refused batch held), or hold it back in its kind's
        window, to be told of with how many more like it."""
        kind = key if key is not None else message
        now = time.monotonic()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self.seconds:
                held = self._held.get(kind)
                total = held.count + count if held else count
                self._held[kind] = _Held(total, count, message, args, contextvars.copy_context())
                if kind not in self._timers:
                    self._schedule(kind, last + self.seconds - now)
                return
            self._last[kind] = now
            held = self._held.pop(kind, None)
        self._emit(message, args, held.count if held else 0)

    def _schedule(self, kind: str, delay: float) -> None:
        # a daemon: a timer pending at exit must not hold the process up
        timer = threading.Timer(max(0.0, delay), self._window_ended, (kind,))
        timer.daemon = True
        self._timers[kind] = timer
        timer.start()

    def _window_ended(self, kind: str) -> None:
        """Log the lines of `kind` held back in the window that has ended, unless
        a later line already told of them (it logs their number too)."""
        now = time.monotonic()
        with self._lock:
            self._timers.pop(kind, None)  # (gone if `flush` came first)
            held = self._held.get(kind)
            if held is None:
                return
            remaining = self._last[kind] + self.seconds - now
            if remaining > 0:  # a line logged meanwhile began a new window
                self._schedule(kind, remaining)
                return
            del self._held[kind]
            self._last[kind] = now
        # the last line held stands for itself; the others are "more like it"
        held.context.run(self._emit, held.message, held.args, held.count - held.last)

    def flush(self) -> None:
        """Log the lines held back in every kind's window now, each kind's
        last with their number, and cancel the timers that would have."""
        now = time.monotonic()
        with self._lock:
            timers, self._timers = list(self._timers.values()), {}
            held, self._held = self._held, {}
            for kind in held:
                self._last[kind] = now
        for timer in timers:
            timer.cancel()
        for line in held.values():
            line.context.run(self._emit, line.message, line.args, line.count - line.last)

    def _emit(self, message: str, args: tuple[object, ...], held: int) -> None:
        since = f" (and {held} more like it since the last such line)" if held else ""
        self.log.warning(message + "%s", *args, since)


# every ConditionLog of the process (module-level ones live as long as it)
_EVERY: weakref.WeakSet[ConditionLog] = weakref.WeakSet()


def flush_all() -> None:
    """`flush` every ConditionLog: the process is stopping, and the lines
    held back in a window would be lost with their timers."""
    for conditions in list(_EVERY):
        conditions.flush()
