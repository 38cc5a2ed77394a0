"""Property: any JSON body (and any list query) sent to a task route answers a
2xx, or a 4xx with the error envelope: never a 500, never a bare error.

One service for the whole run, driven through one event loop inside this
synchronous test (hypothesis and function-scoped async fixtures do not mix).
Each example first makes a fresh task, an activity on it and a claimed task,
so the bodies reach the checks behind decoding as well as decoding itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Caller, MovableClock
from waypost.app import create_app
from waypost.resolvers.access import principals
from waypost.settings import Settings

WORDS = ["open", "cancelled", "succeeded", "failed", "feature", "lesson", "true", "1", ""]
# (method, path under the project or task, the fields its body knows)
ROUTES: list[tuple[str, str, list[str]]] = [
    ("POST", "tasks", ["title", "description", "acceptance_criteria", "kind", "priority",
                       "depends_on", "subject_task_id"]),
    ("PATCH", "{task}", ["expected_revision", "title", "description", "acceptance_criteria",
                         "kind", "priority", "depends_on", "status"]),
    ("POST", "claims", ["task_id"]),
    ("POST", "{task}/renew", []),
    ("POST", "{task}/checkpoint", ["note"]),
    ("POST", "{task}/release", []),
    ("POST", "{task}/recover", []),
    ("POST", "{task}/submit", ["summary", "lessons"]),
    ("POST", "{task}/complete", []),
    ("POST", "{task}/publication/prepare", []),
    ("POST", "{task}/publication/result", ["outcome", "detail"]),
    ("POST", "{task}/publication/finalize", []),
]  # fmt: skip


def json_values(ids: list[str]) -> st.SearchStrategy[Any]:
    leaves = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**70), max_value=2**70)
        | st.integers(min_value=-3, max_value=3)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=12)
        | st.sampled_from([*ids, *WORDS])
    )
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
        max_leaves=8,
    )


def plausible(field: str, ids: list[str]) -> st.SearchStrategy[Any]:
    """Values of the right type, mostly valid: they reach the checks behind decoding."""
    text = st.text(min_size=1, max_size=12)
    lesson = st.fixed_dictionaries({"kind": st.just("lesson"), "title": text, "body": text})
    known: dict[str, st.SearchStrategy[Any]] = {
        "title": text,
        "description": st.text(max_size=12),
        "acceptance_criteria": st.lists(text, max_size=3),
        "kind": st.sampled_from(["feature", "bug", "a_b-1", "Bad"]),
        "priority": st.integers(-3, 3),
        "depends_on": st.lists(st.sampled_from(ids), max_size=3),
        "subject_task_id": st.sampled_from(ids),
        "expected_revision": st.integers(0, 3),
        "status": st.sampled_from(["open", "cancelled", "done"]),
        "task_id": st.sampled_from(ids),
        "note": text,
        "summary": text,
        "lessons": st.lists(lesson | st.dictionaries(st.text(max_size=6), text), max_size=2),
        "outcome": st.sampled_from(["succeeded", "failed", "maybe"]),
        "detail": st.text(max_size=12),
    }
    return known[field]


REQUIRED = {"title", "expected_revision", "note", "summary", "outcome"}


def bodies(fields: list[str], ids: list[str]) -> st.SearchStrategy[Any]:
    """Half well-formed bodies (so the checks behind decoding run), half anything."""
    values = json_values(ids)
    required = {f: plausible(f, ids) for f in fields if f in REQUIRED}
    well_formed = st.fixed_dictionaries(
        required, optional={f: plausible(f, ids) for f in fields if f not in REQUIRED}
    )
    loose = st.fixed_dictionaries({}, optional={f: plausible(f, ids) | values for f in fields})
    odd = st.dictionaries(st.sampled_from([*fields, "surprise"]), values, max_size=4)
    return st.one_of(well_formed, st.one_of(loose, odd, values))


QUERY = {
    "status": st.sampled_from(["open", "claimed", "submitted", "done", "cancelled", "x", ""]),
    "ready": st.sampled_from(["true", "false", "1", "maybe", ""]),
    "limit": st.sampled_from(["1", "2", "50", "200", "0", "201", "-1", "x"]),
    "cursor": st.text(max_size=10),
}


def check_answer(r: httpx.Response, what: str) -> None:
    assert r.status_code < 500, f"{what}: {r.status_code} {r.text}"
    body = r.json()
    assert isinstance(body, dict), what
    if r.status_code >= 400:
        error = body["error"]
        assert set(error) == {"code", "message", "details"}, what
        assert isinstance(error["code"], str) and isinstance(error["details"], dict), what


async def new_session(agent: Caller) -> None:
    agent.session_id = None  # the old one may have expired: naming it would be refused
    await agent.start_session()


class World:
    """The service and its callers, kept across examples."""

    def __init__(self, stack: contextlib.AsyncExitStack, db_path: Path) -> None:
        self.stack = stack
        self.clock = MovableClock()
        self.app = create_app(Settings(db_path=db_path, sweep_interval=3600), clock=self.clock)
        self.callers: list[Caller] = []
        self.projects = 0

    async def start(self) -> None:
        await self.stack.enter_async_context(self.app.router.lifespan_context(self.app))
        transport = httpx.ASGITransport(app=self.app)
        client = await self.stack.enter_async_context(
            httpx.AsyncClient(transport=transport, base_url="http://waypost.test")
        )
        rt = self.app.state.runtime
        for kind in ("human", "agent"):
            at = self.clock.iso()
            made = await rt.db.write(
                lambda c, k=kind, t=at: principals.create_principal(c, k, k, t)
            )
            self.callers.append(Caller(client, made["principal_id"], kind, made["token"]))

    async def fresh_project(self) -> tuple[str, list[str]]:
        """A new project holding a task claimed by the agent and an activity on it."""
        human, agent = self.callers
        self.projects += 1
        base = f"/api/v1/projects/p{self.projects}"
        r = await human.post("/api/v1/projects", {"id": f"p{self.projects}", "name": "P"})
        assert r.status_code == 201, r.text
        await new_session(agent)
        made = [(await human.post(f"{base}/tasks", {"title": "t"})).json()["id"]]
        r = await human.post(f"{base}/tasks", {"title": "a", "subject_task_id": made[0]})
        made.append(r.json()["id"])
        claimed = (await agent.post(f"{base}/claims", {"task_id": made[0]})).json()
        assert "task" in claimed, claimed
        return base, [*made, "task_missing"]


async def one_example(world: World, data: st.DataObject) -> None:
    base, ids = await world.fresh_project()
    # past the lease (and the session): stale work to recover, sessions to refuse
    world.clock.advance(minutes=data.draw(st.sampled_from([0, 1, 20])))
    caller = data.draw(st.sampled_from(world.callers))
    if caller.kind == "agent" and data.draw(st.booleans()):
        await new_session(caller)
    if data.draw(st.integers(0, 3)) == 0:  # a list query a quarter of the time
        loose = {name: values | st.text(max_size=10) for name, values in QUERY.items()}
        plain = {name: values for name, values in QUERY.items() if name != "cursor"}
        queries = st.fixed_dictionaries({}, optional=plain) | st.fixed_dictionaries(
            {}, optional=loose
        )
        query = data.draw(queries)
        check_answer(await caller.get(f"{base}/tasks", **query), f"list {query}")
        return
    method, template, fields = data.draw(st.sampled_from(ROUTES))
    task_id = data.draw(st.sampled_from(ids))
    path = f"{base}/" + template.replace("{task}", f"tasks/{task_id}")
    body = data.draw(bodies(fields, ids))
    r = await caller.send(method, path, body)
    check_answer(r, f"{method} {path} {body!r}")


def test_any_json_body_on_task_routes_answers_2xx_or_a_4xx_envelope() -> None:
    loop = asyncio.new_event_loop()
    with tempfile.TemporaryDirectory() as folder:
        stack = contextlib.AsyncExitStack()
        world = World(stack, Path(folder) / "waypost.db")
        try:
            loop.run_until_complete(world.start())

            @settings(
                max_examples=250,
                deadline=None,
                database=None,
                suppress_health_check=[HealthCheck.too_slow],
            )
            @given(data=st.data())
            def check(data: st.DataObject) -> None:
                loop.run_until_complete(one_example(world, data))

            check()
        finally:
            loop.run_until_complete(stack.aclose())
            loop.close()
