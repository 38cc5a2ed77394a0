"""ConditionLog: one line per window per kind, and the lines held back in a
window are told of when it ends, even when the condition has cleared."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

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
