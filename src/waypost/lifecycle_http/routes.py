"""The lifecycle routes: decode, call one resolver operation, render.

Handlers never see an unauthenticated request (auth.py runs first) and
never build an error body themselves: every refusal is a WaypostError that
envelope.py turns into `{"error": "code"}`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from waypost.errors import WaypostError
from waypost.json_text import compact
from waypost.lifecycle_http import body as rules
from waypost.lifecycle_http.auth import bearer_token
from waypost.lifecycle_http.envelope import error_response, internal_error, json_bytes
from waypost.lifecycle_http.verifiers import TokenVerifier
from waypost.resolvers.lifecycle import checks, commands, queries, reviews
from waypost.resolvers.lifecycle.authz import Action, Caller
from waypost.resolvers.lifecycle.commands import Receipt
from waypost.resolvers.lifecycle.cursors import CursorSigner
from waypost.resolvers.lifecycle.decode import decode
from waypost.resolvers.lifecycle.model import (
    CommentBody,
    EvaluationBody,
    EventsQuery,
    PublicationBody,
    RegisterBody,
    RequiredVersionQuery,
    ReviewRequestBody,
    ReviseBody,
    SearchQuery,
    SourceBody,
    VersionQuery,
)
from waypost.runtime import Runtime

Handler = Callable[[Request], Awaitable[Response]]


class _NoQuery(msgspec.Struct, forbid_unknown_fields=True):
    """POST routes take no query parameters."""


T = TypeVar("T")


def _caller(request: Request) -> Caller:
    caller: Caller = request.state.caller
    return caller


def _receipt(receipt: Receipt) -> Response:
    headers = {"Idempotent-Replayed": "true"} if receipt.replayed else {}
    return json_bytes(receipt.text, 200, headers)


def _json(value: Any) -> Response:
    return json_bytes(compact(value))


def guarded(handler: Handler) -> Handler:
    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except WaypostError as error:
            return error_response(error)
        except ClientDisconnect:
            raise  # the client is gone: Authenticate ends the request quietly
        except Exception as exc:
            return internal_error(exc)

    run.__name__ = handler.__name__
    return run


Command = Callable[[Runtime, commands.Request, str, Any], Awaitable[Receipt]]


def make_routes(rt: Runtime, signer: CursorSigner, verifier: TokenVerifier) -> list[Route]:
    async def mutation(request: Request, model: type[Any]) -> tuple[commands.Request, Any]:
        rules.query(request, _NoQuery)
        raw = await rules.read_body(request)
        key = rules.idempotency_key(request)
        parsed, value = decode(raw, model)
        caller = _caller(request)
        # the identity again, now that the upload is over (the token may have
        # been revoked while it went on)
        await verifier.reconfirm(bearer_token(request.scope), caller)
        req = commands.Request.make(caller, key, "POST", request.url.path, value)
        return req, parsed

    def on_memo(model: type[Any], command: Command) -> Handler:
        action = commands.NEEDS[command.__name__]

        async def handle(request: Request) -> Response:
            memo_id = rules.path_id(request)
            await commands.admit(rt, _caller(request), action, memo_id)
            req, parsed = await mutation(request, model)
            return _receipt(await command(rt, req, memo_id, parsed))

        handle.__name__ = command.__name__
        return handle

    async def register(request: Request) -> Response:
        await commands.admit(rt, _caller(request), commands.NEEDS["register"], None)
        req, parsed = await mutation(request, RegisterBody)
        return _receipt(await commands.register(rt, req, parsed))

    async def search(request: Request) -> Response:
        q = rules.query(request, SearchQuery)
        return _json(await queries.search(rt, signer, _caller(request), q.q, q.cursor, q.limit))

    async def policy_first(request: Request, memo_id: str, check: Callable[[], T]) -> T:
        """`check()` (a GET's query, a digest), refused only to a caller who
        may read the memo: to any other, as for a memo that does not exist,
        `policy_denied` (lifecycle-model.md), the order of the POST routes.
        The policy is read only when `check` refuses: a good request costs
        no read more."""
        try:
            return check()
        except WaypostError:
            await commands.admit(rt, _caller(request), Action.READ, memo_id)
            raise

    async def get_memo(request: Request) -> Response:
        memo_id = rules.path_id(request)
        q = await policy_first(request, memo_id, lambda: rules.query(request, VersionQuery))
        return json_bytes(await queries.get_memo(rt, _caller(request), memo_id, q.version))

    async def events(request: Request) -> Response:
        memo_id = rules.path_id(request)
        q = await policy_first(request, memo_id, lambda: rules.query(request, EventsQuery))
        return _json(await queries.events(rt, _caller(request), memo_id, q.after, q.limit))

    async def list_review_requests(request: Request) -> Response:
        memo_id = rules.path_id(request)
        q = await policy_first(request, memo_id, lambda: rules.query(request, RequiredVersionQuery))
        texts = await queries.review_requests(rt, _caller(request), memo_id, q.version)
        # the retained receipts go out as the very bytes first returned
        return json_bytes('{"items":[' + ",".join(texts) + "]}")

    async def outcomes(request: Request) -> Response:
        memo_id = rules.path_id(request)
        q = await policy_first(request, memo_id, lambda: rules.query(request, RequiredVersionQuery))
        return _json(await queries.outcomes(rt, _caller(request), memo_id, q.version))

    async def document(request: Request) -> Response:
        memo_id = rules.path_id(request)
        digest = str(request.path_params["digest"])

        def checked() -> VersionQuery:
            checks.check_digest(digest, "digest")
            return rules.query(request, VersionQuery)

        q = await policy_first(request, memo_id, checked)
        doc = await queries.get_document(rt, _caller(request), memo_id, digest, q.version)
        # the stored media type exactly: Starlette's media_type would add a
        # charset to text/* that the bytes may not have. An author's bytes
        # are never a live page of this origin: a text/html document opened
        # in a browser ran its scripts here; now it is a download, sandboxed
        headers = {
            "Cache-Control": "no-store",
            "Content-Type": doc.media_type,
            "Content-Disposition": "attachment",
            "Content-Security-Policy": "sandbox; default-src 'none'",
        }
        return Response(doc.content, 200, headers=headers)

    decision = "/v1/decisions/{id}"
    routes = [
        ("GET", "/v1/decisions", search),
        ("POST", "/v1/decisions", register),
        ("GET", decision, get_memo),
        ("POST", f"{decision}/revisions", on_memo(ReviseBody, commands.revise)),
        ("GET", f"{decision}/events", events),
        ("POST", f"{decision}/comments", on_memo(CommentBody, commands.comment)),
        ("POST", f"{decision}/sources", on_memo(SourceBody, commands.add_source)),
        ("POST", f"{decision}/evaluations", on_memo(EvaluationBody, commands.add_evaluation)),
        ("POST", f"{decision}/publications", on_memo(PublicationBody, commands.publish)),
        ("POST", f"{decision}/review-requests", on_memo(ReviewRequestBody, reviews.request_review)),
        ("GET", f"{decision}/review-requests", list_review_requests),
        ("GET", f"{decision}/outcomes", outcomes),
        ("GET", f"{decision}/documents/{{digest}}", document),
    ]
    by_path: dict[str, dict[str, Handler]] = {}
    for method, path, handler in routes:
        by_path.setdefault(path, {})[method] = guarded(handler)
    result = []
    for path, handlers in by_path.items():

        async def dispatch(request: Request, handlers: dict[str, Handler] = handlers) -> Response:
            method = "GET" if request.method == "HEAD" else request.method
            return await handlers[method](request)

        result.append(Route(path, dispatch, methods=list(handlers)))
    return result
