"""The clock file: the service's "now" for tests and simulations."""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Caller, Service
from tests.live_support import running
from waypost.app import create_app
from waypost.clock import CLOCK_FILE_MOST, FileClock, format_time, parse_time
from waypost.errors import Unavailable
from waypost.resolvers.access import principals
from waypost.settings import Settings


def test_file_clock_rereads_the_file_at_every_use(tmp_path: Path) -> None:
    path = tmp_path / "clock"
    clock = FileClock(path)
    path.write_text("2026-11-29T18:00:00.000Z\n")
    assert format_time(clock.now()) == "2026-11-29T18:00:00.000Z"
    path.write_text("2026-11-30T07:15:30.250+01:00")
    assert format_time(clock.now()) == "2026-11-30T06:15:30.250Z"


@pytest.mark.parametrize(
    "content", [b"", b"yesterday", b"2026-11-29T18:00:00", b"\xff2026-11-29T18:00:00Z"]
)
def test_file_clock_without_a_valid_instant_is_unavailable(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "clock"
    path.write_bytes(content)
    with pytest.raises(Unavailable, match=r"^the clock file holds no valid instant$"):
        FileClock(path).now()


def test_a_clock_file_that_cannot_be_read_says_why(tmp_path: Path) -> None:
    """A missing file, or a directory, "held no valid instant"."""
    with pytest.raises(Unavailable, match=r"^the clock file cannot be read: No such file"):
        FileClock(tmp_path / "missing").now()
    with pytest.raises(Unavailable, match=r"^the clock file cannot be read: Is a directory$"):
        FileClock(tmp_path).now()


def test_a_clock_file_holding_more_than_an_instant_is_unavailable_unread(tmp_path: Path) -> None:
    """The file is read at every use: an instant and 100 MB of spaces (or a
    log named by mistake) was read whole each time, 0.5-2 s a request."""
    path = tmp_path / "clock"
    instant = b"2026-11-29T18:00:00Z"
    path.write_bytes(instant + b" " * (CLOCK_FILE_MOST - len(instant)))
    assert format_time(FileClock(path).now()) == "2026-11-29T18:00:00.000Z"
    with path.open("ab") as file:
        file.write(b" ")
    with pytest.raises(Unavailable, match=r"^the clock file holds more than an instant"):
        FileClock(path).now()


def test_parse_time_refuses_an_instant_without_offset() -> None:
    with pytest.raises(ValueError):
        parse_time("2026-11-29T18:00:00")


async def test_a_request_while_the_clock_file_is_unreadable_is_503_not_500(
    tmp_path: Path,
) -> None:
    path = tmp_path / "clock"
    path.write_text("2026-11-29T18:00:00.000Z")
    app = create_app(Settings(db_path=tmp_path / "w.db", sweep_interval=3600), FileClock(path))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            from waypost.resolvers.access import principals

            rt = app.state.runtime
            made = await rt.db.write(
                lambda c: principals.create_principal(c, "human", "h", "2026-11-29T18:00:00.000Z")
            )
            path.write_text("not a time")
            headers = {"Authorization": f"Bearer {made['token']}"}
            r = await client.get("/api/v1/me", headers=headers)
            graphql = await client.post("/graphql", json={"query": "{ me { name } }"},
                                        headers=headers)  # fmt: skip
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"] == "1"
    assert r.json()["error"]["code"] == "unavailable"
    # over GraphQL, refused while authenticating: `retryAfter` too, as later refusals have
    assert graphql.status_code == 503 and graphql.headers["retry-after"] == "1"
    assert graphql.json()["errors"][0]["extensions"] == {"code": "unavailable", "retryAfter": 1}


class _ClockThatFailsAfter:
    """Valid for the first `reads` reads, then a file being rewritten (the
    request's authentication reads the clock first, the answer after it)."""

    def __init__(self, reads: int) -> None:
        self.reads = reads

    def now(self) -> datetime:
        self.reads -= 1
        if self.reads < 0:
            raise Unavailable("the clock file holds no valid instant", retry_after=1)
        return parse_time("2026-11-29T18:00:00.000Z")


class _TickingClock:
    """One second later at every read: an answer that read it twice says so."""

    def __init__(self) -> None:
        self.moment = parse_time("2026-11-29T18:00:00.000Z")

    def now(self) -> datetime:
        self.moment += timedelta(seconds=1)
        return self.moment


async def _as_a_human(
    clock: Any, tmp_path: Path, after_each_commit: Callable[[], None] | None = None
) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str], str]]:
    """A client of a service on `clock`, a human's headers, and a project of
    it; `after_each_commit` is called after each commit that follows."""
    app = create_app(Settings(db_path=tmp_path / "w.db", sweep_interval=3600), clock)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            made = await app.state.runtime.db.write(
                lambda c: principals.create_principal(c, "human", "h", "2026-11-29T18:00:00.000Z")
            )
            headers = {"Authorization": f"Bearer {made['token']}"}
            created = await client.post(
                "/api/v1/projects", json={"id": "p", "name": "P"},
                headers={**headers, "Idempotency-Key": "p"},
            )  # fmt: skip
            assert created.status_code == 201, created.text
            if after_each_commit is not None:
                app.state.runtime.db.add_commit_listener(after_each_commit)
            yield client, headers, created.json()["id"]


