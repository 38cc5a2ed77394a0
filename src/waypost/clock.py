"""The service's notion of "now": the system clock, or an instant read from a file.

Every time the service records or compares is taken from a Clock, never from the
client. The file clock exists for tests and simulations (WAYPOST_CLOCK_FILE).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from waypost.errors import Unavailable


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FileClock:
    """Reads an RFC 3339 instant from a file at every use, so tests can move time."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def now(self) -> datetime:
        try:
            return parse_time(self.path.read_text().strip())
        except (OSError, ValueError) as exc:
            # a missing or half-written file is a passing condition of the
            # simulation, not a fault of the request: retry shortly
            raise Unavailable("the clock file holds no valid instant", retry_after=1) from exc


def format_time(moment: datetime) -> str:
    """RFC 3339 UTC with milliseconds; strings sort in time order."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_time(text: str) -> datetime:
    """Parse an RFC 3339 instant with an explicit offset; raises ValueError otherwise."""
    moment = datetime.fromisoformat(text.replace("z", "Z"))
    if moment.tzinfo is None:
        raise ValueError("time must carry a UTC offset")
    return moment.astimezone(UTC)
