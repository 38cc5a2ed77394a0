"""A stateful property test of the task lifecycle: random sequences of task
creation, claims (ordinary and named, by two agents in sessions and a human),
owner operations, recovery, submission, completion under each review mode,
status edits, judged and priority edits, decisions on the tasks and the
passing of time, over REST against a real SQLite file, checked after every
step against a small independent model (docs/tasks.md, service contract
sections 5, 13 and 14).

The model knows nothing of SQL or stored gate state: it keeps each task's
status, revision, lease and judged-edit count, each session's expiry and
each decision's pins and answer, and decides every answer in the order
docs/tasks.md gives the checks. After every step the service must agree on
every task's status, revision, lease and readiness, on the `ready=true`
list, and on the events the step wrote: exactly the one the docs name for
an accepted write, none for a refusal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import httpx
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from tests.conftest import Caller
from tests.stateful_support import SESSION, Expected, ServiceMachine, answered_as, machine_settings
from tests.tasks_support import BASE, task_path
from waypost.clock import format_time, parse_time

MAX_TASKS = 7
LEASE_SECONDS = 300  # shorter than a session (15 minutes), so leases lapse in live sessions
ACTORS = 3  # two agents and a human (the last); actor number ACTORS is "the holder"
ACTOR = st.one_of(st.just(ACTORS), st.integers(0, ACTORS))  # the holder more often
WHICH = st.integers(0, 99)
FOCUS = st.sampled_from([True, True, False])


@dataclass
class Lease:
    owner: str  # principal id
    session: str | None
    expires: datetime
    workflow: bool


@dataclass
class Task:
    id: str
    created_at: str
    priority: int
    depends_on: list[str]
    subject: str | None
    status: str = "open"
    revision: int = 1
    judged: int = 0
    lease: Lease | None = None
    submitter: str | None = None


@dataclass
class Decision:
    id: str
    created_at: str
    pins: dict[str, int]  # task -> judged-edit count when pinned
    expires_at: datetime | None
    answer: str | None = None


@dataclass
class Model:
    now: datetime
    tasks: dict[str, Task] = field(default_factory=dict)  # in creation order
    decisions: list[Decision] = field(default_factory=list)
    review_mode: str = "human"

    def decision_status(self, d: Decision) -> str:
        if d.expires_at is not None and self.now >= d.expires_at:
            return "expired"
        if any(self.tasks[t].judged != n for t, n in d.pins.items()):
            return "stale"
        return {None: "pending", "allow": "allowed", "deny": "denied"}[d.answer]

    def blockers(self, task: Task) -> list[Decision]:
        """The task's blocking decisions, then its subject's (docs/decisions.md)."""
        found: list[Decision] = []
        for t in (task.id, task.subject):
            mine = [d for d in self.decisions if t in d.pins and d not in found]
            mine.sort(key=lambda d: (d.created_at, d.id))
            found += [d for d in mine if self.decision_status(d) != "allowed"]
        return found

    def gate_passes(self, task: Task) -> bool:
        return not self.blockers(task)

    def deps_done(self, task: Task) -> bool:
        return all(self.tasks[dep].status == "done" for dep in task.depends_on)

    def ready(self, task: Task) -> bool:
        return (
            task.status == "open"
            and task.lease is None
            and self.deps_done(task)
            and self.gate_passes(task)
        )

    def claim_order(self) -> list[Task]:
        ready = [t for t in self.tasks.values() if self.ready(t)]
        return sorted(ready, key=lambda t: (-t.priority, t.created_at, t.id))


class TaskMachine(ServiceMachine):
    def __init__(self) -> None:
        super().__init__()
        self.model = Model(self.clock.now())
        self.sessions: dict[str, datetime] = {}  # session id -> expiry
        self.policy_revision = 1
        self.edits = 0
        self.expected_events: list[tuple[str, str]] = []
        self.run(self._start())

    async def _start(self) -> None:
        await self.open_service()
        self.actors, started = await self.open_team()
        self.sessions.update(started)
        self.human = self.actors[-1]
        await self._patch_policy(lease_seconds=LEASE_SECONDS)
        self.seen = (await self.human.get(f"{BASE}/events", limit=200)).json()["next_after"]

    # --- helpers ----------------------------------------------------------------

    def pick(self, which: int, focus: Callable[[Task], bool] | None = None) -> Task:
        """Task number `which`; with `focus`, among the tasks it picks (if any),
        so that long workflows happen often enough to be checked."""
        tasks = list(self.model.tasks.values())
        chosen = [t for t in tasks if focus(t)] if focus else []
        return (chosen or tasks)[which % len(chosen or tasks)]

    def live_lease(self, task: Task) -> bool:
        return task.lease is not None and task.lease.expires > self.model.now

    def caller(self, actor: int, task: Task | None = None) -> Caller:
        """Actor number `actor`; the last number is the task's lease holder
        (or its latest submitter), when that is one of the actors."""
        if actor < ACTORS:
            return self.actors[actor]
        owner = task.lease.owner if task and task.lease else task.submitter if task else None
        for caller in self.actors:
            if caller.principal_id == owner:
                return caller
        return self.human

    def session_live(self, caller: Caller) -> bool:
        if caller.session_id is None:
            return True  # a human: no session needed, none named
        return self.model.now < self.sessions[caller.session_id]

    def holds(self, caller: Caller, lease: Lease) -> bool:
        return lease.owner == caller.principal_id and (
            caller.kind == "human" or lease.session == caller.session_id
        )

    def new_lease(self, caller: Caller, task: Task) -> Lease:
        expires = self.model.now + timedelta(seconds=LEASE_SECONDS)
        return Lease(caller.principal_id, caller.session_id, expires, task.subject is not None)

    def session_refusal(self, caller: Caller) -> Expected | None:
        if not self.session_live(caller):
            return (403, "forbidden", "session_not_live")
        return None

    def owner_refusal(self, caller: Caller, task: Task) -> Expected | None:
        """docs/tasks.md, Leases: not claimed, lapsed, another's (in this order)."""
        if task.status != "claimed" or task.lease is None:
            return (409, "state_conflict", "not_claimed")
        if task.lease.expires <= self.model.now:
            return (409, "lease_conflict", "lease_expired")
        if not self.holds(caller, task.lease):
            return (409, "lease_conflict", "held_by_another")
        return None

    def gate_refusal(self, task: Task) -> Expected | None:
        """`decision_required`, with the reason docs/decisions.md gives: `declined`
        when a blocker was answered deny, else `reopen_required` when one is stale
        or expired, else none (wait for the answers)."""
        statuses = {self.model.decision_status(d) for d in self.model.blockers(task)}
        if not statuses:
            return None
        if "denied" in statuses:
            return (409, "decision_required", "declined")
        if statuses & {"stale", "expired"}:
            return (409, "decision_required", "reopen_required")
        return (409, "decision_required", None)

    def check_blockers(self, r: httpx.Response, task: Task) -> None:
        """A `decision_required` refusal names the model's blockers, in order."""
        if r.json().get("error", {}).get("code") != "decision_required":
            return
        details = r.json()["error"]["details"]
        blockers = self.model.blockers(task)
        assert details["decision_ids"] == [d.id for d in blockers][:20], (details, blockers)
        assert details["truncated"] is (len(blockers) > 20)
        status = {d.id: self.model.decision_status(d) for d in blockers}
        declined = {i for i, s in status.items() if s == "denied"}
        reopen = {i for i, s in status.items() if s in ("stale", "expired")}
        for key, want in (("declined", declined), ("reopen", reopen)):
            named = set(details.get(key, []))  # at most 20, found among all the blockers
            assert named <= want and len(named) == min(len(want), 20), (key, details, status)
        assert ("wait_on" in details) is not bool(declined), details

    async def _patch_policy(self, **fields: Any) -> None:
        body = {"expected_revision": self.policy_revision, **fields}
        r = await self.human.patch(f"{BASE}/policy", body)
        assert r.status_code == 200, r.text
        self.policy_revision += 1

    # --- tasks ------------------------------------------------------------------

    @initialize(priorities=st.lists(st.integers(-1, 2), min_size=2, max_size=4))
    def first_tasks(self, priorities: list[int]) -> None:
        """A few tasks to start with (each may depend on the one before)."""
        for i, priority in enumerate(priorities):
            self.create(priority, [i - 1] if i % 2 else [], None)

    @precondition(lambda self: len(self.model.tasks) < MAX_TASKS)
    @rule(
        priority=st.integers(-1, 2),
        deps=st.lists(st.integers(0, MAX_TASKS - 1), max_size=3, unique=True),
        subject=st.one_of(st.none(), st.integers(0, MAX_TASKS - 1)),
    )
    def create(self, priority: int, deps: list[int], subject: int | None) -> None:
        ids = list(self.model.tasks)
        depends_on = list(dict.fromkeys(ids[i % len(ids)] for i in deps)) if ids else []
        subject_id = ids[subject % len(ids)] if ids and subject is not None else None
        body: dict[str, Any] = {"title": "t", "priority": priority, "depends_on": depends_on}
        if subject_id is not None:
            body["subject_task_id"] = subject_id
        r = self.run(self.human.post(f"{BASE}/tasks", body))
        assert r.status_code == 201, r.text
        made = r.json()
        task = Task(made["id"], made["created_at"], priority, depends_on, subject_id)
        self.model.tasks[task.id] = task
        self.expected_events.append(("task.created", task.id))

    @precondition(lambda self: self.model.tasks)
    @rule(actor=st.integers(0, ACTORS - 1))
    def claim_next(self, actor: int) -> None:
        caller = self.actors[actor]
        r = self.run(caller.post(f"{BASE}/claims", {}))
        refusal = self.session_refusal(caller)
        order = self.model.claim_order()
        if refusal is None and not order:
            refusal = (404, "not_found", "nothing_ready")
        if refusal is None or refusal[0] == 404:
            # the refusal names the tasks whose lease lapsed: those no decision
            # holds first, each part longest lapsed first; and which are held
            lapsed = {
                t.id: (not self.model.gate_passes(t), t.lease.expires)
                for t in self.model.tasks.values()
                if t.lease is not None and t.lease.expires <= self.model.now
            }  # fmt: skip
            details = r.json().get("error", {}).get("details", {})
            named = details.get("expired_leases", [])
            if refusal is not None:
                assert set(named) == set(lapsed), (named, lapsed)
                assert [lapsed[i] for i in named] == sorted(lapsed.values()), named
                held = [i for i in named if lapsed[i][0]]
                assert details.get("expired_leases_held", []) == held, (details, lapsed)
        if answered_as(r, refusal):
            task = order[0]
            assert r.json()["task"]["id"] == task.id, (r.json()["task"]["id"], order)
            self._take(caller, task, "task.claimed")

    def _take(self, caller: Caller, task: Task, event: str) -> None:
        task.status = "claimed"
        task.lease = self.new_lease(caller, task)
        self.expected_events.append((event, task.id))

    @precondition(lambda self: self.model.tasks)
    @rule(actor=ACTOR, which=WHICH, focus=FOCUS)
    def claim_named(self, actor: int, which: int, focus: bool) -> None:
        task = self.pick(which, self.model.ready if focus else None)
        caller = self.caller(actor, task)
        r = self.run(caller.post(f"{BASE}/claims", {"task_id": task.id}))
        refusal = self.session_refusal(caller)
        if refusal is None and task.status == "claimed" and task.lease is not None:
            if task.lease.expires <= self.model.now:
                refusal = (409, "state_conflict", "lease_expired")
            elif self.holds(caller, task.lease):
                refusal = (409, "state_conflict", "already_claimed")
            else:
                refusal = (409, "lease_conflict", "held_by_another")
        if refusal is None and task.status != "open":
            refusal = (409, "state_conflict", "not_open")
        if refusal is None and not self.model.deps_done(task):
            refusal = (409, "state_conflict", "dependencies_not_done")
        refusal = refusal or self.gate_refusal(task)
        self.check_blockers(r, task)
        if answered_as(r, refusal):
            assert r.json()["lease"]["workflow"] is (task.subject is not None)
            self._take(caller, task, "task.claimed")

    @precondition(lambda self: self.model.tasks)
    @rule(
        actor=ACTOR,
        which=WHICH,
        focus=FOCUS,
        op=st.sampled_from(["renew", "checkpoint", "release", "submit"]),
    )
    def owner_operation(self, actor: int, which: int, focus: bool, op: str) -> None:
        task = self.pick(which, self.live_lease if focus else None)
        caller = self.caller(actor, task)
        body = {"checkpoint": {"note": "n"}, "submit": {"summary": "s"}}.get(op, {})
        r = self.run(caller.post(task_path(task.id, op), body))
        refusal = self.session_refusal(caller) or self.owner_refusal(caller, task)
        if refusal is None and op == "submit":
            refusal = self.gate_refusal(task)
        self.check_blockers(r, task)
        if not answered_as(r, refusal):
            return
        if op == "renew":
            assert task.lease is not None
            task.lease.expires = self.model.now + timedelta(seconds=LEASE_SECONDS)
        elif op == "release":
            task.status, task.lease = "open", None
        elif op == "submit":
            task.status, task.lease, task.submitter = "submitted", None, caller.principal_id
        past = {"renew": "renewed", "checkpoint": "checkpointed", "release": "released"}
        self.expected_events.append((f"task.{past.get(op, 'submitted')}", task.id))

    @precondition(lambda self: self.model.tasks)
    @rule(actor=ACTOR, which=WHICH, focus=FOCUS)
    def recover(self, actor: int, which: int, focus: bool) -> None:
        task = self.pick(which, (lambda t: t.status == "claimed") if focus else None)
        caller = self.caller(actor, task)
        r = self.run(caller.post(task_path(task.id, "recover")))
        refusal = self.session_refusal(caller)
        if refusal is None:
            if task.status != "claimed" or task.lease is None:
                refusal = (409, "state_conflict", "not_claimed")
            elif task.lease.expires > self.model.now:
                if self.holds(caller, task.lease):
                    refusal = (409, "state_conflict", "already_claimed")
                else:
                    refusal = (409, "lease_conflict", "lease_live")
        if answered_as(r, refusal):
            assert task.lease is not None
            assert r.json()["previous_lease"]["owner_id"] == task.lease.owner
            self._take(caller, task, "task.recovered")

    @precondition(lambda self: self.model.tasks)
    @rule(actor=ACTOR, which=WHICH, focus=FOCUS)
    def complete(self, actor: int, which: int, focus: bool) -> None:
        task = self.pick(which, (lambda t: t.status == "submitted") if focus else None)
        caller = self.caller(actor, task)
        r = self.run(caller.post(task_path(task.id, "complete")))
        refusal = self.session_refusal(caller)
        if refusal is None and task.status != "submitted":
            refusal = (409, "state_conflict", "not_submitted")
        if refusal is None:
            mode, own = self.model.review_mode, caller.principal_id == task.submitter
            allowed = {"none": own, "human": caller.kind == "human", "any": not own}[mode]
            if not allowed:
                refusal = (403, "forbidden", "review_mode")
        refusal = refusal or self.gate_refusal(task)
        self.check_blockers(r, task)
        if answered_as(r, refusal):
            task.status = "done"
            self.expected_events.append(("task.completed", task.id))

    # The two rules above reach `submitted` and `done` rarely by chance (a run
    # may leave a rule out, and a lease lapses in six minutes): these two take
    # the next step of the work in hand whenever there is some.

    @precondition(lambda self: any(self.live_lease(t) for t in self.model.tasks.values()))
    @rule(which=WHICH)
    def holder_submits(self, which: int) -> None:
        self.owner_operation(ACTORS, which, True, "submit")

    @precondition(lambda self: any(t.status == "submitted" for t in self.model.tasks.values()))
    @rule(actor=ACTOR, which=WHICH)
    def someone_completes(self, actor: int, which: int) -> None:
        self.complete(actor, which, True)

    # --- edits ------------------------------------------------------------------

    def _patch(self, caller: Caller, task: Task, **fields: Any) -> bool:
        body = {"expected_revision": task.revision, **fields}
        r = self.run(caller.patch(task_path(task.id), body))
        refusal = self.session_refusal(caller)
        reopening = fields.get("status") == "open" and task.status == "cancelled"
        if refusal is None and task.status in ("done", "cancelled") and not reopening:
            refusal = (409, "state_conflict", "task_closed")
        status = fields.get("status")
        if refusal is None and status is not None and status != task.status:
            if caller.kind != "human":
                refusal = (403, "forbidden", "humans_only")
            else:
                allowed = {"cancelled": ("open", "claimed", "submitted"),
                           "open": ("cancelled", "submitted")}  # fmt: skip
                if task.status not in allowed[status]:
                    refusal = (409, "state_conflict", "invalid_transition")
        accepted = answered_as(r, refusal)
        if accepted:
            task.revision += 1
            assert r.json()["revision"] == task.revision
            self.expected_events.append(("task.updated", task.id))
        return accepted

    @precondition(lambda self: self.model.tasks)
    @rule(
        actor=ACTOR,
        which=WHICH,
        status=st.sampled_from(["open", "cancelled"]),
    )
    def set_status(self, actor: int, which: int, status: str) -> None:
        task = self.pick(which)
        accepted = self._patch(self.caller(actor, task), task, status=status)
        if accepted and status != task.status:
            task.status, task.lease = status, None  # leaving claimed ends the lease

    @precondition(lambda self: self.model.tasks)
    @rule(
        actor=ACTOR,
        which=WHICH,
        field_=st.sampled_from(["title", "description", "acceptance_criteria"]),
    )
    def judged_edit(self, actor: int, which: int, field_: str) -> None:
        self.edits += 1
        value = f"edit {self.edits}"
        task = self.pick(which)
        caller = self.caller(actor, task)
        new = [value] if field_ == "acceptance_criteria" else value
        accepted = self._patch(caller, task, **{field_: new})
        if accepted:
            task.judged += 1

    @precondition(lambda self: self.model.tasks)
    @rule(which=WHICH, priority=st.integers(-1, 2))
    def priority_edit(self, which: int, priority: int) -> None:
        task = self.pick(which)
        accepted = self._patch(self.human, task, priority=priority)
        if accepted:
            task.priority = priority

    @rule(mode=st.sampled_from(["none", "human", "any"]))
    def review_mode(self, mode: str) -> None:
        self.run(self._patch_policy(review_mode=mode))
        self.model.review_mode = mode
        self.expected_events.append(("policy.updated", "demo"))

    # --- decisions ----------------------------------------------------------------

    @precondition(lambda self: self.model.tasks)
    @rule(
        picks=st.lists(WHICH, min_size=1, max_size=2),
        expires_in=st.one_of(st.none(), st.sampled_from([3, 10, 30])),
    )
    def open_decision(self, picks: list[int], expires_in: int | None) -> None:
        ids = list(dict.fromkeys(self.pick(i).id for i in picks))
        expires_at = self.model.now + timedelta(minutes=expires_in) if expires_in else None
        body = {"question": "Go?", "options": ["Proceed", "Stop"], "rationale": "r",
                "required_actor": "human", "task_ids": ids, "environment": "staging",
                "expires_at": format_time(expires_at) if expires_at else None}  # fmt: skip
        r = self.run(self.human.post(f"{BASE}/decisions", body))
        assert r.status_code == 201, r.text
        pins = {t: self.model.tasks[t].judged for t in ids}
        made = r.json()
        self.model.decisions.append(Decision(made["id"], made["created_at"], pins, expires_at))
        self.expected_events.append(("decision.opened", r.json()["id"]))

    @precondition(lambda self: self.model.decisions)
    @rule(which=WHICH, focus=FOCUS, disposition=st.sampled_from(["allow", "allow", "deny"]))
    def answer(self, which: int, focus: bool, disposition: str) -> None:
        pending = [d for d in self.model.decisions if self.model.decision_status(d) == "pending"]
        chosen = (focus and pending) or self.model.decisions
        d = chosen[which % len(chosen)]
        body = {"expected_generation": 1, "disposition": disposition, "answer": "Proceed",
                "rationale": "r", "conditions_confirmed": True}  # fmt: skip
        r = self.run(self.human.post(f"{BASE}/decisions/{d.id}/answer", body))
        status = self.model.decision_status(d)
        reason = {"stale": "stale", "expired": "expired"}.get(status, "already_answered")
        if not answered_as(r, None if status == "pending" else (409, "state_conflict", reason)):
            return
        d.answer = disposition
        self.expected_events.append(("decision.answered", d.id))

    # --- time and sessions ----------------------------------------------------------

    @rule(minutes=st.sampled_from([1, 4, 6, 16]))
    def move_clock(self, minutes: int) -> None:
        self.clock.advance(minutes=minutes)
        self.model.now = self.clock.now()

    @rule(agent=st.integers(0, ACTORS - 2), heartbeat=st.booleans())
    def session(self, agent: int, heartbeat: bool) -> None:
        """A heartbeat of the agent's session, or a new session for it."""
        if heartbeat:
            self.heartbeat(agent)
            return
        caller = self.actors[agent]
        caller.session_id = None  # a new session, started outside the old one
        r = self.run(caller.post("/api/v1/sessions"))
        assert r.status_code == 201, r.text
        caller.session_id = r.json()["id"]
        self.sessions[r.json()["id"]] = self.model.now + SESSION

    def heartbeat(self, agent: int) -> None:
        caller = self.actors[agent]
        assert caller.session_id is not None
        r = self.run(caller.post(f"/api/v1/sessions/{caller.session_id}/heartbeat"))
        if answered_as(r, self.session_refusal(caller)):
            expiry = self.sessions[caller.session_id]
            self.sessions[caller.session_id] = max(expiry, self.model.now + SESSION)
            assert parse_time(r.json()["expires_at"]) == self.sessions[caller.session_id]

    # --- what must hold after every step -------------------------------------------

    @invariant()
    def events_are_the_ones_named(self) -> None:
        r = self.run(self.human.get(f"{BASE}/events", after=self.seen, limit=200))
        page = r.json()
        written = [(e["type"], e["subject_id"]) for e in page["items"]]
        assert written == self.expected_events, (written, self.expected_events)
        self.seen = page["next_after"]
        self.expected_events = []

    @invariant()
    def tasks_agree_with_the_model(self) -> None:
        r = self.run(self.human.get(f"{BASE}/tasks", limit=200))
        found = {t["id"]: t for t in r.json()["items"]}
        assert list(found) == list(self.model.tasks)  # creation order
        for task in self.model.tasks.values():
            got = found[task.id]
            assert got["status"] == task.status, (task, got)
            assert got["revision"] == task.revision, (task, got)
            assert got["priority"] == task.priority
            assert got["ready"] is self.model.ready(task), (task, got)
            undone = [d for d in task.depends_on if self.model.tasks[d].status != "done"]
            assert got["blocked_by"]["dependencies"] == undone, (task, got)
            blockers = [d.id for d in self.model.blockers(task)]
            assert got["blocked_by"]["decisions"] == blockers[:20], (task, got)  # at most 20
            assert got["blocked_by"]["decisions_truncated"] is (len(blockers) > 20)
            lease = got["lease"]
            if task.lease is None:
                assert lease is None, (task, got)
            else:
                want = {"owner_id": task.lease.owner, "session_id": task.lease.session,
                        "expires_at": format_time(task.lease.expires),
                        "workflow": task.lease.workflow}  # fmt: skip
                assert lease == want, (task, got)
        ready = self.run(self.human.get(f"{BASE}/tasks", ready="true", limit=200))
        listed = [t["id"] for t in ready.json()["items"]]
        expected = [t.id for t in self.model.tasks.values() if self.model.ready(t)]
        assert listed == expected, (listed, expected)
        r = self.run(self.human.get(f"{BASE}/tasks", ready="false", limit=200))
        others = [t for t in self.model.tasks if t not in expected]
        assert [t["id"] for t in r.json()["items"]] == others
        digest = self.run(self.human.get(f"{BASE}/digest")).json()
        assert digest["ready_task_count"] == len(expected)


TaskMachine.TestCase.settings = machine_settings(30)
TestTaskStateMachine = TaskMachine.TestCase