async def test_a_known_graphql_query_while_the_clock_file_is_rewritten_is_503_not_500(
    tmp_path: Path,
) -> None:
    """A query answered before takes the fast path; a clock file half-written
    between the request's authentication and its answer is the 503 of any
    other moment (it was a 500 on that path)."""
    clock = _ClockThatFailsAfter(reads=10**6)
    query = {"query": "query Digest($p: String!) { project(id: $p) { digest { generatedAt } } }"}
    async for client, headers, project in _as_a_human(clock, tmp_path):
        query["variables"] = {"p": project}  # type: ignore[assignment]
        for _ in range(2):  # learned, then answered by the fast path
            answered = await client.post("/graphql", json=query, headers=headers)
            assert answered.json()["data"]["project"]["digest"]["generatedAt"], answered.text
        clock.reads = 1  # authentication's read, then none
        r = await client.post("/graphql", json=query, headers=headers)
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"] == "1"
    assert r.json()["errors"][0]["extensions"] == {"code": "unavailable", "retryAfter": 1}


async def test_a_graphql_request_under_an_unreadable_clock_file_is_503_on_every_path(
    tmp_path: Path,
) -> None:
    """A query not learned yet and a mutation answer as a learned query does:
    503 with `retryAfter` (read first inside execution, the clock's refusal
    was a field error in a `200`, so one query had two answers)."""
    clock = _ClockThatFailsAfter(reads=10**6)
    query = {"query": "query Digest($p: String!) { project(id: $p) { digest { generatedAt } } }"}
    create = (
        'mutation { projectCreate(input: {idempotencyKey: "m", id: "q", name: "Q"})'
        " { project { createdAt } } }"
    )
    answers = []
    async for client, headers, project in _as_a_human(clock, tmp_path):
        query["variables"] = {"p": project}  # type: ignore[assignment]
        for body in (query, {"query": create}):
            clock.reads = 1  # authentication's read, then none
            answers.append(await client.post("/graphql", json=body, headers=headers))
    for r in answers:
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] == "1"
        assert r.json()["errors"][0]["extensions"] == {"code": "unavailable", "retryAfter": 1}


