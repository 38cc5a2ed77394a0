"""A stateful property test of integration publication authority and its
interplay with decisions and policy: random sequences of publication
`prepare`, `result` and `finalize` (by two agents, in live, lapsed or no
sessions, and a human, over REST and GraphQL, with replays and reused keys),
changes of the policy's `integration_owner` and rules, decisions opened,
answered and reopened around the publishing tasks, judged and status edits,
the human's own claim, submit and complete, and the passing of time, against
the real service, checked after every step against a small independent model
(service contract sections 5, 10, 13 and 14; docs/tasks.md "Publication
authority"; docs/decisions.md "Publication" and "When an allow stops counting
mid-publication"; docs/api.md "Events").

The model keeps each task's status, revision, judged-edit count, lease and
publication (holder, session, when prepared, result), the policy's integration
owner and rules-edit count, each decision's generations (pins and answer), and
each agent session's expiry, and decides every answer in the order the docs
(and, where they are silent, the code) give the checks. After every step the
service must agree, over REST and GraphQL, on every task's status, revision,
publication and blockers, on each decision's status and generation, and on
the events the step wrote: exactly one for an accepted write, with the actor,
session and `data` docs/api.md names, none for a refusal or a replay.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import httpx
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from tests.conftest import Caller
from tests.stateful_support import SESSION, ServiceMachine, machine_settings
from tests.tasks_support import BASE, task_path
from waypost.clock import format_time

LEASE = timedelta(seconds=900)  # the default lease_seconds
ACTORS = 3  # ada and bob (agents), hana (human); number ACTORS is "the one who should"
ACTOR = st.one_of(st.just(ACTORS), st.integers(0, ACTORS))
WHICH = st.integers(0, 99)
STEPS = ("prepare", "result", "finalize")
STATUS_OF = {"allow": "allowed", "deny": "denied", "defer": "deferred"}
GQL_NAME = {
    "prepare": "taskPublicationPrepare",
    "result": "taskPublicationResult",
    "finalize": "taskPublicationFinalize",
}
PUBLICATION = (
    "publication { holder { restId } holderSessionId preparedAt result { outcome detail at } }"
)
GQL_MUTATION = """
mutation ($input: %s!) { %s(input: $input) {
  replayed userErrors { code reason } task { restId %s }
} }"""
GQL_STATE = (
    '{ project(id: "demo") { tasks(first: 100) { nodes { restId status '
    + PUBLICATION
    + " blockedBy { decisionIds } } }"
    + " decisions(first: 100) { nodes { restId status workAllowed generation } } } }"
)

# (HTTP status, error code, details.reason, details that must be among the error's)
Refusal = tuple[int, str, str | None, dict[str, Any]]


@dataclass
class Publication:
    holder: str  # principal id
    holder_kind: str
    session: str | None
    prepared_at: str
    result: dict[str, Any] | None = None

    def rest(self) -> dict[str, Any]:
        return {"holder_id": self.holder, "holder_session_id": self.session,
                "prepared_at": self.prepared_at, "result": self.result}  # fmt: skip

    def gql(self) -> dict[str, Any]:
        result = self.result and {**self.result, "outcome": self.result["outcome"].upper()}
        return {"holder": {"restId": self.holder}, "holderSessionId": self.session,
                "preparedAt": self.prepared_at, "result": result}  # fmt: skip


@dataclass
class Task:
    id: str
    created_at: str
    subject: str | None
    status: str = "open"
    revision: int = 1
    judged: int = 0
    lease_expires: datetime | None = None  # hana's lease, while claimed
    publication: Publication | None = None


@dataclass
class Generation:
    pins: dict[str, int]  # task -> judged-edit count when pinned
    rules: int
    expires_at: datetime | None
    answer: str | None = None


@dataclass
class Decision:
    id: str
    created_at: str
    tasks: list[str]
    generations: list[Generation] = field(default_factory=list)


@dataclass
class Sent:
    """A publication request that succeeded, to send again under its key."""

    actor: int
    step: str
    task: str
    body: dict[str, Any]
    key: str
    gql: bool
    status: int
    answer: Any


@dataclass
class Model:
    now: datetime
    tasks: dict[str, Task] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    owner: str | None = None  # the policy's integration_owner
    rules: int = 0

    def status(self, d: Decision) -> str:
        g = d.generations[-1]
        if g.expires_at is not None and self.now >= g.expires_at:
            return "expired"
        if g.rules != self.rules or any(self.tasks[t].judged != n for t, n in g.pins.items()):
            return "stale"
        return "pending" if g.answer is None else STATUS_OF[g.answer]

    def blockers(self, task: Task) -> list[Decision]:
        """The task's blocking decisions, then its subject's (docs/decisions.md)."""
        found: list[Decision] = []
        for t in (task.id, task.subject):
            mine = sorted((d for d in self.decisions if t in d.tasks and d not in found),
                          key=lambda d: (d.created_at, d.id))  # fmt: skip
            found += [d for d in mine if self.status(d) != "allowed"]
        return found

    def held_around(self, task_ids: list[str]) -> list[str]:
        """Tasks holding authority among these, their subjects and their
        activities (service contract section 13), in id order."""
        around = set(task_ids)
        around |= {s for t in task_ids if (s := self.tasks[t].subject) is not None}
        around |= {t.id for t in self.tasks.values() if t.subject in task_ids}
        return sorted(t for t in around if self.tasks[t].publication is not None)

    def may_publish(self, principal: str, kind: str) -> bool:
        return self.owner == principal or (self.owner is None and kind == "human")


class PublicationMachine(ServiceMachine):
    def __init__(self) -> None:
        super().__init__()
        self.model = Model(self.clock.now())
        self.sessions: dict[str, datetime] = {}
        self.keys = itertools.count()
        self.policy_revision = 1
        self.edits = 0
        self.expected: list[tuple[str, str, str, str | None, dict[str, Any] | None]] = []
        self.last_sent: Sent | None = None
        self.refused_keys: dict[int, str] = {}  # actor -> a key a refused request used
        self.run(self._start())

    async def _start(self) -> None:
        await self.open_service()
        self.actors, started = await self.open_team()
        self.sessions.update(started)
        self.human = self.actors[-1]
        # two tasks, and an activity (a review) on the first
        subjects: list[str | None] = [None, None]
        for i in range(3):
            subject = subjects[0] if i == 2 else None
            body: dict[str, Any] = {"title": f"task {i}"}
            if subject is not None:
                body["subject_task_id"] = subject
            r = await self.human.post(f"{BASE}/tasks", body)
            assert r.status_code == 201, r.text
            made = r.json()
            self.model.tasks[made["id"]] = Task(made["id"], made["created_at"], subject)
            if i == 0:
                subjects[0] = made["id"]
        self.ids = list(self.model.tasks)
        self.seen = (await self.human.get(f"{BASE}/events", limit=200)).json()["next_after"]

    # --- helpers ----------------------------------------------------------------

    def task(self, which: int) -> Task:
        return self.model.tasks[self.ids[which % len(self.ids)]]

    def caller(self, actor: int, task: Task) -> Caller:
        """Actor number `actor`; the last number is the task's holder when it is
        held, else the principal the policy lets publish (hana when none)."""
        if actor < ACTORS:
            return self.actors[actor]
        want = task.publication.holder if task.publication else self.model.owner
        return next((c for c in self.actors if c.principal_id == want), self.human)

    def session_refusal(self, caller: Caller) -> Refusal | None:
        if caller.session_id is not None and self.model.now >= self.sessions[caller.session_id]:
            return (403, "forbidden", "session_not_live", {})
        return None

    def kind_of(self, principal: str) -> str:
        return next(c.kind for c in self.actors if c.principal_id == principal)

    def not_owner(self) -> Refusal:
        extra = {} if self.model.owner is None else {"integration_owner": self.model.owner}
        return (403, "forbidden", "not_integration_owner", extra)

    def gate_refusal(self, task: Task) -> Refusal | None:
        """`decision_required` naming the blockers, with the reason
        docs/decisions.md gives: `declined` (deny or defer) first, then
        `reopen_required` (stale or expired), else none."""
        blockers = self.model.blockers(task)
        if not blockers:
            return None
        statuses = {self.model.status(d) for d in blockers}
        ids = {"decision_ids": [d.id for d in blockers], "truncated": False}
        if statuses & {"denied", "deferred"}:
            return (409, "decision_required", "declined", ids)
        if statuses & {"stale", "expired"}:
            return (409, "decision_required", "reopen_required", ids)
        return (409, "decision_required", None, ids)

    def check(self, r: httpx.Response, refusal: Refusal | None, ok: int = 200) -> bool:
        """Assert the refusal the model predicts (its details too), or success."""
        if refusal is None:
            assert r.status_code == ok, r.text
            assert "Idempotent-Replayed" not in r.headers
            return True
        error = r.json().get("error", {})
        details = error.get("details", {})
        got = (r.status_code, error.get("code"), details.get("reason"))
        assert got == refusal[:3], (got, refusal, r.text)
        for k, v in refusal[3].items():
            assert details.get(k) == v, (k, details, refusal)
        return False

    def note(self, kind: str, subject: str, caller: Caller, data: dict[str, Any] | None) -> None:
        self.expected.append((kind, subject, caller.principal_id, caller.session_id, data))

    # --- publication ----------------------------------------------------------------

    def expect_publication(self, step: str, caller: Caller, task: Task) -> Refusal | None:
        """The answer docs/tasks.md gives, in the order the checks run."""
        m, pub = self.model, task.publication
        me, kind = caller.principal_id, caller.kind
        refusal = self.session_refusal(caller)
        if refusal:
            return refusal
        no_session = kind == "agent" and caller.session_id is None
        if step == "prepare":
            if not m.may_publish(me, kind):
                return self.not_owner()
            if no_session:
                return (403, "forbidden", "session_required", {})
            if pub is not None:
                return (409, "publication_in_progress", None, {"holder_id": pub.holder})
            if task.status in ("done", "cancelled"):
                return (409, "state_conflict", "task_closed", {"status": task.status})
            return self.gate_refusal(task)
        if no_session:
            return (403, "forbidden", "session_required", {})
        if pub is None:
            return (409, "state_conflict", "not_prepared", {})
        if pub.holder != me:
            if step == "result" or m.may_publish(pub.holder, pub.holder_kind):
                return (409, "publication_in_progress", None, {"holder_id": pub.holder})
            if not m.may_publish(me, kind):  # finalize: the principal named now may end it
                return self.not_owner()
        elif step == "result" and not m.may_publish(me, kind):
            return (403, "forbidden", "not_integration_owner", {"integration_owner": m.owner})
        if step == "result" and pub.result is not None:
            return (409, "state_conflict", "result_recorded", {})
        return self.gate_refusal(task)

    async def send(
        self, caller: Caller, step: str, task_id: str, body: dict[str, Any], key: str, gql: bool
    ) -> tuple[int, Any, str | None, str | None, bool]:
        """(HTTP status, task or error, error code, reason, replayed) over either transport."""
        if not gql:
            r = await caller.post(task_path(task_id, f"publication/{step}"), body, key=key)
            replayed = r.headers.get("Idempotent-Replayed") == "true"
            if r.is_success:
                return r.status_code, r.json(), None, None, replayed
            err = r.json()["error"]
            return r.status_code, err, err["code"], err["details"].get("reason"), replayed
        inp: dict[str, Any] = {"idempotencyKey": key, "projectId": "demo", "taskId": task_id}
        if step == "result":
            inp |= {"outcome": body["outcome"].upper(), "detail": body["detail"]}
        kind = "TaskPublicationResultInput" if step == "result" else "TaskActionInput"
        query = GQL_MUTATION % (kind, GQL_NAME[step], PUBLICATION)
        r = await caller.client.post(
            "/graphql", json={"query": query, "variables": {"input": inp}}, headers=caller.headers()
        )
        data = r.json()
        if r.status_code != 200:  # a session that is not live (docs/graphql.md)
            ext = data["errors"][0]["extensions"]
            return r.status_code, data, ext["code"], ext.get("reason"), False
        assert "errors" not in data, data
        payload = data["data"][GQL_NAME[step]]
        if payload["task"] is None:
            (error,) = payload["userErrors"]
            return 0, payload, error["code"], error["reason"], payload["replayed"]
        assert payload["userErrors"] == []
        return 200, payload["task"], None, None, payload["replayed"]

    @rule(
        actor=ACTOR,
        which=WHICH,
        step=st.sampled_from(STEPS),
        outcome=st.sampled_from(["succeeded", "failed"]),
        gql=st.booleans(),
        reuse_refused_key=st.booleans(),
    )
    def publish(
        self, actor: int, which: int, step: str, outcome: str, gql: bool, reuse_refused_key: bool
    ) -> None:
        task = self.task(which)
        caller = self.caller(actor, task)
        number = self.actors.index(caller)
        body = {"outcome": outcome, "detail": f"sha {self.edits}"} if step == "result" else {}
        # a refused request leaves no receipt: its key may carry a new request
        key = self.refused_keys.pop(number, None) if reuse_refused_key else None
        key = key or f"pub-{next(self.keys)}"
        refusal = self.expect_publication(step, caller, task)
        status, got, code, reason, replayed = self.run(
            self.send(caller, step, task.id, body, key, gql)
        )
        assert not replayed
        event(
            f"{step} by {caller.kind}: {refusal[1] if refusal else 'ok'} {refusal and refusal[2]}"
        )
        if refusal is not None:
            assert (code, reason) == refusal[1:3], (step, code, reason, refusal, got)
            if not gql or refusal[2] == "session_not_live":  # HTTP 403 on GraphQL too
                assert status == refusal[0], (step, status, got, refusal)
            if not gql:
                for k, v in refusal[3].items():
                    assert got["details"].get(k) == v, (k, got, refusal)
            self.refused_keys[number] = key
            return
        assert status == 200, (step, got)
        pub = task.publication
        if pub is not None and pub.holder != caller.principal_id:
            event("finalize by the principal the policy names now, not the holder")
        if pub is not None and not self.model.may_publish(pub.holder, pub.holder_kind):
            event(f"{step} by a holder the policy no longer names")
        if self.model.blockers(task) == [] and any(
            len(d.generations) > 1 and self.model.held_around(d.tasks) for d in self.model.decisions
        ):
            event(f"{step} ok after a reopen while held")
        self._apply(step, caller, task, body)
        want = task.publication
        if gql:
            assert got["publication"] == (want and want.gql()), (got, want)
        else:
            assert got["publication"] == (want and want.rest()), (got, want)
            assert got["status"] == task.status and got["revision"] == task.revision
        self.last_sent = Sent(number, step, task.id, body, key, gql, status, got)

    def _apply(self, step: str, caller: Caller, task: Task, body: dict[str, Any]) -> None:
        at = format_time(self.model.now)
        if step == "prepare":
            task.publication = Publication(caller.principal_id, caller.kind,
                                           caller.session_id, at)  # fmt: skip
            self.note("task.publication_prepared", task.id, caller, {})
        elif step == "result":
            assert task.publication is not None
            task.publication.result = {**body, "at": at}
            self.note("task.publication_result_recorded", task.id, caller,
                      {"outcome": body["outcome"]})  # fmt: skip
        else:
            pub = task.publication
            assert pub is not None
            data = {"holder_id": pub.holder, "prepared_at": pub.prepared_at, "result": pub.result}
            task.publication = None
            self.note("task.publication_finalized", task.id, caller, data)

    def _preparable(self) -> list[int]:
        return [
            i for i, t in enumerate(self.model.tasks.values())
            if t.publication is None and t.status not in ("done", "cancelled")
            and not self.model.blockers(t)
        ]  # fmt: skip

    @precondition(lambda self: self._preparable())
    @rule(which=WHICH, gql=st.booleans())
    def someone_prepares(self, which: int, gql: bool) -> None:
        """The principal the policy lets publish prepares a task the gate lets through."""
        ready = self._preparable()
        self.publish(ACTORS, ready[which % len(ready)], "prepare", "failed", gql, False)

    @precondition(lambda self: self._preparable())
    @rule(agent=st.integers(0, 1), which=WHICH, gql=st.booleans())
    def an_agent_owner_prepares(self, agent: int, which: int, gql: bool) -> None:
        """A human names an agent the integration owner, and it prepares from a
        live session (a new one when its last has lapsed)."""
        caller = self.actors[agent]
        if self.model.owner != caller.principal_id:
            self.set_integration_owner(agent)
        if caller.session_id is None or self.session_refusal(caller):
            self.session(agent, "new")
        self.someone_prepares(which, gql)

    def _held_allows(self) -> list[Decision]:
        held = self.model.held_around
        return [d for d in self.model.decisions
                if self.model.status(d) == "allowed" and held(d.tasks)]  # fmt: skip

    @precondition(lambda self: self._held_allows())
    @rule(which=WHICH, how=st.sampled_from(["rules", "unrelated_task", "clock"]))
    def allow_stops_counting(self, which: int, how: str) -> None:
        """What makes an allow stop counting mid-publication (docs/decisions.md):
        a rules edit, a judged edit of an affected task unrelated to the
        publisher (it goes through), or its expiry passing."""
        d = self._held_allows()[which % len(self._held_allows())]
        free = [t for t in d.tasks if not self.model.held_around([t])]
        if how == "unrelated_task" and free:
            self.judged_edit(self.ids.index(free[0]), "title")
        elif how == "clock" and d.generations[-1].expires_at is not None:
            self.move_clock(16)
        else:
            self.rules_edit()
        event(f"allow stops counting mid-publication: {self.model.status(d)}")

    def _stuck(self) -> list[int]:
        """Held tasks whose gate refuses the holder (the publication is stuck)."""
        return [
            i for i, t in enumerate(self.model.tasks.values())
            if t.publication is not None and self.model.blockers(t)
        ]  # fmt: skip

    def _orphaned(self) -> list[int]:
        """Held tasks whose holder the policy no longer lets publish."""
        return [
            i for i, t in enumerate(self.model.tasks.values())
            if t.publication is not None
            and not self.model.may_publish(t.publication.holder, t.publication.holder_kind)
        ]  # fmt: skip

    @precondition(lambda self: self._orphaned())
    @rule(which=WHICH, actor=st.integers(0, ACTORS - 1), gql=st.booleans())
    def someone_else_finalizes(self, which: int, actor: int, gql: bool) -> None:
        """docs/tasks.md: once the policy no longer lets the holder publish, the
        principal it lets publish now may end the authority (anyone else may not)."""
        index = self._orphaned()[which % len(self._orphaned())]
        self.publish(actor, index, "finalize", "failed", gql, False)

    @precondition(lambda self: self._stuck())
    @rule(which=WHICH, finalize=st.booleans())
    def the_way_out(self, which: int, finalize: bool) -> None:
        """docs/decisions.md: reopen each blocker although authority is held (it
        already blocks), answer allow, and the holder's result or finalize goes
        through."""
        index = self._stuck()[which % len(self._stuck())]
        task = list(self.model.tasks.values())[index]
        for d in self.model.blockers(task):
            self.reopen(self.model.decisions.index(d), False, "none", False, True)
        event(f"the way out: {'clear' if not self.model.blockers(task) else 'still blocked'}")
        self.publish(ACTORS, index, "finalize" if finalize else "result", "succeeded", False, False)

    @precondition(lambda self: any(t.publication for t in self.model.tasks.values()))
    @rule(which=WHICH, outcome=st.sampled_from(["succeeded", "failed"]), finalize=st.booleans())
    def holder_goes_on(self, which: int, outcome: str, finalize: bool) -> None:
        """The holder records its result or finalizes (the path a publication
        takes, more often than the random rule above reaches it)."""
        held = [i for i, t in enumerate(self.model.tasks.values()) if t.publication]
        self.publish(ACTORS, held[which % len(held)], "finalize" if finalize else "result",
                     outcome, which % 2 == 0, False)  # fmt: skip

    @precondition(lambda self: self.last_sent is not None)
    @rule(different=st.booleans())
    def send_again(self, different: bool) -> None:
        """The same key and request replays the stored answer, writes nothing and
        changes nothing; the same key on another request is refused 422."""
        sent = self.last_sent
        assert sent is not None
        caller = self.actors[sent.actor]
        step, body = sent.step, sent.body
        if different:  # another route, or another body, under the same key
            step = {"prepare": "finalize", "finalize": "prepare"}.get(step, step)
            body = {**body, "detail": body["detail"] + " again"} if step == "result" else body
        refusal = self.session_refusal(caller)
        status, got, code, reason, replayed = self.run(
            self.send(caller, step, sent.task, body, sent.key, sent.gql)
        )
        if refusal is not None:
            assert (code, reason) == refusal[1:3], got
            return
        if different:
            assert code == "idempotency_key_reused", got
            if not sent.gql:
                assert status == 422
            return
        event("replayed")
        assert (status, got, replayed) == (sent.status, sent.answer, True)

    # --- policy ---------------------------------------------------------------------

    def _patch_policy(self, **fields: Any) -> None:
        body = {"expected_revision": self.policy_revision, **fields}
        r = self.run(self.human.patch(f"{BASE}/policy", body))
        assert r.status_code == 200, r.text
        self.policy_revision += 1
        self.note("policy.updated", "demo", self.human, None)

    @rule(owner=st.sampled_from([None, 0, 1, 2]))
    def set_integration_owner(self, owner: int | None) -> None:
        self.model.owner = None if owner is None else self.actors[owner].principal_id
        self._patch_policy(integration_owner=self.model.owner)

    @rule()
    def rules_edit(self) -> None:
        """A rules-text edit: every allow stops counting (stale), even mid-publication."""
        self.edits += 1
        self._patch_policy(rules=f"rules {self.edits}")
        self.model.rules += 1

    # --- decisions ------------------------------------------------------------------

    @rule(
        picks=st.lists(WHICH, min_size=1, max_size=2),
        expires_in=st.one_of(st.none(), st.sampled_from([5, 20])),
        answer=st.sampled_from([None, "allow", "allow"]),
    )
    def open_decision(self, picks: list[int], expires_in: int | None, answer: str | None) -> None:
        ids = list(dict.fromkeys(self.task(i).id for i in picks))
        expires_at = self.model.now + timedelta(minutes=expires_in) if expires_in else None
        body = {"question": "Go?", "options": ["Proceed", "Stop"], "rationale": "r",
                "required_actor": "human", "task_ids": ids, "environment": "staging",
                "expires_at": format_time(expires_at) if expires_at else None}  # fmt: skip
        r = self.run(self.human.post(f"{BASE}/decisions", body))
        held = self.model.held_around(ids)
        refusal = (409, "publication_in_progress", None, {"task_ids": held}) if held else None
        event(f"open decision: {'refused, held' if held else 'ok'}")
        if not self.check(r, refusal, ok=201):
            return
        made = r.json()
        d = Decision(made["id"], made["created_at"], ids)
        d.generations.append(self._pin(ids, expires_at))
        self.model.decisions.append(d)
        self.note("decision.opened", d.id, self.human,
                  {"generation": 1, "task_ids": ids, "required_actor": "human",
                   "reversible": False, "expires_at": body["expires_at"]})  # fmt: skip
        if answer is not None:
            self.answer(len(self.model.decisions) - 1, False, answer)

    def _pin(self, tasks: list[str], expires_at: datetime | None) -> Generation:
        pins = {t: self.model.tasks[t].judged for t in tasks}
        return Generation(pins, self.model.rules, expires_at)

    @precondition(lambda self: self.model.decisions)
    @rule(which=WHICH, focus=st.booleans(), disposition=st.sampled_from(["allow", "deny", "defer"]))
    def answer(self, which: int, focus: bool, disposition: str) -> None:
        """Answering is never refused for a publication: it adds no blocker."""
        pending = [d for d in self.model.decisions if self.model.status(d) == "pending"]
        chosen = (focus and pending) or self.model.decisions
        d = chosen[which % len(chosen)]
        body = {"expected_generation": len(d.generations), "disposition": disposition,
                "answer": "Proceed", "rationale": "r", "conditions_confirmed": True}  # fmt: skip
        r = self.run(self.human.post(f"{BASE}/decisions/{d.id}/answer", body))
        status = self.model.status(d)
        refusal: Refusal | None = None
        if status in ("stale", "expired"):
            refusal = (409, "state_conflict", status, {})
        elif status != "pending":
            refusal = (409, "state_conflict", "already_answered", {})
        if not self.check(r, refusal):
            return
        d.generations[-1].answer = disposition
        self.note("decision.answered", d.id, self.human,
                  {"generation": len(d.generations), "disposition": disposition,
                   "answer": "Proceed", "relayed": False, "task_ids": d.tasks})  # fmt: skip

    @precondition(lambda self: self.model.decisions)
    @rule(
        which=WHICH,
        focus=st.booleans(),
        expiry=st.sampled_from(["carry", "none", "new"]),
        stale_generation=st.sampled_from([False, False, False, True]),
        then_allow=st.booleans(),
    )
    def reopen(
        self, which: int, focus: bool, expiry: str, stale_generation: bool, then_allow: bool
    ) -> None:
        """Section 14: while authority is held around its tasks, a decision that
        already blocks may be reopened; one that allows may not."""
        around = [d for d in self.model.decisions if self.model.held_around(d.tasks)]
        chosen = (focus and around) or self.model.decisions
        d = chosen[which % len(chosen)]
        current = len(d.generations)
        body: dict[str, Any] = {"expected_generation": current + stale_generation,
                                "rationale": "again"}  # fmt: skip
        previous = d.generations[-1].expires_at
        expires_at = previous
        if expiry == "none":
            body["expires_at"] = expires_at = None
        elif expiry == "new":
            expires_at = self.model.now + timedelta(minutes=30)
            body["expires_at"] = format_time(expires_at)
        r = self.run(self.human.post(f"{BASE}/decisions/{d.id}/reopen", body))
        status = self.model.status(d)
        held = self.model.held_around(d.tasks)
        refusal: Refusal | None = None
        if stale_generation:
            refusal = (409, "generation_conflict", None, {})
        elif expiry == "carry" and previous is not None and previous <= self.model.now:
            refusal = (400, "invalid_request", None, {"field": "expires_at"})
        elif status == "allowed" and held:
            refusal = (409, "publication_in_progress", None, {"task_ids": held})
        event(f"reopen {status}{' while held' if held else ''}: {(refusal and refusal[1]) or 'ok'}")
        if not self.check(r, refusal):
            return
        d.generations.append(self._pin(d.tasks, expires_at))
        self.note("decision.reopened", d.id, self.human,
                  {"generation": current + 1, "previous_status": status, "task_ids": d.tasks,
                   "expires_at": format_time(expires_at) if expires_at else None})  # fmt: skip
        if then_allow:  # the way out, in one step
            self.answer(self.model.decisions.index(d), False, "allow")

    # --- the tasks themselves -------------------------------------------------------

    @rule(which=WHICH, field_=st.sampled_from(["title", "description"]))
    def judged_edit(self, which: int, field_: str) -> None:
        self.edits += 1
        task = self.task(which)
        body = {"expected_revision": task.revision, field_: f"edit {self.edits}"}
        r = self.run(self.human.patch(task_path(task.id), body))
        refusal: Refusal | None = None
        held = self.model.held_around([task.id])
        if task.status in ("done", "cancelled"):
            refusal = (409, "state_conflict", "task_closed", {})
        elif held:
            refusal = (409, "publication_in_progress", None, {})
            # details name the nearest (the task, its subject, its oldest
            # activity: docs/tasks.md) and its holder
            err = r.json().get("error", {}).get("details", {})
            near = {task.id: 0, task.subject: 1}
            nearest = min(held, key=lambda t: (near.get(t, 2), self.model.tasks[t].created_at, t))
            assert err.get("task_id") == nearest, (err, held)
            pub = self.model.tasks[err["task_id"]].publication
            assert pub is not None and err["holder_id"] == pub.holder, (err, pub)
        if not self.check(r, refusal):
            return
        task.revision += 1
        task.judged += 1
        self.note("task.updated", task.id, self.human, None)

    @rule(which=WHICH, status=st.sampled_from(["open", "cancelled"]))
    def set_status(self, which: int, status: str) -> None:
        task = self.task(which)
        body = {"expected_revision": task.revision, "status": status}
        r = self.run(self.human.patch(task_path(task.id), body))
        reopening = status == "open" and task.status == "cancelled"
        allowed = {
            "cancelled": ("open", "claimed", "submitted"),
            "open": ("cancelled", "submitted"),
        }
        refusal: Refusal | None = None
        if task.status in ("done", "cancelled") and not reopening:
            refusal = (409, "state_conflict", "task_closed", {})
        elif status != task.status and task.status not in allowed[status]:
            refusal = (409, "state_conflict", "invalid_transition", {})
        elif status != task.status and task.publication is not None:
            refusal = (409, "publication_in_progress", None,
                       {"holder_id": task.publication.holder})  # fmt: skip
        if not self.check(r, refusal):
            return
        task.revision += 1
        if status != task.status:
            task.status, task.lease_expires = status, None
        self.note("task.updated", task.id, self.human, None)

    @rule(which=WHICH, op=st.sampled_from(["claim", "submit", "complete"]))
    def human_works(self, which: int, op: str) -> None:
        """hana claims, submits and completes (review_mode human): `complete`
        stays open while authority is held, and a done task still holds it."""
        task = self.task(which)
        lapsed = task.lease_expires is not None and task.lease_expires <= self.model.now
        refusal: Refusal | None = None
        if op == "claim":
            r = self.run(self.human.post(f"{BASE}/claims", {"task_id": task.id}))
            if task.status == "claimed":
                reason = "lease_expired" if lapsed else "already_claimed"
                refusal = (409, "state_conflict", reason, {})
            elif task.status != "open":
                refusal = (409, "state_conflict", "not_open", {})
        else:
            r = self.run(
                self.human.post(task_path(task.id, op), {"summary": "s"} if op == "submit" else {})
            )
            if op == "submit" and task.status != "claimed":
                refusal = (409, "state_conflict", "not_claimed", {})
            elif op == "submit" and lapsed:
                refusal = (409, "lease_conflict", "lease_expired", {})
            elif op == "complete" and task.status != "submitted":
                refusal = (409, "state_conflict", "not_submitted", {})
        refusal = refusal or self.gate_refusal(task)
        if not self.check(r, refusal):
            return
        task.status = {"claim": "claimed", "submit": "submitted", "complete": "done"}[op]
        task.lease_expires = self.model.now + LEASE if op == "claim" else None
        past = {"claim": "claimed", "submit": "submitted", "complete": "completed"}[op]
        self.note(f"task.{past}", task.id, self.human, None)
        event(f"{op} ok{' while held' if task.publication else ''}")

    # --- time and sessions ----------------------------------------------------------

    @rule(minutes=st.sampled_from([1, 1, 6, 16]))
    def move_clock(self, minutes: int) -> None:
        self.clock.advance(minutes=minutes)
        self.model.now = self.clock.now()

    @rule(agent=st.integers(0, 1), how=st.sampled_from(["heartbeat", "new", "none"]))
    def session(self, agent: int, how: str) -> None:
        """A heartbeat, a new session (an agent that restarted), or none at all."""
        caller = self.actors[agent]
        if how == "none":
            caller.session_id = None
            return
        if how == "heartbeat" and caller.session_id is not None:
            r = self.run(caller.post(f"/api/v1/sessions/{caller.session_id}/heartbeat"))
            if self.check(r, self.session_refusal(caller)):
                self.sessions[caller.session_id] = self.model.now + SESSION
            return
        caller.session_id = None
        r = self.run(caller.post("/api/v1/sessions"))
        assert r.status_code == 201, r.text
        caller.session_id = r.json()["id"]
        self.sessions[caller.session_id] = self.model.now + SESSION

    @initialize(allow=st.booleans())
    def a_decision_on_the_subject(self, allow: bool) -> None:
        """Every run starts with a decision on the first task (and so on its
        review), allowed or pending, so publications meet the gate early."""
        self.open_decision([0], None, "allow" if allow else None)

    # --- what must hold after every step -------------------------------------------

    @invariant()
    def events_are_the_ones_named(self) -> None:
        r = self.run(self.human.get(f"{BASE}/events", after=self.seen, limit=200))
        items = r.json()["items"]
        got = [(e["type"], e["subject_id"], e["actor_id"], e["actor_session_id"], e["data"])
               for e in items]  # fmt: skip
        assert [e["subject_type"] for e in items] == [t.split(".")[0] for t, *_ in got], items
        want = self.expected
        assert len(got) == len(want), (got, want)
        for g, w in zip(got, want, strict=True):
            assert g[:4] == w[:4], (g, w)
            if w[4] is not None:
                assert g[4] == w[4], (g, w)
        self.seen = r.json()["next_after"]
        self.expected = []

    @invariant()
    def rest_agrees(self) -> None:
        r = self.run(self.human.get(f"{BASE}/tasks", limit=200))
        found = {t["id"]: t for t in r.json()["items"]}
        for task in self.model.tasks.values():
            got = found[task.id]
            pub = task.publication
            assert got["publication"] == (pub and pub.rest()), (task, got)
            assert (got["status"], got["revision"]) == (task.status, task.revision), (task, got)
            blockers = [d.id for d in self.model.blockers(task)]
            assert got["blocked_by"]["decisions"] == blockers, (task, got)
            ready = task.status == "open" and not blockers
            assert got["ready"] is ready, (task, got)
        r = self.run(self.human.get(f"{BASE}/decisions", limit=200))
        decisions = {d["id"]: d for d in r.json()["items"]}
        assert set(decisions) == {d.id for d in self.model.decisions}
        for d in self.model.decisions:
            status = self.model.status(d)
            got = decisions[d.id]
            assert (got["status"], got["generation"]) == (status, len(d.generations)), (d, got)
            assert got["work_allowed"] is (status == "allowed")

    @invariant()
    def graphql_agrees(self) -> None:
        data = self.run(self.human.gql(GQL_STATE))
        assert "errors" not in data, data
        project = data["data"]["project"]
        tasks = {n["restId"]: n for n in project["tasks"]["nodes"]}
        for task in self.model.tasks.values():
            node = tasks[task.id]
            pub = task.publication
            assert node["publication"] == (pub and pub.gql()), (task, node)
            assert node["status"] == task.status.upper()
            assert node["blockedBy"]["decisionIds"] == [d.id for d in self.model.blockers(task)]
        decisions = {n["restId"]: n for n in project["decisions"]["nodes"]}
        for d in self.model.decisions:
            status = self.model.status(d)
            assert decisions[d.id]["status"] == status.upper()
            assert decisions[d.id]["generation"] == len(d.generations)


PublicationMachine.TestCase.settings = machine_settings(20)
TestPublicationStateMachine = PublicationMachine.TestCase
