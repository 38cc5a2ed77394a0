"""The first route of both listeners: a path holding an encoded slash is
unknown (404), whatever it would reach decoded.

Routes match the decoded path, and no id holds a slash: `adr.x%2Fevents`
reached a memo's events route, `projects%2Fdemo/events/stream` the event
stream, past any rule a front proxy keeps by path (httpsemaudit). The REST
routes refused it themselves; every route is refused it here, once.
"""

from __future__ import annotations

from starlette.datastructures import URLPath
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match, NoMatchFound
from starlette.types import Receive, Scope, Send


class EncodedSlash(BaseRoute):
    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http" and b"%2f" in scope.get("raw_path", b"").lower():
            return Match.FULL, {}
        return Match.NONE, {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        # each listener's own 404 (its exception handler renders its envelope)
        raise HTTPException(404)

    def url_path_for(self, name: str, /, **path_params: object) -> URLPath:
        raise NoMatchFound(name, path_params)
