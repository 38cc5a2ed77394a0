"""Streamable HTTP at /mcp on the public listener.

The public app's bearer authentication (waypost.http.auth) has already checked the
bearer token when a request gets here; tools run as that actor, in process.
An MCP session belongs to the principal that opened it: the SDK's session
manager refuses its id to anyone else (it compares `scope["user"]`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST
from starlette.requests import ClientDisconnect
from starlette.types import Message, Receive, Scope, Send

from waypost.errors import PayloadTooLarge, UnsupportedMediaType, WaypostError
from waypost.http.auth import MCP_UNAVAILABLE
from waypost.http.bodies import buffer_body, replaying
from waypost.http.headers import bearer_token, content_coding_refusal, header
from waypost.http.responses import error_headers, security_headers_send, send_json
from waypost.live import hub_for
from waypost.live.streams import still_valid
from waypost.mcp_server.advice import explain
from waypost.mcp_server.backend import Backend, LocalBackend
from waypost.mcp_server.calls import ApiError
from waypost.mcp_server.envelope import (
    ID_SEARCH_MAX,
    MESSAGE_LIMIT,
    Refusal,
    RequestId,
    dropped_notification,
    envelope_refusal,
    is_request_id,
    is_response,
    params_refusal,
    read_message,
    request_id_quickly,
    tool_refusal,
    unknown_method,
)
from waypost.mcp_server.running import RunningCalls, cancelled_request, id_key
from waypost.mcp_server.server import CLIENT_GONE, Context, build_server, tool_error
from waypost.mcp_server.sessions import HEARTBEAT_SECONDS
from waypost.mcp_server.tools import tool_names
from waypost.runtime import Actor, Runtime

# An MCP session with no request in flight (and no open stream) for this long
# is closed, which ends its agent session: as long as a Waypost session lives
# without a heartbeat, so an abandoned client holds nothing longer than that.
IDLE_SECONDS = 15 * 60
BODY_LIMIT = MESSAGE_LIMIT
TOO_LARGE = f"MCP bodies are limited to {BODY_LIMIT} bytes"
# MCP sessions one principal may hold open (as streams per token): the SDK
# caps sessions only for the whole server (10,000), so one agent's token
# filled them all in a minute (and 700 MB), and every other principal was
# refused for the idle timeout.
SESSIONS_PER_PRINCIPAL = 16
# Once the server stops, calls in flight get at least this long to answer (a
# decision_wait answers `unavailable` at once) before every MCP session ends,
# and a call still running is waited for up to the busy timeout plus
# STOP_DRAIN_EXTRA_SECONDS: a write queued behind another process's lock
# gets its answer (`unavailable` at worst) within the busy timeout and a
# second, as a REST request does. Ending the sessions at 0.5 s closed such a
# call's stream with no answer, and the SDK client waited for ever.
STOP_GRACE_SECONDS = 0.5
STOP_DRAIN_EXTRA_SECONDS = 2.0


class _QuietClosedStreams(logging.Filter):
    """The SDK logs an ERROR with a traceback when a client closes its session
    while the server-to-client stream is open; a client going away is no fault."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError)


class _ClientFaultsAsWarnings(logging.Filter):
    """The SDK logs what a client sent that it could not use (a JSON-RPC
    response to a request never made, ...) as an ERROR holding the whole
    payload: a client's mistake, not a fault of the service, and a way for
    any client to write lines of 250,000 characters. A short WARNING instead."""

    PREFIX = "Received exception from stream: "

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if record.levelno == logging.ERROR and message.startswith(self.PREFIX):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg = message[: len(self.PREFIX) + 200]
            record.args = None
        return True


log = logging.getLogger("waypost.mcp")
logging.getLogger("mcp.server.streamable_http").addFilter(_QuietClosedStreams())
logging.getLogger("mcp.server.lowlevel.server").addFilter(_ClientFaultsAsWarnings())
# the SDK logs every request at INFO; Waypost's own log says what matters
logging.getLogger("mcp").setLevel(logging.WARNING)


def _sdk_reads_as_json(media_type: str | None) -> bool:
    """Whether the SDK would parse this body as JSON: it looks at the part
    before the first `;` only (`application/json; foo=bar` too), so every such
    body must pass our parser first, not only the strict REST media types."""
    return (media_type or "").split(";", 1)[0].strip().lower() == "application/json"


