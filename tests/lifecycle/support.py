"""Lifecycle test helpers: the lifecycle app composed over the same Runtime as
the public app (as `serve` composes them), members of a tenant with their
lifecycle tokens, and memo/document builders."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from tests.conftest import Caller, Service
from waypost.resolvers.access import principals
from waypost.resolvers.lifecycle import store
from waypost.resolvers.lifecycle.delivery import Backoff, deliver_forever

HOOK = "https://hooks.example/lifecycle"

_keys = itertools.count()

Receiver = Callable[[httpx.Request], httpx.Response | Awaitable[httpx.Response]]


@contextlib.asynccontextmanager
async def delivering(
    lifecycle: Lifecycle, receiver: Receiver, backoff: Backoff | None = None
) -> AsyncIterator[asyncio.Task[None]]:
    """`deliver_forever` (as `serve` runs it) to `HOOK`, which `receiver`
    answers in place of the network; the worker is cancelled on leaving."""
    rt = lifecycle.service.rt
    async with httpx.AsyncClient(transport=httpx.MockTransport(receiver)) as client:
        worker = asyncio.create_task(deliver_forever(rt, client, HOOK, backoff or Backoff()))
        try:
            yield worker
        finally:
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def document(data: bytes, media_type: str = "text/markdown") -> dict[str, Any]:
    return {
        "digest": digest(data),
        "media_type": media_type,
        "content_base64": base64.b64encode(data).decode(),
    }


def packet_entry(pid: str, data: bytes, media_type: str = "text/markdown") -> dict[str, Any]:
    return {"id": pid, "digest": digest(data), "media_type": media_type, "title": f"doc {pid}"}


def memo(memo_id: str = "adr.payments-retry", version: int = 1, **over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": memo_id,
        "version": version,
        "title": "Retry policy for payment webhooks",
        "question": "Should payment webhooks retry with exponential backoff?",
        "context": "Incidents show duplicate deliveries.",
        "options": [
            {"id": "a", "title": "Exponential backoff", "summary": "doubling waits"},
            {"id": "b", "title": "Fixed interval", "summary": "every minute"},
        ],
        "recommendation": {"option_id": "a", "rationale": "fewer storms"},
        "proposed_binding_principal": "team-payments",
        "tags": ["payments"],
    }
    body.update(over)
    return body


def with_docs(m: dict[str, Any], *docs: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The memo with one packet entry per document, and the documents."""
    m = {**m, "packet": [packet_entry(f"p{i}", d) for i, d in enumerate(docs)]}
    return m, [document(d) for d in docs]


@dataclass
class Member:
    """A principal with a lifecycle token (and its api token) in a tenant."""

    client: httpx.AsyncClient
    id: str
    token: str
    api: Caller

    def headers(self, key: str | None = None) -> dict[str, str]:
        h = {"Authorization": f"Bearer {self.token}"}
        if key is not None:
            h["Idempotency-Key"] = key
        return h

    async def get(self, path: str, **params: Any) -> httpx.Response:
        return await self.client.get(path, params=params or None, headers=self.headers())

    async def post(
        self, path: str, body: Any, key: str | None = None, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        h = {
            **self.headers(key if key is not None else f"lk-{next(_keys)}"),
            "Content-Type": "application/json",
            **(headers or {}),
        }
        return await self.client.post(path, content=raw, headers=h)

    async def register(self, m: dict[str, Any], docs: list[Any] | None = None) -> httpx.Response:
        body: dict[str, Any] = {"memo": m}
        if docs is not None:
            body["documents"] = docs
        return await self.post("/v1/decisions", body)

    async def revise(
        self, m: dict[str, Any], expected: int, docs: list[Any] | None = None, **kw: Any
    ) -> httpx.Response:
        body: dict[str, Any] = {"memo": m, "expected_version": expected, "summary": "changed"}
        if docs is not None:
            body["documents"] = docs
        return await self.post(f"/v1/decisions/{m['id']}/revisions", body, **kw)


@dataclass
class Lifecycle:
    service: Service
    client: httpx.AsyncClient

    async def member(
        self, role: str | None = "author", tenant: str = "acme", kind: str = "human"
    ) -> Member:
        rt = self.service.rt
        at = self.service.clock.iso()

        # names are unique (principals.create_principal): one of its own each
        self.service.made += 1
        name = f"{kind}-{role}-{self.service.made}"

        def make(conn: Any) -> tuple[dict[str, Any], dict[str, Any]]:
            created = principals.create_principal(conn, kind, name, at)
            token = principals.issue_token(conn, created["principal_id"], "lifecycle", at)
            if role is not None:
                store.upsert_grant(conn, created["principal_id"], tenant, role, at)
            return created, token

        created, token = await rt.db.write(make)
        api = Caller(self.service.client, created["principal_id"], kind, created["token"])
        return Member(self.client, created["principal_id"], token["token"], api)

    async def grant(self, principal_id: str, tenant: str, role: str) -> None:
        at = self.service.clock.iso()
        await self.service.rt.db.write(
            lambda conn: store.upsert_grant(conn, principal_id, tenant, role, at)
        )

    async def count(self, table: str) -> int:
        row = await self.service.rt.db.read(
            lambda conn: conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        )
        return int(row[0])


TABLES = (
    "lifecycle_memos",
    "lifecycle_revisions",
    "lifecycle_documents",
    "lifecycle_events",
    "lifecycle_deliveries",
    "lifecycle_receipts",
)
