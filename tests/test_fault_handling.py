"""Broad exception handlers that did the wrong thing (an audit of every one):
a failed hub start refused every stream until a restart, a subscription sent
a fault's raw text, an event stream's 503 escaped as a traceback, a store
error on a read was a 500, the writer retried a failing step for ever, a
provider id that is no string was a fault, and a busy store ended streams
as if their token were revoked."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from graphql import GraphQLError

from tests.conftest import Caller, Service, own_condition_log
from waypost.errors import Unauthenticated, Unavailable
from waypost.live import Hub, sse
from waypost.live import streams as live_streams
from waypost.live.streams import OPENED
from waypost.reranker.client import ProviderFailure, parse_scores
from waypost.schema import fastpath
from waypost.schema.subscriptions import _guarded
from waypost.storage import writer as writer_module
from waypost.storage.connection import STORAGE_RETRY_AFTER
from waypost.storage.db import Database
from waypost.storage.writer import Writer


async def test_a_failed_hub_start_is_tried_again_by_the_next_listener(
    service: Service,
) -> None:
    db = service.rt.db
    calls = 0

    class Flaky:
        """The database, whose first read is refused (a busy store)."""

        async def read(self, fn: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise Unavailable("the database is busy; retry shortly", retry_after=1)
            return await db.read(fn)

        def __getattr__(self, name: str) -> Any:
            return getattr(db, name)

    hub = Hub(Flaky())  # type: ignore[arg-type]
    with pytest.raises(Unavailable):
        await hub.start()
    await hub.start()  # kept, the first failure refused this one too
    # the second start read the log's end; its follower may have read once
    # more already (it wakes at once now: cancelling.wait_at_most)
    assert calls >= 2
    hub.stop()


async def test_a_subscription_fault_reaches_the_client_masked_and_the_log_whole(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def failing() -> AsyncIterator[int]:
        yield 1
        raise sqlite3.OperationalError("disk I/O error reading /srv/secret/waypost.db")

    items = _guarded(failing())
    assert await anext(items) == 1
    with caplog.at_level(logging.ERROR, "waypost"), pytest.raises(GraphQLError) as raised:
        await anext(items)
    assert raised.value.message == "internal error"
    assert raised.value.extensions == {"code": "internal"}
    assert "secret" in caplog.text  # the cause, for the operator


async def test_a_subscription_refused_as_busy_says_when_to_retry() -> None:
    """A subscription's refusal was shaped by its own copy of the GraphQL
    extensions, which left out `retryAfter` (deadcodeaudit): docs/graphql.md
    says a busy database comes with it, wherever it is met."""

    async def busy() -> AsyncIterator[int]:
        yield 1
        raise Unavailable("the database is busy; retry shortly", retry_after=30)

    items = _guarded(busy())
    assert await anext(items) == 1
    with pytest.raises(GraphQLError) as raised:
        await anext(items)
    assert raised.value.extensions == {"code": "unavailable", "retryAfter": 30}


async def test_an_event_stream_ends_with_its_503_in_an_error_event(
    service: Service,
    human: Caller,
    project: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The response has started: the 503 escaped as "Exception in ASGI
    application" and a cut body."""

    async def refusing(*args: Any) -> AsyncIterator[Any]:
        yield OPENED
        raise Unavailable("the database is busy; retry shortly", retry_after=1)

    monkeypatch.setattr(sse, "project_event_batches", refusing)
    with caplog.at_level(logging.ERROR):
        r = await human.client.get("/api/v1/projects/demo/events/stream", headers=human.headers())
    assert r.status_code == 200
    assert r.text.startswith(": stream open\n\n")
    assert r.text.endswith('event: error\ndata: {"code":"unavailable","message":'
                           '"the database is busy; retry shortly","details":{}}\n\n')  # fmt: skip
    assert "Traceback" not in caplog.text and "Exception in ASGI" not in caplog.text