async def _json_rpc_error(
    send: Send, status: int, code: int, message: str, request_id: str | int | None = None
) -> None:
    """A JSON-RPC error (with no request id when the request could not be read)."""
    await send_json(send, status, Refusal(request_id, code, message).as_json())


def _bad_initialize(message: Any) -> Refusal | None:
    """The refusal of an initialize request whose params MCP refuses.

    The SDK answers it with a 200 and an error, and keeps the session it
    opened for it until the idle timeout: sixteen such mistakes shut the
    principal out of new sessions. None for anything else."""
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    return params_refusal(message)


def _refused_in_session(message: Any) -> Refusal | None:
    """`-32601` for a request naming a method MCP does not have, `-32602`
    naming the field for one whose params MCP's schema refuses; None for
    anything else, left to the SDK. Only asked for a request in one of the
    caller's live sessions whose headers the SDK would take (its checks of
    the session and the headers come first)."""
    if not isinstance(message, dict):
        return None
    if not is_request_id(message.get("id")):
        return None  # a notification: the SDK's to read
    return unknown_method(message) or params_refusal(message) or tool_refusal(message, tool_names())


# what the SDK reads in place of a refused message whose headers it refuses
_STAND_IN = b'{"jsonrpc": "2.0", "id": 0, "method": "ping"}'


def _stand_in(scope: Scope, unread: Receive) -> tuple[Scope, Receive]:
    """The request the SDK is handed in place of a refused message, for it
    to answer its own refusal of the headers: a ping, with its own length,
    so that nothing this endpoint refused reaches the SDK (its json.loads,
    its body limit, a tool) even where its checks differ from ours."""
    headers = [
        (k, v) for k, v in scope["headers"] if k not in (b"content-length", b"transfer-encoding")
    ]
    headers.append((b"content-length", str(len(_STAND_IN)).encode()))
    return {**scope, "headers": headers}, replaying(_STAND_IN, unread)


def _sdk_would_serve(scope: Scope, message: Any) -> bool:
    """The SDK's own checks of a POST's headers, as it makes them: an Accept
    naming both JSON and the event stream (by prefix; `*/*` is not enough),
    and a protocol version it supports when one is named, except for an
    `initialize` request (which is how a version is agreed: the SDK skips
    it; a notification of that name, with no id, is held to it)."""
    accepted = [t.strip() for t in (header(scope, b"accept") or "").split(",")]
    version = header(scope, b"mcp-protocol-version")
    return (
        any(t.startswith("application/json") for t in accepted)
        and any(t.startswith("text/event-stream") for t in accepted)
        and (
            version is None
            or version in SUPPORTED_PROTOCOL_VERSIONS
            or (_method_of(message) == "initialize" and is_request_id(_id_of(message)))
        )
    )


def _method_of(message: Any) -> str | None:
    """The method of a POST's message, a refused one's too where known."""
    if isinstance(message, Refusal):
        return message.method
    found = message.get("method") if isinstance(message, dict) else None
    return found if isinstance(found, str) else None


# Headers that carry one value here, as a refusal spells them (the SDK reads
# the first of each; this endpoint reads them with `header`, which refuses a
# repeat)
_SINGLE_HEADERS = {
    b"mcp-session-id": "Mcp-Session-Id",
    b"mcp-protocol-version": "MCP-Protocol-Version",
    b"last-event-id": "Last-Event-ID",
    b"origin": "Origin",
    b"host": "Host",
}


# This server keeps no event store: its stream events carry no id, so any
# Last-Event-ID names none of them.
NO_RESUMING = (
    "this server does not resume streams (its events carry no id): open the stream"
    " without Last-Event-ID; for an answer a dropped stream lost, send the request"
    " again: a write with the same id in the same session, or the same"
    " idempotency_key, is answered from its receipt, not run twice"
)


def _repeated_header(scope: Scope) -> str | None:
    """What to say of a header sent twice, or None. Read later, a repeat
    raised outside any handler: a 500 and an ERROR traceback for any caller."""
    try:
        for name, spelled in _SINGLE_HEADERS.items():
            header(scope, name, spelled)
    except WaypostError as error:
        return error.message
    return None


