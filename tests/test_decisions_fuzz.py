"""Fuzz: any JSON body sent to open, answer or reopen a decision, and any query sent
to the list and detail routes, gets a 2xx or a 4xx with the error envelope, never
a 500.

Bodies start from a valid one and have fields replaced by plausible or arbitrary
JSON values, an unknown field added or one dropped; now and then the body is any
JSON document or raw bytes. Callers vary (a human, an agent in a session, an
agent without one) and the relay switch is on, so bodies reach the actor, relay,
generation and status checks behind decoding. One service serves every example:
the property is about one request at a time.
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

from tests.conftest import Caller, MovableClock, Service
from tests.decisions_support import DECISIONS, decision_body, decision_path, set_policy
from tests.fuzz_support import Edit, encode
from tests.test_decisions_open import DECISION_KEYS
from waypost.app import create_app
from waypost.settings import Settings

text = st.sampled_from(["ok", "Proceed", "Stop", " "]) | st.text(
    st.characters(codec="utf-8"), max_size=16
)
times = st.sampled_from(
    ["2026-12-01T00:00:00Z", "2026-11-29T17:00:00Z", "9999-12-31T23:59:59-01:00",
     "0001-01-01T00:00:00+01:00", "2026-12-01", "tomorrow", "2026-11-29T18:00:00.0004Z"]
)  # fmt: skip
anything = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)


def field(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value, sometimes any JSON value."""
    return st.one_of(*[plausible] * 5, anything)


def edits(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Edit]:
    """(fields to set, fields to drop, or a whole other document or raw bytes):
    mostly a few fields changed, sometimes an unknown one added or one dropped."""
    changed = st.fixed_dictionaries({}, optional=fields)
    odd = st.fixed_dictionaries({}, optional={**fields, "extra": anything})
    dropped = st.lists(st.sampled_from([*fields, "extra"]), max_size=1)
    return st.one_of(
        *[st.tuples(changed, st.just([]), st.none())] * 3,
        st.tuples(odd, dropped, st.none()),
        st.tuples(st.just({}), st.just([]), anything | st.binary(max_size=40)),
    )


