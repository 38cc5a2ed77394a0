"""Helpers for the MCP tests: a real `waypost serve`, principals made with the
admin CLI, and the official MCP client over either transport."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from tests.conftest import Caller
from tests.serve_support import Server, admin_command

TRANSPORTS = ["http", "stdio"]
_keys = itertools.count()


@dataclass
class Waypost:
    """The running service, reached over REST as the tests' humans do."""

    server: Server
    admin_token: str

    @property
    def url(self) -> str:
        return self.server.url

    def principal(self, kind: str, name: str) -> str:
        """A new principal's token, made with the admin CLI as an operator would."""
        made = admin_command(self.server.db, "principal", "create", "--kind", kind, "--name", name)
        token: str = made["token"]
        return token

    def rest(self, method: str, path: str, body: Any = None, token: str | None = None,
             **headers: str) -> httpx.Response:  # fmt: skip
        h = {"Authorization": f"Bearer {token or self.admin_token}", **headers}
        if method != "GET":
            h.setdefault("Idempotency-Key", f"test-{next(_keys)}")
        return httpx.request(method, f"{self.url}{path}", json=body, headers=h, timeout=30)

    def project(self, project: str) -> str:
        r = self.rest("POST", "/api/v1/projects", {"id": project, "name": project.title()})
        assert r.status_code == 201, r.text
        return project

    def task(self, project: str, title: str = "Migrate the billing table") -> str:
        r = self.rest("POST", f"/api/v1/projects/{project}/tasks", {"title": title})
        assert r.status_code == 201, r.text
        task_id: str = r.json()["id"]
        return task_id

    def events(self, project: str, type: str) -> list[dict[str, Any]]:
        r = self.rest("GET", f"/api/v1/projects/{project}/events?limit=200")
        return [e for e in r.json()["items"] if e["type"] == type]


@contextlib.asynccontextmanager
async def streams(transport: str, url: str, token: str) -> AsyncIterator[tuple[Any, Any]]:
    """The official client's transport streams to Waypost's MCP server."""
    if transport == "http":
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=300)) as client,
            streamable_http_client(f"{url}/mcp", http_client=client) as (read, write, _),
        ):
            yield read, write
    else:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "waypost.cli", "mcp", "--url", url],
            # the SDK passes only HOME, PATH and the like on: without
            # PYTHONPATH a clone's stdio tests ran the installed package
            env={
                "WAYPOST_TOKEN": token,
                "PYTHONUNBUFFERED": "1",
                **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
            },
            cwd=str(Path(__file__).resolve().parent.parent),
        )
        async with stdio_client(params) as (read, write):
            yield read, write


@contextlib.asynccontextmanager
async def session(transport: str, url: str, token: str) -> AsyncIterator[ClientSession]:
    async with streams(transport, url, token) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s


def text(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def call(s: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool call that must succeed; its JSON result."""
    result = await s.call_tool(tool, arguments)
    assert not result.isError, text(result)
    body: dict[str, Any] = json.loads(text(result))
    assert result.structuredContent == body
    return body


async def refused(s: ClientSession, tool: str, **arguments: Any) -> str:
    """A tool call that must fail; its error text."""
    result = await s.call_tool(tool, arguments)
    assert result.isError, text(result)
    return text(result)


MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def open_session(caller: Caller) -> str:
    """A live MCP session of `caller` over /mcp in process (its Mcp-Session-Id)."""
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
    r = await caller.client.post("/mcp", json=hello, headers={**caller.headers(), **MCP_HEADERS})
    assert r.status_code == 200, r.text
    session_id = r.headers["mcp-session-id"]
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    headers = {**caller.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    assert (await caller.client.post("/mcp", json=done, headers=headers)).status_code == 202
    return session_id


def messages_of(r: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an answer, as JSON or as an event stream."""
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        return [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
    return [r.json()] if r.content else []