def _loopback(host: str) -> bool:
    """Whether `host` (a Host header's or an origin's, port and all) names
    this machine: `localhost`, 127.0.0.0/8 or [::1]."""
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def _origin_refusal(scope: Scope) -> str | None:
    """What to say of a request whose `Origin` this endpoint refuses, or None.

    MCP (2025-06-18, transports, "Security Warning"): servers MUST validate
    the Origin header, and answer 403 when it is present and invalid, against
    DNS rebinding. Clients that are no browser send none. A request from a
    browser is served only when its origin and the host it names are both
    this machine: in a rebinding, the page's origin and the Host header name
    the attacker's host, so comparing them with each other proves nothing.
    (A page of another origin cannot send the bearer token without a CORS
    preflight, which /mcp never grants: this check is the rest of the way.)"""
    origin = header(scope, b"origin")
    if origin is None:
        return None
    scheme, sep, rest = origin.partition("://")
    if (
        sep
        and scheme.lower() in ("http", "https")
        and _loopback(rest)
        and _loopback(header(scope, b"host") or "")
    ):
        return None
    return (
        f"Origin {origin[:100]} may not call this endpoint: a browser's request is served"
        " only from a loopback origin to a loopback host"
    )


def _media_types_lowered(scope: Scope) -> Scope:
    """The scope with `Content-Type` and `Accept` in lower case, and its
    `Accept` lines joined into one.

    Media types are case-insensitive (RFC 9110, 8.3.1), and /api/v1 and
    /graphql compare them so; the SDK compares them as sent (`Application/JSON`
    was 415, an `Accept` of `Application/JSON, Text/Event-Stream` 406). Accept
    is a list: two lines mean what one line of both, comma-separated, means
    (RFC 9110, 5.3), and the SDK reads the first line only, so a client that
    sent JSON and the event stream on two lines was refused."""
    headers = scope["headers"]
    accepts = [v for k, v in headers if k == b"accept"]
    if len(accepts) < 2 and not any(
        k in (b"content-type", b"accept") and v != v.lower() for k, v in headers
    ):
        return scope
    kept = [(k, v.lower() if k == b"content-type" else v) for k, v in headers if k != b"accept"]
    if accepts:
        kept.append((b"accept", b", ".join(accepts).lower()))
    return {**scope, "headers": kept}


def _id_of(message: Any) -> RequestId | None:
    """The id of a POST's request, when it has one (a refused one's too)."""
    if isinstance(message, Refusal):
        return message.request_id
    found = message.get("id") if isinstance(message, dict) else None
    return found if is_request_id(found) else None


def _actor(scope: Scope) -> Actor:
    actor: Actor = scope["state"]["actor"]
    return actor


@dataclass
class _Session:
    """An MCP session as the SDK's idle timer sees it: idle only while no
    request of it is in flight (an open GET stream is one), counted from the
    end of the last. Aged by the end of requests alone, a session whose GET
    stream stayed open (the official client keeps one) dropped out of the
    table after 15 minutes though the SDK kept it: the principal's cap and
    the session's own checks stopped holding."""

    in_flight: int = 0
    idle_since: float = field(default_factory=time.monotonic)

    def begin(self) -> None:
        self.in_flight += 1

    def end(self) -> None:
        self.in_flight -= 1
        if not self.in_flight:
            self.idle_since = time.monotonic()

    def idle_before(self, cutoff: float) -> bool:
        return not self.in_flight and self.idle_since < cutoff


async def _read_post(scope: Scope, receive: Receive, send: Send) -> tuple[Any, Receive] | None:
    """A POST's JSON-RPC message and a `receive` that hands its body on; the
    message is a `Refusal` for one whose params or size are refused (answered
    once the session is known). None when the POST was answered here: a media
    type or content coding refused, a body past the limit with no id found,
    a message the envelope refuses.

    The SDK parses with json.loads: a body nested a few thousand levels deep
    raised RecursionError (a 500), and duplicate keys, NaN or integers past
    64 bits passed. The REST parser goes first, then the envelope's own rules
    (mcp_server/envelope.py)."""
    try:
        if not _sdk_reads_as_json(header(scope, b"content-type")):
            raise UnsupportedMediaType("send the message as application/json")
        coded = content_coding_refusal(scope)
        if coded is not None:
            raise UnsupportedMediaType(coded)
        # read up to the id search's bound: a message past the limit is
        # refused with its id where one is found (the official client waited
        # for ever on a 413 with `"id": null`)
        body, receive = await buffer_body(scope, receive, ID_SEARCH_MAX, "MCP bodies")
        too_large = len(body) > BODY_LIMIT
        found = request_id_quickly(body) if too_large else None
        if too_large and found is None:
            await _json_rpc_error(send, 413, INVALID_REQUEST, TOO_LARGE)
            return None
    except ClientDisconnect:
        return None
    except PayloadTooLarge:  # past the search's bound too: no id is looked for
        await _json_rpc_error(send, 413, INVALID_REQUEST, TOO_LARGE)
        return None
    except WaypostError as error:
        await _json_rpc_error(send, error.status, INVALID_REQUEST, error.message)
        return None
    if too_large:
        # answered as a refused argument is, with its id: 200 in a live
        # session, where the official client took a 413 for the transport
        # failing and ended the whole session
        return Refusal(found, INVALID_REQUEST, TOO_LARGE, status=413), receive
    message = read_message(body)
    refusal = message if isinstance(message, Refusal) else envelope_refusal(message)
    if refusal is not None and refusal.code != INVALID_PARAMS and not refusal.silent:
        await send_json(send, 400, refusal.as_json())
        return None
    return message, receive


