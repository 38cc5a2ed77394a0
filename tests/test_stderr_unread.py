"""A `serve` whose standard error is a pipe that nobody reads (a log shipper
that stalled, a supervisor that never drains it): the first admin's token
fits in the pipe's buffer, but once the buffer is full every log line blocks
the event loop, and with it every request, `/healthz` and SIGTERM."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.log_support import full_pipe, read_until
from tests.serve_support import START, free_port
from waypost.observe.log_writer import LineWriter, QueuedLines

pytestmark = pytest.mark.slow


def test_a_standard_error_nobody_reads_does_not_stop_the_service(tmp_path: Path) -> None:
    db, clock = tmp_path / "waypost.db", tmp_path / "clock"
    clock.write_text(START)
    env = {**os.environ, "WAYPOST_CLOCK_FILE": str(clock)}
    env.pop("TYPESAFE_API_KEY", None)
    port = free_port()
    unread, written = os.pipe()  # the read end stays open and is never read
    process = subprocess.Popen(
        [sys.executable, "-m", "waypost.cli", "serve", "--db", str(db), "--port", str(port),
         "--lifecycle-port", "0"],
        stdout=subprocess.DEVNULL, stderr=written, env=env,
    )  # fmt: skip
    os.close(written)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline, up = time.monotonic() + 60, False
        while time.monotonic() < deadline and not up:
            with contextlib.suppress(httpx.TransportError):
                up = httpx.get(f"{url}/healthz", timeout=2).status_code == 200
            time.sleep(0.1)
        assert up
        # each refused request writes one access line (about 200 bytes): a
        # 64 KiB pipe is full after a few hundred of them
        with httpx.Client(base_url=url, timeout=5) as client:
            for _ in range(1500):
                assert client.get("/api/v1/me").status_code == 401
            assert client.get("/healthz").status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            stopped = process.wait(timeout=10) is not None
        except subprocess.TimeoutExpired:
            stopped = False
        os.close(unread)  # the blocked write fails now, and the process can go
        if not stopped:
            process.kill()
            process.wait(timeout=30)
    assert stopped, "serve ignored SIGTERM while its standard error was full"


def test_lines_past_the_queue_are_counted_and_the_count_said_once_read_again() -> None:
    """While standard error takes nothing, lines past the queue's capacity
    are dropped; the first line that fits after says how many."""
    unread, written = full_pipe()
    lines = QueuedLines(capacity=3)
    lines.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    stream = os.fdopen(written, "w", encoding="utf-8")
    writer = LineWriter(lines, stream)
    said = bytearray()
    try:
        for n in range(10):
            lines.handle(logging.LogRecord("t", logging.INFO, __file__, 1, "line %d", (n,), None))
        # the thread holds one line in its blocked write, the queue three
        assert lines.dropped in (6, 7), lines.dropped
        dropped = lines.dropped
        reading = threading.Thread(target=read_until, args=(unread, said, b"after\n"))
        reading.start()
        assert writer.settle(10)
        lines.handle(logging.LogRecord("t", logging.INFO, __file__, 1, "after", (), None))
        reading.join(10)
    finally:
        writer.stop(5)
        stream.close()
        os.close(unread)
    text = said.decode().replace("x", "")
    kept = [line for line in text.splitlines() if line.startswith("INFO t line")]
    assert len(kept) == 10 - dropped
    assert text.endswith(
        f"WARNING waypost.logs {dropped} log line(s) dropped: standard error took nothing"
        " while they came (a reader that stopped reading)\nINFO t after\n"
    ), text[-300:]
