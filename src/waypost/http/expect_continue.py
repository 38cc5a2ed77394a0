"""An answer given before the body of an `Expect: 100-continue` request was
asked for closes its connection, and says so.

uvicorn sends `100 Continue` when the app first reads the body. A request
refused before that (`401`, `415`, a `429`) got its answer and no `100`,
with the connection kept: uvicorn went on waiting for the declared body, so
a client that took the answer as RFC 9110 (10.1.1) lets it, sent no body and
reused the connection, had its next request read as that body
(protocoljourney). RFC 9110 says such a server SHOULD say whether it closes
or reads on; `Connection: close` says it closes, and uvicorn then does
(under httptools and h11 alike).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


def _waits_to_send_a_body(headers: list[tuple[bytes, bytes]]) -> bool:
    expects = declares_body = False
    for name, value in headers:
        if name == b"expect":
            expects = value.strip().lower() == b"100-continue"
        elif name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            declares_body = True
    return expects and declares_body


class CloseUnreadContinue:
    """ASGI middleware: see the module's docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _waits_to_send_a_body(scope["headers"]):
            await self.app(scope, receive, send)
            return
        asked = False

        async def reading() -> Message:
            nonlocal asked
            asked = True  # uvicorn sends its `100 Continue` now
            return await receive()

        async def answering(message: Message) -> None:
            if message["type"] == "http.response.start" and not asked:
                headers = [*message.get("headers", []), (b"connection", b"close")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, reading, answering)