class McpEndpoint:
    """The ASGI app mounted at /mcp; `run()` belongs in the app's lifespan."""

    def __init__(
        self, runtime: Callable[[], Runtime], heartbeat_seconds: float = HEARTBEAT_SECONDS
    ) -> None:
        self._runtime = runtime
        self._calls = RunningCalls(_call_key)
        self.server = build_server(self._backend_for, self._calls, heartbeat_seconds)
        self.manager = StreamableHTTPSessionManager(
            app=self.server, session_idle_timeout=IDLE_SECONDS, max_request_body_size=BODY_LIMIT
        )
        # principal -> its sessions' ids -> each (the SDK's own table is
        # private: this one ages them as it does)
        self._sessions: dict[str, dict[str, _Session]] = {}
        # principal -> its initialize requests not yet answered: each may
        # become a session, so the cap counts them (40 at once all got one);
        # one answered with a session counts as that session from then on
        self._opening: dict[str, int] = {}
        # (session, request id) of the requests running now: the SDK keys a
        # request's answer by its id, so a second with the same id took the
        # first's place and one of the two was never answered (nor did the
        # server stop while its client waited)
        self._running: set[tuple[str, str]] = set()

    def _backend_for(self, ctx: Context) -> Backend:
        # a tool call over Streamable HTTP always carries its HTTP request
        assert ctx.request is not None
        return LocalBackend(self._runtime(), _actor(ctx.request.scope))

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Run the session manager for as long as the app lives.

        The manager's task group is entered and left in one task of its own:
        a lifespan may be entered and left in different tasks (test fixtures
        do), and a task group must not be.
        """
        started, stop = asyncio.Event(), asyncio.Event()
        stopping = self._runtime().stopping
        self._runtime().metrics.set_mcp_sessions(self.session_count)

        async def hold() -> None:
            async with self.manager.run():
                started.set()
                # the app's end, or the server stopping: an open session (its
                # GET stream) would keep uvicorn waiting for the connection
                ends = [asyncio.create_task(stop.wait()), asyncio.create_task(stopping.wait())]
                await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
                for end in ends:
                    end.cancel()
                if stopping.is_set():
                    await self._calls_answered()

        holder = asyncio.create_task(hold())
        waiter = asyncio.create_task(started.wait())
        await asyncio.wait([holder, waiter], return_when=asyncio.FIRST_COMPLETED)
        if holder.done():
            waiter.cancel()
            holder.result()  # re-raise why the manager could not start
        try:
            yield
        finally:
            stop.set()
            await holder

    async def _calls_answered(self) -> None:
        """The stop's grace, then until no call is running (bounded)."""
        settings = self._runtime().settings
        busy = settings.busy_timeout_ms / 1000 if settings else 0.0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + busy + STOP_DRAIN_EXTRA_SECONDS
        await asyncio.sleep(STOP_GRACE_SECONDS)
        while self._running and loop.time() < deadline:
            await asyncio.sleep(0.05)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        message: Any = None  # a POST's JSON-RPC message, once read
        unread = receive  # before a POST's body is read
        scope = _media_types_lowered(scope)
        # what every answer of the service carries, in place of the SDK's own
        # (its event streams said `Cache-Control: no-cache, no-transform`)
        send = security_headers_send(send, replace=True)
        if scope["method"] == "POST":
            read = await _read_post(scope, receive, send)
            if read is None:
                return  # answered: nothing in it reaches the SDK
            message, receive = read
        refused = _headers_refusal(scope)
        if refused is not None:
            status, text = refused
            await _json_rpc_error(send, status, INVALID_REQUEST, text, _id_of(message))
            return
        unavailable = scope.get("state", {}).get(MCP_UNAVAILABLE)
        if unavailable is not None:
            await _answer_unavailable(scope, send, message, unavailable)
            return
        actor = _actor(scope)
        live = self._live(actor.principal_id)
        session_id = header(scope, b"mcp-session-id")
        known = session_id in live
        if isinstance(message, Refusal) and session_id is not None and not known:
            # an ended, unknown or another principal's session: the SDK's 404,
            # as for a message it reads (MCP answers a terminated session's
            # requests 404); its refusal said 400 or 413, on which the
            # official client, which starts again on a 404, died after a restart
            await _json_rpc_error(send, 404, INVALID_REQUEST, "Session not found")
            return
        # in a live session the SDK's checks of Accept and the protocol
        # version come first, for a refused message as for any: a refused
        # one was answered 200 where a valid one got the SDK's 406
        in_session = known and _sdk_would_serve(scope, message)
        if isinstance(message, Refusal) and known and not in_session:
            scope, receive = _stand_in(scope, unread)
        if await _answered_here(send, message, in_session, known):
            return
        cancelled = cancelled_request(message) if in_session else None
        if cancelled is not None:
            # taken here, not by the SDK, whose handling ended the session
            # when the cancel met the answer (running.py)
            key = (session_id, id_key(cancelled))
            self._calls.cancel(key, received=key in self._running)
            await _accepted(send)
            return
        # only in the caller's own sessions (another's id is the SDK's 404)
        running = _running_key(session_id, message) if known else None
        if running is not None and running in self._running:
            await _json_rpc_error(
                send, 409, INVALID_REQUEST,
                "a request with this id is still running in this session: wait for its"
                " answer (sent again once it has answered, it is answered from its receipt)",
                message["id"],
            )  # fmt: skip
            return
        opening = session_id is None and scope["method"] == "POST"
        if opening and not await self._may_open(send, actor, live, message):
            return
        await self._through_the_sdk(
            scope, receive, send, actor, (live, session_id), running=running, opening=opening
        )

    async def _may_open(
        self, send: Send, actor: Actor, live: dict[str, _Session], message: Any
    ) -> bool:
        """Whether this request may open a session; else it is answered here."""
        if len(live) + self._opening.get(actor.principal_id, 0) >= SESSIONS_PER_PRINCIPAL:
            await _json_rpc_error(
                send, 429, INVALID_REQUEST,
                f"at most {SESSIONS_PER_PRINCIPAL} MCP sessions of one principal may be"
                " open: close one (DELETE /mcp with its Mcp-Session-Id) or let one idle out",
                _id_of(message),  # as the endpoint's other refusals carry it
            )  # fmt: skip
            return False
        bad = _bad_initialize(message)
        if bad is not None:
            await send_json(send, 400, bad.as_json())
            return False
        return True

    async def _through_the_sdk(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        actor: Actor,
        sessions: tuple[dict[str, _Session], str | None],
        *,
        running: tuple[str, str] | None,
        opening: bool,
    ) -> None:
        """Hand the request to the SDK's session manager, keeping the books
        around it: the opening counted, the request id running, the session
        in flight, a GET stream watched for its token's revocation.
        `sessions`: the principal's live sessions, and the one named."""
        live, session_id = sessions
        # the principal, never the token: any of its tokens may use its sessions
        identity = AccessToken(
            token="", client_id=actor.principal_id, scopes=[], subject=actor.principal_id
        )
        gone = asyncio.Event()
        scope_with_user: dict[str, Any] = {
            **scope, "user": AuthenticatedUser(identity), CLIENT_GONE: gone
        }  # fmt: skip
        receive = _noting_disconnect(receive, gone)
        if opening:
            principal_id = actor.principal_id
            self._opening[principal_id] = self._opening.get(principal_id, 0) + 1
            # the opening stops counting as the session starts to: counted
            # both ways until the SDK's handler returned (after the client
            # had its answer), the next initialize was refused at 15 sessions
            opened = _Once(lambda: self._opened(principal_id))
            send = _noting_new_session(send, live, opened)
        session = live.get(session_id) if session_id is not None else None
        answered = _StatusNoted(send)
        send = answered.send
        if running is not None:
            self._running.add(running)
            # freed once, as the last part goes out or else at the end: a
            # re-send of the id may have taken the place by the end, and
            # freeing it again let a third request with the id in (the SDK
            # then filed its answer channel over the re-send's)
            unregister = _Once(lambda: self._answered(running))
            send = _on_last_part(send, unregister)
        watch: asyncio.Task[None] | None = None
        if scope["method"] == "GET":
            # the session's standalone stream: it runs until its client
            # leaves, so it must end once its token is revoked, as every
            # stream does; a revoked token's stream stayed open (185 s in an
            # audit), keeping its session from idling out
            revoked = asyncio.Event()
            token = bearer_token(header(scope, b"authorization")) or ""
            watch = asyncio.create_task(self._until_revoked(token, revoked))
            receive = _gone_once(receive, revoked)
            send, finish = _finishing(send)
        if session is not None:
            session.begin()  # in flight: the session is not idle meanwhile
        response = _OneResponse(send)
        try:
            await self.manager.handle_request(
                scope_with_user, receive, _null_sdk_error_ids(response.send)
            )
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            if not response.ended:
                raise
            # the session closed under a request already answered (its DELETE
            # raced it): nothing is left to tell the client; after the SDK's
            # own 500 the operator is told why (its log line is dropped:
            # _QuietClosedStreams), without a traceback
            if response.status >= 500:
                log.warning("MCP: a request was answered %d as its session closed", response.status)
            else:
                log.debug("MCP: the session closed after its request was answered")
        finally:
            # the book-keeping first and the one await last: a last part that
            # failed to go out (or a cancellation there) skipped what followed,
            # and the session stayed in flight, never idling out
            if watch is not None:
                watch.cancel()
            if running is not None:
                unregister()
            if opening:
                opened()  # a refused or failed initialize's place too
            if session is not None:
                session.end()
                # only a DELETE the SDK carried out ends the session (one it
                # refused, a bad protocol version, freed a place all the same)
                if scope["method"] == "DELETE" and 200 <= answered.status < 300:
                    live.pop(session_id or "", None)
            if watch is not None:
                await finish()

    def _answered(self, running: tuple[str, str]) -> None:
        self._running.discard(running)
        self._calls.answered(running)

    def _opened(self, principal_id: str) -> None:
        left = self._opening[principal_id] - 1
        if left:
            self._opening[principal_id] = left
        else:
            del self._opening[principal_id]

    async def _until_revoked(self, token: str, revoked: asyncio.Event) -> None:
        """Set `revoked` once the token no longer authenticates, looked at
        every `recheck_seconds` (section 14) as the other streams look (a
        store an operator must mend ends it too: it cannot tell)."""
        rt = self._runtime()
        seconds = hub_for(rt).limits.recheck_seconds
        while True:
            await asyncio.sleep(seconds)
            if not await still_valid(rt, token):
                revoked.set()
                return

    def session_count(self) -> int:
        """The sessions of every principal not idle past the SDK's idle
        timeout (for the metrics: a principal who never returns keeps its
        aged entries in the table until then)."""
        cutoff = time.monotonic() - IDLE_SECONDS
        return sum(
            not session.idle_before(cutoff)
            for sessions in self._sessions.values()
            for session in sessions.values()
        )

    def _live(self, principal_id: str) -> dict[str, _Session]:
        """The principal's sessions not idle past the SDK's idle timeout."""
        live = self._sessions.setdefault(principal_id, {})
        cutoff = time.monotonic() - IDLE_SECONDS
        for gone in [s for s, session in live.items() if session.idle_before(cutoff)]:
            del live[gone]
        return live


