"""The edges of the log lines' own thread (observe/log_writer.py) that its
first tests left open (review82): the count of dropped lines said once, the
bytes a descriptor gets for what standard error's text stream escaped, and
the order of the log's lines against what the process prints itself (the
first admin's token, click's refusal) when standard error is slow."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest
from click.testing import CliRunner

from tests.log_support import drain, full_pipe, read_until
from waypost.cli import main
from waypost.observe import logs
from waypost.observe.log_writer import STALLED, LineWriter, QueuedLines


def _record(message: str) -> logging.LogRecord:
    return logging.LogRecord("t", logging.INFO, __file__, 1, message, (), None)


@contextlib.contextmanager
def _slow_standard_error(monkeypatch: pytest.MonkeyPatch, seconds: float) -> Iterator[None]:
    """Each line reaches standard error `seconds` after the thread takes it
    (a slow terminal, a loaded pipe), the root logger restored after."""
    write = LineWriter._write

    def slow(self: LineWriter, line: str) -> None:
        threading.Event().wait(seconds)
        write(self, line)

    monkeypatch.setattr(LineWriter, "_write", slow)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        yield
    finally:
        logs.settle()
        root.handlers[:], level = saved
        root.setLevel(level)


def test_the_count_of_dropped_lines_is_said_once() -> None:
    """The note goes before the first line that fits after the drops, and
    the count starts again from nothing: the lines after it carry no note."""
    unread, written = full_pipe()
    lines = QueuedLines(capacity=3)
    lines.setFormatter(logging.Formatter("%(message)s"))
    stream = os.fdopen(written, "w", encoding="utf-8")
    writer = LineWriter(lines, stream)
    said = bytearray()
    try:
        for n in range(6):
            lines.handle(_record(f"line {n}"))
        assert lines.dropped > 0
        reading = threading.Thread(target=read_until, args=(unread, said, b"third\n"))
        reading.start()
        assert writer.settle(10)
        for word in ("first", "second", "third"):  # each once the last is written
            lines.handle(_record(word))
            assert writer.settle(10)
        reading.join(10)
    finally:
        writer.stop(5)
        stream.close()
        os.close(unread)
    text = said.decode().replace("x", "")
    assert text.count("log line(s) dropped") == 1, text
    assert text.endswith("first\nsecond\nthird\n"), text


def test_a_descriptor_gets_the_bytes_standard_errors_text_stream_wrote() -> None:
    """A lone surrogate (a file name read with surrogateescape) or any
    character the encoding lacks is escaped, as `sys.stderr` (errors
    `backslashreplace`) wrote it through the StreamHandler; the line is not
    lost to an encoding error."""
    unread, written = os.pipe()
    lines = QueuedLines()
    lines.setFormatter(logging.Formatter("%(message)s"))
    stream = os.fdopen(written, "w", encoding="utf-8", errors="backslashreplace")
    writer = LineWriter(lines, stream)
    said = bytearray()
    message = "caf\u00e9 \U0001f600 /srv/\udcff.db"
    try:
        lines.handle(_record(message))
        lines.handle(_record("after"))
        reading = threading.Thread(target=read_until, args=(unread, said, b"after\n"))
        reading.start()
        assert writer.settle(10)
        reading.join(10)
    finally:
        writer.stop(5)
        stream.close()
        os.close(unread)
    assert bytes(said) == f"{message}\nafter\n".encode("utf-8", "backslashreplace")


def test_the_first_admins_token_follows_the_lines_logged_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`applied N migrations` (and every line before it) came before the
    token on a terminal; the lines go by a thread now, the token does not."""
    from waypost.runtime import _show_admin_token

    out = (tmp_path / "stderr").open("w", encoding="utf-8")
    monkeypatch.setattr("sys.stderr", out)
    with _slow_standard_error(monkeypatch, 0.2):
        logs.configure("text")
        logging.getLogger("waypost.storage").info("applied 1 migration")
        _show_admin_token(out, "wp_secret", "tok_x")
    out.close()
    text = (tmp_path / "stderr").read_text()
    assert text.index("applied 1 migration") < text.index("wp_secret"), text


def _busy_port() -> socket.socket:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    return taken


