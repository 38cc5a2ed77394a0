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
        # a missing or half-written file is a passing condition of the
        # simulation, not a fault of the request: retry shortly
        try:
            with self.path.open("rb") as file:
                # a bounded read: the file is read at every use, and one
                # pointed at a growing log by mistake (or an instant and 100 MB
                # of spaces) took 0.5-2 s a request on the event loop
                data = file.read(CLOCK_FILE_MOST + 1)
        except OSError as exc:  # said apart: a missing file "held no valid instant"
            reason = exc.strerror or type(exc).__name__
            raise Unavailable(f"the clock file cannot be read: {reason}", retry_after=1) from exc
        if len(data) > CLOCK_FILE_MOST:
            raise Unavailable(
                f"the clock file holds more than an instant (over {CLOCK_FILE_MOST} bytes)",
                retry_after=1,
            )
        try:
            moment = parse_time(data.decode().strip())
        except ValueError as exc:  # UnicodeDecodeError too
            raise Unavailable("the clock file holds no valid instant", retry_after=1) from exc
        if not CLOCK_EARLIEST <= moment < CLOCK_END:
            # the service adds and subtracts days from now (leases, the digest's
            # week, receipts' two days): near year 1 or 9999 that overflowed
            raise Unavailable(
                "the clock file's instant is outside the years 0002 to 9998", retry_after=1
            )
        return moment


# An instant with many fractional digits and some whitespace fits many times over.
CLOCK_FILE_MOST = 4096
# RFC 3339 date-time: `T` between date and time, and an explicit offset. Python's
# own parser also takes week dates, a space or a missing offset; those are refused.
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-](?P<oh>\d{2}):(?P<om>\d{2}))",
    re.ASCII,
)
# The instants a file clock may hold: a year of room on each side of what
# datetime can represent, for the durations the service computes from now.
# The end is exclusive: an instant is compared before it is cut to
# milliseconds, so 9998-12-31T23:59:59.9999Z is still year 9998.
CLOCK_EARLIEST = datetime(2, 1, 1, tzinfo=UTC)
CLOCK_END = datetime(9999, 1, 1, tzinfo=UTC)


def format_time(moment: datetime) -> str:
    """RFC 3339 UTC with milliseconds; strings sort in time order (years are padded
    to four digits, which strftime does not promise)."""
    # isoformat pads the year to four digits and truncates to milliseconds
    # as the field-by-field spelling did, in a third of its time (a create
    # spells an instant three or four times); in UTC it ends "+00:00"
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def parse_time(text: str) -> datetime:
    """Parse an RFC 3339 instant with an explicit offset; raises ValueError otherwise
    (also for instants that do not fit in UTC, near year 1 or 9999)."""
    matched = _RFC3339.fullmatch(text)
    if not matched:
        raise ValueError("expected an RFC 3339 time with an offset")
    # the offset's hours 00-23 and minutes 00-59: Python's parser read
    # `+05:60` as six hours and `-00:99` as 1 h 39 min
    if matched["oh"] is not None and (int(matched["oh"]) > 23 or int(matched["om"]) > 59):
        raise ValueError("a date, time or offset field is out of range")
    try:
        return datetime.fromisoformat(text.upper()).astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("the time is out of range") from exc
    except ValueError as exc:
        # datetime's own text ("month must be in 1..12", "offset must be a
        # timedelta ...") is not shown to clients; this message is
        raise ValueError("a date, time or offset field is out of range") from exc
