"""The GraphQL HTTP endpoint: Strawberry's ASGI view with our context and error shape."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

import msgspec
from cross_web import HTTPException
from graphql import GraphQLError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.http import GraphQLHTTPResponse
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.types import ExecutionResult

from waypost import console
from waypost.cancelling import CallerGone, caller_gone
from waypost.clock import format_time
from waypost.decoding import MESSAGE_MOST, clip, is_json_media_type, parse_json
from waypost.errors import Unavailable, WaypostError
from waypost.http.client_gone import disconnect_of
from waypost.http.headers import bearer_token, content_coding_refusal, header
from waypost.http.responses import (
    error_headers,
    graphql_error_body,
    graphql_extensions,
    graphql_refusal_body,
)
from waypost.observe.requests import note_graphql_operation
from waypost.rest.responses import json_response
from waypost.schema import fastpath, request_rules, schema
from waypost.schema.context import Context
from waypost.schema.errors import refuses_the_caller
from waypost.schema.execution import MASKED
from waypost.schema.fastpath import known
from waypost.schema.variable_errors import reworded
from waypost.schema.websocket import NOBODY, TransportWS, oversized_subscribe, refused_subscribe

log = logging.getLogger("waypost.graphql")
_encoder = msgspec.json.Encoder()


def shape_error(error: GraphQLError) -> dict[str, Any]:
    """Top-level errors carry `extensions.code`; unexpected faults are masked."""
    original = error.original_error
    formatted = error.formatted
    if isinstance(original, WaypostError):
        # a retry's advice names the key as a mutation takes it (an input
        # field), not as the REST header (diskfulljourney)
        formatted["message"] = original.message.replace("Idempotency-Key", "idempotencyKey")
        if error.extensions and "code" in error.extensions:
            # shaped where it arose (execution.shaped_error), which knows the field
            formatted["extensions"] = dict(error.extensions)
        else:
            formatted["extensions"] = graphql_extensions(original)
    elif (
        original is None
        or isinstance(original, GraphQLError)
        or (error.path is None and isinstance(original, ValueError))
    ):
        # parse and validation errors, the query limits among them, and
        # variables that do not coerce to their declared types; a literal
        # that will not parse (an Int of 5,000 digits: int() refuses it) is
        # one too, raised before anything runs. graphql-core quotes a refused
        # value whole ("Value 'kkk...' does not exist"): 60 KB came back
        # a variable's refusal names its path within `variables`, as REST
        # names a body's field (variable_errors.py)
        message, field = reworded(formatted["message"], schema)
        formatted["message"] = clip(message, MESSAGE_MOST)
        formatted["extensions"] = {"code": "invalid_request"}
        if field is not None:
            formatted["extensions"]["field"] = field
    else:
        if error.extensions != MASKED:  # the executor logs the faults it masks
            log.error("unhandled GraphQL error", exc_info=original)
        formatted["message"] = "Unexpected error."
        formatted["extensions"] = {"code": "internal"}
    return dict(formatted)


# Strawberry refuses malformed HTTP requests with plain text; these become
# GraphQL-shaped JSON errors with a code, like every other refusal.
_HTTP_CODES = {400: "invalid_request", 404: "not_found", 405: "method_not_allowed"}


def http_error(status: int, code: str, message: str, details: dict[str, Any]) -> Response:
    return json_response(graphql_error_body(message, code, details), status)


def refusal_response(error: WaypostError) -> Response:
    """`error` refused before or around execution, in GraphQL's shape, with
    its headers (`Retry-After` on a 503)."""
    return json_response(graphql_refusal_body(error), error.status, error_headers(error))


class WaypostGraphQL(GraphQL[Context, None]):
    graphql_transport_ws_handler_class = TransportWS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        request = Request(scope=scope, receive=receive)
        response: Response
        # GET (and HEAD) never executes anything: it serves the GraphiQL page
        # when enabled (authentication lets it through without a token)
        if request.method != "POST":
            page = (
                self.graphql_ide
                and request.method in ("GET", "HEAD")
                and "query" not in request.query_params
            )
            if page:
                # our own page and vendored files: GraphiQL without a CDN
                response = console.graphiql_page(request)
            else:
                # the route takes every method so that this 405 is in GraphQL's shape
                response = http_error(405, "method_not_allowed", "GraphQL takes POST requests", {})
                response.headers["Allow"] = "GET, HEAD, POST" if self.graphql_ide else "POST"
            await response(scope, receive, send)
            return
        metrics = scope["app"].state.runtime.metrics
        try:
            media_type = header(scope, b"content-type")
        except WaypostError as error:  # two Content-Type headers: a media type refused
            metrics.graphql_refused()
            response = refusal_response(error)
            await response(scope, receive, send)
            return
        coded = content_coding_refusal(scope)
        if not is_json_media_type(media_type) or coded is not None:
            metrics.graphql_refused()
            response = http_error(
                415,
                "unsupported_media_type",
                coded or "Content-Type must be application/json (optionally with charset=utf-8)",
                {},
            )
            await response(scope, receive, send)
            return
        # Strawberry compares the media type case-sensitively: hand it the canonical one
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
        scope = {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
        request = Request(scope=scope, receive=receive)
        try:
            body = parse_json(await request.body())
        except WaypostError as error:  # not JSON, a duplicate key, over 64 KiB
            metrics.graphql_refused()
            response = refusal_response(error)
            await response(scope, receive, send)
            return
        why = (
            await request_rules.refusal(body, over_http=True)
            if isinstance(body, dict)
            else "the body must be a JSON object (batched requests are not supported)"
        )
        if why is not None:
            # refused before Strawberry's pipeline (and its observer) runs:
            # counted here, or the operations metric never saw it
            metrics.graphql_refused()
            response = http_error(400, "invalid_request", why, {})
            await response(scope, receive, send)
            return
        # the body is read: `receive` now tells only that the client has
        # gone, and work waiting for a place of a lane (a context packet's
        # search) then ends unrun, the request unanswered, as a REST read's
        gone = caller_gone.set(disconnect_of(receive))
        try:
            response = await self._answer(request, body)
        except CallerGone:
            return
        except WaypostError as error:
            response = refusal_response(error)
        except HTTPException as exc:
            if exc.reason == "Unsupported content type":
                response = http_error(415, "unsupported_media_type", exc.reason, {})
            else:
                code = _HTTP_CODES.get(exc.status_code, "invalid_request")
                response = http_error(exc.status_code, code, exc.reason, {})
        finally:
            caller_gone.reset(gone)
        await response(scope, receive, send)

    async def _answer(self, request: Request, body: dict[str, Any]) -> Response:
        known_answer = await self._known_answer(request, body)
        if known_answer is not None:
            return known_answer
        # a clock file that cannot be read is the 503 before anything runs,
        # as on the fast path (read first inside execution, it became a
        # field error in a 200: one query, two answers)
        request.app.state.runtime.now()
        response = await self.run(request)
        retry_after = getattr(request.state, "retry_after", None)
        if retry_after is not None:
            # the answer stays 200 (it is a GraphQL result), but an HTTP
            # client's retry logic reads the header, as on REST's 503
            response.headers["Retry-After"] = str(retry_after)
        context = getattr(request.state, "graphql_context", None)
        _say_now(response, request, context.judged_at if context is not None else None)
        return response

    async def _known_answer(self, request: Request, body: dict[str, Any]) -> Response | None:
        """A request the pipeline answered before by the fast path
        (schema/fastpath/known.py), answered again without it; None sends
        the request through the pipeline (which may learn it)."""
        # a streaming transport asked for in `Accept` takes the pipeline's path
        if not _plain_json_accepted(request.headers.get("accept", "")):
            return None
        key = known.request_key(body)
        if key is None:
            return None
        entry = known.KNOWN.get(key)
        if entry is None:
            request.state.graphql_known_key = key  # the fast path learns it
            return None
        rt = request.app.state.runtime
        # judged at one instant, as the pipeline's query is (schema/snapshot.py);
        # a clock file that cannot be read raises the 503 here
        with rt.pinned_now():
            data = await fastpath.answer_known(rt, entry, request.state.actor.principal_id)
            at = rt.now()  # the instant it was judged at: its snapshot's
        if data is None:
            return None  # an error to render this time: the pipeline does
        # what the pipeline does around execution (observe/graphql.py)
        note_graphql_operation(entry.name)
        rt.metrics.graphql.labels(type="query", outcome="ok").inc()
        # the pipeline's process_result and create_response
        response = Response(self.encode_json({"data": data}), media_type="application/json")
        _say_now(response, request, at)
        return response

    def encode_json(self, data: object) -> str:
        """The REST encoder (msgspec): a dashboard's answer is large, and
        `json.dumps` took a tenth of its time. A str, not bytes: the WebSocket
        handler sends bytes as binary frames, which browsers' clients refuse."""
        return _encoder.encode(data).decode()

    def decode_json(self, data: str | bytes) -> object:
        """The same strict JSON as REST bodies: no duplicate keys, no NaN. A
        refused `subscribe` frame is answered for its operation (see
        `refused_subscribe`); any other refusal is a JSONDecodeError, which
        Strawberry answers as malformed (a WebSocket frame: close 4400).
        HTTP bodies were checked before."""
        raw = data.encode() if isinstance(data, str) else data
        oversized = oversized_subscribe(raw)
        if oversized is not None:
            return oversized
        try:
            return parse_json(raw)
        except WaypostError as error:
            frame = refused_subscribe(raw, error)
            if frame is not None:
                return frame
            raise json.JSONDecodeError(error.message, raw.decode("utf-8", "replace"), 0) from error

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> Context:
        rt = request.app.state.runtime
        if isinstance(request, WebSocket):
            # the caller is named by connection_init (schema/websocket.py)
            return Context(rt=rt, actor=NOBODY)
        token = bearer_token(request.headers.get("authorization")) or ""
        key = getattr(request.state, "graphql_known_key", None)
        context = Context(rt=rt, actor=request.state.actor, token=token, known_key=key)
        request.state.graphql_context = context  # its `judged_at`, for `Waypost-Now`
        return context

    async def process_result(
        self, request: Request | WebSocket, result: ExecutionResult
    ) -> GraphQLHTTPResponse:
        data: GraphQLHTTPResponse = {"data": result.data}
        if result.errors and not isinstance(request, WebSocket):
            for error in result.errors:
                refusal = error.original_error
                if isinstance(refusal, CallerGone):
                    raise refusal  # the request ends unanswered (see __call__)
                if refusal is not None and refuses_the_caller(refusal):
                    # as at the gate: 401 or 403 and nothing else (a mutation
                    # before it in the document committed; its receipt
                    # replays it to another token of the principal)
                    raise refusal
        if result.errors:
            # in document order: graphql-core lists errors as their resolvers
            # fail, and batched loaders fail list items in no fixed order
            errors = sorted(result.errors, key=_document_order)
            shaped = [shape_error(e) for e in errors]
            data["errors"] = list[object](shaped)
            waits = [
                e["extensions"]["retryAfter"]
                for e in shaped
                if "retryAfter" in e.get("extensions", {})
            ]
            if waits and not isinstance(request, WebSocket):
                request.state.retry_after = max(waits)
        return data


