"""WARNINGs for a condition that refuses many requests in a row.

A full disk logged a line per refused write and another per failed COMMIT:
11,500 lines in 35 s, on the disk that was full. A condition's line is logged
at once the first time, then at most once per `seconds`, saying how many it
stands for. Lines are told apart by a key (by default their format string),
so one condition never hides another.
"""

from __future__ import annotations

import logging
import threading
import time

CONDITION_LOG_SECONDS = 10.0


class ConditionLog:
    def __init__(self, log: logging.Logger, seconds: float = CONDITION_LOG_SECONDS) -> None:
        self.log = log
        self.seconds = seconds
        self._lock = threading.Lock()  # the writer thread and the event loop both log
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def warning(self, message: str, *args: object, key: str | None = None) -> None:
        kind = key if key is not None else message
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(kind, -self.seconds) < self.seconds:
                self._held[kind] = self._held.get(kind, 0) + 1
                return
            self._last[kind] = now
            held = self._held.pop(kind, 0)
        since = f" (and {held} more like it since the last such line)" if held else ""
        self.log.warning(message + "%s", *args, since)
