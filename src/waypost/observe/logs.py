"""Log set-up for `serve`: plain text or one JSON object per line.

Request lines come from `waypost.access` with the fields of `RequestLine`;
they never hold a token, a body or a header value (the request id is made
here, not taken from the client).
"""

from __future__ import annotations

import atexit
import json
import logging
import sys
from collections.abc import Awaitable
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from waypost.clock import format_time
from waypost.observe.conditions import ConditionLog
from waypost.observe.log_writer import LineWriter, QueuedLines

ACCESS = logging.getLogger("waypost.access")
# the lifecycle listener's request lines: the same fields, told apart by name
LIFECYCLE_ACCESS = logging.getLogger("waypost.lifecycle.access")
# the attribute of a LogRecord that carries a request line's fields
FIELDS = "waypost_fields"
# A message longer than this is cut: a library may log what a client sent
# (the MCP SDK logs a tool name it does not know, or a message it could not
# read, whole), and no client writes lines of 250,000 characters to the log.
MESSAGE_MAX = 2000


# Control characters a text line shows escaped (`\n`, `\x1b`, ...): a
# library may log what a client sent (the MCP SDK, a tool name), and a line
# break in it started a line of the client's choosing (a forged time, level
# and logger), and an escape sequence reached the operator's terminal. C0,
# DEL, C1 and the Unicode line and paragraph separators; a tab stays. A
# backslash is doubled, so that `\n` in a line is always an escaped line
# break and never two characters a client typed.
_ESCAPED = {
    c: ascii(chr(c))[1:-1]
    for c in [*range(0x20), 0x5C, *range(0x7F, 0xA0), 0x2028, 0x2029]
    if c != 0x09
}


# What `json.dumps(ensure_ascii=False)` leaves raw though a terminal or a
# line-oriented reader takes it as control: DEL, C1 (0x9B is an 8-bit CSI)
# and the Unicode line and paragraph separators. C0 it escapes itself.
_JSON_ESCAPED = {c: f"\\u{c:04x}" for c in [*range(0x7F, 0xA0), 0x2028, 0x2029]}


def message_of(record: logging.LogRecord) -> str:
    message = record.getMessage()
    if len(message) <= MESSAGE_MAX:
        return message
    return f"{message[:MESSAGE_MAX]}... ({len(message)} characters, cut)"


def one_line(text: str) -> str:
    """`text` with its control characters escaped: one line of a text log."""
    if text.isascii() and text.isprintable() and "\\" not in text:
        # nothing to escape (an access line, nearly always): the check runs
        # in C, where `translate` looked each character up in a dict (~10 us
        # of a ~200-character line, on every request; contextcpu)
        return text
    return text.translate(_ESCAPED)


def _time(record: logging.LogRecord) -> str:
    # the API's own spelling of an instant (strftime took twice as long)
    return format_time(datetime.fromtimestamp(record.created, UTC))


class JsonFormatter(logging.Formatter):
    """`{"time", "level", "logger", "message", ...fields}`, one object per line."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": _time(record),
            "level": record.levelname,
            "logger": record.name,
            "message": message_of(record),
        }
        data.update(getattr(record, FIELDS, None) or {})
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False, default=str).translate(_JSON_ESCAPED)


class TextFormatter(logging.Formatter):
    """`time LEVEL logger message key=value ...`."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_time(record)} {record.levelname} {record.name} {message_of(record)}"
        fields = getattr(record, FIELDS, None)
        if fields:
            line += " " + " ".join(f"{k}={'-' if v is None else v}" for k, v in fields.items())
        line = one_line(line)
        # a fault's traceback follows on lines of its own (JSON keeps it in a field)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class NoQueryStrings(logging.Filter):
    """uvicorn logs each WebSocket handshake with its path and query string
    (`"WebSocket /graphql?token=..." [accepted]`): a client may put a token
    there, and a line never holds one. The query string is cut off."""

    def filter(self, record: logging.LogRecord) -> bool:
        if '"WebSocket %s"' in str(record.msg) and isinstance(record.args, tuple):
            record.args = tuple(
                a.partition("?")[0] if i == 1 and isinstance(a, str) else a
                for i, a in enumerate(record.args)
            )
        return True


class ClientFaultsAreNoErrors(logging.Filter):
    """uvicorn logs a WebSocket text frame that is no UTF-8 as an ERROR with a
    traceback ("Invalid UTF-8 sequence received from client."): anyone, with
    no token, could write one at will, and ERROR lines are the operator's
    alert for faults of the service. It is an INFO line without a traceback,
    as a client that hangs up is (the socket is closed 1007, as before)."""

    CLIENT_FAULTS = frozenset({"Invalid UTF-8 sequence received from client."})

    def filter(self, record: logging.LogRecord) -> bool:
        # (a record's msg may be any object, a dict too: unhashable)
        if (
            record.levelno >= logging.ERROR
            and isinstance(record.msg, str)
            and record.msg in self.CLIENT_FAULTS
        ):
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.exc_info, record.exc_text = None, None
            return logging.getLogger().isEnabledFor(logging.INFO)
        return True