def test_a_refused_start_says_the_lines_logged_before_its_refusal_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start refused once its warnings are logged (`cannot_listen`): the
    warnings come before click's `Error:` line, not after it or never (the
    process leaves, and the daemon thread with it)."""
    with _slow_standard_error(monkeypatch, 0.3), _busy_port() as taken:
        port = str(taken.getsockname()[1])
        result = CliRunner().invoke(
            main,
            ["serve", "--db", str(tmp_path / "w.db"), "--port", port, "--lifecycle-port", "0"],
            env={"TYPESAFE_API_KEY": ""},
        )
    assert result.exit_code == 1, result.output
    warned = result.output.find("TYPESAFE_API_KEY is not set")
    assert 0 <= warned < result.output.index("Error: cannot_listen:"), result.output


def test_a_line_logged_before_a_usage_refusal_comes_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`serve` refuses most settings before `_run` (whose `finally` waits for
    the log): a line logged there before such a refusal reached standard
    error after click's message or not at all, so a test that a refused
    start warns of nothing ("WARNING" not in its output) passed whether it
    warned or not, by the thread's timing."""
    import click

    def refused(*_: object) -> None:
        logging.getLogger("waypost").warning("said before the refusal")
        raise click.UsageError("--lifecycle-auth refused here")

    monkeypatch.setattr("waypost.cli._lifecycle_settings", refused)
    with _slow_standard_error(monkeypatch, 0.3):
        result = CliRunner().invoke(
            main, ["serve", "--db", str(tmp_path / "w.db")], env={"TYPESAFE_API_KEY": ""}
        )
    assert result.exit_code == 2, result.output
    warned = result.output.find("said before the refusal")
    assert 0 <= warned < result.output.index("refused here"), result.output


