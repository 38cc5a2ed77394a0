"""Streamable HTTP at /mcp on the public listener.

The public app's bearer authentication (waypost.http.auth) has already checked the
bearer token when a request gets here; tools run as that actor, in process.
An MCP session belongs to the principal that opened it: the SDK's session
manager refuses its id to anyone else (it compares `scope["user"]`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http import GET_STREAM_KEY
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.types import INTERNAL_ERROR, INVALID_REQUEST
from starlette.types import Message, Receive, Scope, Send

from waypost.errors import Unavailable, WaypostError
from waypost.http.auth import MCP_UNAVAILABLE
from waypost.http.headers import bearer_token, header
from waypost.http.responses import error_headers, security_headers_send, send_json
from waypost.live import hub_for
from waypost.live.streams import still_valid
from waypost.mcp_server.advice import explain
from waypost.mcp_server.backend import Backend, LocalBackend
from waypost.mcp_server.calls import ApiError
from waypost.mcp_server.envelope import Refusal, dropped_notification, is_response
from waypost.mcp_server.http_checks import (
    BODY_LIMIT,
    bad_initialize,
    headers_refusal,
    id_of,
    json_rpc_error,
    media_types_lowered,
    padding_stripped,
    read_post,
    refused_in_session,
    sdk_would_serve,
    stand_in,
)
from waypost.mcp_server.http_sending import (
    Once,
    OneResponse,
    StatusNoted,
    accepted,
    event_lines_kept,
    finishing,
    gone_once,
    noting_disconnect,
    null_sdk_error_ids,
    on_last_part,
)
from waypost.mcp_server.running import RunningCalls, cancelled_request, id_key
from waypost.mcp_server.server import CLIENT_GONE, Context, build_server, tool_error
from waypost.mcp_server.sessions import HEARTBEAT_SECONDS
from waypost.runtime import Actor, Runtime

# An MCP session with no request in flight (and no open stream) for this long
# is closed, which ends its agent session: as long as a Waypost session lives
# without a heartbeat, so an abandoned client holds nothing longer than that.
IDLE_SECONDS = 15 * 60
# MCP sessions one principal may hold open (as streams per token): the SDK
# caps sessions only for the whole server (10,000), so one agent's token
# filled them all in a minute (and 700 MB), and every other principal was
# refused for the idle timeout.
SESSIONS_PER_PRINCIPAL = 16
# Once the server stops with an MCP session open (or opening), calls in
# flight get at least this long to answer (a decision_wait answers
# `unavailable` at once) before every MCP session ends, and a call still
# running is waited for up to the busy timeout plus STOP_DRAIN_EXTRA_SECONDS:
# a write queued behind another process's lock gets its answer
# (`unavailable` at worst) within the busy timeout and a second, as a REST
# request does. Ending the sessions at 0.5 s closed such a call's stream
# with no answer, and the SDK client waited for ever.
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
    # the bearer token the session was last used with (any of the
    # principal's tokens may use it): once that one is revoked, the session
    # stops counting against its principal's cap (`_forget_revoked`)
    token: str = ""

    def begin(self) -> None:
        self.in_flight += 1

    def end(self) -> None:
        self.in_flight -= 1
        if not self.in_flight:
            self.idle_since = time.monotonic()

    def idle_before(self, cutoff: float) -> bool:
        return not self.in_flight and self.idle_since < cutoff


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
        # set as the session manager ends: the SDK cannot take a request
        # after that (its "Task group is not initialized" was a 500 and an
        # ERROR for a request arriving during a stop)
        self._ended = False

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
                self._ended = True

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
        if not (self._running or self._opening or any(self._sessions.values())):
            # no session open, none opening, no call running: nothing the
            # grace could let finish (every stop of a service no MCP client
            # used took half a second more)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + busy + STOP_DRAIN_EXTRA_SECONDS
        await asyncio.sleep(STOP_GRACE_SECONDS)
        while self._running and loop.time() < deadline:
            await asyncio.sleep(0.05)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        message: Any = None  # a POST's JSON-RPC message, once read
        unread = receive  # before a POST's body is read
        scope = padding_stripped(media_types_lowered(scope))
        # what every answer of the service carries, in place of the SDK's own
        # (its event streams said `Cache-Control: no-cache, no-transform`)
        send = security_headers_send(send, replace=True)
        if scope["method"] == "POST":
            read = await read_post(scope, receive, send)
            if read is None:
                return  # answered: nothing in it reaches the SDK
            message, receive = read
        refused = headers_refusal(scope)
        if refused is not None:
            status, text = refused
            await json_rpc_error(send, status, INVALID_REQUEST, text, id_of(message))
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
            await json_rpc_error(send, 404, INVALID_REQUEST, "Session not found")
            return
        # in a live session the SDK's checks of Accept and the protocol
        # version come first, for a refused message as for any: a refused
        # one was answered 200 where a valid one got the SDK's 406
        in_session = known and sdk_would_serve(scope, message)
        if isinstance(message, Refusal) and known and not in_session:
            scope, receive = stand_in(scope, unread)
        if await _answered_here(send, message, in_session, known):
            return
        cancelled = cancelled_request(message) if in_session else None
        if cancelled is not None:
            # taken here, not by the SDK, whose handling ended the session
            # when the cancel met the answer (running.py)
            key = (session_id, id_key(cancelled))
            self._calls.cancel(key, received=key in self._running)
            await accepted(send)
            return
        # only in the caller's own sessions (another's id is the SDK's 404)
        running = _running_key(session_id, message) if known else None
        if running is not None and str(message["id"]) == GET_STREAM_KEY:
            # the SDK keeps the session's GET stream under this key: a request
            # with the id took that stream's place, and the stream, unknown to
            # the session from then on, held even a SIGTERM's stop
            await json_rpc_error(
                send, 400, INVALID_REQUEST,
                f"the id {GET_STREAM_KEY!r} is the transport's own: send another id",
                message["id"],
            )  # fmt: skip
            return
        if running is not None and self._still_running(running):
            await json_rpc_error(
                send, 409, INVALID_REQUEST,
                "a request with this id is still running in this session: wait for its"
                " answer (sent again once it has answered, it is answered from its receipt)",
                message["id"],
            )  # fmt: skip
            return
        opening = session_id is None and scope["method"] == "POST"
        if opening and not await self._may_open(send, actor, live, message):
            return
        if self._ended:
            # no await since this check: the SDK takes the request or it is
            # answered here, never handed to a manager that has ended
            stopping = Unavailable("the server is stopping; send this again once it is back")
            await _answer_unavailable(scope, send, message, stopping)
            return
        await self._through_the_sdk(
            scope, receive, send, actor, (live, session_id), running=running, opening=opening
        )

    async def _may_open(
        self, send: Send, actor: Actor, live: dict[str, _Session], message: Any
    ) -> bool:
        """Whether this request may open a session; else it is answered here."""
        if self._held(actor, live) >= SESSIONS_PER_PRINCIPAL:
            await self._forget_revoked(live)
        # counted again after that await, with none from here until the
        # opening is counted (`_through_the_sdk`): two initializes at the cap
        # cannot both take the one place freed
        if self._held(actor, live) >= SESSIONS_PER_PRINCIPAL:
            await json_rpc_error(
                send, 429, INVALID_REQUEST,
                f"at most {SESSIONS_PER_PRINCIPAL} MCP sessions of one principal may be"
                " open: close one (DELETE /mcp with its Mcp-Session-Id) or let one idle out",
                id_of(message),  # as the endpoint's other refusals carry it
            )  # fmt: skip
            return False
        bad = bad_initialize(message)
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
        receive = noting_disconnect(receive, gone)
        if opening:
            principal_id = actor.principal_id
            self._opening[principal_id] = self._opening.get(principal_id, 0) + 1
            # the opening stops counting as the session starts to: counted
            # both ways until the SDK's handler returned (after the client
            # had its answer), the next initialize was refused at 15 sessions
            opened = Once(lambda: self._opened(principal_id))
            token = bearer_token(header(scope, b"authorization")) or ""
            send = _noting_new_session(send, live, opened, token)
        session = live.get(session_id) if session_id is not None else None
        answered = StatusNoted(send)
        send = answered.send
        if running is not None:
            self._running.add(running)
            # freed once, as the last part goes out or else at the end: a
            # re-send of the id may have taken the place by the end, and
            # freeing it again let a third request with the id in (the SDK
            # then filed its answer channel over the re-send's)
            unregister = Once(lambda: self._answered(running))
            send = on_last_part(send, unregister)
        watch: asyncio.Task[None] | None = None
        if scope["method"] == "GET":
            # the session's standalone stream: it runs until its client
            # leaves, so it must end once its token is revoked, as every
            # stream does; a revoked token's stream stayed open (185 s in an
            # audit), keeping its session from idling out
            revoked = asyncio.Event()
            token = bearer_token(header(scope, b"authorization")) or ""
            watch = asyncio.create_task(self._until_revoked(token, revoked))
            receive = gone_once(receive, revoked)
            send, finish = finishing(send)
        if session is not None:
            session.begin()  # in flight: the session is not idle meanwhile
            # the token it is used with now: one switched to a new token
            # and the old one revoked still serves, and still counts (it was
            # freed at the cap while it served: a seventeenth; review76)
            session.token = bearer_token(header(scope, b"authorization")) or session.token
        response = OneResponse(send)
        try:
            await self.manager.handle_request(
                scope_with_user, receive, event_lines_kept(null_sdk_error_ids(response.send))
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

    def _still_running(self, running: tuple[str, str]) -> bool:
        """Whether a request of the session with this id runs now, as the
        SDK's transport tells ids apart: it files a request's answer channel
        under `str(id)`, so `5` and `"5"`, two requests, share one, and the
        second took the first's (never answered, its POST open for ever)."""
        if running in self._running:
            return True
        session, key = running
        filed = str(json.loads(key))
        return any(s == session and str(json.loads(k)) == filed for s, k in self._running)

    def _held(self, actor: Actor, live: dict[str, _Session]) -> int:
        """The places the principal holds: its sessions and its openings."""
        return len(live) + self._opening.get(actor.principal_id, 0)

    async def _forget_revoked(self, live: dict[str, _Session]) -> None:
        """Stop counting the idle sessions whose last token was revoked since.

        The cap is the principal's, since any of its tokens may use its
        sessions; so sixteen sessions opened with a leaked token, revoked
        at once, kept the principal's new token out of MCP until they
        idled out, 15 minutes (tokenjourney). No request with the revoked
        token passes the gate, so such a session takes no more work; the
        SDK keeps it until its idle timeout. Looked at only at the cap."""
        rt = self._runtime()
        idle = [(i, s.token) for i, s in live.items() if not s.in_flight and s.token]
        # each token read once: every refused initialize at the cap reads
        # as many times as the principal has tokens in use, not sessions
        # (one read per session, sixteen a refusal; review76)
        revoked = {t for t in {t for _, t in idle} if not await still_valid(rt, t)}
        for session_id, token in idle:
            session = live.get(session_id)  # another request may have ended it
            # nor used it meanwhile with another token, nor be using it now
            unchanged = session is not None and session.token == token and not session.in_flight
            if unchanged and token in revoked:
                del live[session_id]

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