def _headers_refusal(scope: Scope) -> tuple[int, str] | None:
    """(status, text) refusing the request for its headers, before any
    session is looked at; None when they pass."""
    repeated = _repeated_header(scope)
    if repeated is not None:
        return 400, repeated
    foreign = _origin_refusal(scope)
    if foreign is not None:
        return 403, foreign
    if scope["method"] == "GET" and header(scope, b"last-event-id"):
        # the SDK, with no event store, returned from such a GET without
        # an answer: uvicorn's 500 and an ERROR line, for any client
        return 400, NO_RESUMING
    return None


async def _answered_here(send: Send, message: Any, in_session: bool, known: bool) -> bool:
    """Answer what never reaches the SDK (True when answered): a refused
    message, and in a live session what the SDK would mishandle."""
    if isinstance(message, Refusal) and message.silent and in_session:
        log.warning("a message was dropped unanswered (%s)", message.message)
        await _accepted(send)
        return True
    if isinstance(message, Refusal) and (in_session or not known):
        # a refused argument of a well-formed request, after the checks
        # of headers and origin: in a live session an answer to it (200),
        # as the SDK gives one (the official client took a 400 for the
        # transport failing and dropped the session); with no session, 400
        status = 200 if in_session else message.status
        await send_json(send, status, message.as_json())
        return True
    refused = _refused_in_session(message) if in_session else None
    if refused is not None:
        await send_json(send, 200, refused.as_json())
        return True
    dropped = dropped_notification(message) if in_session and isinstance(message, dict) else None
    if dropped is not None:
        if dropped:
            log.warning("a notification its schema refuses was dropped (%s)", dropped)
        await _accepted(send)
        return True
    if in_session and is_response(message):
        # this server asks nothing: the SDK logged an ERROR for the answer
        # and sent "Internal Server Error" down the session's stream
        log.warning("a response to no request of this server was dropped")
        await _accepted(send)
        return True
    return False


