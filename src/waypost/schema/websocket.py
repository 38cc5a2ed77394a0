"""GraphQL over WebSocket (`graphql-transport-ws`): authentication in
`connection_init`.

The token travels in the `connection_init` payload as
`{"Authorization": "Bearer wp_..."}` (optionally with `"Waypost-Session"`, as
the HTTP header would carry it); a missing or bad one, or one named twice
in different cases, closes the socket with code 4401 before anything runs.
Strawberry itself closes a socket that sends `subscribe` before
`connection_init` (4401); a second `connection_init` is closed here (4429),
whatever its payload.

Every `subscribe` checks the token again, so a token revoked while its
socket is open runs nothing more on it (close 4401), and its payload passes
the same request rules as an HTTP body (schema/request_rules.py): a payload
that is not an object closes the socket (4400); a refused request (JSON the
strict parser refuses included) or a syntax error answers an `error`
message for that operation id.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from graphql import GraphQLError
from starlette import websockets as starlette_ws
from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import (
    CompleteMessage,
    ConnectionInitMessage,
    Message,
    SubscribeMessage,
)

from waypost.clock import format_time
from waypost.decoding import MESSAGE_MOST, clip, is_utf8
from waypost.errors import (
    Forbidden,
    PayloadTooLarge,
    Unauthenticated,
    Unavailable,
    WaypostError,
)
from waypost.http.auth import GRAPHQL_BODY_LIMIT
from waypost.http.headers import bearer_token
from waypost.http.responses import graphql_extensions
from waypost.http.websocket_closing import STOP_GRACE_SECONDS
from waypost.live import TooManyStreams, hub_for
from waypost.observe.requests import note_principal
from waypost.resolvers.access import principals, sessions
from waypost.runtime import Actor, Runtime
from waypost.schema import request_rules
from waypost.schema.context import Context
from waypost.schema.frame_top import member_value, top_level
from waypost.schema.variable_errors import reworded
from waypost.storage.turns import CALLER

log = logging.getLogger("waypost.graphql")

# the context of a socket before connection_init names its caller; nothing
# runs with it (Strawberry refuses operations before the acknowledgement)
NOBODY = Actor(principal_id="", kind="", name="", token_id="")


async def authenticate(rt: Runtime, payload: object) -> tuple[Actor, str]:
    """(caller, token) from a connection_init payload, or Unauthenticated."""
    if not isinstance(payload, dict):
        raise Unauthenticated("unauthenticated")
    # header names, as over HTTP, in any case; and as over HTTP a header
    # named twice (`Authorization` and `authorization`) is ambiguous: which
    # token or session was meant is not guessed
    headers: dict[str, object] = {}
    for key, value in payload.items():
        name = str(key).lower()
        if name in headers and name in ("authorization", "waypost-session"):
            raise Unauthenticated(f"{name} is named twice in the connection_init payload")
        headers[name] = value
    header = headers.get("authorization")
    token = bearer_token(header) if isinstance(header, str) else None
    if token is None:
        raise Unauthenticated("unauthenticated")
    session_id = headers.get("waypost-session")
    if session_id is not None and not isinstance(session_id, str):
        # a session named in a form no header could carry is not ignored:
        # the caller meant to act in it
        raise Forbidden.reason("session_not_live", "Waypost-Session must be a string")
    at = format_time(rt.now())

    def check(conn: Any) -> Actor:
        actor = principals.authenticate(conn, token, "api")
        if isinstance(session_id, str):
            actor = sessions.enter_session(conn, actor, session_id, at)
        return actor

    return await rt.db.read(check), token


class RefusedPayload(dict[str, object]):
    """Stands in for the payload of a `subscribe` frame the strict parser
    refused (a duplicate key, `NaN`, an integer past 64 bits), so that the
    refusal is answered for its operation, as docs/graphql.md says, instead
    of closing the socket (4400) and every other subscription on it."""

    def __init__(self, refusal: WaypostError) -> None:
        super().__init__()
        self.refusal = refusal


def oversized_subscribe(raw: bytes) -> dict[str, object] | None:
    """The `subscribe` frame `raw` refused for its operation when its payload,
    the document and variables, is over POST /graphql's body limit as sent
    (`payload_too_large`), as that body is; else None. Measured once parsed
    and encoded again, compact, a payload of escaped text (`\\ud83d\\ude00`,
    as Python's json writes an emoji) ran at three times what HTTP refused
    (limitsjourney)."""
    if len(raw) <= GRAPHQL_BODY_LIMIT:
        return None  # a frame no larger than the limit holds no payload past it
    members = top_level(raw.decode("utf-8", "replace"))
    payload = members.get("payload") if members is not None else None
    if payload is None or len(payload.encode()) <= GRAPHQL_BODY_LIMIT:
        return None
    message = f"a GraphQL document and its variables are limited to {GRAPHQL_BODY_LIMIT} bytes"
    return refused_subscribe(raw, PayloadTooLarge(message), members)


def _operation_id(members: dict[str, str]) -> object:
    """The frame's `id`: a string of any length (its text has no depth and no
    number to parse: read whole, cheaply), else as `member_value` reads it.
    An id past member_value's 1,024 characters went unread, and an oversized
    payload under it ran (review74)."""
    text = members.get("id", "")
    if text.startswith('"'):
        try:
            return json.loads(text)
        except ValueError:
            return None
    return member_value(members, "id")


def refused_subscribe(
    raw: bytes, refusal: WaypostError, members: dict[str, str] | None = None
) -> dict[str, object] | None:
    """The `subscribe` frame `raw` (which the strict parser refused: `refusal`)
    with its payload replaced by a RefusedPayload, read leniently for its type
    and id (`members`, when already read); None when it is no such frame
    (then the socket closes, 4400)."""
    if members is None:
        members = top_level(raw.decode("utf-8", "replace"))
    if members is None or member_value(members, "type") != "subscribe":
        return None
    operation_id = _operation_id(members)
    if not isinstance(operation_id, str) or not members.get("payload", "").startswith("{"):
        return None
    if not operation_id.isascii() and not is_utf8(operation_id):
        return None  # a lone surrogate: no frame could carry it back
    return {"type": "subscribe", "id": operation_id, "payload": RefusedPayload(refusal)}


def _unavailable(error: Unavailable) -> dict[str, Any]:
    """A GraphQL error for a store that cannot answer now, as over HTTP."""
    return {"message": error.message, "extensions": graphql_extensions(error)}


# What a send to a client that went away raises: Strawberry's own class, and
# Starlette's. Starlette's WebSocketDisconnected (a RuntimeError) is not in
# every release pyproject.toml admits (0.40 has none: a send after the close
# raised a plain RuntimeError there, which stays a fault here)
_CLIENT_GONE: tuple[type[BaseException], ...] = (
    WebSocketDisconnected,
    starlette_ws.WebSocketDisconnect,
    *((gone,) if (gone := getattr(starlette_ws, "WebSocketDisconnected", None)) else ()),
)


# What uvicorn raises for a send after it closed the socket itself (its
# keepalive cut a client that stopped reading, ping unanswered): a plain
# RuntimeError, so matched by its words, in each of uvicorn's implementations
_CLOSED_BY_SERVER = "Unexpected ASGI message 'websocket.send', after sending 'websocket.close'"


def client_gone(error: BaseException) -> bool:
    """Whether `error` says only that the client is gone (or was cut off)."""
    return isinstance(error, _CLIENT_GONE) or (
        type(error) is RuntimeError and str(error).startswith(_CLOSED_BY_SERVER)
    )


# Operations one socket runs at once (Strawberry's own default figure, which
# its check, after ours, would refuse with "Subscription limit reached").
MAX_OPERATIONS = 100


# One event goes to every subscriber within the same millisecond, and the
# clock is said to the millisecond: read and formatted once a millisecond
# for all of them (it cost 4 us a message, measured in the fanout bench,
# where a hundred `projectEvents` subscriptions send a hundred messages a
# write). (runtime's clock, monotonic millisecond, text)
_said: tuple[object, int, str] = (None, -1, "")


def _clock_text(rt: Runtime) -> str:
    global _said
    tick = time.monotonic_ns() // 1_000_000
    clock, said_at, text = _said
    if clock is not rt.clock or said_at != tick:
        text = format_time(rt.now())
        _said = (rt.clock, tick, text)
    return text


class TransportWS(BaseGraphQLTransportWSHandler[Context, None]):
    _init_payload: object = None
    # the token this socket is counted for (Hub.open_socket) once acknowledged
    _counted: str | None = None
    # re-checks that token while the socket is open (`_watch_token`), and
    # closes the socket once the server stops (`_close_at_stop`)
    _token_watch: asyncio.Task[None] | None = None
    _stop_watch: asyncio.Task[None] | None = None

    async def send_message(self, message: Any) -> None:
        # parse and validation errors (the query limits among them) carry the
        # same code as over HTTP; field errors are shaped by the executor. A
        # query's or mutation's `next` holds the request's own errors too
        # (variables that do not fit their types): they had no code at all
        kind = message.get("type")
        if kind == "error":
            errors = message.get("payload") or []
        elif kind == "next":
            errors = (message.get("payload") or {}).get("errors") or []
        else:
            errors = []
        if kind == "next" and isinstance(message.get("payload"), dict):
            message = {**message, "payload": self._with_now(message["payload"])}
        for error in errors:
            extensions = error.setdefault("extensions", {})
            text = error.get("message")
            if "code" not in extensions:
                extensions["code"] = "invalid_request"
                if isinstance(text, str):  # a variable named by its path, as over HTTP
                    text, field = reworded(text, self.schema)
                    if field is not None:
                        extensions["field"] = field
            # as over HTTP (view.shape_error): a refused value is not echoed whole
            if isinstance(text, str):
                error["message"] = clip(text, MESSAGE_MOST)
        await super().send_message(message)

    def _with_now(self, payload: dict[str, Any]) -> dict[str, Any]:
        """`payload` with the service's clock as it is sent (`extensions.now`),
        as `Waypost-Now` says it on every HTTP answer: a dashboard counting
        down to a decision's expiry over the socket had no clock of the
        service's to count by (it may be simulated, or hours from the
        browser's). A copy: one event's answer may be shared by several
        subscriptions. Left as it is when a clock file being rewritten
        cannot be read: the message stands."""
        try:
            now = _clock_text(self.context.rt)
        except Unavailable:
            return payload
        extensions = payload.get("extensions")
        return {**payload, "extensions": {**(extensions or {}), "now": now}}

    async def handle_task_exception(self, error: Exception) -> None:
        """Strawberry logs any fault of an operation's task as an ERROR with a
        traceback; a client that went away while an event was being sent to
        it (a closed console tab) is no fault of the service (section 14).

        Strawberry turns the first failed send into its own
        WebSocketDisconnected; a socket's other subscriptions then meet
        Starlette's (sending after the close), which is not that class; and
        one cut by uvicorn's keepalive meets uvicorn's RuntimeError."""
        if client_gone(error):
            log.debug("a subscriber went away while an event was sent to it")
            return
        await super().handle_task_exception(error)

    async def handle_connection_init(self, message: ConnectionInitMessage) -> None:
        payload = message.get("payload")
        if self.connection_init_received:
            # the protocol's 4429 for any second init: Strawberry judged its
            # payload first, so a second one with `null` or a list got 4400
            await self.websocket.close(code=4429, reason="Too many initialisation requests")
            return
        if not isinstance(payload, dict | None):
            # the protocol's payload is an object or absent: anything else is a
            # malformed message (4400), not a bad credential (it closed 4401)
            self.connection_init_received = True
            await self.handle_invalid_message("connection_init's payload must be an object")
            return
        try:
            actor, token = await authenticate(self.context.rt, message.get("payload"))
        except Unavailable:
            # the store could not answer: 1013 "try again later", not a bad token
            self.connection_init_received = True
            await self.websocket.close(code=1013, reason="Try again later")
            return
        except WaypostError:
            # also a session that is not live: the socket gets no caller at all
            self.connection_init_received = True
            await self.websocket.close(code=4401, reason="Unauthorized")
            return
        hub = hub_for(self.context.rt)
        try:
            hub.open_socket(actor.token_id)
        except TooManyStreams as full:
            # 1008, "policy violation": the socket is refused, the token
            # is good (4401 would tell the client to ask for another)
            self.connection_init_received = True
            await self.websocket.close(code=1008, reason=full.message)
            return
        self._counted = actor.token_id
        self.context.actor, self.context.token = actor, token
        note_principal(actor.principal_id)
        CALLER.set(actor.principal_id)  # its operations' turns (storage/turns.py)
        self._init_payload = message.get("payload")
        self._token_watch = asyncio.create_task(self._watch_token(hub.limits.recheck_seconds))
        await super().handle_connection_init(message)

    async def _watch_token(self, seconds: float) -> None:
        """Close the socket once its token is revoked (or its session ends),
        checked as often as streams check theirs. A socket with no
        subscription ran nothing that would notice, so it stayed open and
        counted against the caps for ever."""
        while True:
            await asyncio.sleep(seconds)
            try:
                await authenticate(self.context.rt, self._init_payload)
            except Unavailable:
                continue  # the store, not the caller: look again next time
            except WaypostError as refused:
                # the client may be leaving at the same moment: nothing to tell it then
                with contextlib.suppress(*_CLIENT_GONE, RuntimeError):
                    await self._refuse_operations(refused)
                    await self.websocket.close(code=4401, reason="Unauthorized")
                return

    async def _refuse_operations(self, refused: WaypostError) -> None:
        """Each running operation's end, with the refusal as its error, as a
        stream that re-checks first ends (live/streams.py): this watch began
        at `connection_init`, so it came first nearly always, and the
        subscriptions ended with the socket alone (review90)."""
        error = {"message": refused.message, "extensions": graphql_extensions(refused)}
        for operation_id in list(self.operations):
            await self.send_message({"id": operation_id, "type": "next",
                                     "payload": {"errors": [error]}})  # fmt: skip
            await self.send_message({"id": operation_id, "type": "complete"})

    def on_request_accepted(self) -> None:
        super().on_request_accepted()
        # from the socket's start: one that has sent no connection_init yet
        # waited out uvicorn's delayed 1012, a second more (review85)
        self._stop_watch = asyncio.create_task(self._close_at_stop())

    async def _close_at_stop(self) -> None:
        """Once the server stops, close the socket `1012` (service restart)
        after its operations have ended: the hub ends every subscription's
        stream, and each sends its `complete` as it ends. uvicorn's own 1012
        came at its stop's first tick, before a subscription busy with
        events had ended (shutdownjourney); it now waits for this close, up
        to http/websocket_closing.STOP_GRACE_SECONDS."""
        await self.context.rt.stopping.wait()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STOP_GRACE_SECONDS
        while self.operations and loop.time() < deadline:
            await asyncio.sleep(0.01)
        with contextlib.suppress(*_CLIENT_GONE, RuntimeError):
            await self.websocket.close(code=1012, reason="Service Restart")

    async def shutdown(self) -> None:
        try:
            await super().shutdown()
        finally:
            if self._counted is not None:
                hub_for(self.context.rt).close_socket(self._counted)
                self._counted = None
            watches = (self._token_watch, "token watch"), (self._stop_watch, "stop watch")
            self._token_watch = self._stop_watch = None
            for watch, what in watches:
                if watch is None:
                    continue
                watch.cancel()
                try:
                    await watch
                except asyncio.CancelledError:
                    pass
                except Exception:  # a fault of a watch must not cut the socket's clean-up
                    log.exception("the %s of a GraphQL WebSocket failed", what)

    async def handle_message(self, message: Message) -> None:
        if not isinstance(message, dict):
            await self.handle_invalid_message("WebSocket message must be a JSON object")
            return
        await super().handle_message(message)

    async def handle_complete(self, message: CompleteMessage) -> None:
        # Strawberry looks the id up in a dict: a list or an object raised
        # TypeError, an ERROR traceback for any client, token or none
        if not isinstance(message.get("id"), str):
            await self.handle_invalid_message("complete needs the id of an operation")
            return
        await super().handle_complete(message)

    async def _refuse(self, operation_id: str, error: dict[str, Any]) -> None:
        """An `error` frame for an operation refused before it is known to
        run, counted as the operations metric counts HTTP's early refusals."""
        self.context.rt.metrics.graphql_refused()
        await self.send_message({"id": operation_id, "type": "error", "payload": [error]})

    async def handle_subscribe(self, message: SubscribeMessage) -> None:
        payload, operation_id = message.get("payload"), message.get("id")
        if not isinstance(payload, dict) or not isinstance(operation_id, str) or not operation_id:
            # an empty id names no operation the client could complete later
            await self.handle_invalid_message("subscribe needs an id and a payload object")
            return
        # an id still running, or a socket not yet acknowledged: Strawberry
        # closes it (4409, 4401) before anything of ours could answer for it
        if self.connection_acknowledged and operation_id not in self.operations:
            try:
                # the token (and session) named at connection_init, checked again:
                # a revocation ends what the socket may run at once
                await authenticate(self.context.rt, self._init_payload)
            except Unavailable as busy:
                # the store, not the caller: this operation fails, the socket stays
                await self.send_message(
                    {"id": operation_id, "type": "error", "payload": [_unavailable(busy)]}
                )
                return
            except WaypostError:
                await self.websocket.close(code=4401, reason="Unauthorized")
                return
            if isinstance(payload, RefusedPayload):
                refusal = payload.refusal
                extensions = graphql_extensions(refusal)
                # named as in an HTTP body: the frame's `payload.` is not the request's
                where = extensions.get("field")
                if isinstance(where, str) and where.startswith("payload."):
                    extensions["field"] = where.removeprefix("payload.")
                invalid = {"message": refusal.message, "extensions": extensions}
                await self._refuse(operation_id, invalid)
                return
            why = await request_rules.refusal(payload, over_http=False)
            # a syntax error too (Strawberry's stream would only log it), and an
            # operation name that selects nothing (Strawberry closed the whole
            # socket, 4400, and every other subscription on it)
            found = (
                await request_rules.unrunnable(payload["query"], payload.get("operationName"))
                if why is None
                else None
            )
            if why is not None or found is not None:
                error = found if found is not None else GraphQLError(why or "")
                await self._refuse(operation_id, dict(error.formatted))
                return
            most = MAX_OPERATIONS
            if len(self.operations) >= most:
                # Strawberry's own refusal said "Subscription limit reached" of
                # any operation and took `invalid_request`: a valid query a
                # client should send again once another ends
                crowded = {
                    "message": f"at most {most} operations run at once on one socket:"
                    " send this one again once another has completed",
                    "extensions": {"code": "too_many_operations", "most": most},
                }
                await self._refuse(operation_id, crowded)
                return
        await super().handle_subscribe(message)
