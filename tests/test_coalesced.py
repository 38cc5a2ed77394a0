"""Point look-ups coalesced per pass of the event loop (storage/coalesced.py):
the token and receipt reads of concurrent requests share one statement, and
each request still gets exactly its own row, as of after it arrived."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from tests.conftest import Service
from waypost.ids import token_digest
from waypost.resolvers.access import store as access_store
from waypost.resolvers.core import store as core_store
from waypost.storage.coalesced import CHUNK, SIZES, Coalesced, padded


@contextlib.asynccontextmanager
async def write_under_way(service: Service) -> AsyncIterator[None]:
    """A write the writer holds until the block ends (as under load)."""
    release = threading.Event()
    held = asyncio.ensure_future(service.rt.db.write(lambda conn: release.wait(10)))
    while service.rt.db.unanswered_writes() == 0:
        await asyncio.sleep(0.001)
    try:
        yield
    finally:
        release.set()
        await held


def counted(calls: list[list[Any]], read_many: Any) -> Any:
    def read(conn: sqlite3.Connection, keys: Sequence[Any]) -> Any:
        calls.append(list(keys))
        return read_many(conn, keys)

    return read


async def test_keys_asked_in_one_pass_are_read_by_one_statement(service: Service) -> None:
    alice, bob = await service.principal("human", "alice"), await service.principal("agent", "bob")
    calls: list[list[bytes]] = []
    rows = Coalesced(service.rt.db, counted(calls, access_store.tokens_with_principals))
    unknown = token_digest("wp_nobody")
    asked = [token_digest(alice.token), token_digest(bob.token), unknown] * 3
    async with write_under_way(service):
        found = await asyncio.gather(*(rows.get(digest) for digest in asked))
    # one statement; each key once, padded to four by the last (see below)
    assert len(calls) == 1 and sorted(set(calls[0])) == sorted(set(asked))
    assert len(calls[0]) == 4
    assert [row["id"] if row else None for row in found] == [
        alice.principal_id, bob.principal_id, None
    ] * 3  # fmt: skip
    # the next pass reads again: a token revoked meanwhile is seen at once
    await service.rt.db.write(
        lambda conn: conn.execute(
            "UPDATE tokens SET revoked_at = 'x' WHERE sha256 = ?", (token_digest(alice.token),)
        )
    )
    again = await rows.get(token_digest(alice.token))
    assert len(calls) == 2 and again is not None and again["revoked_at"] == "x"


async def test_with_no_write_under_way_each_key_is_read_at_once(service: Service) -> None:
    """No writer thread to take the GIL: nothing to win by waiting for the
    pass to end, which cost a sequential create 0.3 ms."""
    calls: list[list[bytes]] = []
    rows = Coalesced(service.rt.db, counted(calls, access_store.tokens_with_principals))
    assert service.rt.db.unanswered_writes() == 0
    await asyncio.gather(*(rows.get(token_digest(f"wp_{i}")) for i in range(3)))
    assert calls == [[token_digest(f"wp_{i}")] for i in range(3)]


async def test_more_keys_than_a_statement_takes_are_read_in_chunks(service: Service) -> None:
    calls: list[list[bytes]] = []
    rows = Coalesced(service.rt.db, counted(calls, access_store.tokens_with_principals))
    # a key a chunk left out would wait for ever: fail instead (mutantaudit3)
    async with write_under_way(service), asyncio.timeout(10):
        found = await asyncio.gather(*(rows.get(token_digest(f"wp_{i}")) for i in range(CHUNK + 5)))
    assert found == [None] * (CHUNK + 5)
    assert sorted(len(keys) for keys in calls) == [8, CHUNK]  # 5 padded to 8


async def test_batches_of_every_size_share_a_few_statement_texts(service: Service) -> None:
    """A statement's text grows with its keys: with a text for every size,
    up to 200 texts of each look-up went into the connection's cache of 256
    prepared statements and pushed out the hot ones. Padded, every size from
    1 to CHUNK makes one of SIZES' texts, and each key still gets its row."""
    alice = await service.principal("human", "alice")
    receipt = await alice.post("/api/v1/projects", {"id": "padded", "name": "Padded"})
    assert receipt.status_code == 201, receipt.text
    key = receipt.request.headers["Idempotency-Key"]
    digests = [token_digest(alice.token)] + [token_digest(f"wp_{i}") for i in range(CHUNK)]
    slots = [(alice.principal_id, key)] + [(alice.principal_id, f"k{i}") for i in range(CHUNK)]
    conn = _Recording(sqlite3.connect(service.db_path))
    try:
        for size in range(1, CHUNK + 1):
            tokens = access_store.tokens_with_principals(conn, padded(digests[:size]))
            assert list(tokens) == [digests[0]]
            receipts = core_store.receipt_rows(conn, padded(slots[:size]))
            assert list(receipts) == [slots[0]]
    finally:
        conn.close()
    assert len(conn.texts) == 2 * len(SIZES), len(conn.texts)


