"""Pipes for the log writer's tests (observe/log_writer.py): one whose
buffer is full before the first line, and reading one until a line came."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading


def full_pipe() -> tuple[int, int]:
    """A pipe (read end, write end) whose buffer is full: the next blocking
    write to it waits until its read end is read."""
    unread, written = os.pipe()
    fcntl.fcntl(written, fcntl.F_SETFL, os.O_NONBLOCK)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(written, b"x" * 4096)
    fcntl.fcntl(written, fcntl.F_SETFL, 0)
    return unread, written


def read_until(fd: int, said: bytearray, wanted: bytes) -> None:
    """Read `fd` into `said` until `wanted` is in it, or the pipe ends."""
    while wanted not in said:
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        said += chunk


def drain(fd: int, wanted: bytes) -> None:
    """Read `fd` until `wanted` came (at most 10 s): a writer blocked on its
    full pipe is let go before the pipe is closed."""
    reading = threading.Thread(target=read_until, args=(fd, bytearray(), wanted))
    reading.start()
    reading.join(10)
