"""The private lifecycle app: `create_lifecycle_app(rt, verifier)`.

A Starlette app of its own, on its own listener: its routes, its
authentication layer and its `{"error": "code"}` envelope. Nothing of the
public app (its bearer authentication, REST envelope or GraphQL) is part of it, and the public
app mounts none of these routes.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from waypost.http.encoded_slash import EncodedSlash
from waypost.lifecycle_http.auth import Authenticate
from waypost.lifecycle_http.envelope import status_response
from waypost.lifecycle_http.routes import make_routes
from waypost.lifecycle_http.verifiers import TokenVerifier
from waypost.observe.requests import RequestObserver
from waypost.resolvers.lifecycle.cursors import CursorSigner
from waypost.runtime import Runtime


def create_lifecycle_app(rt: Runtime, verifier: TokenVerifier) -> Starlette:
    """The lifecycle listener's ASGI app. `verifier` is required: there is no default."""
    if verifier is None:  # a composition that forgot it must not start unauthenticated
        raise TypeError("create_lifecycle_app needs a token verifier")

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return status_response(exc.status_code, exc.headers)

    # the cursor key lives in this process only: a restart invalidates every cursor
    signer = CursorSigner()
    app = Starlette(
        # first: decoded, a path with an encoded slash reached another route
        routes=[EncodedSlash(), *make_routes(rt, signer, verifier)],
        exception_handlers={404: http_error, 405: http_error},
    )
    # a trailing slash is an unknown route (404), never a redirect whose
    # Location comes from the client's Host header
    app.router.redirect_slashes = False
    app.state.runtime = rt
    app.add_middleware(Authenticate, verifier=verifier)
    # outermost, as on the public app: request id, one log line, the metrics
    settings = rt.settings
    app.add_middleware(
        RequestObserver,
        metrics=lambda: rt.metrics,
        access_log=settings.access_log if settings is not None else True,
        router=app.router,
        lifecycle=True,
    )
    return app