class World:
    """The fuzzed service: callers, tasks and decisions that exist in it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, service: Service) -> None:
        self.loop = loop
        self.service = service
        self.callers: list[Caller] = []
        self.tasks: list[str] = []
        self.decisions: list[str] = []

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    async def setup(self) -> None:
        human = await self.service.principal("human", "hana")
        r = await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
        assert r.status_code == 201, r.text
        await set_policy(human, allow_relayed_human_answers=True)
        for title in ("Migrate", "Back up"):
            r = await human.post("/api/v1/projects/demo/tasks", {"title": title})
            self.tasks.append(r.json()["id"])
        for required, extra in (("human", {}), ("either", {"recommendation": "Stop",
                                                           "reversible": True})):  # fmt: skip
            r = await human.post(DECISIONS, decision_body(self.tasks, required_actor=required,
                                                          **extra))  # fmt: skip
            assert r.status_code == 201, r.text
            self.decisions.append(r.json()["id"])
        sessionless = await self.service.principal("agent", "loose")
        self.callers = [human, await self.service.agent(), sessionless]

    def ids(self, known: list[str]) -> st.SearchStrategy[Any]:
        return field(st.sampled_from([*known, "task_nope", "dec_nope", "bad id!", ""]))

    def targets(self) -> st.SearchStrategy[str]:
        """Decision ids for the URL: the known ones, mostly, or an unknown one."""
        return st.sampled_from([*self.decisions, *self.decisions, "dec_nope"])

    def send(self, caller: Caller, method: str, path: str, raw: bytes) -> httpx.Response:
        headers = {"Content-Type": "application/json"}
        response: httpx.Response = self.run(
            caller.send(method, path, None, content=raw, headers=headers)
        )
        return response

    def generation(self, decision_id: str) -> int:
        r = self.run(self.callers[0].get(decision_path(decision_id)))
        return int(r.json()["generation"]) if r.status_code == 200 else 1


def check_answer(r: httpx.Response, success: int) -> None:
    assert r.status_code < 500, r.text
    data = r.json()
    if r.status_code == success:
        assert set(data) == DECISION_KEYS, data
        return
    assert 400 <= r.status_code < 500, r.text
    assert set(data) == {"error"} and set(data["error"]) == {"code", "message", "details"}
    assert isinstance(data["error"]["details"], dict)
    if r.status_code == 400:
        assert data["error"]["code"] == "invalid_request"
        assert isinstance(data["error"]["details"].get("field"), str), data


@contextmanager
def world(db_path: Path) -> Iterator[World]:
    loop = asyncio.new_event_loop()
    stack = AsyncExitStack()

    async def start() -> World:
        clock = MovableClock()
        app = create_app(Settings(db_path=db_path, sweep_interval=3600), clock=clock)
        await stack.enter_async_context(app.router.lifespan_context(app))
        client = await stack.enter_async_context(
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://w.test")
        )
        made = World(loop, Service(app, client, app.state.runtime, clock, db_path))
        await made.setup()
        return made

    try:
        yield loop.run_until_complete(start())
    finally:
        loop.run_until_complete(stack.aclose())
        loop.close()


FUZZ = settings(
    max_examples=50,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
callers = st.integers(0, 2)


def test_any_open_body_is_answered_without_a_fault(tmp_path: Path) -> None:
    with world(tmp_path / "w.db") as w:
        strings = st.lists(field(text), max_size=3)
        bodies = edits({
            "question": field(text), "options": field(st.lists(text, max_size=3)),
            "rationale": field(text),
            "required_actor": field(st.sampled_from(["human", "agent", "either", "x"])),
            "task_ids": field(st.lists(w.ids(w.tasks), max_size=3)),
            "environment": field(text), "conditions": field(strings),
            "expires_at": field(st.none() | times),
            "recommendation": field(st.none() | st.sampled_from(["Proceed", "Stop", "x"])),
            "reversible": field(st.booleans()),
        })  # fmt: skip

        @FUZZ
        @given(who=callers, edit=bodies)
        def check(who: int, edit: Edit) -> None:
            raw = encode(decision_body(w.tasks), edit)
            check_answer(w.send(w.callers[who], "POST", DECISIONS, raw), 201)

        check()


def test_any_answer_body_is_answered_without_a_fault(tmp_path: Path) -> None:
    with world(tmp_path / "w.db") as w:
        relay = st.fixed_dictionaries({}, optional={"prompt": field(text),
                                                    "response": field(text)})  # fmt: skip
        bodies = edits({
            "expected_generation": field(st.integers(0, 4)),
            "disposition": field(st.sampled_from(["allow", "deny", "defer", "maybe"])),
            "answer": field(st.sampled_from(["Proceed", "Stop", "proceed"])),
            "rationale": field(text), "conditions_confirmed": field(st.booleans()),
            "relay": field(st.none() | relay),
        })  # fmt: skip

        @FUZZ
        @given(who=callers, decision=w.targets(), reopen=st.booleans(), edit=bodies)
        def check(who: int, decision: str, reopen: bool, edit: Edit) -> None:
            path = decision_path(decision)
            generation = w.generation(decision)
            if reopen:  # a fresh cycle, so answers reach more than `already_answered`
                body = {"expected_generation": generation, "rationale": "again"}
                w.run(w.callers[0].post(f"{path}/reopen", body))
                generation += 1
            base = {"expected_generation": generation, "disposition": "allow", "answer": "Proceed",
                    "rationale": "ok", "conditions_confirmed": True}  # fmt: skip
            check_answer(w.send(w.callers[who], "POST", f"{path}/answer", encode(base, edit)), 200)

        check()


def test_any_reopen_body_is_answered_without_a_fault(tmp_path: Path) -> None:
    with world(tmp_path / "w.db") as w:
        bodies = edits({
            "expected_generation": field(st.integers(0, 4)), "rationale": field(text),
            "environment": field(text), "conditions": field(st.lists(text, max_size=3)),
            "expires_at": field(st.none() | times),
        })  # fmt: skip

        @FUZZ
        @given(who=callers, decision=w.targets(), edit=bodies)
        def check(who: int, decision: str, edit: Edit) -> None:
            path = decision_path(decision)
            base = {"expected_generation": w.generation(decision), "rationale": "again"}
            check_answer(w.send(w.callers[who], "POST", f"{path}/reopen", encode(base, edit)), 200)

        check()


def test_any_list_or_detail_query_is_answered_without_a_fault(tmp_path: Path) -> None:
    with world(tmp_path / "w.db") as w:
        values = st.one_of(text, st.integers().map(str), st.sampled_from(
            ["pending", "allowed", "stale", "0", "201", "-1", "eyJ4IjoxfQ", "WzFd", "WyJhIiwiYiJd"]
        ))  # fmt: skip
        params = st.dictionaries(st.sampled_from(["status", "cursor", "limit", "x"]), values)

        @FUZZ
        @given(query=params, detail=st.booleans())
        def check(query: dict[str, str], detail: bool) -> None:
            path = decision_path(w.decisions[0]) if detail else DECISIONS
            r = w.run(w.callers[0].get(path, **query))
            assert r.status_code in (200, 400), r.text
            if r.status_code == 400:
                assert r.json()["error"]["code"] == "invalid_request"
                assert isinstance(r.json()["error"]["details"].get("field"), str)

        check()