def test_a_line_logged_as_the_process_leaves_is_written() -> None:
    """After the last wait for the queue, the daemon thread is taken along
    as the interpreter ends: a line another exit handler logs (or asyncio's
    "Task was destroyed but it is pending!", a fault's only trace, which the
    tests look for in `serve`'s output) was lost, or came out as a logging
    error of the interpreter's teardown (review82)."""
    script = (
        "import atexit, logging\n"
        "atexit.register(lambda: logging.getLogger('waypost').warning('logged at exit'))\n"
        "from waypost.observe import logs\n"
        "logs.configure('text')\n"
        "logging.getLogger('waypost').warning('logged while running')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    said = [line.split(" ", 3)[-1] for line in done.stderr.splitlines()]
    assert said == ["logged while running", "logged at exit"], done.stderr


def test_a_line_logged_as_the_process_leaves_never_holds_the_exit_on_a_full_pipe() -> None:
    """`finish` writes a line logged after the last wait at once, "not while
    standard error takes nothing: the exit must not wait on it". A reader
    that stops once the stop's own lines fit, with room left for them and
    not for the lines an exit handler logs after (a fault's traceback, the
    asyncio "Task was destroyed" lines): the direct write blocked for ever,
    under the handler's lock, and only a SIGKILL ended the process (review83)."""
    script = (
        "import atexit, fcntl, logging, os, sys\n"
        "unread, written = os.pipe()\n"
        "fcntl.fcntl(written, fcntl.F_SETFL, os.O_NONBLOCK)\n"
        "try:\n"
        "    while True: os.write(written, b'x' * 4096)\n"
        "except BlockingIOError: pass\n"
        "fcntl.fcntl(written, fcntl.F_SETFL, 0)\n"
        "os.read(unread, 4096)  # one page free: the running line fits, the exit's do not\n"
        "atexit.register(lambda: [logging.getLogger('waypost').error('at exit %s', 'y' * 1900)"
        " for _ in range(3)])\n"
        "sys.stderr = os.fdopen(written, 'w')\n"
        "from waypost.observe import logs\n"
        "logs.configure('text')\n"
        "logging.getLogger('waypost').warning('logged while running')\n"
    )
    try:
        subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail("the process did not leave: a line logged at exit waited on a full pipe")


def test_a_stop_behind_a_standard_error_that_takes_nothing_waits_one_second_not_two() -> None:
    """docs/operations.md: a stop waits for the lines still waiting "up to
    5 s, and no more than 1 s once none is written". `serve` waits as its
    context closes (`logs.settle`) and again as the process leaves
    (`finish`): behind a reader that stopped, each waited STALLED, 2 s in
    all (a real `serve` behind `(sleep 9; cat)` took 2.6 s to leave,
    0.7 s with a reader) (review83)."""
    unread, written = full_pipe()
    lines = QueuedLines()
    lines.setFormatter(logging.Formatter("%(message)s"))
    writer = LineWriter(lines, os.fdopen(written, "w", encoding="utf-8"))
    try:
        lines.handle(_record("the stop's last line"))
        started = time.monotonic()
        assert not writer.settle(5.0)  # as `serve`'s context closes
        writer.finish(lines, 5.0)  # as the process leaves
        waited = time.monotonic() - started
        assert waited < STALLED + 0.5, waited
    finally:
        drain(unread, b"line\n")
        os.close(unread)


class _SlowStream:
    """A standard error without a descriptor that takes each line `seconds`
    after it is handed one: slow, but taking every line."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.text: list[str] = []

    def write(self, text: str) -> None:
        time.sleep(self.seconds)
        self.text.append(text)

    def flush(self) -> None:
        pass


def _lines_to(stream: object) -> tuple[QueuedLines, LineWriter]:
    lines = QueuedLines()
    lines.setFormatter(logging.Formatter("%(message)s"))
    return lines, LineWriter(lines, stream)  # type: ignore[arg-type]


def test_a_wait_goes_on_while_lines_are_written_however_slowly() -> None:
    """docs/operations.md: a stop waits "up to 5 s, and no more than 1 s
    once none is written": eight lines a quarter of STALLED apart take twice
    STALLED, and each is written, so the wait sees them all out."""
    stream = _SlowStream(STALLED / 4)
    lines, writer = _lines_to(stream)
    try:
        for n in range(8):
            lines.handle(_record(f"line {n}"))
        assert writer.settle(10)
        assert "".join(stream.text) == "".join(f"line {n}\n" for n in range(8))
    finally:
        writer.stop(5)


def test_a_wait_ends_at_its_time_limit_though_lines_are_still_written() -> None:
    """The other bound: lines still coming, slowly, hold a wait no longer
    than its `timeout` (the stop's 5 s, the first token's 1 s)."""
    stream = _SlowStream(STALLED / 10)
    lines, writer = _lines_to(stream)
    try:
        for n in range(40):  # 4 STALLED of lines
            lines.handle(_record(f"line {n}"))
        started = time.monotonic()
        assert not writer.settle(STALLED / 2)
        assert time.monotonic() - started < STALLED, time.monotonic() - started
    finally:
        writer.settle(10)
        writer.stop(5)


def test_a_stop_never_waits_on_a_queue_that_filled_again() -> None:
    """Lines logged between the stop's wait and its stop marker may fill the
    queue again while standard error takes nothing: the marker's own put
    gives up at the stop's time limit, and the stop says the thread runs on."""
    release = threading.Event()

    class Held(_SlowStream):
        def write(self, text: str) -> None:
            release.wait(30)

    lines = QueuedLines(capacity=1)
    lines.setFormatter(logging.Formatter("%(message)s"))
    writer = LineWriter(lines, Held(0))  # type: ignore[arg-type]
    lines.handle(_record("taken by the thread, whose write waits"))
    deadline = time.monotonic() + 5
    while lines.queue.qsize() and time.monotonic() < deadline:
        time.sleep(0.01)
    lines.handle(_record("fills the queue"))
    # as if both came after the stop's wait had seen the queue empty
    writer.settle = lambda timeout: True  # type: ignore[method-assign]
    said: list[bool] = []
    stopping = threading.Thread(target=lambda: said.append(writer.stop(0.3)), daemon=True)
    try:
        stopping.start()
        stopping.join(5)
        assert not stopping.is_alive(), "the stop waited on a full queue"
        assert said == [False]
    finally:
        release.set()


def _pipe_taking_nothing_after_finish() -> tuple[int, TextIO, QueuedLines]:
    """A writer that finished while standard error took lines (a line logged
    after goes straight to it), and a reader that stopped since."""
    unread, written = os.pipe()
    stream = os.fdopen(written, "w", encoding="utf-8")
    lines, writer = _lines_to(stream)
    writer.finish(lines, 5.0)
    assert lines.direct is not None
    filler = os.dup(written)
    os.set_blocking(filler, False)  # (the file's flags: blocking again below)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(filler, b"x" * 4096)
    os.set_blocking(filler, True)
    os.close(filler)
    return unread, stream, lines


def test_lines_logged_at_exit_behind_a_reader_that_stopped_wait_one_second_in_all() -> None:
    """docs/operations.md: a line logged as the process leaves is written at
    once, "waiting at most a second for standard error": the first such line
    waits STALLED, and the ones after it, behind the same stalled reader, not
    at all (a traceback's lines, each `Task was destroyed` line)."""
    unread, stream, lines = _pipe_taking_nothing_after_finish()
    try:
        started = time.monotonic()
        for n in range(4):
            lines.handle(_record(f"at exit {n}"))
        waited = time.monotonic() - started
        assert waited < STALLED * 2.5, waited  # not 4 x STALLED
    finally:
        stream.close()
        os.close(unread)


def test_a_long_line_at_exit_is_written_in_what_the_pipe_takes_not_held_on() -> None:
    """A pipe with one page free says it takes a write; a 20 KB line (a
    fault's traceback) written whole would block there until a reader came,
    under the handler's lock, and the exit with it: written a page at a
    time, it gives up once the pipe takes no more."""
    unread, stream, lines = _pipe_taking_nothing_after_finish()
    os.read(unread, 4096)  # one page free
    logging_at_exit = threading.Thread(
        target=lines.handle, args=(_record("y" * 20_000),), daemon=True
    )
    try:
        logging_at_exit.start()
        logging_at_exit.join(STALLED + 3)
        assert not logging_at_exit.is_alive(), "a line at exit held on a full pipe"
    finally:
        # read to the pipe's end (no descriptor closed under a read: its
        # number, taken again by the next test's pipe, would be read)
        drained = threading.Thread(target=read_until, args=(unread, bytearray(), b"\0"))
        drained.start()
        logging_at_exit.join(5)
        stream.close()
        drained.join(10)
        os.close(unread)


def test_a_line_at_exit_after_the_reader_left_raises_nothing() -> None:
    """Standard error's reader gone (EPIPE) as the process leaves: the line
    goes with it, and the exit handler that logged it carries on."""
    unread, written = os.pipe()
    stream = os.fdopen(written, "w", encoding="utf-8")
    lines, writer = _lines_to(stream)
    writer.finish(lines, 5.0)
    os.close(unread)
    try:
        lines.handle(_record("after the reader left"))  # no BrokenPipeError
    finally:
        stream.close()


def test_a_line_logged_after_a_stalled_stop_is_dropped_at_once() -> None:
    """`finish` after a stop that gave up behind a stalled reader writes
    nothing directly: a line logged after it (another exit handler's) waits
    on standard error not at all, so the exit waits STALLED once, not twice."""
    unread, written = full_pipe()
    stream = os.fdopen(written, "w", encoding="utf-8")
    lines, writer = _lines_to(stream)
    try:
        lines.handle(_record("the stop's last line"))
        started = time.monotonic()
        writer.finish(lines, 5.0)
        lines.handle(_record("logged by another exit handler"))
        waited = time.monotonic() - started
        assert waited < STALLED + 0.5, waited
    finally:
        # every queued line read out, the last one too: the thread wrote the
        # exit handler's line once the pipe had room, and, with the pipe
        # closed by then and its descriptor handed to the next test's pipe,
        # into that one ("logged by another exit handler" at the head of
        # what it read: a fresh-clone check at 08d17e0)
        drain(unread, b"logged by another exit handler\n")
        os.close(unread)
        stream.close()


def test_what_the_stream_buffered_comes_before_the_first_line() -> None:
    """Text standard error's stream holds unwritten when the thread starts
    (a message printed before `configure`) goes first: the thread writes to
    the descriptor, past the stream's buffer."""
    unread, written = os.pipe()
    stream = os.fdopen(written, "w", encoding="utf-8")
    stream.write("printed before\n")
    lines, writer = _lines_to(stream)
    said = bytearray()
    try:
        lines.handle(_record("logged after"))
        assert writer.settle(10)
        reading = threading.Thread(target=read_until, args=(unread, said, b"logged after\n"))
        reading.start()
        reading.join(10)
    finally:
        writer.stop(5)
        stream.close()
        os.close(unread)
    assert bytes(said).startswith(b"printed before\nlogged after\n"), bytes(said)