async def test_an_answers_waypost_now_is_the_instant_it_was_judged_at(tmp_path: Path) -> None:
    """The clock is read once per answer: the digest's `generated_at` and the
    answer's `Waypost-Now` are one instant, on REST and GraphQL (each read
    the clock again for the header, so a moving clock set them apart)."""
    query = {"query": "query Digest($p: String!) { project(id: $p) { digest { generatedAt } } }"}
    async for client, headers, project in _as_a_human(_TickingClock(), tmp_path):
        rest = await client.get(f"/api/v1/projects/{project}/digest", headers=headers)
        query["variables"] = {"p": project}  # type: ignore[assignment]
        graphql = [await client.post("/graphql", json=query, headers=headers) for _ in range(2)]
    assert rest.status_code == 200, rest.text
    assert rest.headers["Waypost-Now"] == rest.json()["generated_at"]
    for answer in graphql:  # the pipeline's answer, then the fast path's
        assert answer.status_code == 200, answer.text
        generated = answer.json()["data"]["project"]["digest"]["generatedAt"]
        assert answer.headers["Waypost-Now"] == generated


async def test_a_writes_waypost_now_is_read_after_the_write(tmp_path: Path) -> None:
    """A write reads its own time as it commits; its answer's `Waypost-Now`
    is read after it, on REST and GraphQL, never an instant from before it
    (a first version judged a whole request at its start, so a mutation's
    answer said a lease had not expired that its own write had recovered)."""
    create = (
        'mutation { projectCreate(input: {idempotencyKey: "m", id: "q", name: "Q"})'
        " { project { createdAt } } }"
    )
    async for client, headers, _ in _as_a_human(_TickingClock(), tmp_path):
        rest = await client.post(
            "/api/v1/projects", json={"id": "r", "name": "R"},
            headers={**headers, "Idempotency-Key": "r"},
        )  # fmt: skip
        graphql = await client.post("/graphql", json={"query": create}, headers=headers)
    assert rest.status_code == 201, rest.text
    assert rest.headers["Waypost-Now"] > rest.json()["created_at"]
    created = graphql.json()["data"]["projectCreate"]["project"]["createdAt"]
    assert graphql.headers["Waypost-Now"] > created, graphql.text


class _ClockGoneAfterACommit:
    """A clock file rewritten just as a write commits: valid until then."""

    def __init__(self) -> None:
        self.gone = False

    def now(self) -> datetime:
        if self.gone:
            raise Unavailable("the clock file holds no valid instant", retry_after=1)
        return parse_time("2026-11-29T18:00:00.000Z")


async def test_a_write_whose_clock_cannot_be_read_after_it_is_answered_without_waypost_now(
    tmp_path: Path,
) -> None:
    """A write's `Waypost-Now` is read after it commits; a clock file being
    rewritten then leaves the header out, and the committed write is answered
    as it is, on REST and GraphQL (a 503 would tell the client its write did
    not happen)."""
    clock = _ClockGoneAfterACommit()
    create = (
        'mutation { projectCreate(input: {idempotencyKey: "m", id: "q", name: "Q"})'
        " { project { name } } }"
    )

    def gone() -> None:
        clock.gone = True

    async for client, headers, _ in _as_a_human(clock, tmp_path, after_each_commit=gone):
        rest = await client.post(
            "/api/v1/projects", json={"id": "r", "name": "R"},
            headers={**headers, "Idempotency-Key": "r"},
        )  # fmt: skip
        assert rest.status_code == 201, rest.text
        assert rest.json()["id"] == "r" and "waypost-now" not in rest.headers
        clock.gone = False
        graphql = await client.post("/graphql", json={"query": create}, headers=headers)
        assert graphql.status_code == 200, graphql.text
        assert graphql.json()["data"]["projectCreate"]["project"] == {"name": "Q"}
        assert "waypost-now" not in graphql.headers