async def _answer_unavailable(scope: Scope, send: Send, message: Any, error: WaypostError) -> None:
    """The answer when the caller could not even be authenticated because
    the store (or the clock) is unavailable: a tool call's is a tool error,
    as a busy store's during the call is; any other request's a JSON-RPC
    error with its id. In a session (the caller's or not: nothing is known
    of the caller, and nothing is told) a request's answer is a 200, a
    notification's or a client's response's a 202 (dropped, and the log
    says so): any other status ended the official client's whole session. Anything else gets
    the error's own status (503) with its `Retry-After`."""
    text = explain(ApiError.of(error))
    # a client's response is never answered with its id (of the server's
    # numbering: the client may use it for a request of its own)
    request_id = None if is_response(message) else _id_of(message)
    in_session = header(scope, b"mcp-session-id") is not None and scope["method"] == "POST"
    if in_session and request_id is None:
        log.warning("a message was dropped unanswered (%s)", error.message)
        await _accepted(send)
        return
    body: dict[str, Any] = Refusal(request_id, INTERNAL_ERROR, text).as_json()
    calls_a_tool = isinstance(message, dict) and message.get("method") == "tools/call"
    if calls_a_tool and request_id is not None:
        result = tool_error(text).model_dump(mode="json", by_alias=True, exclude_none=True)
        body = {"jsonrpc": "2.0", "id": request_id, "result": result}
    await send_json(send, 200 if in_session else error.status, body, error_headers(error))


