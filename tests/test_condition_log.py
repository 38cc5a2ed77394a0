"""ConditionLog: one line per window per kind, and the lines held back in a
window are told of when it ends, even when the condition has cleared."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from waypost.lifecycle_http import verifiers
from waypost.observe.conditions import ConditionLog
from waypost.runtime import open_runtime
from waypost.settings import Settings

WINDOW = 0.2


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "waypost.test.conditions"]


def _wait_for(caplog: pytest.LogCaptureFixture, count: int, seconds: float = 5.0) -> list[str]:
    deadline = time.monotonic() + seconds
    while len(_messages(caplog)) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return _messages(caplog)


def test_lines_held_back_are_counted_when_the_window_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conditions = ConditionLog(logging.getLogger("waypost.test.conditions"), seconds=WINDOW)
    with caplog.at_level(logging.WARNING, "waypost.test.conditions"):
        for n in range(4):
            conditions.warning("refused write %d: disk full", n)
        # the condition clears: no fifth line ever comes to carry the count
        assert _messages(caplog) == ["refused write 0: disk full"]
        lines = _wait_for(caplog, 2)
        assert lines == [
            "refused write 0: disk full",
            "refused write 3: disk full (and 2 more like it since the last such line)",
        ]
        time.sleep(WINDOW * 2)
        assert len(_messages(caplog)) == 2  # nothing held, nothing more to say


def test_at_most_one_line_per_window_after_a_timed_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conditions = ConditionLog(logging.getLogger("waypost.test.conditions"), seconds=WINDOW)
    with caplog.at_level(logging.WARNING, "waypost.test.conditions"):
        conditions.warning("busy %s", "a")
        conditions.warning("busy %s", "b")
        _wait_for(caplog, 2)
        # the timed line began a new window: a line within it is held again
        conditions.warning("busy %s", "c")
        assert _messages(caplog) == ["busy a", "busy b"]
        assert _wait_for(caplog, 3) == ["busy a", "busy b", "busy c"]


def test_kinds_are_held_apart_and_a_line_after_a_quiet_window_is_logged_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conditions = ConditionLog(logging.getLogger("waypost.test.conditions"), seconds=WINDOW)
    with caplog.at_level(logging.WARNING, "waypost.test.conditions"):
        conditions.warning("full", key="k")
        conditions.warning("full", key="k")
        conditions.warning("other", key="j")  # another kind is never held by this one
        assert _messages(caplog) == ["full", "other"]
        time.sleep(WINDOW * 3)
        assert _messages(caplog) == ["full", "other", "full"]
        conditions.warning("full again", key="k")  # a quiet window has passed
        assert _messages(caplog)[-1] == "full again"


def test_a_flush_tells_of_the_lines_held_and_the_timer_then_says_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conditions = ConditionLog(logging.getLogger("waypost.test.conditions"), seconds=WINDOW)
    with caplog.at_level(logging.WARNING, "waypost.test.conditions"):
        for n in range(3):
            conditions.warning("refused write %d: disk full", n)
        conditions.flush()
        assert _messages(caplog) == [
            "refused write 0: disk full",
            "refused write 2: disk full (and 1 more like it since the last such line)",
        ]
        time.sleep(WINDOW * 2)
        assert len(_messages(caplog)) == 2  # the window's timer was cancelled


async def test_the_lines_held_when_the_runtime_closes_are_logged_with_their_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A process stopping within the window never logged the lines it held
    back (the timer is a daemon thread): `serve` stopped a few seconds into
    a full disk said one refusal where there were many."""
    conditions = ConditionLog(logging.getLogger("waypost.test.conditions"), seconds=60)
    with caplog.at_level(logging.WARNING, "waypost.test.conditions"):
        async with open_runtime(Settings(db_path=tmp_path / "w.db")):
            for n in range(5):
                conditions.warning("refused write %d: disk full", n)
            assert _messages(caplog) == ["refused write 0: disk full"]
        assert _messages(caplog) == [
            "refused write 0: disk full",
            "refused write 4: disk full (and 3 more like it since the last such line)",
        ]


def test_the_window_is_10_seconds_by_default() -> None:
    """docs/lifecycle.md: "one WARNING per kind of failure every 10 s at most"
    (mutantaudit10)."""
    assert ConditionLog(logging.getLogger("waypost.test.conditions")).seconds == 10.0
    assert verifiers._conditions.seconds == 10.0


def test_one_format_string_under_two_keys_is_two_kinds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Lines are told apart by their key (by default their format string):
    "TokenReview failed: %s" keyed by the error's name must not hide a
    ConnectError behind a ReadTimeout (mutantaudit10)."""
    conditions = ConditionLog(logging.getLogger("waypost.test.conditions"), seconds=5.0)
    with caplog.at_level(logging.WARNING, "waypost.test.conditions"):
        conditions.warning("failed: %s", "ReadTimeout", key="ReadTimeout")
        conditions.warning("failed: %s", "ConnectError", key="ConnectError")
        assert _messages(caplog) == ["failed: ReadTimeout", "failed: ConnectError"]
        conditions.flush()


def test_a_flushed_line_begins_a_window(caplog: pytest.LogCaptureFixture) -> None:
    """At most one line per window: the line a flush writes counts as one
    (mutantaudit10). Windows of 2 s, so that a loaded machine's late sleep
    (up to 0.8 s) changes nothing."""
    window = 2.0
    conditions = ConditionLog(logging.getLogger("waypost.test.conditions"), seconds=window)
    with caplog.at_level(logging.WARNING, "waypost.test.conditions"):
        conditions.warning("full %s", "a")
        conditions.warning("full %s", "b")  # held
        time.sleep(window / 2)
        conditions.flush()  # "full b" now, and a window from here
        assert _messages(caplog) == ["full a", "full b"]
        time.sleep(window / 2 + 0.2)  # past a's window, within the flushed line's
        conditions.warning("full %s", "c")
        assert _messages(caplog) == ["full a", "full b"]
        assert _wait_for(caplog, 3) == ["full a", "full b", "full c"]


def test_the_held_line_is_logged_when_the_window_of_the_first_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """ "When the window ends, a timer logs the last of them": the window the
    first line began, not one counted from the held line (mutantaudit10)."""
    window = 2.0
    conditions = ConditionLog(logging.getLogger("waypost.test.conditions"), seconds=window)
    with caplog.at_level(logging.WARNING, "waypost.test.conditions"):
        start = time.monotonic()
        conditions.warning("full %s", "a")
        time.sleep(1.2)
        conditions.warning("full %s", "b")  # held until start + 2.0, not + 3.2
        assert _wait_for(caplog, 2) == ["full a", "full b"]
        assert time.monotonic() - start < 2.9


def test_a_line_that_stands_for_many_counts_them_all(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A batch of refused writes logs one line that counts its writes: the
    lines held back are told of as the refusals they stand for, not the
    lines (a line per shedding pass counted a fifth of them, overloadjourney)."""
    conditions = ConditionLog(logging.getLogger("waypost.test.conditions"), seconds=WINDOW)
    with caplog.at_level(logging.WARNING, "waypost.test.conditions"):
        for n in (3, 5, 7, 2):
            conditions.warning("%d writes refused", n, count=n)
        assert _wait_for(caplog, 2) == [
            "3 writes refused",
            "2 writes refused (and 12 more like it since the last such line)",
        ]
        conditions.warning("%d writes refused", 4, count=4)
        conditions.warning("%d writes refused", 6, count=6)
        conditions.flush()
        assert _messages(caplog)[2:] == [
            "6 writes refused (and 4 more like it since the last such line)"
        ]