@pytest.mark.parametrize(
    ("code", "words"),
    [(sqlite3.SQLITE_IOERR, "failed a read or write"), (sqlite3.SQLITE_CORRUPT, "damaged")],
)
async def test_a_store_error_on_a_read_is_503(tmp_path: Path, code: int, words: str) -> None:
    """A read's I/O error answered 500 with a traceback per request."""
    db = Database(tmp_path / "w.db")
    await db.open()

    def failing(conn: sqlite3.Connection) -> None:
        error = sqlite3.OperationalError("disk I/O error")
        error.sqlite_errorcode = code  # type: ignore[attr-defined]
        raise error

    try:
        for read in (db.read, db.read_point):
            with pytest.raises(Unavailable) as refused:
                await read(failing)
            assert words in refused.value.message
            assert refused.value.retry_after == STORAGE_RETRY_AFTER
    finally:
        await db.close()


class _FailingBegin:
    """A writer connection whose BEGIN fails as `error` does."""

    def __init__(self, conn: sqlite3.Connection, error: BaseException) -> None:
        self._conn, self._error = conn, error

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.startswith("BEGIN"):
            raise self._error
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _not_a_database() -> sqlite3.DatabaseError:
    error = sqlite3.DatabaseError("file is not a database")
    error.sqlite_errorcode = sqlite3.SQLITE_NOTADB  # type: ignore[attr-defined]
    return error


@pytest.mark.parametrize(
    ("error", "answered"),
    [(_not_a_database(), sqlite3.DatabaseError), (RuntimeError("a fault"), Unavailable)],
)
async def test_a_step_that_always_fails_answers_its_callers_once(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    error: BaseException,
    answered: type[BaseException],
) -> None:
    """BEGIN raising a DatabaseError (a damaged file) escaped `_begin`, and the
    writer loop ran the same units again and again: 99,266 log lines in 2 s
    and callers that waited for ever."""
    own = own_condition_log(monkeypatch, writer_module)
    conn = sqlite3.connect(tmp_path / "w.db", isolation_level=None, check_same_thread=False)
    writer = Writer(_FailingBegin(conn, error), 1000)  # type: ignore[arg-type]
    try:
        with caplog.at_level(logging.WARNING, "waypost"):
            outcome = await asyncio.wait_for(
                asyncio.gather(
                    writer.submit(lambda c: None, transaction=True), return_exceptions=True
                ),
                timeout=5,
            )
            await asyncio.sleep(0.2)  # time for any spin to show in the log
    finally:
        await asyncio.to_thread(writer.stop)
    assert isinstance(outcome[0], answered), outcome
    # (this writer's lines: a condition line of another test's may come by timer)
    said = [r for r in caplog.records if r.name == own.log.name or r.levelno >= logging.ERROR]
    assert len(said) <= 2, [r.getMessage() for r in said]


def test_a_provider_id_that_is_no_string_is_a_bad_answer() -> None:
    """A list as an id raised TypeError (unhashable): logged as a fault,
    reported as `connect_error`."""
    for bad in ([1], {"a": 1}, 7, None):
        body = b'{"scores": [{"id": %s, "score": 1}, {"id": "b", "score": 2}]}' % (
            str(bad).replace("'", '"').replace("None", "null").encode()
        )
        with pytest.raises(ProviderFailure) as failed:
            parse_scores(body, ["a", "b"])
        assert failed.value.reason == "bad_scores"


