"""The line that says writes are committed again after the storage refused them.

A full disk (or storage gone read-only or failing) refuses every write with a
WARNING, held to one every 10 s (observe/conditions.py). Nothing said when it
ended: an operator who freed space read the last warning and could not tell
from the log whether the service had recovered or had stopped writing
(diskfulljourney). The writer notes each storage refusal here, and its next
commit logs that writes are committed again, how many were refused and for
how long. At most one such line every 10 s, as for the warnings: a disk with
room for small writes but not large ones has commits and refusals take
turns, and a line per commit would flood the log on the disk that is full.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from waypost.observe.conditions import CONDITION_LOG_SECONDS
from waypost.storage.connection import storage_refusal


class Outage:
    """Storage refusals not yet told of as ended (noted by the writer thread;
    a line held back in its window is logged by a timer's)."""

    def __init__(self, log: logging.Logger, flush: Callable[[], None] = lambda: None) -> None:
        self._log = log
        # logs the refusals' WARNINGs held back in their window: told after
        # this line (by the window's timer), they said the disk was full below
        # the line that says it is no longer
        self._flush = flush
        self._lock = threading.Lock()
        self._cause: str | None = None  # the last refusal's words
        self._refused = 0
        self._began = 0.0  # time.monotonic() of the first refusal
        self._told = -CONDITION_LOG_SECONDS  # time.monotonic() of the last line
        # a commit came after the last refusal and is not told of yet
        self._recovered = False
        self._timer: threading.Timer | None = None

    def refused(self, exc: BaseException) -> None:
        """Note a write refused by `exc`, when the storage refused it (a
        COMMIT whose outcome is unknown carries the storage's error as its
        cause)."""
        cause = storage_refusal(exc) or storage_refusal(exc.__cause__ or exc)
        if cause is None:
            return
        with self._lock:
            if self._cause is None:
                self._began = time.monotonic()
            self._cause = cause
            self._refused += 1
            self._recovered = False

    def committed(self) -> None:
        """A batch committed: log the end of the refusals, if any. Within 10 s
        of the last such line it is told when that window ends, unless the
        storage refused a write again meanwhile (then the next commit tells
        it): kept for a next commit alone, a quiet service never told it."""
        with self._lock:
            if self._cause is None:
                return
            self._recovered = True
            wait = self._told + CONDITION_LOG_SECONDS - time.monotonic()
            if wait > 0:
                if self._timer is None:
                    self._timer = threading.Timer(wait, self._window_ended)
                    self._timer.daemon = True
                    self._timer.start()
                return
        self._tell()

    def close(self) -> None:
        """The writer stops: tell now what a pending window would have (its
        timer is a daemon, which a stopping process does not wait for)."""
        with self._lock:
            timer, self._timer = self._timer, None
            recovered = self._recovered
        if timer is not None:
            timer.cancel()
            if recovered:
                self._tell()

    def _window_ended(self) -> None:
        with self._lock:
            self._timer = None
            if self._cause is None or not self._recovered:
                return
        self._tell()

    def _tell(self) -> None:
        with self._lock:
            if self._cause is None:
                return
            now = time.monotonic()
            self._told = now
            refused, took, cause = self._refused, now - self._began, self._cause
            self._cause, self._refused, self._recovered = None, 0, False
        self._flush()
        self._log.info(
            "writes are committed again: %d refused in %.1f s before this (the last: %s)",
            refused,
            took,
            cause,
        )
