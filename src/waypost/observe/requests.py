"""One log line and one set of metrics per HTTP request.

`RequestObserver` is the outermost ASGI layer of the public app: it gives
each request an id (answered as `X-Request-Id`), times it, and once the
response is done writes one line to `waypost.access` and counts it. The line
names the route template (`/api/v1/projects/{project}/tasks`), never the raw
path, also for a request refused before routing, and holds no token, body
or header value.

A WebSocket connection gets one line too, when it closes: status 101 once
accepted (the close code is the protocol's business), or the status of its
refusal, and the time it stayed open. It is not counted in the request
metrics: a connection's lifetime is no request's latency. For the same
reason an event stream (a `GET` answered as `text/event-stream`: the SSE
route, `/mcp`'s standalone stream) is counted but not timed in them.

The lifecycle listener has one of its own (`lifecycle=True`): its lines go
to `waypost.lifecycle.access`, its counts to the `waypost_lifecycle_http_*`
families.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from starlette.routing import Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from waypost.ids import new_id
from waypost.observe.logs import ACCESS, FIELDS, LIFECYCLE_ACCESS
from waypost.observe.metrics import Metrics

# nginx's code for "the client closed the connection before the answer"
CLIENT_CLOSED = 499
_GRAPHQL_NAME = re.compile(r"^[_A-Za-z][_0-9A-Za-z]*\Z")
# GraphQL bounds no name; the log keeps this much of one
OPERATION_MOST = 100


@dataclass
class RequestLine:
    request_id: str
    method: str
    route: str | None = None
    status: int = CLIENT_CLOSED
    duration_ms: float = 0.0
    principal_id: str | None = None
    operation: str | None = None
    stream: bool = False  # answered as an event stream (not in the field list)
    finished: bool = False  # answered: a task that outlives it names it no more

    def fields(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "method": self.method,
            "route": self.route,
            "status": self.status,
            "duration_ms": self.duration_ms,
            "principal_id": self.principal_id,
            "operation": self.operation,
        }


_current: ContextVar[RequestLine | None] = ContextVar("waypost_request_line", default=None)


class RequestIdOnRecords(logging.Filter):
    """A record logged while a request is served (a fault's ERROR and its
    traceback, a warning) names that request's id, the one its client got
    in `X-Request-Id` and the operator is told to quote: the id was only on
    the access line written after it, and with `--no-access-log` nowhere
    (logaudit). A record with fields of its own (an access line) keeps them;
    a task the request started that outlives it (one shared by later
    requests) names it only while it lasts."""

    def filter(self, record: logging.LogRecord) -> bool:
        line = _current.get()
        if line is not None and not line.finished and not hasattr(record, FIELDS):
            setattr(record, FIELDS, {"request_id": line.request_id})
        return True


def note_principal(principal_id: str) -> None:
    """Record the caller a WebSocket named in its first message (an HTTP
    request's caller is read from the scope its authentication sets)."""
    line = _current.get()
    if line is not None:
        line.principal_id = principal_id


def note_graphql_operation(name: str | None) -> None:
    """Record the GraphQL operation name on this request's line (client-chosen
    text, so only a valid GraphQL name is kept, cut at OPERATION_MOST
    characters with "..."; "(invalid)" stands for any other text). A valid
    name over 100 characters was "(invalid name)", whose space split the
    text line's `key=value` fields (obsaudit)."""
    line = _current.get()
    if line is not None and name is not None:
        if not _GRAPHQL_NAME.match(name):
            line.operation = "(invalid)"
        elif len(name) > OPERATION_MOST:
            line.operation = name[:OPERATION_MOST] + "..."
        else:
            line.operation = name


def route_template(router: Router, scope: Scope) -> str | None:
    """The template of the route `scope` would reach, or None when none
    matches. For a request refused before routing (401): the log line and
    the metrics then say which route refused callers were after, which
    counting them all as "unmatched" hid (a client with a stale token
    hammering one route looked like a scan of unknown paths)."""
    for candidate in router.routes:
        match, child = candidate.matches(scope)
        if match is not Match.NONE:
            path: str | None = getattr(child.get("route", candidate), "path", None)
            return path
    return None


async def _run_observed(line: RequestLine, call: Awaitable[None]) -> None:
    """Run one request or socket with `line` as the current one, timing it; a
    fault before any status was sent is a 500 on the line (the server
    answers it so)."""
    token = _current.set(line)
    started = time.perf_counter()
    try:
        await call
    except BaseException:
        if line.status == CLIENT_CLOSED:
            line.status = 500
        raise
    finally:
        _current.reset(token)
        line.finished = True
        line.duration_ms = round((time.perf_counter() - started) * 1000, 3)


class RequestObserver:
    def __init__(
        self,
        app: ASGIApp,
        metrics: Callable[[], Metrics | None],
        access_log: bool = True,
        router: Router | None = None,
        lifecycle: bool = False,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.access_log = access_log
        self.router = router  # to name the route of a request refused before routing
        self.lifecycle = lifecycle
        self.log = LIFECYCLE_ACCESS if lifecycle else ACCESS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        line = RequestLine(request_id=new_id("req"), method=scope["method"])
        header = (b"x-request-id", line.request_id.encode())

        async def observed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                line.status = message["status"]
                headers = message.get("headers", [])
                line.stream = line.method == "GET" and any(
                    k.lower() == b"content-type" and v.startswith(b"text/event-stream")
                    for k, v in headers
                )
                message = {**message, "headers": [*headers, header]}
            await send(message)

        try:
            await _run_observed(line, self.app(scope, receive, observed_send))
        finally:
            route = scope.get("route")
            line.route = getattr(route, "path", None)
            if line.route is None and self.router is not None:
                line.route = route_template(self.router, scope)
            state = scope.get("state") or {}
            # the token's principal, also when its named session was refused
            line.principal_id = state.get("principal_id")
            self._finish(line)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        # the upgrade is a GET; a socket closed before it was accepted was
        # refused (ASGI servers answer that with 403)
        line = RequestLine(request_id=new_id("req"), method="GET")
        header = (b"x-request-id", line.request_id.encode())

        async def observed_send(message: Message) -> None:
            kind = message["type"]
            if kind == "websocket.accept":
                line.status = 101
                message = {**message, "headers": [*message.get("headers", []), header]}
            elif kind == "websocket.http.response.start":
                line.status = message["status"]
            elif kind == "websocket.close" and line.status == CLIENT_CLOSED:
                line.status = 403
            await send(message)

        try:
            await _run_observed(line, self.app(scope, receive, observed_send))
        finally:
            line.route = getattr(scope.get("route"), "path", None)
            if self.access_log:
                self.log.info("websocket", extra={FIELDS: line.fields()})

    def _finish(self, line: RequestLine) -> None:
        metrics = self.metrics()
        if metrics is not None:
            route = line.route or "unmatched"
            seconds = None if line.stream else line.duration_ms / 1000
            metrics.observe_request(line.method, route, line.status, seconds, self.lifecycle)
        if self.access_log:
            self.log.info("request", extra={FIELDS: line.fields()})
