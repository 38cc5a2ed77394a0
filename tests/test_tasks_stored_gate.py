"""Task JSON with `ready` from the stored gate state (tasks/stored_gate.py, what
the GraphQL fast path reads) against the task JSON derived from the decisions'
history (`tasks_json_by_ids`, what REST and graphql-core read), for every task
of the project after each kind of gate transition: each answer, reopening,
expiry by the clock alone (and a clock set back), staleness by a judged edit
and by a rules edit, an activity of a held subject, dependencies, a lease,
the sweep's timeout answer, and more blocking decisions than the JSON lists.

At each step the two must be equal key for key, both before `blocked_by` is
derived (`ready`) and after; and GraphQL queries selecting `ready` and
`blockedBy` must answer byte for byte as graphql-core does."""

from __future__ import annotations

import sqlite3
from typing import Any

from tests.conftest import Caller, Service
from tests.decisions_support import edit_task, open_decision, reopen
from tests.fastpath_support import both
from tests.gate_state_support import answer
from tests.tasks_support import make_task, set_policy
from waypost.resolvers.core import sweep
from waypost.resolvers.tasks import reads as task_reads
from waypost.resolvers.tasks import stored_gate
from waypost.schema.fastpath.fields import FIELDS, TASK_KEYS

TASK_QUERY = """
query ($id: String!) {
  project(id: "demo") {
    task(id: $id) {
      restId ready status
      blockedBy { decisionIds decisionsTruncated dependencies { restId ready } }
      subject { restId ready blockedBy { decisionIds } }
      dependsOn { restId ready }
      lease { sessionId expiresAt workflow expired owner { name } }
      publication { holderSessionId preparedAt result { outcome detail at } holder { name } }
    }
  }
}
"""
# what a dashboard selects: `ready` only, so blockedBy is never derived
READY_QUERY = """
query { project(id: "demo") { decisions(first: 50) { nodes {
  affected { task { restId ready status } }
} } } }
"""


ALWAYS = ("id", "project_id", "subject_task_id")
PROJECTIONS = [
    frozenset({"ready"}),
    frozenset({"title", "status", "revision"}),
    frozenset({"depends_on", "acceptance_criteria"}),
    frozenset({"blocked_by", "created_at"}),
    frozenset({"lease"}),
    frozenset({"publication", "ready"}),
    frozenset({"lease", "publication", "blocked_by"}),
    frozenset(),
]


def test_every_task_field_of_the_fast_path_has_its_key() -> None:
    """A field reading a key the projected read leaves out would fall back
    (a KeyError) on every query: each registered Task field either reads a
    key that is always there or names its key in TASK_KEYS."""
    always_there = {"id", "restId", "projectId", "project", "subject", "activities",
                    "checkpoints", "submissions", "decisions", "__typename"}  # fmt: skip
    task_fields = {name for (type_name, name) in FIELDS if type_name == "Task"}
    assert task_fields - always_there == {n for (t, n) in TASK_KEYS if t == "Task"}
    assert set(TASK_KEYS.values()) <= stored_gate.KEYS


async def agree(service: Service, human: Caller) -> dict[str, bool]:
    """Both readings agree on every task of the project; returns task -> ready."""
    now = service.clock.now()

    def read(conn: sqlite3.Connection) -> tuple[dict[str, Any], dict[str, Any], set[str]]:
        ids = [r[0] for r in conn.execute("SELECT id FROM tasks WHERE project_id = 'demo'")]
        derived = task_reads.tasks_json_by_ids(conn, ids, now)
        stored = stored_gate.tasks_by_ids(conn, ids, now)
        for task_id, task in stored.items():  # `ready` alone, before any derivation
            assert task["ready"] == derived[task_id]["ready"], (task_id, task, derived[task_id])
        held = {task_id for task_id, task in stored.items() if "blocked_by" not in task}
        stored_gate.fill_blocked_by(conn, list(stored.values()), now)
        for keys in PROJECTIONS:  # a few columns only: the same values
            projected = stored_gate.tasks_by_ids(conn, ids, now, keys)
            stored_gate.fill_blocked_by(conn, list(projected.values()), now)
            for task_id, task in projected.items():
                for key in {*keys, *ALWAYS}:
                    assert task[key] == derived[task_id][key], (keys, key, task_id)
        return derived, stored, held

    derived, stored, held = await service.rt.db.read(read)
    assert stored == derived
    # held by the stored state exactly when the history names a blocking decision
    assert held == {t for t, task in derived.items() if task["blocked_by"]["decisions"]}
    for task_id in derived:
        answered = await both(human, TASK_QUERY, {"id": task_id})
        assert answered.answered and answered.fast == answered.slow, answered
    answered = await both(human, READY_QUERY)
    assert answered.answered and answered.fast == answered.slow, answered
    return {task_id: task["ready"] for task_id, task in derived.items()}


