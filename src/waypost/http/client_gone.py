"""Telling that a REST read's or a GraphQL request's client has gone.

uvicorn does not cancel a request's task when its client disconnects: the
task runs to its end and its answer goes nowhere. A REST read's body is
never read (its route takes none), and a GraphQL request's is read whole
before it runs, so their `receive` is free to watch for the disconnect; a
request that waits for a place of a gate (a search queued for the search
lane, storage/db.py) watches it and ends there, never running
(`cancelling.caller_gone`).

It sees a close only while the connection is read: a request pipelined
behind this one once it waits pauses reading until this answer is sent, so
a client that sent another request then and left is not seen to go, and
its search runs (review48; one sent with it is read by the watch itself,
review49).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from starlette.types import Receive


def disconnect_of(receive: Receive) -> Callable[[], Coroutine[Any, Any, None]]:
    """What returns once the client has gone: uvicorn then answers every
    `receive` with `http.disconnect` (any body a client sent with its GET is
    read and dropped on the way)."""

    async def disconnected() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    return disconnected