async def _answered_here(send: Send, message: Any, in_session: bool, known: bool) -> bool:
    """Answer what never reaches the SDK (True when answered): a refused
    message, and in a live session what the SDK would mishandle."""
    if isinstance(message, Refusal) and message.silent and in_session:
        log.warning("a message was dropped unanswered (%s)", message.message)
        await accepted(send)
        return True
    if isinstance(message, Refusal) and (in_session or not known):
        # a refused argument of a well-formed request, after the checks
        # of headers and origin: in a live session an answer to it (200),
        # as the SDK gives one (the official client took a 400 for the
        # transport failing and dropped the session); with no session, 400
        status = 200 if in_session else message.status
        await send_json(send, status, message.as_json())
        return True
    refused = refused_in_session(message) if in_session else None
    if refused is not None:
        await send_json(send, 200, refused.as_json())
        return True
    dropped = dropped_notification(message) if in_session and isinstance(message, dict) else None
    if dropped is not None:
        if dropped:
            log.warning("a notification its schema refuses was dropped (%s)", dropped)
        await accepted(send)
        return True
    if in_session and is_response(message):
        # this server asks nothing: the SDK logged an ERROR for the answer
        # and sent "Internal Server Error" down the session's stream
        log.warning("a response to no request of this server was dropped")
        await accepted(send)
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
    request_id = None if is_response(message) else id_of(message)
    in_session = header(scope, b"mcp-session-id") is not None and scope["method"] == "POST"
    if in_session and request_id is None:
        log.warning("a message was dropped unanswered (%s)", error.message)
        await accepted(send)
        return
    body: dict[str, Any] = Refusal(request_id, INTERNAL_ERROR, text).as_json()
    calls_a_tool = isinstance(message, dict) and message.get("method") == "tools/call"
    if calls_a_tool and request_id is not None:
        result = tool_error(text).model_dump(mode="json", by_alias=True, exclude_none=True)
        body = {"jsonrpc": "2.0", "id": request_id, "result": result}
    await send_json(send, 200 if in_session else error.status, body, error_headers(error))


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


def _noting_new_session(
    send: Send, live: dict[str, _Session], opened: Callable[[], None], token: str
) -> Send:
    """`send`, noting the session id the SDK answers a successful initialize
    with (and calling `opened` then). The SDK puts a session id on its
    refusals too (a request other than initialize without a session, a bad
    `Accept`: 400, 406), then drops that session: counted, sixteen such
    mistakes shut the principal out of new sessions for the idle timeout."""

    async def noting(message: Message) -> None:
        if message["type"] == "http.response.start" and 200 <= message["status"] < 300:
            for key, value in message.get("headers", ()):
                if key.lower() == b"mcp-session-id":
                    live[value.decode("latin-1")] = _Session(token=token)
                    opened()
        await send(message)

    return noting