class ClientMadeWarningsHeldBack(logging.Filter):
    """uvicorn logs a WARNING for each request its parser cannot read
    ("Invalid HTTP request received.", answered 400) and for each asking an
    upgrade other than to a WebSocket ("Unsupported upgrade request.", served
    as a plain request): anyone, with no token, wrote 960 of the first in one
    sweep of made-up methods (obsaudit), and as many of the second (review33).
    Each is held to one line per 10 s, saying how many it stands for, as
    every condition that refuses many requests in a row is
    (observe/conditions.py). So is Strawberry's WARNING for each WebSocket
    handshake whose Origin is not the Host's (refused 403): 50 tokenless
    handshakes with a 6 KB Origin wrote 50 lines of 2 KB (proxyaudit); its
    line keeps the origin and the host, cut short, since behind a proxy
    that sends its own Host a browser's handshake can be one of these (one
    that says `Sec-Fetch-Site: same-origin`, as to an HTTPS page, is not)."""

    SAID_AS: Final = {
        "Invalid HTTP request received.": "a request the HTTP parser could not read was"
        " answered 400 (%s)",
        "Unsupported upgrade request.": "a request asked an upgrade other than to a"
        " WebSocket and was served as a plain request (%s)",
    }

    FOREIGN_ORIGIN: Final = "Rejected WebSocket connection from origin"
    FOREIGN_ORIGIN_SAID_AS: Final = (
        "a WebSocket handshake whose Origin is not its Host was refused 403 (origin %s,"
        " host %s; behind a proxy, pass the Host on: docs/operations.md)"
    )

    def __init__(self) -> None:
        super().__init__()
        self._condition = ConditionLog(logging.getLogger("waypost.http"))

    def filter(self, record: logging.LogRecord) -> bool:
        # (a record's msg may be any object, a dict too: unhashable)
        msg = record.msg
        if not isinstance(msg, str):
            return True
        said_as = self.SAID_AS.get(msg)
        if said_as is not None and record.name.startswith("uvicorn"):
            # one window per listener: a line standing for some names its own
            self._condition.warning(said_as, msg, key=f"{said_as} {_listener.get()}")
            return False
        if msg.startswith(self.FOREIGN_ORIGIN) and record.name.startswith("strawberry"):
            args = record.args if isinstance(record.args, tuple) else ()
            origin, host = (_clipped(a) for a in (*args, None, None)[:2])
            self._condition.warning(self.FOREIGN_ORIGIN_SAID_AS, origin, host)
            return False
        return True


class NoSocketLinesOfUvicorn(logging.Filter):
    """uvicorn writes its own lines for each WebSocket (`127.0.0.1:33208 -
    "WebSocket /graphql" [accepted]`, and the websockets library's
    `connection open` and `connection closed`, through uvicorn's logger), each
    with the client's address: access lines in all but name, which
    `--no-access-log` left on (logaudit). Installed only then; with the
    access log on they stay, beside the service's own `websocket` line."""

    SOCKET_LINES: Final = frozenset({"connection open", "connection closed"})

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg
        if record.levelno > logging.INFO or not record.name.startswith("uvicorn"):
            return True
        if not isinstance(msg, str):
            return True
        return not (msg.startswith('%s - "WebSocket %s"') or msg in self.SOCKET_LINES)


# The listener whose uvicorn server runs the current task: set once in each
# server's task, and inherited by everything that server starts (its
# lifespan, its connections, their requests).
_listener: ContextVar[str | None] = ContextVar("waypost_listener", default=None)


T = TypeVar("T")


async def serving_as(name: str, serving: Awaitable[T]) -> T:
    """Await `serving` (one listener's uvicorn server) with its lines named `name`."""
    _listener.set(name)
    return await serving


class ListenerOnRecords(logging.Filter):
    """Each uvicorn server writes its own start and stop lines ("Started
    server process", "Application startup complete.", "Shutting down"):
    with two listeners in one process every such line came twice, alike,
    and a line about a connection one listener could not read named neither
    (logaudit). A line a listener's server writes outside any request says
    `listener=public` or `listener=lifecycle`; one within a request names
    the request (`RequestIdOnRecords`, installed before this filter), whose
    access line names the listener by its logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        name = _listener.get()
        if name is not None and not hasattr(record, FIELDS):
            setattr(record, FIELDS, {"listener": name})
        return True


def _clipped(value: object, most: int = 80) -> str:
    """A client's header value for a log line: repr'd, and cut to `most` characters."""
    said = repr(value)
    return said if len(said) <= most else f"{said[:most]}... ({len(said)} characters)"


_writer: LineWriter | None = None
_lines: QueuedLines | None = None


def configure(log_format: str, level: int = logging.INFO, access_log: bool = True) -> None:
    """Root handler on standard error, through a thread of its own
    (observe/log_writer.py); uvicorn's loggers propagate into it. Without
    the access log, uvicorn's lines for each WebSocket go too."""
    global _writer, _lines
    if _writer is None:
        atexit.register(_finish)
    else:  # configured again in one process (the tests)
        _writer.stop(timeout=1.0)
    handler = _lines = QueuedLines()
    _writer = LineWriter(handler, sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    # on the handler: it sees the records of every logger (uvicorn's included)
    handler.addFilter(NoQueryStrings())
    handler.addFilter(ClientFaultsAreNoErrors())
    handler.addFilter(ClientMadeWarningsHeldBack())
    # (imported here: requests.py builds its lines on this module's names)
    from waypost.observe.requests import RequestIdOnRecords

    handler.addFilter(RequestIdOnRecords())
    handler.addFilter(ListenerOnRecords())
    if not access_log:
        handler.addFilter(NoSocketLinesOfUvicorn())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # httpx logs every request it sends at INFO (a second line beside the
    # reranker's one line per attempt, with the provider's URL); its
    # warnings and errors still come through
    for name in ("httpx", "httpcore"):
        quiet = level if level < logging.INFO else max(level, logging.WARNING)
        logging.getLogger(name).setLevel(quiet)


def _finish() -> None:
    if _writer is not None and _lines is not None:
        _writer.finish(_lines, timeout=5.0)


def settle(timeout: float = 5.0) -> None:
    """Wait until the lines logged so far are on standard error, at most
    `timeout` seconds: before the process writes there itself (a refusal
    at exit, the first admin's token) or leaves."""
    if _writer is not None:
        _writer.settle(timeout)
