"""Fuzz: any JSON body sent to create, correct or feedback gets a 2xx or a 4xx with the
error envelope, never a 500.

Bodies are drawn near the real shapes (known field names holding plausible or
arbitrary JSON values, unknown fields, wrong nesting) as well as arbitrary JSON
documents and raw bytes. One service serves every example of a test: the
property is about one request at a time, so examples need no fresh database.
Keys and string values may hold lone surrogates (JSON `\\ud800` escapes), which the
strict parser refuses with an encodable path; `test_a_lone_surrogate_escape_is_a_400`
and `test_a_lone_surrogate_in_a_key_is_a_400` check one of each directly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Caller, MovableClock
from tests.fuzz_support import Edit, encode
from tests.knowledge_support import correction, kpath
from waypost.app import create_app
from waypost.resolvers.access import principals
from waypost.settings import Settings

PROJECT = "fz"
FLAT_KEYS = {
    "id", "project_id", "kind", "title", "body", "status", "scope", "tags", "applicability",
    "provenance", "collection", "share_across_projects", "superseded_by_id", "revision",
    "created_at", "updated_at",
}  # fmt: skip

text = st.text(st.characters(exclude_categories=()), max_size=24)  # surrogates too
keys = st.text(st.characters(exclude_categories=()), max_size=12)  # surrogates too
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),  # beyond 64 bits too
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)
anything = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)


def field(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value for the field, sometimes any JSON value."""
    return st.one_of(plausible, plausible, plausible, anything)


def partial(members: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=members)


def edits(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Edit]:
    """Changes to a valid body: a few fields replaced, an unknown one added, one dropped;
    now and then a whole other JSON document, or raw bytes."""
    changed = st.fixed_dictionaries({}, optional={**fields, "extra": anything})
    dropped = st.lists(st.sampled_from([*fields, "extra"]), max_size=1)
    return st.one_of(
        st.tuples(changed, dropped, st.none()),
        st.tuples(changed, st.just([]), st.none()),
        st.tuples(st.just({}), st.just([]), anything | st.binary(max_size=40)),
    )


class Targets:
    """Ids that exist in the fuzzed service, so references are sometimes right."""

    def __init__(self, task_id: str, record_ids: list[str]) -> None:
        self.task_id = task_id
        self.record_ids = record_ids

    def ids(self) -> st.SearchStrategy[Any]:
        return field(st.sampled_from([self.task_id, *self.record_ids, "task_x", "bad id!"]))

    def content(self, *, complete: bool) -> dict[str, st.SearchStrategy[Any]]:
        lists = st.lists(text, max_size=3)
        dims = {"task_ids": st.lists(self.ids(), max_size=2), "components": lists,
                "environments": lists, "versions": lists}  # fmt: skip
        provenance = {"summary": text, "source_uri": st.none() | text,
                      "source_task_id": st.none() | self.ids(),
                      "source_submission_id": st.none() | text}  # fmt: skip
        nested = st.fixed_dictionaries if complete else partial
        return {
            "title": field(text),
            "body": field(text),
            "status": field(st.sampled_from(["observed", "validated", "deprecated", "superseded"])),
            "scope": field(nested(dims)),
            "tags": field(st.lists(text, max_size=3)),
            "applicability": field(text),
            "provenance": field(nested(provenance)),
        }

    def create(self) -> st.SearchStrategy[Edit]:
        kinds = st.sampled_from(["lesson", "fact", "rejected_approach", "checkpoint", "x"])
        return edits(
            {
                **self.content(complete=False),
                "kind": field(kinds),
                "collection": field(st.sampled_from(["project", "shared"])),
                "share_across_projects": field(st.booleans()),
            }
        )

    def correct(self) -> st.SearchStrategy[Edit]:
        return edits(
            {
                **self.content(complete=True),
                "expected_revision": field(st.integers(0, 4)),
                "superseded_by_id": field(st.none() | self.ids()),
            }
        )

    def feedback(self) -> st.SearchStrategy[Edit]:
        return edits(
            {
                "expected_revision": field(st.integers(0, 4)),
                "useful": field(st.booleans()),
                "comment": field(st.none() | text),
            }
        )


def check_answer(r: httpx.Response, success: int) -> None:
    assert r.status_code < 500, r.text
    data = r.json()
    if r.status_code == success:
        if success != 201 or "kind" in data:  # a record (feedback has its own shape)
            assert set(data) == FLAT_KEYS, data
        return
    assert 400 <= r.status_code < 500, r.text
    assert set(data) == {"error"} and set(data["error"]) == {"code", "message", "details"}
    assert isinstance(data["error"]["details"], dict)
    if r.status_code == 400:
        assert data["error"]["code"] == "invalid_request"
        assert isinstance(data["error"]["details"].get("field"), str), data


