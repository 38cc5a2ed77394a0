"""The calls running in MCP sessions, so that a client's cancel reaches them.

MCP's `notifications/cancelled` is taken by both transports before the SDK
sees it, and cancels the call here. The SDK's own handling ended the whole
session (over stdio the process) when the cancel met the call's answer: one
that arrived after the handler's work and before its answer made the SDK
assert "Request already responded to", and one that arrived while the answer
was being sent let its `CancelledError` out of the request's task, which
cancelled the session's task group without a word (an audit with the
official client: the session ended after 11 to 55 calls each cancelled a few
milliseconds after it was sent). Here a cancel that comes too late (the call
has answered, or is answering) is ignored, as MCP allows; one that comes in
time ends the call's work, which is answered `Request cancelled` (a tool
call's as a tool error, the SDK's turn of the `McpError` raised here; a
resource read's as JSON-RPC code 0, as the SDK answered a cancel; stdio
drops that answer, as MCP says a cancelled request gets none). A cancel of
a request received whose handler has not started yet (the SDK starts each
in a task of its own; under load that is some milliseconds later) is kept
until it starts, or until the request is answered: ignored, a cancelled
`decision_wait` held its stream for up to its 240-second bound.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import anyio
import mcp.types as types
from mcp.shared.exceptions import McpError

from waypost.mcp_server.envelope import is_request_id

CANCELLED = types.ErrorData(code=0, message="Request cancelled")


def id_key(request_id: Any) -> str:
    """A request id as JSON, so that `5` and `"5"` stay two ids."""
    return json.dumps(request_id)


def cancelled_request(message: Any) -> Any | None:
    """The id a well-formed `notifications/cancelled` names; None for any other
    message (a list or an object is no id, and `true` would equal 1)."""
    if not isinstance(message, dict) or message.get("method") != "notifications/cancelled":
        return None
    if "id" in message or not isinstance(message.get("params"), dict):
        return None
    named = message["params"].get("requestId")
    return named if is_request_id(named) else None


class RunningCalls:
    """The calls running, each under its own cancel scope, by the key its
    transport gives it (`key_of`: the session and the request id over `/mcp`,
    the request id over stdio, whose process is the session)."""

    def __init__(self, key_of: Callable[[Any], Hashable]) -> None:
        self.key_of = key_of
        self._scopes: dict[Hashable, anyio.CancelScope] = {}
        # cancels of requests received whose handler has not started
        self._early: set[Hashable] = set()

    @contextlib.contextmanager
    def running(self, ctx: Any) -> Iterator[None]:
        """Run the block as the call of `ctx`; cancelled, it raises the SDK's
        `Request cancelled` for the SDK to answer."""
        key = self.key_of(ctx)
        with anyio.CancelScope() as scope:
            # a client that reuses an id while its first call runs cancels the later
            self._scopes[key] = scope
            if key in self._early:
                self._early.discard(key)
                scope.cancel()  # taken at the block's first await
            try:
                yield
            finally:
                if self._scopes.get(key) is scope:
                    del self._scopes[key]
        if scope.cancelled_caught:
            raise McpError(CANCELLED)

    def cancel(self, key: Hashable, received: bool) -> None:
        """Cancel the call of `key`; `received`: its request was received
        and is not answered yet, so a call not started yet is cancelled as
        it starts."""
        scope = self._scopes.get(key)
        if scope is not None:
            scope.cancel()
        elif received:
            self._early.add(key)

    def answered(self, key: Hashable) -> None:
        """The request of `key` is answered: a cancel kept for it goes (a
        request with no cancellable handler, `tools/list`, never takes it)."""
        self._early.discard(key)
