"""The service's notion of "now": the system clock, or an instant read from a file.

Every time the service records or compares is taken from a Clock, never from the
client. The file clock exists for tests and simulations (WAYPOST_CLOCK_FILE).
"""

from __future__ import annotations

import re
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


# RFC 3339 date-time: `T` between date and time, and an explicit offset. Python's
# own parser also takes week dates, a space or a missing offset; those are refused.
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


def format_time(moment: datetime) -> str:
    """RFC 3339 UTC with milliseconds; strings sort in time order (years are padded
    to four digits, which strftime does not promise)."""
    m = moment.astimezone(UTC)
    return (
        f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
        f".{m.microsecond // 1000:03d}Z"
    )


def parse_time(text: str) -> datetime:
    """Parse an RFC 3339 instant with an explicit offset; raises ValueError otherwise
    (also for instants that do not fit in UTC, near year 1 or 9999)."""
    if not _RFC3339.fullmatch(text):
        raise ValueError("expected an RFC 3339 time with an offset")
    try:
        return datetime.fromisoformat(text.upper()).astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("the time is out of range") from exc
    except ValueError as exc:
        # datetime's own text ("month must be in 1..12", "offset must be a
        # timedelta ...") is not shown to clients; this message is
        raise ValueError("a date, time or offset field is out of range") from exc