async def _accepted(send: Send) -> None:
    """202 with no body, as the SDK answers a notification or a response."""
    await send({"type": "http.response.start", "status": 202,
                "headers": [(b"content-length", b"0")]})  # fmt: skip
    await send({"type": "http.response.body", "body": b""})


def _call_key(ctx: Context) -> tuple[str | None, str]:
    """(session, id) of a call, as a cancel names it: the `Mcp-Session-Id`
    its request carried (a tool call always comes in a session)."""
    assert ctx.request is not None
    return header(ctx.request.scope, b"mcp-session-id"), id_key(ctx.request_id)


def _running_key(session_id: str | None, message: Any) -> tuple[str, str] | None:
    """(session, id) of a request within a session, the id as JSON so that
    `5` and `"5"` stay two ids; None for anything else (a notification, a
    response, a request opening a session)."""
    if session_id is None or not isinstance(message, dict) or "method" not in message:
        return None
    if "id" not in message:
        return None
    return session_id, id_key(message["id"])  # as `_call_key` names a call


# what the SDK puts in the id of the errors it answers itself (a missing or
# unknown session, a bad Accept, a method it does not serve): JSON-RPC's null
_SDK_ERROR_ID = "server-error"


def _null_sdk_error_ids(send: Send) -> Send:
    """`send` for the SDK's answers only: JSON-RPC's `"id": null` in the
    errors it answers itself, whose id is otherwise the string "server-error"
    (a client's own id of that name, in the endpoint's refusals, stands)."""
    held: list[Message] = []

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] >= 400:
            held.append(message)  # until its body says whose error it is
            return
        if message["type"] == "http.response.body" and held:
            held.append(message)
            if message.get("more_body", False):
                return
            start, *parts = held
            held.clear()
            for part in _with_null_error_id(start, parts):
                await send(part)
            return
        await send(message)

    return sending


