"""Authentication before routing: the outermost layer of the lifecycle app.

Every request, whatever its path or method, must carry `Authorization:
Bearer <token>` that the composed verifier accepts; nothing is routed and no
body is read before that. Cookies are never looked at. Every response, the
refusals included, carries `no-store` and `nosniff`.
"""

from __future__ import annotations

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from waypost.errors import Unauthenticated, WaypostError
from waypost.http.headers import bearer_token as http_bearer_token
from waypost.http.responses import security_headers_send
from waypost.lifecycle_http.envelope import error_response, internal_error
from waypost.lifecycle_http.verifiers import TokenVerifier
from waypost.storage.turns import CALLER


def bearer_token(scope: Scope) -> str:
    values = [v for k, v in scope["headers"] if k == b"authorization"]
    if len(values) != 1:
        raise Unauthenticated("unauthenticated")
    # the public listener's rule: only spaces and tabs around the token are
    # trimmed (NBSP or NEL attached made a token of ours here too)
    token = http_bearer_token(values[0].decode("latin-1"))
    if token is None or len(token) > 8192:
        raise Unauthenticated("unauthenticated")
    return token


class Authenticate:
    def __init__(self, app: ASGIApp, verifier: TokenVerifier) -> None:
        self.app = app
        self.verifier = verifier

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            # no WebSocket route here: refused before the handshake (uvicorn
            # answers 403, as the public listener does for a path it lacks);
            # returning without a word was a 500 and an ERROR line
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":  # lifespan passes
            await self.app(scope, receive, send)
            return
        send = security_headers_send(send)
        try:
            caller = await self.verifier.verify(bearer_token(scope))
        except WaypostError as error:
            await error_response(error)(scope, receive, send)
            return
        except Exception as exc:
            await internal_error(exc)(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state["caller"] = caller
        # the access line's caller (observe/requests.py), when a Waypost token
        # named a principal: a TokenReview caller is a Kubernetes user name
        if caller.token_id is not None:
            state["principal_id"] = caller.id
        # whose request, for the lanes that take callers in turn (a lifecycle
        # search's place in the search lane), named as its writes' turns are
        # (resolvers/lifecycle/commands.py): unset, every lifecycle caller of
        # every tenant was one caller (None), first come, first served
        turn = CALLER.set(f"lifecycle:{caller.id}")
        try:
            await self.app(scope, receive, send)
        except ClientDisconnect:
            # gone mid-body: nobody is left to answer; the access line keeps
            # 499, as on the public listener (http/auth.py)
            return
        finally:
            CALLER.reset(turn)
