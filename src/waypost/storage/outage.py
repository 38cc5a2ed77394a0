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
import time

from waypost.observe.conditions import CONDITION_LOG_SECONDS
from waypost.storage.connection import storage_refusal


class Outage:
    """Storage refusals not yet told of as ended (the writer thread's alone)."""

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._cause: str | None = None  # the last refusal's words
        self._refused = 0
        self._began = 0.0  # time.monotonic() of the first refusal
        self._told = -CONDITION_LOG_SECONDS  # time.monotonic() of the last line

    def refused(self, exc: BaseException) -> None:
        """Note a write refused by `exc`, when the storage refused it (a
        COMMIT whose outcome is unknown carries the storage's error as its
        cause)."""
        cause = storage_refusal(exc) or storage_refusal(exc.__cause__ or exc)
        if cause is None:
            return
        if self._cause is None:
            self._began = time.monotonic()
        self._cause = cause
        self._refused += 1

    def committed(self) -> None:
        """A batch committed: log the end of the refusals, if any (within
        10 s of the last such line, kept for the next commit after)."""
        now = time.monotonic()
        if self._cause is None or now - self._told < CONDITION_LOG_SECONDS:
            return
        self._told = now
        self._log.info(
            "writes are committed again: %d refused in %.1f s before this (the last: %s)",
            self._refused,
            now - self._began,
            self._cause,
        )
        self._cause = None
        self._refused = 0
