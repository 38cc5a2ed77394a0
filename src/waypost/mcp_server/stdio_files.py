"""Standard input and output of `waypost mcp`, through daemon threads.

A read or a write of a pipe blocks until the client writes or reads, and no
thread can be interrupted. In anyio's worker threads (`anyio.wrap_file`) a
cancelled call was waited for: Ctrl-C did nothing until a line came in, and
a second signal could not end a process whose client had stopped reading
its output (those threads are joined at exit, too). Each file here has a
daemon thread of its own that makes its blocking calls one at a time, and a
cancelled await abandons its call: a chunk read for it is dropped, a line
written for it may still go out. Nothing reads or writes after a cancel but
the end of the process.

`os.read` and `os.write` on the descriptors, not `sys.stdin.buffer`: a daemon
thread blocked inside a buffered file holds its lock, and closing that file
at exit is then a fatal error. A descriptor in non-blocking mode (a client
may hand one over) is waited on with `select`, as a blocking call waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import select
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from waypost.cancelling import settle

T = TypeVar("T")


class _DaemonCalls:
    """Blocking calls made one at a time by a daemon thread, each awaited."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._calls: queue.SimpleQueue[
            tuple[Callable[[], Any], asyncio.Future[Any], asyncio.AbstractEventLoop]
        ] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    async def run(self, call: Callable[[], T]) -> T:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
            self._thread.start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._calls.put((call, future, loop))
        return await future

    def _serve(self) -> None:
        while True:
            call, future, loop = self._calls.get()
            outcome: Any = None
            error: Exception | None = None
            try:
                outcome = call()
            except Exception as exc:  # the awaiting task's to handle
                error = exc
            with contextlib.suppress(RuntimeError):  # the loop has closed: the process is ending
                loop.call_soon_threadsafe(settle, future, outcome, error)


class StdinChunks:
    """Standard input (`fd`), one chunk per `read1`."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._calls = _DaemonCalls("waypost-mcp-stdin")

    async def read1(self, size: int, /) -> bytes:
        return await self._calls.run(lambda: _read(self._fd, size))


class StdoutLines:
    """Standard output (`fd`), each `write` whole before the next."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._calls = _DaemonCalls("waypost-mcp-stdout")

    async def write(self, data: bytes, /) -> None:
        await self._calls.run(lambda: _write_all(self._fd, data))


def _read(fd: int, size: int) -> bytes:
    while True:
        try:
            return os.read(fd, size)
        except BlockingIOError:
            select.select([fd], [], [])


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [])
