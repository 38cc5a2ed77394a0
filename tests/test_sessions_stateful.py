"""A stateful property test of principals, their tokens and agent sessions,
and of what sessions do to leases and to the calls that need one: random
sequences of token issue and revocation, session start, heartbeat and end
(over REST and GraphQL, with the caller's own session, none or another's
in `Waypost-Session`), idempotent replays, named claims, renewals,
releases, recoveries, decision answers and the passing of time, checked
after every step against a small independent model (service contract
sections 2, 3 and 13; docs/api.md "Principals and sessions" and
"Idempotency"; docs/tasks.md "Leases").

The model keeps each principal's tokens (audience, revoked), each session's
owner, expiry and end, each task's lease and each decision's answer, and
decides every answer in the order the docs give: the token (`401`), the
session the header names (`403 session_not_live`), then the operation's own
rules (`agents_only`, `session_required`, the session a heartbeat or end
names, the lease rules). A session ending or expiring leaves its leases as
they were until the lease itself expires (docs/tasks.md). After every step
the service must agree on every token's standing, on `me` (REST and
GraphQL), on every session (GraphQL `node`, null for another's), on every
task's lease and readiness, and on the events the step wrote, session
events (which no project lists) included.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from tests.stateful_support import Expected, ServiceMachine, answered_as, machine_settings
from tests.tasks_support import BASE, task_path
from waypost.clock import format_time
from waypost.resolvers.access import principals
from waypost.schema.relay import global_id

SESSION = timedelta(minutes=15)
LEASE_SECONDS = 600  # shorter than a session, so both lapse first in turn
LEASE = timedelta(seconds=LEASE_SECONDS)
NAMES = (("agent", "ada"), ("agent", "bob"), ("human", "hana"))
AGENTS = 2
TASKS = 3
MAX_SESSIONS = 12  # GraphQL checks ask for every session by an alias (30 at most)
MAX_DECISIONS = 4
ACTOR = st.integers(0, len(NAMES) - 1)
AGENT = st.integers(0, AGENTS - 1)
WHICH = st.integers(0, 99)
TOKEN = st.sampled_from([-1, -1, -1, -1, -1, 0, 1, 2, 3])  # -1: a usable one (if any)
HEADER = st.sampled_from(["own", "own", "own", "none", "any"])

SESSION_FIELDS = "restId principalId startedAt expiresAt endedAt"
MUTATIONS = {
    "start": "mutation($i: SessionStartInput!) { sessionStart(input: $i) { session { "
    + SESSION_FIELDS
    + " } userErrors { code reason } replayed } }",
    "heartbeat": "mutation($i: SessionActionInput!) { sessionHeartbeat(input: $i) { session { "
    + SESSION_FIELDS
    + " } userErrors { code reason } replayed } }",
    "end": "mutation($i: SessionActionInput!) { sessionEnd(input: $i) { session { "
    + SESSION_FIELDS
    + " } userErrors { code reason } replayed } }",
}
PAYLOAD = {"start": "sessionStart", "heartbeat": "sessionHeartbeat", "end": "sessionEnd"}

_keys = itertools.count()


@dataclass
class Token:
    id: str
    secret: str
    audience: str
    revoked: bool = False

    @property
    def usable(self) -> bool:
        return self.audience == "api" and not self.revoked


@dataclass
class Principal:
    id: str
    kind: str
    name: str
    tokens: list[Token]
    current: str | None = None  # the session it last started (its "own" header)


@dataclass
class Session:
    id: str
    owner: str
    started: datetime
    expires: datetime
    ended: datetime | None = None

    def live(self, now: datetime) -> bool:
        return self.ended is None and now < self.expires

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "principal_id": self.owner,
            "started_at": format_time(self.started),
            "expires_at": format_time(self.expires),
            "ended_at": format_time(self.ended) if self.ended else None,
        }

    def gql(self) -> dict[str, Any]:
        j = self.json()
        return {"restId": j["id"], "principalId": j["principal_id"],
                "startedAt": j["started_at"], "expiresAt": j["expires_at"],
                "endedAt": j["ended_at"]}  # fmt: skip


@dataclass
class Lease:
    owner: str
    session: str | None
    expires: datetime


@dataclass
class Task:
    id: str
    lease: Lease | None = None


@dataclass
class Sent:
    """A session mutation that succeeded, kept to be sent again."""

    actor: int
    op: str  # start, heartbeat, end
    target: str | None  # the session a heartbeat or end named
    key: str
    header: str | None
    gql: bool
    status: int
    body: dict[str, Any]  # the REST body, or the GraphQL payload's session


@dataclass
class Call:
    """Who sends a request, with which token and which session header."""

    actor: int
    token: Token
    header: str | None


class SessionMachine(ServiceMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = self.clock.now()
        self.principals: list[Principal] = []
        self.sessions: dict[str, Session] = {}  # in start order
        self.tasks: list[Task] = []
        self.decisions: dict[str, bool] = {}  # id -> answered
        self.sent: list[Sent] = []
        self.expected_events: list[tuple[Any, ...]] = []
        self.tokens_changed = True  # every token is asked `me` after a change
        self.run(self._start())

    async def _start(self) -> None:
        await self.open_service()
        self.rt = self.app.state.runtime
        for kind, name in NAMES:
            caller = await self.new_caller(kind, name)
            tokens = await self.rt.db.read(
                lambda conn, pid=caller.principal_id: principals.list_tokens(conn, pid)
            )
            (made,) = tokens
            first = Token(made["token_id"], caller.token, "api")
            self.principals.append(Principal(caller.principal_id, kind, name, [first]))
            # a token of another audience is no token on the public listener
            await self._issue(len(self.principals) - 1, "lifecycle")
        self.human_token = self.principals[-1].tokens[0].secret  # never revoked
        r = await self._send("POST", "/api/v1/projects", self.human_token, None,
                             {"id": "demo", "name": "D"})  # fmt: skip
        assert r.status_code == 201, r.text
        body = {"expected_revision": 1, "lease_seconds": LEASE_SECONDS}
        r = await self._send("PATCH", f"{BASE}/policy", self.human_token, None, body)
        assert r.status_code == 200, r.text
        for _ in range(TASKS + 1):  # the last one only carries decisions
            r = await self._send("POST", f"{BASE}/tasks", self.human_token, None, {"title": "t"})
            assert r.status_code == 201, r.text
            self.tasks.append(Task(r.json()["id"]))
        self.decision_task = self.tasks.pop().id
        self.seen = await self.rt.db.read(
            lambda conn: conn.execute("SELECT max(sequence) FROM events").fetchone()[0]
        )

    # --- helpers ----------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        token: str,
        header: str | None,
        body: Any = None,
        key: str | None = None,
    ) -> httpx.Response:
        h = {"Authorization": f"Bearer {token}"}
        if header is not None:
            h["Waypost-Session"] = header
        if method != "GET":
            h["Idempotency-Key"] = key if key is not None else f"sm-{next(_keys)}"
        return await self.client.request(method, path, json=body, headers=h)

    def send(self, call: Call, method: str, path: str, body: Any = None, key: str | None = None
             ) -> httpx.Response:  # fmt: skip
        return self.run(self._send(method, path, call.token.secret, call.header, body, key))

    def gql(self, call: Call, query: str, variables: dict[str, Any]) -> httpx.Response:
        h = {"Authorization": f"Bearer {call.token.secret}"}
        if call.header is not None:
            h["Waypost-Session"] = call.header
        body = {"query": query, "variables": variables}
        return self.run(self.client.post("/graphql", json=body, headers=h))

    async def _issue(self, actor: int, audience: str) -> Token:
        p = self.principals[actor]
        made = await self.rt.db.write(
            lambda conn: principals.issue_token(conn, p.id, audience, self.clock.iso())
        )
        token = Token(made["token_id"], made["token"], audience)
        p.tokens.append(token)
        return token

    def token(self, actor: int, which: int) -> Token:
        """Token number `which` of the actor; -1 its newest usable one (its
        newest of all when every one is revoked)."""
        tokens = self.principals[actor].tokens
        if which >= 0:
            return tokens[which % len(tokens)]
        usable = [t for t in tokens if t.usable]
        return (usable or tokens)[-1]

    def header(self, actor: int, how: str, which: int) -> str | None:
        if how == "own":
            return self.principals[actor].current
        if how == "any" and self.sessions:
            ids = list(self.sessions)
            return ids[which % len(ids)]
        return None

    def call(self, actor: int, token: int, how: str, which: int) -> Call:
        return Call(actor, self.token(actor, token), self.header(actor, how, which))

    def own_live(self, actor: int, session_id: str | None) -> bool:
        s = self.sessions.get(session_id or "")
        return s is not None and s.owner == self.principals[actor].id and s.live(self.now)

    def gate(self, call: Call) -> Expected | None:
        """What every request meets first: its token, then its session header."""
        if not call.token.usable:
            return (401, "unauthenticated", None)
        if call.header is not None and not self.own_live(call.actor, call.header):
            return (403, "forbidden", "session_not_live")
        return None

    def session_required(self, call: Call) -> Expected | None:
        if self.principals[call.actor].kind == "agent" and call.header is None:
            return (403, "forbidden", "session_required")
        return None

    def expect_gql(
        self, r: httpx.Response, op: str, gate: Expected | None, refusal: Expected | None
    ) -> dict[str, Any] | None:
        """A refusal of the caller is top-level with its HTTP status; one of what
        was asked is a userError; success gives the session."""
        if gate is not None:
            assert r.status_code == gate[0], r.text
            (error,) = r.json()["errors"]
            assert error["extensions"]["code"] == gate[1], r.text
            return None
        assert r.status_code == 200, r.text
        assert "errors" not in r.json(), r.text
        payload: dict[str, Any] = r.json()["data"][PAYLOAD[op]]
        assert payload["replayed"] is False, payload
        if refusal is not None:
            assert payload["session"] is None, payload
            got = [(e["code"], e["reason"]) for e in payload["userErrors"]]
            assert got == [(refusal[1], refusal[2])], (got, refusal)
            return None
        assert payload["userErrors"] == [], payload
        session: dict[str, Any] = payload["session"]
        return session

    def event(self, call: Call, type_: str, subject: str, data: Any = None) -> None:
        actor = self.principals[call.actor].id
        self.expected_events.append((type_, subject, actor, call.header, data))

    def holds(self, call: Call, lease: Lease) -> bool:
        p = self.principals[call.actor]
        return lease.owner == p.id and (p.kind == "human" or lease.session == call.header)

    # --- tokens -------------------------------------------------------------------

    @precondition(lambda self: sum(len(p.tokens) for p in self.principals) < 16)
    @rule(actor=ACTOR, revoke_old=st.booleans())
    def rotate_token(self, actor: int, revoke_old: bool) -> None:
        """`waypost admin token issue` (and, for a rotation, revoke the old one)."""
        old = [t for t in self.principals[actor].tokens if t.usable]
        self.run(self._issue(actor, "api"))
        self.tokens_changed = True
        if revoke_old and old and self.principals[actor].kind == "agent":
            self.revoke(actor, self.principals[actor].tokens.index(old[-1]), False)

    @rule(actor=AGENT, which=st.integers(0, 7), reissue=st.sampled_from([True, True, False]))
    def revoke(self, actor: int, which: int, reissue: bool) -> None:
        """`waypost admin token revoke`: refused at the next request (agents
        only: the human's first token sets the scene for every step). An
        agent left with no usable token is mostly given a new one."""
        tokens = self.principals[actor].tokens
        token = tokens[which % len(tokens)]
        self.run(
            self.rt.db.write(lambda conn: principals.revoke_token(conn, token.id, self.clock.iso()))
        )
        token.revoked = True
        self.tokens_changed = True
        if reissue and not any(t.usable for t in tokens):
            self.run(self._issue(actor, "api"))

    # --- sessions -----------------------------------------------------------------

    @initialize()
    def first_sessions(self) -> None:
        for agent in range(AGENTS):
            self.start_session(agent, -1, "none", 0, False)

    @precondition(lambda self: len(self.sessions) < MAX_SESSIONS)
    @rule(actor=ACTOR, token=TOKEN, how=HEADER, which=WHICH, gql=st.booleans())
    def start_session(self, actor: int, token: int, how: str, which: int, gql: bool) -> None:
        call = self.call(actor, token, how, which)
        key = f"sm-{next(_keys)}"
        p = self.principals[actor]
        gate = self.gate(call)
        refusal = None if p.kind == "agent" else (403, "forbidden", "agents_only")
        if gql:
            r = self.gql(call, MUTATIONS["start"], {"i": {"idempotencyKey": key}})
            got = self.expect_gql(r, "start", gate, refusal)
            if got is None:
                return
            sid, status, body = got["restId"], 200, got
        else:
            r = self.send(call, "POST", "/api/v1/sessions", {}, key)
            if not answered_as(r, gate or refusal, 201):
                return
            sid, status, body = r.json()["id"], 201, r.json()
        session = Session(sid, p.id, self.now, self.now + SESSION)
        assert sid not in self.sessions
        self.sessions[sid] = session
        assert body == (session.gql() if gql else session.json()), (body, session)
        p.current = sid
        self.event(call, "session.started", sid, {"expires_at": format_time(session.expires)})
        self.sent.append(Sent(actor, "start", None, key, call.header, gql, status, body))

    def target(self, actor: int, own: bool, which: int) -> str:
        """The session a heartbeat or end names: the actor's own (if it has
        one) or any session there is."""
        mine = self.principals[actor].current
        if own and mine is not None:
            return mine
        ids = list(self.sessions)
        return ids[which % len(ids)]

    @precondition(lambda self: self.sessions)
    @rule(
        actor=ACTOR,
        op=st.sampled_from(["heartbeat", "heartbeat", "end"]),
        own=st.sampled_from([True, True, False]),
        which=WHICH,
        token=TOKEN,
        how=HEADER,
        gql=st.booleans(),
    )
    def session_action(
        self, actor: int, op: str, own: bool, which: int, token: int, how: str, gql: bool
    ) -> None:
        sid = self.target(actor, own, which)
        call = self.call(actor, token, how, which)
        key = f"sm-{next(_keys)}"
        gate = self.gate(call)
        # another's, ended or expired: the same refusal (docs/api.md)
        refusal = None if self.own_live(actor, sid) else (403, "forbidden", "session_not_live")
        if gql:
            variables = {"i": {"idempotencyKey": key, "sessionId": sid}}
            got = self.expect_gql(self.gql(call, MUTATIONS[op], variables), op, gate, refusal)
            if got is None:
                return
            status, body = 200, got
        else:
            r = self.send(call, "POST", f"/api/v1/sessions/{sid}/{op}", {}, key)
            if not answered_as(r, gate or refusal):
                return
            status, body = 200, r.json()
        session = self.sessions[sid]
        if op == "heartbeat":
            # now + 15 minutes, or as it was if that is later
            session.expires = max(session.expires, self.now + SESSION)
            self.event(call, "session.renewed", sid, {"expires_at": format_time(session.expires)})
        else:
            session.ended = self.now
            self.event(call, "session.ended", sid, {})
        assert body == (session.gql() if gql else session.json()), (body, session)
        self.sent.append(Sent(actor, op, sid, key, call.header, gql, status, body))

    @precondition(lambda self: self.sent)
    @rule(
        which=WHICH,
        token=TOKEN,
        how=st.sampled_from(["same", "same", "none", "own"]),
        different=st.sampled_from([False, False, True]),
    )
    def replay(self, which: int, token: int, how: str, different: bool) -> None:
        """The same key again: the same request is answered its stored answer
        (with any token of the principal; the header is not part of the
        request but is checked first); another request is `422`."""
        sent = self.sent[which % len(self.sent)]
        header = {"same": sent.header, "none": None}.get(how, self.principals[sent.actor].current)
        call = Call(sent.actor, self.token(sent.actor, token), header)
        gate = self.gate(call)
        if different or not sent.gql:
            path = "/api/v1/sessions"
            if sent.target is not None:
                path += f"/{sent.target}/{sent.op}"
            if different:  # another route under the key (or REST for a GraphQL key)
                other = self.principals[sent.actor].current or "nobody"
                if not sent.gql:
                    swap = {"start": f"{other}/heartbeat", "heartbeat": f"{sent.target}/end",
                            "end": f"{sent.target}/heartbeat"}  # fmt: skip
                    path = f"/api/v1/sessions/{swap[sent.op]}"
            r = self.send(call, "POST", path, {}, sent.key)
            if different:
                answered_as(r, gate or (422, "idempotency_key_reused", None))
                return
            if answered_as(r, gate, sent.status):
                assert r.json() == sent.body, (r.json(), sent)
                assert r.headers.get("idempotent-replayed") == "true", r.headers
            return
        variables: dict[str, Any] = {"idempotencyKey": sent.key}
        if sent.target is not None:
            variables["sessionId"] = sent.target
        r = self.gql(call, MUTATIONS[sent.op], {"i": variables})
        if gate is not None:
            assert r.status_code == gate[0], r.text
            return
        payload = r.json()["data"][PAYLOAD[sent.op]]
        assert payload == {"session": sent.body, "userErrors": [], "replayed": True}, (
            payload,
            sent,
        )

    # --- leases -------------------------------------------------------------------

    @rule(actor=ACTOR, which=WHICH, token=TOKEN, how=HEADER, pick=WHICH)
    def claim(self, actor: int, which: int, token: int, how: str, pick: int) -> None:
        task = self.tasks[which % len(self.tasks)]
        call = self.call(actor, token, how, pick)
        r = self.send(call, "POST", f"{BASE}/claims", {"task_id": task.id})
        refusal = self.gate(call) or self.session_required(call)
        if refusal is None and task.lease is not None:
            if task.lease.expires <= self.now:
                refusal = (409, "state_conflict", "lease_expired")
            elif self.holds(call, task.lease):
                refusal = (409, "state_conflict", "already_claimed")
            else:
                refusal = (409, "lease_conflict", "held_by_another")
        if answered_as(r, refusal):
            self.take(call, task, "task.claimed")
            assert r.json()["lease"] == self.lease_json(task.lease), (r.json(), task)

    def take(self, call: Call, task: Task, event: str) -> None:
        task.lease = Lease(self.principals[call.actor].id, call.header, self.now + LEASE)
        self.event(call, event, task.id)

    @rule(
        actor=ACTOR,
        which=WHICH,
        token=TOKEN,
        how=HEADER,
        pick=WHICH,
        op=st.sampled_from(["renew", "renew", "release"]),
    )
    def owner_operation(self, actor: int, which: int, token: int, how: str, pick: int, op: str
                        ) -> None:  # fmt: skip
        task = self.tasks[which % len(self.tasks)]
        call = self.call(actor, token, how, pick)
        r = self.send(call, "POST", task_path(task.id, op), {})
        refusal = self.gate(call) or self.session_required(call)
        if refusal is None:
            if task.lease is None:
                refusal = (409, "state_conflict", "not_claimed")
            elif task.lease.expires <= self.now:
                refusal = (409, "lease_conflict", "lease_expired")
            elif not self.holds(call, task.lease):
                refusal = (409, "lease_conflict", "held_by_another")
        if not answered_as(r, refusal):
            return
        assert task.lease is not None
        if op == "renew":
            task.lease.expires = self.now + LEASE
            self.event(call, "task.renewed", task.id)
        else:
            task.lease = None
            self.event(call, "task.released", task.id)

    # Owner operations by chance mostly meet a refusal: these two send them
    # as the holder, and as an agent at work in a live session.

    @precondition(lambda self: any(t.lease for t in self.tasks))
    @rule(which=WHICH, op=st.sampled_from(["renew", "renew", "release"]))
    def holder_acts(self, which: int, op: str) -> None:
        held = [t for t in self.tasks if t.lease]
        task = held[which % len(held)]
        assert task.lease is not None
        owner = next(i for i, p in enumerate(self.principals) if p.id == task.lease.owner)
        self.owner_operation(owner, self.tasks.index(task), -1, "own", 0, op)

    @precondition(lambda self: len(self.sessions) < MAX_SESSIONS)
    @rule(
        agent=AGENT,
        which=WHICH,
        op=st.sampled_from(["claim", "claim", "recover", "renew", "release", "heartbeat"]),
    )
    def agent_works(self, agent: int, which: int, op: str) -> None:
        """An agent at work in its live session (a new one if its last one is
        not live): it claims an unleased task or recovers a lapsed lease, or
        acts on one it holds."""
        if not self.own_live(agent, self.principals[agent].current):
            self.start_session(agent, -1, "none", 0, False)
        if op == "heartbeat":
            self.session_action(agent, "heartbeat", True, 0, -1, "own", False)
            return
        me = self.principals[agent].id

        def focus(t: Task) -> bool:
            if op == "claim":
                return t.lease is None
            if op == "recover":
                return t.lease is not None and t.lease.expires <= self.now
            return t.lease is not None and t.lease.owner == me

        chosen = [t for t in self.tasks if focus(t)] or self.tasks
        index = self.tasks.index(chosen[which % len(chosen)])
        if op == "claim":
            self.claim(agent, index, -1, "own", 0)
        elif op == "recover":
            self.recover(agent, index, -1, "own", 0)
        else:
            self.owner_operation(agent, index, -1, "own", 0, op)

    @rule(actor=ACTOR, which=WHICH, token=TOKEN, how=HEADER, pick=WHICH)
    def recover(self, actor: int, which: int, token: int, how: str, pick: int) -> None:
        task = self.tasks[which % len(self.tasks)]
        call = self.call(actor, token, how, pick)
        r = self.send(call, "POST", task_path(task.id, "recover"), {})
        refusal = self.gate(call) or self.session_required(call)
        previous = task.lease
        if refusal is None:
            if previous is None:
                refusal = (409, "state_conflict", "not_claimed")
            elif previous.expires > self.now:
                if self.holds(call, previous):
                    refusal = (409, "state_conflict", "already_claimed")
                else:
                    refusal = (409, "lease_conflict", "lease_live")
        if answered_as(r, refusal):
            assert previous is not None
            assert r.json()["previous_lease"] == self.lease_json(previous), r.json()
            self.take(call, task, "task.recovered")

    # --- decisions (an answer needs a session) -----------------------------------------

    @precondition(lambda self: len(self.decisions) < MAX_DECISIONS)
    @rule(required=st.sampled_from(["agent", "either"]))
    def open_decision(self, required: str) -> None:
        body = {"question": "Go?", "options": ["Proceed", "Stop"], "rationale": "r",
                "required_actor": required, "task_ids": [self.decision_task],
                "environment": "staging", "expires_at": None}  # fmt: skip
        human = Call(len(NAMES) - 1, self.principals[-1].tokens[0], None)
        r = self.send(human, "POST", f"{BASE}/decisions", body)
        assert r.status_code == 201, r.text
        self.decisions[r.json()["id"]] = False
        self.event(human, "decision.opened", r.json()["id"])

    @precondition(lambda self: self.decisions)
    @rule(actor=ACTOR, which=WHICH, token=TOKEN, how=HEADER, pick=WHICH)
    def answer(self, actor: int, which: int, token: int, how: str, pick: int) -> None:
        ids = list(self.decisions)
        unanswered = [d for d in ids if not self.decisions[d]]
        chosen = unanswered if unanswered and which % 4 else ids
        decision = chosen[which % len(chosen)]
        call = self.call(actor, token, how, pick)
        body = {"expected_generation": 1, "disposition": "allow", "answer": "Proceed",
                "rationale": "r", "conditions_confirmed": True}  # fmt: skip
        r = self.send(call, "POST", f"{BASE}/decisions/{decision}/answer", body)
        refusal = self.gate(call) or self.session_required(call)
        if refusal is None and self.decisions[decision]:
            refusal = (409, "state_conflict", "already_answered")
        if answered_as(r, refusal):
            self.decisions[decision] = True
            self.event(call, "decision.answered", decision)

    # --- time ---------------------------------------------------------------------

    @rule(minutes=st.sampled_from([1, 4, 9, 14, 16]))
    def move_clock(self, minutes: int) -> None:
        self.clock.advance(minutes=minutes)
        self.now = self.clock.now()

    def moments(self) -> list[datetime]:
        ahead = [s.expires for s in self.sessions.values() if s.live(self.now)]
        ahead += [t.lease.expires for t in self.tasks if t.lease and t.lease.expires > self.now]
        return sorted(ahead)

    @precondition(lambda self: self.moments())
    @rule(which=WHICH, before=st.booleans())
    def move_clock_to_an_expiry(self, which: int, before: bool) -> None:
        """To exactly a session's or a lease's expiry (no longer live then), or a
        millisecond before it (still live)."""
        moments = self.moments()
        moment = moments[which % len(moments)] - timedelta(milliseconds=1 if before else 0)
        self.clock.moment = moment
        self.now = moment

    # --- what must hold after every step -------------------------------------------

    def lease_json(self, lease: Lease | None) -> dict[str, Any] | None:
        if lease is None:
            return None
        return {"owner_id": lease.owner, "session_id": lease.session,
                "expires_at": format_time(lease.expires), "workflow": False}  # fmt: skip

    @invariant()
    def events_are_the_ones_named(self) -> None:
        def read(conn: sqlite3.Connection) -> list[sqlite3.Row]:
            return conn.execute(
                "SELECT sequence, project_id, type, subject_id, actor_id, actor_session_id, data"
                " FROM events WHERE sequence > ? ORDER BY sequence",
                (self.seen,),
            ).fetchall()

        rows = self.run(self.rt.db.read(read))
        written = []
        for row in rows:
            data = json.loads(row["data"]) if row["type"].startswith("session.") else None
            written.append(
                (row["type"], row["subject_id"], row["actor_id"], row["actor_session_id"], data)
            )
            # session events belong to no project, every other one to demo
            assert row["project_id"] == (None if data is not None else "demo"), tuple(row)
        assert written == self.expected_events, (written, self.expected_events)
        if rows:
            r = self.run(
                self._send("GET", f"{BASE}/events?after={self.seen}&limit=200",
                           self.human_token, None)
            )  # fmt: skip
            items = r.json()["items"]
            listed = [(e["type"], e["subject_id"], e["actor_session_id"]) for e in items]
            want = [(e[0], e[1], e[3]) for e in self.expected_events if e[4] is None]
            assert listed == want, (listed, want)
            self.seen = rows[-1]["sequence"]
        self.expected_events = []

    @invariant()
    def tokens_and_me_agree(self) -> None:
        for actor, p in enumerate(self.principals):
            tokens = p.tokens if self.tokens_changed else [self.token(actor, -1)]
            for token in tokens:
                r = self.run(self._send("GET", "/api/v1/me", token.secret, None))
                if not token.usable:
                    assert r.status_code == 401, (token, r.text)
                    assert r.headers.get("www-authenticate", "").startswith("Bearer"), r.headers
                    continue
                assert r.status_code == 200, r.text
                me = r.json()
                assert me["principal"] == {"id": p.id, "kind": p.kind, "name": p.name}, me
                self.check_me_session(actor, me["session"], "id")
            call = self.call(actor, -1, "own", 0)
            if call.header is not None:
                # a read in the session it last started: refused once that is not live
                r = self.run(self._send("GET", "/api/v1/me", call.token.secret, call.header))
                if answered_as(r, self.gate(call)):
                    assert r.json()["session"] == self.sessions[call.header].json(), r.json()
        self.tokens_changed = False

    def check_me_session(self, actor: int, got: dict[str, Any] | None, id_field: str) -> None:
        """Without a header, `me.session` is the caller's live session that
        expires last (**Choice**), of several that expire together the one
        started last (the model's sessions are in the order they started)."""
        pid = self.principals[actor].id
        live = [s for s in self.sessions.values() if s.owner == pid and s.live(self.now)]
        if not live:
            assert got is None, got
            return
        # max keeps the first of equals: reversed, that is the one started last
        want = max(reversed(live), key=lambda s: (s.expires, s.started))
        assert got == (want.json() if id_field == "id" else want.gql()), (got, want)

    @invariant()
    def graphql_sessions_agree(self) -> None:
        for actor in range(AGENTS):
            token = self.token(actor, -1)
            if not token.usable:
                continue
            ids = list(self.sessions)
            nodes = " ".join(
                f's{i}: node(id: "{global_id("Session", sid)}") {{ ... on Session {{ '
                f"{SESSION_FIELDS} }} }}"
                for i, sid in enumerate(ids)
            )
            query = f"{{ me {{ restId kind name }} mySession {{ {SESSION_FIELDS} }} {nodes} }}"
            r = self.gql(Call(actor, token, None), query, {})
            assert r.status_code == 200 and "errors" not in r.json(), r.text
            data = r.json()["data"]
            p = self.principals[actor]
            assert data["me"] == {"restId": p.id, "kind": "AGENT", "name": p.name}, data
            self.check_me_session(actor, data["mySession"], "restId")
            for i, sid in enumerate(ids):
                s = self.sessions[sid]
                # a session is its agent's own: another's reads as null
                want = s.gql() if s.owner == p.id else None
                assert data[f"s{i}"] == want, (sid, data[f"s{i}"], want)

    @invariant()
    def leases_agree(self) -> None:
        r = self.run(self._send("GET", f"{BASE}/tasks?limit=200", self.human_token, None))
        found = {t["id"]: t for t in r.json()["items"]}
        for task in self.tasks:
            got = found[task.id]
            # a lease outlives the session it was taken in (docs/tasks.md)
            assert got["lease"] == self.lease_json(task.lease), (task, got)
            assert got["status"] == ("open" if task.lease is None else "claimed"), (task, got)
            assert got["ready"] is (task.lease is None), (task, got)


SessionMachine.TestCase.settings = machine_settings(20)
TestSessionStateMachine = SessionMachine.TestCase
