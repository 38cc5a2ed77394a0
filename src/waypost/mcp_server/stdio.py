"""`waypost mcp`: the MCP server over stdio, for clients that launch a process.

The tools are backed by the REST API of a running Waypost (`--url`), with the
token from WAYPOST_TOKEN. The MCP session is the process: it ends (and so
does the agent session it kept) when the client closes standard input.
"""

from __future__ import annotations

import sys

import anyio
import httpx
from mcp.server.stdio import stdio_server

from waypost import __version__
from waypost.mcp_server.backend import HttpBackend
from waypost.mcp_server.server import build_server


class TokenRefused(Exception):
    pass


async def check_token(client: httpx.AsyncClient) -> None:
    """Refuse to start with a token Waypost refuses; start anyway when it is down
    (a desktop client may launch us first: tools then say it is unreachable)."""
    try:
        response = await client.get("/api/v1/me")
    except httpx.HTTPError as exc:
        print(f"waypost mcp: cannot reach {client.base_url} yet ({type(exc).__name__})",
              file=sys.stderr)  # fmt: skip
        return
    if response.status_code == 401:
        raise TokenRefused(f"{client.base_url} refused the token in WAYPOST_TOKEN (401)")


async def serve_stdio(url: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}", "User-Agent": f"waypost-mcp/{__version__}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30.0) as client:
        await check_token(client)
        backend = HttpBackend(client)
        server = build_server(lambda ctx: backend)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


def main(url: str, token: str) -> None:
    anyio.run(serve_stdio, url, token)
