"""Fuzz: any JSON body (and any bytes) sent to register and revise gets a 200 or
a 4xx `{"error": code}` with a code of the closed set, never a 5xx.

Bodies are drawn near the real shape (a valid memo with fields replaced by
plausible or arbitrary values, unknown fields, documents that may or may not
match) and as arbitrary JSON documents. One service serves every example.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import MovableClock, serving
from tests.lifecycle.support import Lifecycle, Member, document, memo, packet_entry
from waypost.lifecycle_http import create_lifecycle_app
from waypost.lifecycle_http.envelope import CODES
from waypost.lifecycle_http.verifiers import WaypostTokenVerifier
from waypost.settings import Settings

text = st.text(st.characters(exclude_categories=()), max_size=24)  # surrogates too
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), text
)
anything = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)


def field(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(plausible, plausible, anything)


BLOBS = [b"alpha", b"beta"]
ids = st.sampled_from(["a", "b", "p0", "p1", "fz", "bad id", ""])
option = st.fixed_dictionaries(
    {"id": field(ids), "title": field(text)}, optional={"summary": field(text)}
)
memo_fields = {
    "id": field(st.just("fz")),
    "version": field(st.integers(0, 3)),
    "title": field(text),
    "question": field(st.sampled_from(["Why?", "Why? Why?", "no", ""]) | text),
    "context": field(text),
    "options": field(st.lists(option, max_size=3)),
    "recommendation": field(st.none() | st.fixed_dictionaries({"option_id": field(ids)})),
    "packet": field(
        st.lists(
            st.sampled_from([packet_entry(f"p{i}", b) for i, b in enumerate(BLOBS)]), max_size=2
        )
    ),
    "highlights": field(
        st.lists(
            st.fixed_dictionaries({"id": ids, "packet_id": ids, "locator": text, "text": text}),
            max_size=2,
        )
    ),
    "tags": field(st.lists(text, max_size=3)),
    "seal": anything,
    "extra": anything,
}
documents = st.lists(st.sampled_from([document(b) for b in BLOBS]) | anything, max_size=3)


def bodies(revise: bool) -> st.SearchStrategy[Any]:
    changed = st.fixed_dictionaries({}, optional=memo_fields)
    dropped = st.lists(st.sampled_from(list(memo_fields)), max_size=2)

    def build(change: dict[str, Any], drop: list[str], docs: Any, extra: dict[str, Any]) -> Any:
        m = {**memo("fz", 2 if revise else 1), **change}
        for name in drop:
            m.pop(name, None)
        body: dict[str, Any] = {"memo": m, "documents": docs, **extra}
        if revise:
            body.setdefault("expected_version", 1)
            body.setdefault("summary", "s")
        return body

    top = st.fixed_dictionaries(
        {}, optional={"expected_version": anything, "summary": anything, "tenant": anything}
    )
    near = st.builds(build, changed, dropped, field(documents), top)
    return st.one_of(near, near, near, anything)


def check(r: httpx.Response) -> None:
    assert r.status_code < 500, r.text
    if r.status_code != 200:
        assert r.json() in [{"error": code} for code in CODES], r.text


@contextmanager
def running(db_path: Path) -> Iterator[tuple[asyncio.AbstractEventLoop, Member]]:
    loop = asyncio.new_event_loop()
    stack = AsyncExitStack()

    async def start() -> Member:
        service = await stack.enter_async_context(
            serving(Settings(db_path=db_path, sweep_interval=3600), MovableClock())
        )
        app = create_lifecycle_app(service.rt, WaypostTokenVerifier(service.rt))
        client = await stack.enter_async_context(
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://l.test")
        )
        author = await Lifecycle(service, client).member("author")
        r = await author.register(memo("fz"))
        assert r.status_code == 200, r.text
        return author

    try:
        yield loop, loop.run_until_complete(start())
    finally:
        loop.run_until_complete(stack.aclose())
        loop.close()


FUZZ = settings(
    max_examples=80, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


def send(loop: asyncio.AbstractEventLoop, author: Member, path: str, body: Any) -> None:
    raw = json.dumps(body).encode("utf-8", "surrogatepass")
    check(loop.run_until_complete(author.post(path, raw)))


def test_register_never_answers_5xx(tmp_path: Path) -> None:
    with running(tmp_path / "fuzz.db") as (loop, author):

        @FUZZ
        @given(bodies(revise=False))
        def run(body: Any) -> None:
            send(loop, author, "/v1/decisions", body)

        run()


def test_revise_never_answers_5xx(tmp_path: Path) -> None:
    with running(tmp_path / "fuzz.db") as (loop, author):

        @FUZZ
        @given(bodies(revise=True))
        def run(body: Any) -> None:
            send(loop, author, "/v1/decisions/fz/revisions", body)

        run()


def test_raw_bytes_never_answer_5xx(tmp_path: Path) -> None:
    with running(tmp_path / "fuzz.db") as (loop, author):

        @FUZZ
        @given(st.binary(max_size=64))
        def run(raw: bytes) -> None:
            check(loop.run_until_complete(author.post("/v1/decisions", raw)))

        run()


def test_search_terms_never_answer_5xx(tmp_path: Path) -> None:
    with running(tmp_path / "fuzz.db") as (loop, author):

        @FUZZ
        @given(st.text(max_size=40) | st.sampled_from(['"', "NEAR(", "a OR", "*", "^x", "\x00"]))
        def run(q: str) -> None:
            r = loop.run_until_complete(author.get("/v1/decisions", q=q))
            check(r)
            if len(q) <= 200:
                assert r.status_code == 200, r.text

        run()