async def test_a_busy_store_does_not_end_a_stream_as_if_its_token_were_revoked(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    raised: list[BaseException] = [Unavailable("busy", retry_after=1)]

    async def read(fn: Any) -> Any:
        raise raised[0]

    monkeypatch.setattr(service.rt.db, "read", read)
    assert await live_streams.still_valid(service.rt, "wp_x") is True
    raised[0] = Unauthenticated("revoked")
    assert await live_streams.still_valid(service.rt, "wp_x") is False


class _FailingRollbacks:
    """A writer connection whose ROLLBACK TO and ROLLBACK fail twice (a device
    failing for a moment), then work."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn, self.failures = conn, 2

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.startswith("ROLLBACK") and self.failures > 0:
            self.failures -= 1
            error = sqlite3.OperationalError("disk I/O error")
            error.sqlite_errorcode = sqlite3.SQLITE_IOERR  # type: ignore[attr-defined]
            raise error
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


async def test_a_failed_rollback_leaves_no_unit_unanswered_and_no_transaction_open(
    tmp_path: Path,
) -> None:
    """The final ROLLBACK of `_undo_unit` raised out of the batch: the units
    that had run were never answered, the transaction stayed open, and every
    later write failed ("cannot start a transaction within a transaction")."""
    raw = sqlite3.connect(tmp_path / "w.db", isolation_level=None, check_same_thread=False)
    raw.execute("CREATE TABLE t (x)")
    writer = Writer(_FailingRollbacks(raw), 1000)  # type: ignore[arg-type]

    def ok(conn: sqlite3.Connection) -> str:
        conn.execute("INSERT INTO t VALUES (1)")
        return "ok"

    def bad(conn: sqlite3.Connection) -> None:
        raise ValueError("the unit's own error")

    try:
        outcomes = await asyncio.wait_for(
            asyncio.gather(
                *(writer.submit(fn, transaction=True) for fn in (ok, bad, ok)),
                return_exceptions=True,
            ),
            timeout=5,
        )
        assert outcomes[0] == "ok" and outcomes[2] == "ok", outcomes
        assert isinstance(outcomes[1], ValueError), outcomes
        assert await asyncio.wait_for(writer.submit(ok, transaction=True), timeout=5) == "ok"
    finally:
        await asyncio.to_thread(writer.stop)
    check = sqlite3.connect(tmp_path / "w.db")
    assert check.execute("SELECT count(*) FROM t").fetchone()[0] == 3
    check.close()


async def test_a_read_that_tries_to_write_is_a_fault_not_a_read_only_store(
    tmp_path: Path,
) -> None:
    """Readers are query_only: plain SQLITE_READONLY there is a bug of the
    read, not the storage's condition (no 503 "the database is read-only")."""
    db = Database(tmp_path / "w.db")
    await db.open()
    try:
        for read in (db.read, db.read_point):
            with pytest.raises(sqlite3.OperationalError):
                await read(lambda c: c.execute("CREATE TABLE oops (x)"))
    finally:
        await db.close()


async def test_a_store_that_needs_an_operator_ends_a_stream_at_its_token_check(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A damaged file or changed files last until a restart: a token revoked
    meanwhile could not be told, so the stream ends (a busy store does not)."""

    async def read(fn: Any) -> Any:
        raise Unavailable("the database file is damaged", retry_after=STORAGE_RETRY_AFTER)

    monkeypatch.setattr(service.rt.db, "read", read)
    assert await live_streams.still_valid(service.rt, "wp_x") is False


async def test_a_fast_path_sql_fault_is_logged_and_answered_by_graphql_core(
    human: Caller, project: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Only the store's conditions (busy, damaged, full, ...) pass through
    the fast path unlogged: an SQL fault of its own is a WARNING, and the
    ordinary path answers."""

    def broken(*args: Any) -> Any:
        raise sqlite3.OperationalError("no such column: k.nothing")

    monkeypatch.setattr(fastpath, "execute", broken)
    with caplog.at_level(logging.WARNING, "waypost"):
        data = await human.gql('{ project(id: "demo") { name } }')
    assert data == {"data": {"project": {"name": "Demo"}}}
    assert "fast path fault" in caplog.text


async def test_a_sweep_refused_pass_after_pass_is_logged_once_a_window(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each pass the store refused (a full disk, another process's lock) was
    one WARNING: 67 lines in 13 s at `--sweep-interval 0.2`, where the
    writer's own lines of the same condition came once per 10 s window."""
    from tests.conftest import MovableClock, serving
    from waypost import runtime as runtime_module
    from waypost.settings import Settings

    own = own_condition_log(monkeypatch, runtime_module)
    settings = Settings(db_path=tmp_path / "w.db", sweep_interval=0.02, busy_timeout_ms=5)
    async with serving(settings, MovableClock()) as service:
        registry = service.rt.metrics.registry

        def skipped() -> float:
            labels = {"outcome": "skipped"}
            return registry.get_sample_value("waypost_sweep_runs_total", labels) or 0.0

        holder = sqlite3.connect(service.db_path, isolation_level=None)
        try:
            with caplog.at_level(logging.WARNING, "waypost"):
                holder.execute("BEGIN IMMEDIATE")  # another process's lock
                for _ in range(500):
                    if skipped() >= 5:
                        break
                    await asyncio.sleep(0.02)
                holder.execute("ROLLBACK")
                passes = skipped()
        finally:
            holder.close()
    assert passes >= 5  # the sweep went on trying, pass after pass
    # the first line at once; the rest held back, then told as their number
    # when the runtime closed (within the same 10 s window)
    lines = [r for r in caplog.records if r.getMessage().startswith("sweep")]
    said = [r.getMessage() for r in lines]
    assert len(said) <= 2, said
    assert said[0] == "sweep skipped: the database is busy; retry shortly", said
    assert {r.name for r in lines} == {own.log.name}


async def test_a_sweep_skipped_for_another_cause_is_logged_at_once(
    service: Service, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep's lines shared one window whatever refused the pass, so a
    full disk after a busy store waited out the busy line's window, counted
    as one more of it."""
    from waypost import runtime as runtime_module
    from waypost.resolvers.core import sweep

    own = own_condition_log(monkeypatch, runtime_module)
    causes = [Unavailable("the database is busy; retry shortly", retry_after=1)] * 2
    causes.append(Unavailable("the database's disk is full; retry later", retry_after=30))

    async def refused(rt: Any) -> dict[str, Any]:
        if not causes:
            await asyncio.sleep(3600)
        raise causes.pop(0)

    monkeypatch.setattr(sweep, "run_once", refused)
    with caplog.at_level(logging.WARNING, "waypost"):
        sweeping = asyncio.ensure_future(runtime_module._sweep_forever(service.rt, 0.01))
        try:
            for _ in range(200):
                if not causes:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
        finally:
            sweeping.cancel()
    said = [r.getMessage() for r in caplog.records if r.name == own.log.name]
    assert said == [
        "sweep skipped: the database is busy; retry shortly",
        "sweep skipped: the database's disk is full; retry later",
    ], said


async def test_a_read_that_fails_after_its_fields_were_cancelled_is_no_error(
    service: Service, human: Caller, project: str, caplog: pytest.LogCaptureFixture
) -> None:
    """`context(q:)` refuses a NUL at once, which ends its parent, and
    graphql-core cancels the sibling fields waiting on their shared reads;
    those reads then failed the same way with nobody left to see it, and
    asyncio logged each as an ERROR with its traceback ("Task exception was
    never retrieved") for a client's bad `q`."""
    import gc

    document = (
        'query($q: String!) { project(id: "demo") { context(q: $q) { truncated }'
        " knowledge(q: $q) { edges { cursor } } tasks(q: $q) { edges { cursor } } } }"
    )
    with caplog.at_level(logging.ERROR, "asyncio"):
        for _ in range(10):
            answer = await human.gql(document, {"q": "a\x00b"})
            assert answer["errors"][0]["extensions"]["code"] == "invalid_request", answer
        await asyncio.sleep(0.3)  # the abandoned reads end on their threads
        gc.collect()
    unseen = [r.getMessage() for r in caplog.records if "never retrieved" in r.getMessage()]
    assert unseen == []


async def test_a_begin_that_fails_for_another_reason_than_a_lock_is_not_tried_again(
    tmp_path: Path,
) -> None:
    """BEGIN waits for another process's lock in slices (`_BUSY_SLICE`),
    trying again while the budget lasts; a damaged file is no lock: its
    caller is answered at once, after one BEGIN, not after a budget of
    BEGINs tried back to back."""
    conn = sqlite3.connect(tmp_path / "w.db", isolation_level=None, check_same_thread=False)
    failing = _FailingBegin(conn, _not_a_database())
    begins = 0
    execute = failing.execute

    def counting(sql: str, *args: Any) -> Any:
        nonlocal begins
        begins += sql.startswith("BEGIN")
        return execute(sql, *args)

    failing.execute = counting  # type: ignore[method-assign]
    writer = Writer(failing, 5000)  # type: ignore[arg-type]
    try:
        began = asyncio.get_running_loop().time()
        with pytest.raises(sqlite3.DatabaseError):
            await asyncio.wait_for(writer.submit(lambda c: None, transaction=True), 10)
        waited = asyncio.get_running_loop().time() - began
    finally:
        await asyncio.to_thread(writer.stop)
    assert begins == 1, begins
    assert waited < 1.0, f"answered after {waited:.1f} s"
