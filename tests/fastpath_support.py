"""Shared by the fast path tests: varied data, and one query run both ways.

`both` sends the same request twice through the whole app: once as it is
served (the fast path answers the queries it can), once with the fast path
switched off (graphql-core executes every field). The response bodies are
compared byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from unittest import mock

from tests.conftest import Caller, Service
from tests.decisions_support import (
    BASE,
    answer,
    edit_task,
    new_task,
    open_decision,
    reopen,
    send_answer,
    set_policy,
    task_path,
)
from tests.knowledge_support import correction, create, kpath
from waypost.schema import fastpath
from waypost.schema.fastpath import known
from waypost.schema.memo import Memo


@dataclass
class Answered:
    """One query's two answers, and whether the fast path gave the first."""

    fast: bytes
    slow: bytes
    answered: bool


@contextmanager
def graphql_core_only() -> Iterator[None]:
    """The fast path off: graphql-core answers every query, and no request
    is answered from `known` either."""
    with (
        mock.patch.object(fastpath, "answer", lambda executor: None),
        mock.patch.object(known, "KNOWN", Memo(0)),
    ):
        yield


@contextmanager
def spying() -> Iterator[list[bool]]:
    """Notes, for each fast path run, whether it answered (True) or fell back."""
    seen: list[bool] = []
    real = fastpath._run

    async def spy(rt: Any, plan: Any, caller: str) -> Any:
        data = await real(rt, plan, caller)
        seen.append(data is not None)
        return data

    with mock.patch.object(fastpath, "_run", spy):
        yield seen


async def post(caller: Caller, query: str, variables: dict[str, Any] | None) -> bytes:
    r = await caller.client.post(
        "/graphql", json={"query": query, "variables": variables or {}}, headers=caller.headers()
    )
    assert r.status_code < 500, r.text
    return r.content


async def both(caller: Caller, query: str, variables: dict[str, Any] | None = None) -> Answered:
    with spying() as seen:
        fast = await post(caller, query, variables)
    with graphql_core_only():
        slow = await post(caller, query, variables)
    return Answered(fast, slow, seen == [True])


async def seed(service: Service, human: Caller) -> dict[str, Any]:
    """Two projects; tasks with dependencies, criteria, leases, a publication,
    revisions, checkpoints and a submission; decisions
    pending, allowed, deferred and reopened, relayed, and reopened twice."""
    for project_id in ("demo", "other"):
        r = await human.post("/api/v1/projects", {"id": project_id, "name": project_id.title()})
        assert r.status_code == 201, r.text
    await set_policy(human, allow_relayed_human_answers=True)
    a = await new_task(human, "Back up", acceptance_criteria=["a copy exists", "it restores"])
    b = await new_task(human, "Migrate", depends_on=[a], kind="chore", priority=5)
    c = await new_task(human, "Announce", description="Tell the team.")
    d = await new_task(human, "Verify", subject_task_id=b)
    agent = await service.agent()
    r = await agent.post(f"{BASE}/claims", {"task_id": c})
    assert r.status_code == 200, r.text
    # histories: revisions that change what a task depends on, checkpoints, a submission
    await edit_task(human, b, priority=7)
    await edit_task(human, b, depends_on=[a, c])
    for note in ("copied half the rows", "copied the rest"):
        r = await agent.post(f"{task_path(c)}/checkpoint", {"note": note})
        assert r.status_code == 200, r.text
    # with a lesson: a record whose provenance names its task and submission
    lesson = {"kind": "lesson", "title": "Announce early", "body": "Before the window."}
    r = await agent.post(
        f"{task_path(c)}/submit", {"summary": "Announced in #general.", "lessons": [lesson]}
    )
    assert r.status_code == 200, r.text
    # a task under a lease, and one under publication with its result
    leased = await new_task(human, "Index")
    r = await agent.post(f"{BASE}/claims", {"task_id": leased})
    assert r.status_code == 200, r.text
    published = await new_task(human, "Release")
    assert (await human.post(f"{task_path(published)}/publication/prepare")).status_code == 200
    body = {"outcome": "succeeded", "detail": "v1.2 tagged"}
    assert (await human.post(f"{task_path(published)}/publication/result", body)).status_code == 200

    pending = await open_decision(
        human, [a, b], recommendation="Proceed", expires_at="2027-01-01T00:00:00Z"
    )
    allowed = await open_decision(
        human, [c], required_actor="either", reversible=True, recommendation="Proceed"
    )
    await answer(human, allowed["id"])
    deferred = await open_decision(human, [a, d], conditions=[])
    await answer(human, deferred["id"], disposition="defer", answer="Stop")
    assert (await reopen(human, deferred["id"], 1)).status_code == 200
    relayed = await open_decision(human, [d])
    relay = {"prompt": "Proceed or Stop?", "response": "proceed ✓"}
    r = await send_answer(agent, relayed["id"], relay=relay)
    assert r.status_code == 200, r.text
    twice = await open_decision(human, [b])
    for generation in (1, 2):
        await answer(human, twice["id"], generation, disposition="deny", answer="Stop")
        assert (await reopen(human, twice["id"], generation)).status_code == 200

    r = await human.post("/api/v1/projects/other/tasks", {"title": "Elsewhere"})
    assert r.status_code == 201, r.text
    elsewhere = r.json()["id"]
    r = await human.post("/api/v1/projects/other/decisions", {
        "question": "Elsewhere?", "options": ["Yes", "No"], "rationale": "other project",
        "required_actor": "human", "task_ids": [elsewhere], "environment": "prod",
    })  # fmt: skip
    assert r.status_code == 201, r.text
    records = await seed_knowledge(human, agent, [a, b], elsewhere)
    return {"tasks": [a, b, c, d], "elsewhere": elsewhere,
            "decisions": [pending["id"], twice["id"]], "knowledge": records}  # fmt: skip


async def seed_knowledge(
    human: Caller, agent: Caller, tasks: list[str], elsewhere: str
) -> list[str]:
    """Records of both projects: scoped to tasks, with a source task, corrected,
    with feedback; one superseded by another of its project; one of `other`
    shared and superseded by a project-only record (which `demo` cannot read)."""
    lesson = await create(
        human, "demo", title="Copy in batches", tags=["db", "billing"],
        scope={"task_ids": tasks, "components": ["billing"], "environments": ["prod"],
               "versions": []},
        provenance={"summary": "from the migration", "source_task_id": tasks[1]},
    )  # fmt: skip
    lesson = await correct(human, "demo", lesson, status="validated", body="Batches of 10k.")
    for caller, useful in ((human, True), (agent, False)):
        path = kpath("demo", lesson["id"], "feedback")
        r = await caller.post(path, {"expected_revision": 2, "useful": useful})
        assert r.status_code == 201, r.text
    fact = await create(human, "demo", kind="fact", title="Backups run nightly")
    await correct(human, "demo", fact, status="superseded", superseded_by_id=lesson["id"])
    hidden = await create(human, "other", title="Other's own", scope={"task_ids": [elsewhere]})
    shared = await create(
        human, "other", kind="rejected_approach", title="Shared advice",
        collection="shared", share_across_projects=True,
    )  # fmt: skip
    await correct(human, "other", shared, status="superseded", superseded_by_id=hidden["id"])
    return [lesson["id"], fact["id"], hidden["id"], shared["id"]]


async def correct(
    caller: Caller, project: str, record: dict[str, Any], **changes: Any
) -> dict[str, Any]:
    r = await caller.patch(kpath(project, record["id"]), correction(record, **changes))
    assert r.status_code == 200, r.text
    corrected: dict[str, Any] = r.json()
    return corrected