async def test_a_pipelined_request_reads_its_own_clock(service: Service, human: Caller) -> None:
    """uvicorn starts a pipelined request's task inside the `send` of the one
    before it, and the new task inherits the context there: a read's pin on
    the clock must have ended before its answer is sent (a first version
    sent inside it, and every request pipelined behind a read, an MCP
    session's too, was judged at that read's instant for good)."""
    start = service.clock.moment
    reads = itertools.count(1)
    service.clock.now = lambda: start + timedelta(seconds=next(reads))  # type: ignore[method-assign]
    async with running(service) as base:
        port = int(base.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        one = (
            f"GET /api/v1/me HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {human.token}\r\n\r\n"
        ).encode()
        writer.write(one * 3)  # three requests in one write: each waits behind the last
        heads = []
        for _ in range(3):
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            length = int(re.search(rb"(?i)content-length: (\d+)", head)[1])  # type: ignore[index]
            await reader.readexactly(length)
            heads.append(head)
        writer.close()
    said = [re.search(rb"(?i)waypost-now: (\S+)", head)[1] for head in heads]  # type: ignore[index]
    assert len(set(said)) == 3, said  # each judged at an instant of its own


@pytest.mark.parametrize("content", ["9999-12-31T23:59:00.000Z", "0001-01-01T00:00:00.000Z"])
def test_a_file_clock_near_the_ends_of_the_calendar_is_unavailable(
    tmp_path: Path, content: str
) -> None:
    """The service adds days to now (a lease, the digest's week): at these
    instants a claim, a session or the digest answered 500 (OverflowError)."""
    path = tmp_path / "clock"
    path.write_text(content)
    with pytest.raises(Unavailable) as refused:
        FileClock(path).now()
    assert "0002 to 9998" in refused.value.message


@pytest.mark.parametrize(
    "content",
    ["9998-12-31T23:59:59.9999Z", "9999-01-01T00:59:59.9999999+01:00", "0002-01-01T00:00:00Z"],
)
def test_every_instant_of_the_years_0002_to_9998_is_a_valid_clock(
    tmp_path: Path, content: str
) -> None:
    """The last tenth of a millisecond of 9998 was refused as outside it: the
    bound was 23:59:59.999 and the instant was compared before it was cut."""
    path = tmp_path / "clock"
    path.write_text(content)
    assert FileClock(path).now().year in (2, 9998)


def test_format_time_pads_years_so_strings_sort_in_time_order() -> None:
    early = format_time(parse_time("0999-01-01T00:00:00Z"))
    assert early == "0999-01-01T00:00:00.000Z"
    assert early < format_time(parse_time("2026-11-29T18:00:00Z"))


@pytest.mark.parametrize(
    "text",
    [
        "2026-W49-1T00:00:00Z",  # ISO week date
        "2026-11-29 18:00:00Z",  # space instead of T
        "20261129T180000Z",  # basic format
        "0001-01-01T00:00:00+01:00",  # before year 1 in UTC
        "9999-12-31T23:59:59-01:00",  # after year 9999 in UTC
        "2026-12-01T00:00:00+05:60",  # minutes of an offset past 59 (read as +06:00)
        "2026-12-01T00:00:00-00:99",  # (read as -01:39)
        "2026-12-01T00:00:00+25:00",
        "2016-12-31T23:59:60Z",  # a leap second (RFC 3339 allows it; docs/api.md)
    ],
)
def test_parse_time_accepts_only_rfc3339_that_fits_in_utc(text: str) -> None:
    with pytest.raises(ValueError):
        parse_time(text)


def test_format_time_spells_any_instant_in_utc_truncated_to_milliseconds() -> None:
    """clock.format_time (now `isoformat` with its "+00:00" cut): an instant
    with another offset is spelt in UTC, microseconds are cut, not rounded,
    and years before 1000 keep four digits (review80)."""
    from datetime import UTC, timezone

    east = timezone(timedelta(hours=5, minutes=30))
    assert format_time(datetime(2026, 12, 7, 5, 30, 0, 999_999, tzinfo=east)) == (
        "2026-12-07T00:00:00.999Z"
    )
    west = timezone(-timedelta(hours=1, seconds=5))
    assert format_time(datetime(2026, 12, 6, 23, 59, 0, 1_000, tzinfo=west)) == (
        "2026-12-07T00:59:05.001Z"
    )
    assert format_time(datetime(7, 1, 2, 3, 4, 5, 6_789, tzinfo=UTC)) == "0007-01-02T03:04:05.006Z"