def _say_now(response: Response, request: Request, at: datetime | None) -> None:
    """`Waypost-Now`: the service's clock (which may be simulated) as the
    answer was made, so a page can say "how long ago" by it and not by a
    browser's clock that may be hours off. A query's is `at`, the instant it
    was judged at; a mutation's is read after its writes (none when a clock
    file being rewritten cannot be read then: the answer stands)."""
    if at is None:
        try:
            at = request.app.state.runtime.now()
        except Unavailable:
            return
    response.headers["Waypost-Now"] = format_time(at)


def _document_order(error: GraphQLError) -> tuple[Any, ...]:
    """Sort key: where the field stands in the document, then its path (the
    items of one list field share a location: by their index)."""
    where = tuple((at.line, at.column) for at in error.locations or ())
    path = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in error.path or ())
    return (where, path)


def graphql_view(graphiql: bool) -> WaypostGraphQL:
    return WaypostGraphQL(
        schema,
        graphql_ide="graphiql" if graphiql else None,
        allow_queries_via_get=False,
        # subscriptions: the graphql-transport-ws protocol only (not the legacy graphql-ws)
        subscription_protocols=(GRAPHQL_TRANSPORT_WS_PROTOCOL,),
    )


# What a client that wants one JSON answer sends in `Accept`; anything else
# (multipart/mixed, text/event-stream: a streaming transport) is left to the
# pipeline, which picks the transport itself.
_PLAIN_ACCEPT = {
    "",
    "*/*",
    "application/*",
    "application/json",
    "application/graphql-response+json",
}


def _plain_json_accepted(accept: str) -> bool:
    ranges = (part.split(";", 1)[0].strip().lower() for part in accept.split(","))
    return all(media in _PLAIN_ACCEPT for media in ranges)
