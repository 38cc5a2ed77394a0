"""The outer ASGI layer: authentication before routing, limits and common headers.

A bearer token is checked before any route runs or any body is read, on
every request but `/healthz`, the console's static pages, and (with
`--graphiql`) GET and HEAD of `/graphql`, which serve code and no data.
`Waypost-Session` names the live agent session the request acts in. GraphQL
bodies are capped at 64 KiB here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from contextvars import Token

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from waypost import console
from waypost.clock import format_time
from waypost.decoding import is_json_media_type
from waypost.errors import Unauthenticated, Unavailable, WaypostError
from waypost.http.bodies import buffer_body
from waypost.http.headers import bearer_token, content_coding_refusal, header
from waypost.http.responses import (
    error_headers,
    graphql_refusal_body,
    send_json,
    with_security_headers,
)
from waypost.ids import token_digest
from waypost.resolvers.access import principals, sessions
from waypost.runtime import Actor, Runtime
from waypost.storage.turns import CALLER

log = logging.getLogger("waypost")
GRAPHQL_BODY_LIMIT = 64 * 1024
# The ASGI scope's state key of a store (or clock) that could not be read to
# authenticate a /mcp request: that endpoint answers it in JSON-RPC itself.
MCP_UNAVAILABLE = "mcp_unavailable"


def _graphql_reads_body(scope: Scope) -> bool:
    """Whether /graphql's view reads this request's body: a POST of JSON
    without a content coding. It refuses any other (405, 415) without reading
    one, as /api/v1, /mcp and the lifecycle listener do, so it is not read
    here either: it was, and a GET with a body over 64 KiB was 413, a
    refused request whose declared body never came went unanswered until
    --request-read-timeout, and `Expect: 100-continue` was granted for a
    request already refused (httpedgeaudit). It must hold for every request
    schema/view.py goes on to read, which asks the same two functions: one
    it read unbuffered would have no limit."""
    if scope["method"] != "POST":
        return False
    try:
        media_type = header(scope, b"content-type")
    except WaypostError:
        return False  # two Content-Type headers: the view refuses them
    return is_json_media_type(media_type) and content_coding_refusal(scope) is None


class BearerAuthentication:
    def __init__(
        self, app: ASGIApp, runtime: Callable[[], Runtime], graphiql: bool, metrics: bool = False
    ) -> None:
        self.app = app
        self.runtime = runtime
        self.graphiql = graphiql
        self.metrics = metrics  # `serve --metrics`: the /metrics route exists

    async def _graphql_body(self, scope: Scope, receive: Receive) -> Receive:
        """The GraphQL body, read whole within its limit: a body over it is a
        request refused before its operation is known, counted as such."""
        try:
            _, receive = await buffer_body(
                scope, receive, GRAPHQL_BODY_LIMIT, "GraphQL request bodies"
            )
        except WaypostError:
            self.runtime().metrics.graphql_refused()
            raise
        return receive

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        is_graphql = path == "/graphql"
        # /healthz is open; so is the GraphiQL page when enabled (GET on /graphql
        # only serves the page: queries are POSTs and carry the token), and the
        # console's static pages (GET only; they hold no data, only code)
        public = (
            path == "/healthz"
            or (is_graphql and self.graphiql and scope["method"] in ("GET", "HEAD"))
            or console.is_public(scope["method"], path, self.graphiql)
        )
        caller: Token[Hashable] | None = None
        if not public:
            try:
                # /metrics takes a token of its own audience, so a scraper's
                # credential opens nothing else (and an api token not it)
                # Without --metrics the route does not exist: either token gets
                # the 404 (an api token was refused as not a metrics one)
                audience: str | tuple[str, ...] = "api"
                if path == "/metrics":
                    audience = "metrics" if self.metrics else ("api", "metrics")
                actor = await self._authenticate(scope, audience)
                if is_graphql and _graphql_reads_body(scope):
                    receive = await self._graphql_body(scope, receive)
            except WaypostError as error:
                if not (path == "/mcp" and isinstance(error, Unavailable)):
                    await self._refuse(scope, send, error, is_graphql)
                    return
                # the MCP endpoint answers it with the message's id, in a live
                # session with a 200 (this 503 in REST's shape ended the
                # official client's whole session, as any status but 2xx and
                # 404 does); it opens nothing without an actor
                scope.setdefault("state", {})[MCP_UNAVAILABLE] = error
            except ClientDisconnect:
                log.debug("client went away while sending its request")
                return
            except Exception:
                log.exception("authentication failed unexpectedly")
                await self._refuse(scope, send, WaypostError("internal error"), is_graphql)
                return
            else:
                scope.setdefault("state", {})["actor"] = actor
                # whose request, for the lanes that take callers in turn
                caller = CALLER.set(actor.principal_id)
        started = False

        async def guarded_send(message: Message) -> None:
            # one wrapper, not two: it runs twice for every response
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = with_security_headers(message)
            await send(message)

        try:
            await self.app(scope, receive, guarded_send)
        except ClientDisconnect:
            # A client that goes away mid-request is not a fault of the service
            # (contract 14): nobody is left to answer, and no traceback is logged.
            log.debug("client went away while sending its request")
        except Exception:
            # Routes answer their own errors; anything escaping them would
            # otherwise reach the server's plain-text 500 without our headers.
            if started:
                raise
            log.exception("unhandled error")
            await self._refuse(scope, send, WaypostError("internal error"), is_graphql)
        finally:
            if caller is not None:
                CALLER.reset(caller)

    async def _authenticate(self, scope: Scope, audience: str | tuple[str, ...]) -> Actor:
        token = bearer_token(header(scope, b"authorization"))
        if token is None:
            raise Unauthenticated("unauthenticated")
        session_id = header(scope, b"waypost-session")
        rt = self.runtime()
        at = format_time(rt.now())
        # asked together with the other requests of this pass of the loop
        digest = token_digest(token)
        actor = principals.actor_of_token(await rt.token_rows.get(digest), digest, audience)
        # for the request's log line, even when the session is refused
        scope.setdefault("state", {})["principal_id"] = actor.principal_id
        if session_id is None:
            return actor
        return await rt.db.read_point(
            lambda conn: sessions.enter_session(conn, actor, session_id, at)
        )

    @staticmethod
    async def _refuse(scope: Scope, send: Send, error: WaypostError, graphql: bool) -> None:
        body = graphql_refusal_body(error) if graphql else error.to_json()
        headers = {**error_headers(error), **console.refusal_headers(scope)}
        await send_json(send, error.status, body, headers)
