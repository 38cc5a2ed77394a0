"""A stateful property test: random sequences of decision, task, policy and clock
operations against the real service, checked at every step against a small
independent model of the pin rules.

The model knows nothing of revisions or SQL: it counts judged edits per task
and rules edits per project, remembers what each generation pinned, and
decides the status in the contract's order (expired, stale, the answer,
pending). After every step the service must agree on each decision's status
and `work_allowed`, on which decisions block which task, on which tasks the
`ready` lists and the digest count (readiness in SQL), and no generation
that was already seen may have changed (an answer may only appear on the
current generation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import (
    initialize,
    invariant,
    precondition,
    rule,
)

from tests.stateful_support import ServiceMachine, machine_settings
from waypost.clock import format_time
from waypost.resolvers.core import sweep

BASE = "/api/v1/projects/demo"
TASKS = 3
STATUS_OF = {"allow": "allowed", "deny": "denied", "defer": "deferred"}

QUERY = """
{ project(id: "demo") { decisions(first: 100) { edges { node {
    restId status workAllowed generation
    generations(first: 100) { edges { node {
      generation policyRevision environment conditions expiresAt reopenRationale at
      affected { taskId pinnedRevision }
      answer { disposition answer timedOut conditionsConfirmed at }
    } } }
} } } } }"""

# Each status filter, listed and counted (from the stored state, migration 0023)
STATUSES = ("pending", "allowed", "denied", "deferred", "expired", "stale")
FILTERS = (
    '{ project(id: "demo") { '
    + " ".join(
        f"{s}: decisions(status: {s.upper()}, first: 100) {{ totalCount nodes {{ restId }} }}"
        for s in STATUSES
    )
    + " } }"
)


@dataclass
class Generation:
    judged: dict[str, int]  # task -> judged-edit count when pinned
    rules: int  # rules-edit count when pinned
    expires_at: datetime | None
    opened_at: datetime
    answer: str | None = None
    timed_out: bool = False


@dataclass
class Decision:
    id: str
    tasks: list[str]
    reversible: bool
    generations: list[Generation] = field(default_factory=list)


class Model:
    def __init__(self, now: datetime) -> None:
        self.now = now
        self.judged: dict[str, int] = {}
        self.rules = 0
        self.decisions: list[Decision] = []

    def status(self, d: Decision) -> str:
        g = d.generations[-1]
        if g.expires_at is not None and self.now >= g.expires_at:
            return "expired"
        if self.rules != g.rules or any(self.judged[t] != n for t, n in g.judged.items()):
            return "stale"
        return "pending" if g.answer is None else STATUS_OF[g.answer]

    def pin(self, tasks: list[str], expires_at: datetime | None) -> Generation:
        judged = {t: self.judged[t] for t in tasks}
        return Generation(judged, self.rules, expires_at, self.now)

    def blocking(self, task: str) -> set[str]:
        return {d.id for d in self.decisions if task in d.tasks and self.status(d) != "allowed"}


class DecisionMachine(ServiceMachine):
    def __init__(self) -> None:
        super().__init__()
        self.model = Model(self.clock.now())
        self.snapshots: dict[tuple[str, int], dict[str, Any]] = {}
        self.task_revision: dict[str, int] = {}
        self.policy_revision = 1
        self.edits = 0
        self.run(self._start())

    async def _start(self) -> None:
        await self.open_service()
        self.human = await self.new_caller("human", "hana")
        assert (await self.human.post("/api/v1/projects", {"id": "demo", "name": "D"})).is_success
        self.tasks = []
        for i in range(TASKS):
            r = await self.human.post(f"{BASE}/tasks", {"title": f"task {i}"})
            self.tasks.append(r.json()["id"])
            self.task_revision[r.json()["id"]] = 1
            self.model.judged[r.json()["id"]] = 0

    # --- decisions ------------------------------------------------------------------

    @initialize(
        picks=st.lists(st.integers(0, TASKS - 1), min_size=1, max_size=TASKS, unique=True),
        reversible=st.booleans(),
    )
    def allowed_decision(self, picks: list[int], reversible: bool) -> None:
        """Every run starts with a live allow, so the edits that follow have one to test."""
        self.open(picks, None, reversible)
        self.answer(len(self.model.decisions) - 1, "allow", False)

    @rule(
        picks=st.lists(st.integers(0, TASKS - 1), min_size=1, max_size=TASKS, unique=True),
        expires_in=st.one_of(st.none(), st.integers(1, 48 * 60)),
        reversible=st.booleans(),
    )
    def open(self, picks: list[int], expires_in: int | None, reversible: bool) -> None:
        tasks = [self.tasks[i] for i in picks]
        expires_at = self.clock.now() + timedelta(minutes=expires_in) if expires_in else None
        body: dict[str, Any] = {
            "question": "Go?", "options": ["Proceed", "Stop"], "rationale": "r",
            "required_actor": "either", "task_ids": tasks, "environment": "staging",
            "conditions": ["c"], "expires_at": format_time(expires_at) if expires_at else None,
            "recommendation": "Proceed", "reversible": reversible,
        }  # fmt: skip
        r = self.run(self.human.post(f"{BASE}/decisions", body))
        assert r.status_code == 201, r.text
        decision = Decision(r.json()["id"], tasks, reversible)
        decision.generations.append(self.model.pin(tasks, expires_at))
        self.model.decisions.append(decision)

    @precondition(lambda self: self.model.decisions)
    @rule(
        which=st.integers(0, 99),
        disposition=st.sampled_from(["allow", "deny", "defer"]),
        wrong_generation=st.booleans(),
    )
    def answer(self, which: int, disposition: str, wrong_generation: bool) -> None:
        d = self.model.decisions[which % len(self.model.decisions)]
        current = len(d.generations)
        generation = current + 1 if wrong_generation else current
        body = {"expected_generation": generation, "disposition": disposition,
                "answer": "Stop", "rationale": "r", "conditions_confirmed": True}  # fmt: skip
        r = self.run(self.human.post(f"{BASE}/decisions/{d.id}/answer", body))
        status = self.model.status(d)
        if wrong_generation:
            expected = (409, "generation_conflict")
        elif status in ("stale", "expired") or d.generations[-1].answer is not None:
            expected = (409, "state_conflict")
        else:
            assert r.status_code == 200, r.text
            d.generations[-1].answer = disposition
            return
        assert (r.status_code, r.json()["error"]["code"]) == expected, r.text

    @precondition(lambda self: self.model.decisions)
    @rule(
        which=st.integers(0, 99),
        expiry=st.sampled_from(["carry", "none", "new"]),
        wrong_generation=st.booleans(),
    )
    def reopen(self, which: int, expiry: str, wrong_generation: bool) -> None:
        d = self.model.decisions[which % len(self.model.decisions)]
        current = len(d.generations)
        body: dict[str, Any] = {
            "expected_generation": current - 1 if wrong_generation else current,
            "rationale": "again",
        }
        previous = d.generations[-1].expires_at
        expires_at = previous
        if expiry == "none":
            body["expires_at"], expires_at = None, None
        elif expiry == "new":
            expires_at = self.clock.now() + timedelta(hours=12)
            body["expires_at"] = format_time(expires_at)
        r = self.run(self.human.post(f"{BASE}/decisions/{d.id}/reopen", body))
        if wrong_generation:
            code = "invalid_request" if current == 1 else "generation_conflict"
            assert r.json()["error"]["code"] == code, r.text
            return
        if expiry == "carry" and previous is not None and previous <= self.clock.now():
            assert (r.status_code, r.json()["error"]["details"]["field"]) == (400, "expires_at")
            return
        assert r.status_code == 200, r.text
        d.generations.append(self.model.pin(d.tasks, expires_at))

    # --- what the pins watch --------------------------------------------------------

    def _patch_task(self, task: str, **fields: Any) -> None:
        body = {"expected_revision": self.task_revision[task], **fields}
        r = self.run(self.human.patch(f"{BASE}/tasks/{task}", body))
        assert r.status_code == 200, r.text
        self.task_revision[task] += 1

    @rule(which=st.integers(0, TASKS - 1), field_=st.sampled_from(["title", "description"]))
    def judged_edit(self, which: int, field_: str) -> None:
        self.edits += 1
        self._patch_task(self.tasks[which], **{field_: f"edit {self.edits}"})
        self.model.judged[self.tasks[which]] += 1

    @rule(which=st.integers(0, TASKS - 1))
    def priority_edit(self, which: int) -> None:
        self.edits += 1
        self._patch_task(self.tasks[which], priority=self.edits)

    def _patch_policy(self, **fields: Any) -> None:
        body = {"expected_revision": self.policy_revision, **fields}
        r = self.run(self.human.patch(f"{BASE}/policy", body))
        assert r.status_code == 200, r.text
        self.policy_revision += 1

    @rule()
    def rules_edit(self) -> None:
        self.edits += 1
        self._patch_policy(rules=f"rules {self.edits}")
        self.model.rules += 1

    @rule()
    def lease_edit(self) -> None:
        self.edits += 1
        self._patch_policy(lease_seconds=600 + self.edits)

    @rule(minutes=st.sampled_from([1, 30, 6 * 60, 23 * 60, 25 * 60]))
    def move_clock(self, minutes: int) -> None:
        self.clock.advance(minutes=minutes)
        self.model.now = self.clock.now()

    @rule()
    def run_sweep(self) -> None:
        report = self.run(sweep.run_once(self.app.state.runtime))
        expected = 0
        for d in self.model.decisions:
            g = d.generations[-1]
            due = g.opened_at + timedelta(hours=24) <= self.model.now
            if d.reversible and due and self.model.status(d) == "pending":
                g.answer, g.timed_out = "allow", True
                expected += 1
        assert report["decisions_timed_out"] == expected

    # --- what must hold after every step -------------------------------------------

    @invariant()
    def service_agrees_with_the_model(self) -> None:
        data = self.run(self.human.gql(QUERY))
        assert "errors" not in data, data
        edges = data["data"]["project"]["decisions"]["edges"]
        found = {e["node"]["restId"]: e["node"] for e in edges}
        assert len(found) == len(self.model.decisions)
        for d in self.model.decisions:
            node = found[d.id]
            status = self.model.status(d)
            assert node["status"] == status.upper(), (d, status, node)
            assert node["workAllowed"] is (status == "allowed")
            assert node["generation"] == len(d.generations)
            gens = [e["node"] for e in node["generations"]["edges"]]
            assert [g["generation"] for g in gens] == list(range(len(d.generations), 0, -1))
            for g in gens:
                self._check_unchanged(d, g)
            answer = gens[0]["answer"]
            current = d.generations[-1]
            assert (answer["disposition"].lower() if answer else None) == current.answer
            assert bool(answer and answer["timedOut"]) is current.timed_out
        filtered = self.run(self.human.gql(FILTERS))["data"]["project"]
        for status in STATUSES:
            expected = {d.id for d in self.model.decisions if self.model.status(d) == status}
            listed = filtered[status]
            assert {n["restId"] for n in listed["nodes"]} == expected, status
            assert listed["totalCount"] == len(expected), status
        r = self.run(self.human.get(f"{BASE}/tasks", limit=200))
        for task in r.json()["items"]:
            blocking = self.model.blocking(task["id"])
            assert set(task["blocked_by"]["decisions"]) == blocking, task
            assert task["ready"] is (not blocking)
        # the same predicate in SQL (ready lists and the digest) agrees with the model
        free = {t for t in self.tasks if not self.model.blocking(t)}
        for flag, expected in (("true", free), ("false", set(self.tasks) - free)):
            r = self.run(self.human.get(f"{BASE}/tasks", ready=flag, limit=200))
            assert {t["id"] for t in r.json()["items"]} == expected, (flag, r.json())
        digest = self.run(self.human.get(f"{BASE}/digest")).json()
        assert digest["ready_task_count"] == len(free)
        assert {t["id"] for t in digest["blocked_tasks"]} == set(self.tasks) - free

    def _check_unchanged(self, d: Decision, g: dict[str, Any]) -> None:
        key = (d.id, g["generation"])
        seen = self.snapshots.get(key)
        self.snapshots[key] = g
        if seen is None:
            return
        pins = {k: v for k, v in g.items() if k != "answer"}
        assert pins == {k: v for k, v in seen.items() if k != "answer"}, (seen, g)
        if seen["answer"] is not None:
            assert g["answer"] == seen["answer"]
        elif g["generation"] < len(d.generations):
            # an answer only arrives while its generation is current, and every
            # step does one thing: seen unanswered and superseded, it stays so
            assert g["answer"] is None, (seen, g)


DecisionMachine.TestCase.settings = machine_settings(20, steps=15)
TestDecisionStateMachine = DecisionMachine.TestCase
