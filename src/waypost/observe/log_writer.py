"""Log lines reach standard error through a thread of their own.

A write to a pipe whose reader stopped reading (a stalled log shipper, a
supervisor that never drains it) blocks once the pipe's 64 KiB are full.
Written on the event loop, as every access line was, that write held the
loop: after some 360 requests every request, `/healthz` and the SIGTERM
handler waited on it, and only a SIGKILL ended the process
(sessionsjourney). So a record is formatted where it is logged (the filters
read the request's context there) and queued; one daemon thread writes the
queue out. While standard error takes nothing, lines past the queue's
capacity are dropped and counted, and the next line that fits says how
many were lost.

The standard library's `QueueHandler` copies each record to queue it, and
its `QueueListener` joins its thread without a time limit when it stops (a
stop behind such a pipe would hang there instead): the queue here holds the
formatted lines, and `settle` waits a bounded time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import select
import threading
import time
from collections.abc import Callable
from typing import TextIO

# lines waiting for standard error: some 2 MB of formatted text at most
CAPACITY = 10_000
_STOP = None  # what tells the thread to end
# seconds without a line written after which a wait for the queue gives up
STALLED = 1.0


class QueuedLines(logging.Handler):
    """Formats each record where it is logged and queues the line for the
    writer thread, dropping it (counted) when the queue is full."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        super().__init__()
        self.queue: queue.Queue[str | None] = queue.Queue(capacity)
        self.dropped = 0
        # once the process is leaving, its writer's own write: no thread runs then
        self.direct: Callable[[str], None] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        # called under the handler's lock (Handler.handle), one at a time
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        if self.direct is not None:
            with contextlib.suppress(OSError, ValueError):
                self.direct(f"{line}\n")
            return
        if self.dropped:
            try:
                self.queue.put_nowait(self.format(_dropped_note(self.dropped)))
            except queue.Full:
                self.dropped += 1
                return
            self.dropped = 0
        try:
            self.queue.put_nowait(line)
        except queue.Full:
            self.dropped += 1


def _dropped_note(count: int) -> logging.LogRecord:
    return logging.LogRecord(
        "waypost.logs",
        logging.WARNING,
        __file__,
        0,
        "%d log line(s) dropped: standard error took nothing while they came (a reader"
        " that stopped reading)",
        (count,),
        None,
    )


class LineWriter:
    """The thread that writes the queued lines to `stream` (standard error).

    To a stream with a descriptor it writes with `os.write`, not through the
    stream: a thread blocked in the stream's own write holds the stream's
    lock, and the interpreter's exit, which flushes standard error, waited on
    it for ever (a SIGTERM ended the service's work and not its process)."""

    def __init__(self, lines: QueuedLines, stream: TextIO | None) -> None:
        self._queue = lines.queue
        self._stream = stream
        self._fd = _descriptor(stream)
        self._encoding = getattr(stream, "encoding", None) or "utf-8"
        self._written = 0
        self._gave_up = False  # a write at exit found standard error taking nothing
        self._stalled_at: int | None = None  # lines written when a wait last gave up
        self._thread = threading.Thread(target=self._run, name="waypost-log-lines", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            line = self._queue.get()
            try:
                if line is _STOP:
                    return
                self._write(f"{line}\n")
            except (OSError, ValueError):  # ValueError: a closed stream of the tests'
                pass  # standard error is gone (its reader left): the line with it
            finally:
                self._written += 1  # this thread's alone: `settle` only reads it
                self._queue.task_done()

    def _write(self, line: str) -> None:
        if self._fd is None:
            if self._stream is not None:  # a stream of the tests' (no descriptor)
                self._stream.write(line)
                self._stream.flush()
            return
        data = memoryview(line.encode(self._encoding, "backslashreplace"))
        while data:
            try:
                data = data[os.write(self._fd, data) :]
            except BlockingIOError:  # a descriptor another process made non-blocking
                select.select([], [self._fd], [])  # this thread may wait; no other does

    def settle(self, timeout: float) -> bool:
        """Wait until every line queued so far is written, at most `timeout`
        seconds, and no longer than STALLED once no line is written (standard
        error may take nothing: a stop waited its whole time limit twice, as
        the refusal and as the process left); True when they were."""
        now = time.monotonic()
        deadline, written, moved = now + timeout, self._written, now
        if self._stalled_at == written:
            # the last wait gave up and nothing was written since: the stop's
            # second wait (as the process leaves) does not wait STALLED again
            moved -= STALLED
        while self._queue.unfinished_tasks:
            if now >= deadline or now - moved >= STALLED or not self._thread.is_alive():
                self._stalled_at = self._written
                return False
            time.sleep(0.005)
            now = time.monotonic()
            if self._written != written:
                written, moved = self._written, now
        return True

    def stop(self, timeout: float) -> bool:
        """Write what is queued (within `timeout`), then end the thread; True
        when it ended."""
        if self.settle(timeout):
            # lines logged meanwhile may have filled the queue again: never
            # wait on it without end (the thread writes them, or gave up)
            with contextlib.suppress(queue.Full):
                self._queue.put(_STOP, timeout=timeout)
                self._thread.join(timeout)
        return not self._thread.is_alive()

    def finish(self, lines: QueuedLines, timeout: float) -> None:
        """As the process leaves (atexit): what is queued is written, and a
        line logged after (by another exit handler, or an asyncio task
        collected as the interpreter ends: a fault's only trace) is written
        at once, where the daemon thread would take it along unwritten. Not
        while standard error takes nothing: those lines are dropped, as the
        exit must not wait on it."""
        if self.stop(timeout):
            lines.direct = self._write_at_exit

    def _write_at_exit(self, line: str) -> None:
        """`_write`, waiting on standard error no longer than STALLED for a
        line: a reader that stopped after the last wait leaves that line
        (cut short) and every later one unwritten, at once (the handler's
        lock is held here, and the exit must not wait on it)."""
        if self._fd is None:
            self._write(line)
            return
        data = memoryview(line.encode(self._encoding, "backslashreplace"))
        deadline = time.monotonic() + (0.0 if self._gave_up else STALLED)
        while data:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [self._fd], [], left)[1]:
                self._gave_up = True
                return
            # no more than a pipe takes at once once it says it takes any
            with contextlib.suppress(BlockingIOError):
                data = data[os.write(self._fd, data[: select.PIPE_BUF]) :]


def _descriptor(stream: TextIO | None) -> int | None:
    """The descriptor under `stream`, once what it buffers is written; None
    for a stream without one (a test's capture)."""
    if stream is None:
        return None
    try:
        fd = stream.fileno()
        stream.flush()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return None
    return fd
