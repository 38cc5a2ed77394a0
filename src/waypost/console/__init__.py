"""The human console at /console and the local GraphiQL page: static files only.

Everything the browser loads ships inside this package (no CDN, no build step).
The pages need no token to load; the console asks for one and sends it to
/graphql as a bearer token, so nothing here reads or sets a cookie. Every
response of these routes carries a Content-Security-Policy that allows only
this origin (and its WebSocket), and may not be framed.
"""

from __future__ import annotations

import functools
import re
from importlib.resources import files
from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, request_response
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from waypost.errors import MethodNotAllowed, NotFound
from waypost.rest.responses import error_response

PACKAGE = Path(str(files("waypost.console")))
STATIC = PACKAGE / "static"
GRAPHIQL = PACKAGE / "graphiql"
CONSOLE_PREFIX = "/console"
GRAPHIQL_PREFIX = "/graphiql/"
# A Host header we may echo into the CSP (anything else: 'self' alone, which
# CSP level 3 browsers already extend to ws:/wss: of the same host).
_HOST = re.compile(r"^[A-Za-z0-9.\-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$")


def is_public(method: str, path: str, graphiql: bool) -> bool:
    """The console's pages and files load without a token (GET/HEAD only).

    Kept narrow on purpose: `/`, `/console` and what lies below it, and the
    GraphiQL files when GraphiQL is on. Every API route still needs a token.
    """
    if method not in ("GET", "HEAD"):
        return False
    return _is_console_path(path) or (graphiql and path.startswith(GRAPHIQL_PREFIX))


def _is_console_path(path: str) -> bool:
    return path in ("/", CONSOLE_PREFIX) or path.startswith(CONSOLE_PREFIX + "/")


def refusal_headers(scope: Scope) -> dict[str, str]:
    """The console's headers for a request refused before routing (a POST
    to a page without a token) whose path is the console's: every answer of
    `/`, `/console` and below carries them (docs/console.md)."""
    if not _is_console_path(scope["path"]):
        return {}
    return {k.decode(): v.decode() for k, v in security_headers(_host(scope))}


def security_headers(host: str | None, fonts: bool = False) -> list[tuple[bytes, bytes]]:
    connect = "'self'"
    if host and _HOST.match(host):
        connect += f" ws://{host} wss://{host}"
    csp = (
        "default-src 'self'; "
        f"connect-src {connect}; "
        # GraphiQL's stylesheet carries its fonts and icons inline, as data:
        # URLs; the console's own files need nothing past default-src
        + ("img-src 'self' data:; font-src 'self' data:; " if fonts else "")
        + "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
    return [
        (b"content-security-policy", csp.encode()),
        (b"x-frame-options", b"DENY"),
        (b"referrer-policy", b"no-referrer"),
        (b"cross-origin-opener-policy", b"same-origin"),
    ]


def _host(scope: Scope) -> str | None:
    for key, value in scope.get("headers", []):
        if key == b"host":
            return str(value.decode("latin-1"))
    return None


class WithSecurityHeaders:
    """Adds the console's CSP and framing headers to every response of `app`."""

    def __init__(self, app: ASGIApp, fonts: bool = False, get_only: bool = False) -> None:
        self.app = app
        self.fonts = fonts
        # a page's method checked here, not by its Route: the Route's 405
        # went out before these headers were added
        self.get_only = get_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        extra = security_headers(_host(scope), self.fonts)
        # Whole files only: the pages are small, and Starlette answers a
        # malformed or unsatisfiable Range in plain text, outside the one
        # error envelope of every route
        headers = scope.get("headers", [])
        if any(key in (b"range", b"if-range") for key, _ in headers):
            kept = [(k, v) for k, v in headers if k not in (b"range", b"if-range")]
            scope = {**scope, "headers": kept}

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                # and no `Accept-Ranges: bytes` (Starlette's), which offered
                # the ranges that are ignored here
                kept = [(k, v) for k, v in message.get("headers", []) if k != b"accept-ranges"]
                message = {**message, "headers": [*kept, *extra]}
            await send(message)

        try:
            if self.get_only and scope["method"] not in ("GET", "HEAD"):
                raise HTTPException(405, headers={"Allow": "GET, HEAD"})
            await self.app(scope, receive, wrapped)
        except HTTPException as exc:
            # a file that is not there, or a method files do not take: the
            # service's usual 404 or 405, with these headers too (the app's
            # handler would answer it without them); a 405 said `not_found`
            # and named no `Allow`
            if exc.status_code != 405:
                await error_response(NotFound("no such file"))(scope, receive, wrapped)
                return
            response = error_response(MethodNotAllowed("pages and files take GET and HEAD"))
            # said here: StaticFiles' own 405 names no methods before Starlette 1.8
            response.headers["Allow"] = "GET, HEAD"
            await response(scope, receive, wrapped)


async def _index(request: Request) -> Response:
    return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")


async def _to_console(request: Request) -> Response:
    return RedirectResponse(CONSOLE_PREFIX, status_code=302)


async def _no_such_page(request: Request) -> Response:
    """A path under /console that is no page or file: the service's usual 404,
    with the console's headers (the app's own answer carries none)."""
    return error_response(NotFound("no such route"))


@functools.cache
def _graphiql_html() -> bytes:
    return (GRAPHIQL / "index.html").read_bytes()


def graphiql_page(request: Request) -> Response:
    """GET /graphql with --graphiql: GraphiQL from the package's vendored files.

    The page's bytes, not a `FileResponse`: that would honour Range, and answer
    a malformed one in plain text, outside the error envelope."""
    response = HTMLResponse(_graphiql_html())
    for key, value in security_headers(request.headers.get("host"), fonts=True):
        response.headers[key.decode()] = value.decode()
    return response


def routes(graphiql: bool) -> list[BaseRoute]:
    page = WithSecurityHeaders(request_response(_index), get_only=True)
    found: list[BaseRoute] = [
        Route("/", WithSecurityHeaders(request_response(_to_console), get_only=True)),
        Route(CONSOLE_PREFIX, page),
        Route(CONSOLE_PREFIX + "/", page),
        Mount(CONSOLE_PREFIX + "/static", app=WithSecurityHeaders(StaticFiles(directory=STATIC))),
        # last: whatever else lies under /console
        Route(
            CONSOLE_PREFIX + "/{rest:path}",
            WithSecurityHeaders(request_response(_no_such_page), get_only=True),
        ),
    ]
    if graphiql:
        vendored = WithSecurityHeaders(StaticFiles(directory=GRAPHIQL), fonts=True)
        found.append(Mount(GRAPHIQL_PREFIX.rstrip("/"), app=vendored))
    return found