async def test_ready_from_the_stored_state_equals_the_gate_through_every_transition(
    service: Service, human: Caller, project: str
) -> None:
    top = (await make_task(human, "top", acceptance_criteria=["it works"]))["id"]
    other = (await make_task(human, "other"))["id"]
    after = (await make_task(human, "after", depends_on=[other]))["id"]
    activity = (await make_task(human, "review", subject_task_id=top))["id"]
    assert (await agree(service, human))[top] is True
    decision = (await open_decision(human, [top, other], expires_at="2026-11-29T18:10:00Z"))["id"]
    state = await agree(service, human)
    assert not state[top] and not state[activity] and not state[other]
    generation = 1
    for disposition in ("deny", "defer"):
        await answer(human, decision, disposition, generation)
        assert not (await agree(service, human))[top]
        r = await reopen(human, decision, generation, expires_at="2026-11-29T18:10:00Z")
        assert r.status_code == 200, r.text
        generation += 1
    await answer(human, decision, "allow", generation)
    state = await agree(service, human)
    assert state[top] and state[activity] and state[other] and not state[after]
    # expiry by the clock alone, then a clock set back
    service.clock.advance(minutes=15)
    assert not (await agree(service, human))[top]
    service.clock.advance(minutes=-15)
    assert (await agree(service, human))[top]
    # a judged edit of another affected task makes the allow stale
    await edit_task(human, other, description="the scope grew")
    assert not (await agree(service, human))[activity]
    assert (await reopen(human, decision, generation)).status_code == 200
    await answer(human, decision, "allow", generation + 1)
    assert (await agree(service, human))[activity]
    # a rules edit makes it stale too
    await set_policy(human, rules="No deploys on Fridays.")
    assert not (await agree(service, human))[top]
    # a task under a lease
    free = (await make_task(human, "free"))["id"]
    agent = await service.agent()
    r = await agent.post("/api/v1/projects/demo/claims", {"task_id": free})
    assert r.status_code == 200, r.text
    assert (await agree(service, human))[free] is False
    # its lease past its expiry (`expired` judged at the request's instant),
    # and a task under publication, with a result
    service.clock.advance(hours=2)
    await agree(service, human)
    published = (await make_task(human, "published"))["id"]
    path = f"/api/v1/projects/demo/tasks/{published}/publication"
    assert (await human.post(f"{path}/prepare")).status_code == 200
    await agree(service, human)
    r = await human.post(f"{path}/result", {"outcome": "failed", "detail": "CI red"})
    assert r.status_code == 200, r.text
    await agree(service, human)


async def test_the_sweeps_answer_and_a_long_list_of_blocking_decisions(
    service: Service, human: Caller, project: str
) -> None:
    top = (await make_task(human, "top"))["id"]
    await open_decision(human, [top], recommendation="Proceed", reversible=True)
    for _ in range(21):  # one more than the JSON lists (decisions_truncated)
        await open_decision(human, [top])
    assert (await agree(service, human))[top] is False
    service.clock.advance(hours=24, seconds=1)
    assert (await sweep.run_once(service.rt))["decisions_timed_out"] >= 1
    await agree(service, human)


async def test_a_row_written_around_the_triggers_is_answered_from_the_history(
    service: Service, human: Caller, project: str
) -> None:
    top = (await make_task(human, "top"))["id"]

    def drift(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE tasks SET gate_held = 1 WHERE id = ?", (top,))

    await service.rt.db.write(drift)
    # `blockedBy` finds no blocking decision: graphql-core answers from the history
    answered = await both(human, TASK_QUERY, {"id": top})
    assert not answered.answered and answered.fast == answered.slow
    assert b'"decisionIds":[]' in answered.fast