class _Recording:
    """A real connection that notes the text of every statement it runs."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        conn.row_factory = sqlite3.Row
        self.conn, self.texts = conn, set[str]()

    def execute(self, sql: str, parameters: Sequence[Any]) -> sqlite3.Cursor:
        self.texts.add(sql)
        return self.conn.execute(sql, parameters)

    def close(self) -> None:
        self.conn.close()


async def test_a_failed_read_reaches_every_asker_and_a_gone_one_is_skipped(
    service: Service,
) -> None:
    def broken(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, Any]:
        conn.execute("SELECT * FROM no_such_table")
        return {}

    rows: Coalesced[str, Any] = Coalesced(service.rt.db, broken)
    async with write_under_way(service):
        gone = asyncio.ensure_future(rows.get("a"))
        asked = [asyncio.ensure_future(rows.get(key)) for key in ("a", "b")]
        await asyncio.sleep(0)  # all three have asked; the read comes next
        assert sum(len(futures) for futures in rows._waiting.values()) == 3
        gone.cancel()  # its request went away before the read: the others are answered
        # an asker left unanswered (a gone one's future failing the rest) would hang
        results = await asyncio.wait_for(asyncio.gather(*asked, return_exceptions=True), 10)
    assert all(isinstance(r, sqlite3.OperationalError) for r in results)
    with pytest.raises(asyncio.CancelledError):
        await gone


async def test_concurrent_requests_each_get_their_own_answer(
    service: Service, project: str
) -> None:
    """Creates, a replay, a reused key and a revoked token, all in flight at
    once: the shared reads hand each request its own token and receipt."""
    alice, bob = await service.principal("human", "alice2"), await service.principal("human", "bob")
    body = {"kind": "lesson", "title": "Shared reads", "body": "one statement for many"}
    path = f"/api/v1/projects/{project}/knowledge"
    first = await alice.post(path, body, key="k-1")
    assert (await alice.post(path, body, key="k-r")).status_code == 201
    assert first.status_code == 201
    revoked = await service.principal("human", "carol")
    await service.rt.db.write(
        lambda conn: conn.execute(
            "UPDATE tokens SET revoked_at = 'x' WHERE principal_id = ?", (revoked.principal_id,)
        )
    )
    async with write_under_way(service):
        answering = asyncio.gather(
            alice.post(path, body, key="k-1"),  # a replay
            alice.post(path, {**body, "title": "other"}, key="k-r"),  # a key reused
            bob.post(path, body, key="k-1"),  # another principal's own key
            revoked.post(path, body, key="k-9"),
            *(alice.post(path, body, key=f"k-{i}") for i in range(2, 8)),
        )
        # past their tokens and receipts: the seven new writes queue behind it
        for _ in range(2000):  # at most 10 s: the statuses below say what went wrong
            if service.rt.db.unanswered_writes() >= 1 + 7:
                break
            await asyncio.sleep(0.005)
    answers = await answering
    statuses = [a.status_code for a in answers]
    assert statuses == [201, 422, 201, 401] + [201] * 6, [a.text for a in answers]
    assert answers[0].headers.get("idempotent-replayed") == "true"
    assert answers[0].json() == first.json()
    assert answers[2].json()["id"] != first.json()["id"]


async def test_a_cancelled_batch_read_cancels_every_asker(service: Service) -> None:
    """The batch's read is cancelled while it waits (the loop closing, the
    read gone to a pool thread since the file was busy): its askers are
    cancelled with it, none left waiting for an answer that never comes."""
    in_pool, release = threading.Event(), threading.Event()
    calls: list[str] = []

    def busy_then_held(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, Any]:
        if not calls:  # the loop's own connection: busy, so on to a pool thread
            calls.append("point")
            raise sqlite3.OperationalError("database is locked")
        calls.append("pool")
        in_pool.set()
        release.wait(10)
        return {key: key for key in keys}

    rows: Coalesced[str, Any] = Coalesced(service.rt.db, busy_then_held)
    try:
        async with write_under_way(service):
            asked = [asyncio.ensure_future(rows.get(key)) for key in ("a", "b", "a")]
            assert await asyncio.to_thread(in_pool.wait, 10)
            assert calls == ["point", "pool"] and len(rows._reads) == 1
            for read in list(rows._reads):
                read.cancel()
            results = await asyncio.wait_for(asyncio.gather(*asked, return_exceptions=True), 10)
    finally:
        release.set()
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