def _with_null_error_id(start: Message, parts: list[Message]) -> list[Message]:
    """An error answer's messages, its `"id": "server-error"` made `null`."""
    body = b"".join(part.get("body", b"") for part in parts)
    try:
        data = json.loads(body)
    except ValueError:
        return [start, *parts]
    if not isinstance(data, dict) or data.get("id") != _SDK_ERROR_ID:
        return [start, *parts]
    data["id"] = None
    rewritten = json.dumps(data, separators=(",", ":")).encode()
    headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(rewritten)).encode()))
    return [{**start, "headers": headers}, {"type": "http.response.body", "body": rewritten}]


class _OneResponse:
    """`send` for one response: what the SDK sends after its last part is
    dropped, and `ended` tells whether the response is out. A notification
    racing its session's DELETE was answered 202; the SDK's write into the
    closed session then failed, and it started a 500 as well and raised
    ClosedResourceError: uvicorn refused the second start, logged an ERROR
    with its traceback and dropped the keep-alive connection (boundsaudit)."""

    def __init__(self, send: Send) -> None:
        self.ended = False
        self.status = 0  # of the response sent (0: none yet)
        self._send = send

    async def send(self, message: Message) -> None:
        if self.ended:
            log.debug("MCP: dropped %s sent after the response had ended", message["type"])
            return
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.ended = True
        await self._send(message)


def _on_last_part(send: Send, ended: Callable[[], None]) -> Send:
    """`send`, calling `ended` just before the last part of the response goes
    out: a client that has read its answer whole may send its id again at
    once, before the SDK's handler has returned (it was refused 409)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            ended()
        await send(message)

    return sending


def _noting_disconnect(receive: Receive, gone: asyncio.Event) -> Receive:
    """`receive`, setting `gone` when it tells that the client has gone (the
    SDK's event-stream response listens for that while a call runs)."""

    async def noting() -> Message:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
        return message

    return noting


def _gone_once(receive: Receive, revoked: asyncio.Event) -> Receive:
    """`receive`, telling the SDK its client has gone once `revoked` is set:
    its event-stream response ends on that, as on a real disconnect."""

    async def receiving() -> Message:
        if revoked.is_set():
            return {"type": "http.disconnect"}
        message = asyncio.ensure_future(receive())
        ended = asyncio.ensure_future(revoked.wait())
        try:
            await asyncio.wait((message, ended), return_when=asyncio.FIRST_COMPLETED)
        finally:  # cancelled itself (the server stopping), it leaves neither behind
            ended.cancel()
            received = message.done()
            if not received:
                message.cancel()
        return message.result() if received else {"type": "http.disconnect"}

    return receiving


def _finishing(send: Send) -> tuple[Send, Callable[[], Awaitable[None]]]:
    """`send`, and what ends a response the SDK left open: its event stream
    stops sending at a disconnect, which `_gone_once` reports for a revoked
    token while the client still reads (uvicorn then cut the connection
    mid-chunk and logged an ERROR). After a real disconnect the last part is
    dropped by the server."""
    state = {"started": False, "ended": False}

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            state["started"] = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            state["ended"] = True
        await send(message)

    async def finish() -> None:
        if state["started"] and not state["ended"]:
            with contextlib.suppress(OSError):
                await sending({"type": "http.response.body", "body": b"", "more_body": False})

    return sending, finish


def _noting_new_session(send: Send, live: dict[str, _Session], opened: Callable[[], None]) -> Send:
    """`send`, noting the session id the SDK answers a successful initialize
    with (and calling `opened` then). The SDK puts a session id on its
    refusals too (a request other than initialize without a session, a bad
    `Accept`: 400, 406), then drops that session: counted, sixteen such
    mistakes shut the principal out of new sessions for the idle timeout."""

    async def noting(message: Message) -> None:
        if message["type"] == "http.response.start" and 200 <= message["status"] < 300:
            for key, value in message.get("headers", ()):
                if key.lower() == b"mcp-session-id":
                    live[value.decode("latin-1")] = _Session()
                    opened()
        await send(message)

    return noting


class _Once:
    """`fn`, run by the first call only."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self._fn: Callable[[], None] | None = fn

    def __call__(self) -> None:
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()


class _StatusNoted:
    """`send` noting the status of the response it starts (0: none yet)."""

    def __init__(self, send: Send) -> None:
        self.status = 0
        self._send = send

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        await self._send(message)