@contextmanager
def running_service(db_path: Path) -> Iterator[tuple[asyncio.AbstractEventLoop, Caller]]:
    """The app with its lifespan entered, driven by one event loop for every example."""
    loop = asyncio.new_event_loop()
    stack = AsyncExitStack()
    clock = MovableClock()

    async def start() -> Caller:
        app = create_app(Settings(db_path=db_path, sweep_interval=3600), clock=clock)
        await stack.enter_async_context(app.router.lifespan_context(app))
        transport = httpx.ASGITransport(app=app)
        client = await stack.enter_async_context(
            httpx.AsyncClient(transport=transport, base_url="http://waypost.test")
        )
        rt = app.state.runtime
        made = await rt.db.write(
            lambda c: principals.create_principal(c, "human", "fuzz", clock.iso())
        )
        return Caller(client, made["principal_id"], "human", made["token"])

    try:
        caller = loop.run_until_complete(start())
        yield loop, caller
    finally:
        loop.run_until_complete(stack.aclose())
        loop.close()


def setup_targets(loop: asyncio.AbstractEventLoop, caller: Caller) -> Targets:
    async def setup() -> Targets:
        r = await caller.post("/api/v1/projects", {"id": PROJECT, "name": "Fuzz"})
        assert r.status_code == 201, r.text
        r = await caller.post(f"/api/v1/projects/{PROJECT}/tasks", {"title": "t"})
        assert r.status_code == 201, r.text
        task_id = r.json()["id"]
        ids = []
        for title in ("target", "replacement"):
            r = await caller.post(kpath(PROJECT), {"kind": "fact", "title": title, "body": "b"})
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        return Targets(task_id, ids)

    return loop.run_until_complete(setup())


FUZZ = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def send(
    loop: asyncio.AbstractEventLoop, caller: Caller, method: str, path: str, raw: bytes
) -> Any:
    headers = {"Content-Type": "application/json"}
    return loop.run_until_complete(caller.send(method, path, None, content=raw, headers=headers))


def test_any_create_body_is_answered_without_a_fault(tmp_path: Path) -> None:
    with running_service(tmp_path / "waypost.db") as (loop, caller):
        targets = setup_targets(loop, caller)
        base = {"kind": "lesson", "title": "t", "body": "b"}

        @FUZZ
        @given(edit=targets.create())
        def check(edit: Edit) -> None:
            check_answer(send(loop, caller, "POST", kpath(PROJECT), encode(base, edit)), 201)

        check()


def test_any_correction_body_is_answered_without_a_fault(tmp_path: Path) -> None:
    with running_service(tmp_path / "waypost.db") as (loop, caller):
        targets = setup_targets(loop, caller)
        path = kpath(PROJECT, targets.record_ids[0])

        @FUZZ
        @given(edit=targets.correct())
        def check(edit: Edit) -> None:
            # the base is the current record, so unchanged fields make a valid correction
            current = loop.run_until_complete(caller.get(path)).json()
            check_answer(send(loop, caller, "PATCH", path, encode(correction(current), edit)), 200)

        check()


def test_any_feedback_body_is_answered_without_a_fault(tmp_path: Path) -> None:
    with running_service(tmp_path / "waypost.db") as (loop, caller):
        targets = setup_targets(loop, caller)
        path = kpath(PROJECT, targets.record_ids[0])

        @FUZZ
        @given(edit=targets.feedback())
        def check(edit: Edit) -> None:
            current = loop.run_until_complete(caller.get(path)).json()
            base = {"expected_revision": current["revision"], "useful": True}
            check_answer(send(loop, caller, "POST", f"{path}/feedback", encode(base, edit)), 201)

        check()


def test_a_lone_surrogate_escape_is_a_400(tmp_path: Path) -> None:
    with running_service(tmp_path / "waypost.db") as (loop, caller):
        setup_targets(loop, caller)
        raw = b'{"kind": "lesson", "title": "\\ud800", "body": "b"}'
        r = send(loop, caller, "POST", kpath(PROJECT), raw)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["details"]["field"] == "title"


def test_a_lone_surrogate_in_a_key_is_a_400(tmp_path: Path) -> None:
    with running_service(tmp_path / "waypost.db") as (loop, caller):
        setup_targets(loop, caller)
        raw = b'{"kind": "lesson", "title": "t", "body": "b", "scope": {"\\ud800": []}}'
        r = send(loop, caller, "POST", kpath(PROJECT), raw)
        assert r.status_code == 400, r.text
