"""A stateful property test of the private lifecycle listener: random
sequences of registrations, revisions (with packet custody), comments,
sources, evaluations, publications, review requests, outcomes (on the
public listener), replays and reused keys, grant changes and search walks,
by members of two tenants in every role and by a principal with no grant,
over the lifecycle app composed over the same Runtime as the public app (as
`serve` composes them) on a real SQLite file, checked after every step
against a small independent model (lifecycle-http-contract.md,
lifecycle-model.md, docs/lifecycle.md).

The model keeps, per (tenant, memo id), the full Memo JSON of every
revision (defaults filled in), the documents stored under the memo, its
`updated_at`, and the review requests and outcomes of each version; one
event log across tenants; and every receipt handed out. A refusal is
predicted with its status and `{"error": code}` in the order the contract
gives (policy first, then the body, then the stored state). After every
step the service must agree on each tenant's listing, on every row count
(a refusal writes nothing: no memo, revision, document, event, delivery or
receipt), and on everything readable about the memos the step touched:
each revision's bytes, documents, events, review requests and outcomes.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import sqlite3
from dataclasses import dataclass, field
from typing import Any

import httpx
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from tests.conftest import Caller
from tests.lifecycle import support as lifecycle_support
from tests.stateful_support import ServiceMachine, machine_settings
from waypost.lifecycle_http import create_lifecycle_app
from waypost.lifecycle_http.verifiers import WaypostTokenVerifier
from waypost.resolvers.access import principals
from waypost.resolvers.lifecycle import store

TENANTS = ("acme", "beta")
IDS = ("adr.a", "adr.b", "adr.c")
WORDS = ("amber", "cobalt", "indigo", "ochre", "sienna", "teal")
DOCS = (b"notes one", b"notes two", b"notes three", b"notes four")
MEDIA = ("text/markdown", "text/plain")
OPTION_IDS = ("a", "b", "c")
# name, kind, tenant, role (None: no grant); "flex" is moved by a rule
MEMBERS = (
    ("ann", "human", "acme", "author"),
    ("ava", "agent", "acme", "reviewer"),
    ("rev", "human", "acme", "reviewer"),
    ("red", "human", "acme", "reader"),
    ("bea", "human", "beta", "author"),
    ("nob", "human", None, None),
    ("flex", "human", "acme", "author"),
)
ANCHOR = {"acme": "ann", "beta": "bea"}  # an author of each tenant who never moves
GRANTS = (("acme", "author"), ("acme", "reviewer"), ("acme", "reader"), ("beta", "author"), None)
ALLOWED = {
    "reader": {"read"},
    "reviewer": {"read", "comment"},
    "author": {"read", "comment", "write"},
}
TABLES = (*lifecycle_support.TABLES, "lifecycle_review_requests", "lifecycle_outcomes")
# authors more often than the others, so that most runs build memos to refuse on
WHO = st.sampled_from([0, 0, 0, 1, 2, 3, 4, 4, 5, 6, 6])
WHICH = st.integers(0, 99)
MEMO = st.sampled_from([0, 0, 0, 1, 2])  # mostly the id both tenants start with
KEY = st.sampled_from(["fresh", "fresh", "refused", "others"])
PACKET = st.lists(
    st.tuples(st.integers(0, len(DOCS) - 1), st.integers(0, len(MEDIA) - 1)),
    max_size=3,
    unique_by=lambda e: e[0],
)
_keys = itertools.count()


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def words(memo: dict[str, Any]) -> set[str]:
    text = " ".join((memo["title"], memo["question"], memo["context"]))
    return set(re.findall(r"[a-z]+", text.lower()))


@dataclass
class Member:
    name: str
    id: str
    kind: str
    token: str
    api: Caller
    tenant: str | None
    role: str | None

    def may(self, action: str, tenant: str | None = None) -> bool:
        if self.role is None or action not in ALLOWED[self.role]:
            return False
        return tenant is None or tenant == self.tenant


@dataclass
class Request:
    request_id: str
    reviewers: list[str]
    requested_by: str
    requested_at: str
    receipt: bytes
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)  # reviewer -> outcome


@dataclass
class Memo:
    tenant: str
    id: str
    revisions: list[dict[str, Any]]
    updated_at: str
    stored: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # digest -> doc
    requests: dict[int, list[Request]] = field(default_factory=dict)  # version -> requests

    @property
    def current(self) -> int:
        return len(self.revisions)


@dataclass
class Sent:
    """A mutation the service accepted: what replaying it must give back."""

    who: str
    key: str
    path: str
    raw: bytes
    answer: bytes
    tenant: str
    action: str


Refusal = tuple[int, str] | None


class LifecycleMachine(ServiceMachine):
    def __init__(self) -> None:
        super().__init__()
        self.memos: dict[tuple[str, str], Memo] = {}
        self.events: list[dict[str, Any]] = []
        self.sent: list[Sent] = []
        self.refused_keys: dict[str, list[str]] = {}
        self.touched: set[tuple[str, str]] = set()
        self.saved_plan = (store.PROBE_MEMOS, store.FEW_MATCHES)
        self.made = itertools.count()
        self.run(self._start())

    async def _start(self) -> None:
        await self.open_service()
        rt = self.app.state.runtime
        self.lc_app = create_lifecycle_app(rt, WaypostTokenVerifier(rt))
        transport = httpx.ASGITransport(app=self.lc_app)
        self.lc = httpx.AsyncClient(transport=transport, base_url="http://lifecycle.test")
        self.members: dict[str, Member] = {}
        at = self.clock.iso()
        for name, kind, tenant, role in MEMBERS:

            def make(conn: sqlite3.Connection, name: str = name, kind: str = kind) -> Any:
                made = principals.create_principal(conn, kind, name, at)
                token = principals.issue_token(conn, made["principal_id"], "lifecycle", at)
                return made, token["token"]

            made, token = await rt.db.write(make)
            api = Caller(self.client, made["principal_id"], kind, made["token"])
            if kind == "agent":
                await api.start_session()
            member = Member(name, made["principal_id"], kind, token, api, tenant, role)
            self.members[name] = member
            await self._grant(member, tenant, role)

    async def _grant(self, member: Member, tenant: str | None, role: str | None) -> None:
        at = self.clock.iso()

        def write(conn: sqlite3.Connection) -> None:
            if tenant is None or role is None:
                store.delete_grant(conn, member.id)
            else:
                store.upsert_grant(conn, member.id, tenant, role, at)

        await self.app.state.runtime.db.write(write)
        member.tenant, member.role = tenant, role

    def teardown(self) -> None:
        store.PROBE_MEMOS, store.FEW_MATCHES = self.saved_plan
        self.run(self.lc.aclose())
        super().teardown()

    # --- requests -------------------------------------------------------------------

    def member(self, who: int) -> Member:
        return self.members[MEMBERS[who][0]]

    def get(self, m: Member, path: str, **params: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {m.token}"}
        return self.run(self.lc.get(path, params=params or None, headers=headers))

    def post(self, m: Member, path: str, body: Any, key: str) -> httpx.Response:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {
            "Authorization": f"Bearer {m.token}",
            "Idempotency-Key": key,
            "Content-Type": "application/json",
        }
        return self.run(self.lc.post(path, content=raw, headers=headers))

    def key_for(self, m: Member, source: str) -> str:
        """A new key, one of the caller's refused ones (a refusal keeps no
        receipt, so its key is free again: docs/lifecycle.md), or one another
        caller used (a receipt is the caller's own: service contract 10)."""
        spare = self.refused_keys.get(m.name)
        if source == "refused" and spare:
            return spare.pop()
        mine = {sent.key for sent in self.sent if sent.who == m.name}
        others = [sent.key for sent in self.sent if sent.key not in mine]
        if source == "others" and others:
            return others[-1]
        return f"key-{next(_keys)}"

    def mutate(
        self, m: Member, path: str, body: Any, refusal: Refusal, action: str, fresh: str
    ) -> httpx.Response | None:
        """Send a mutation and check the predicted answer; the response when accepted."""
        key = self.key_for(m, fresh)
        raw = json.dumps(body).encode()
        r = self.post(m, path, raw, key)
        assert r.headers["cache-control"] == "no-store", r.headers
        if refusal is not None:
            assert (r.status_code, r.json()) == (refusal[0], {"error": refusal[1]}), (
                refusal,
                r.status_code,
                r.text,
                body,
            )
            spare = self.refused_keys.setdefault(m.name, [])
            if key not in spare:
                spare.append(key)
            return None
        assert r.status_code == 200, (r.text, body)
        assert "idempotent-replayed" not in r.headers
        self.refused_keys[m.name] = [k for k in self.refused_keys.get(m.name, []) if k != key]
        assert m.tenant is not None
        self.sent.append(Sent(m.name, key, path, raw, r.content, m.tenant, action))
        return r

    def event(self, memo: Memo, version: int, type_: str, actor: Member, data: Any) -> int:
        sequence = len(self.events) + 1
        self.events.append(
            {
                "sequence": sequence,
                "memo_id": memo.id,
                "version": version,
                "type": type_,
                "actor": actor.id,
                "at": self.clock.iso(),
                "data": data,
                "tenant": memo.tenant,
            }
        )
        return sequence

    def memo_of(self, m: Member, which: int) -> tuple[str, Memo | None]:
        """A memo id, and the memo of that id in the caller's tenant (None: none there)."""
        memo_id = IDS[which % len(IDS)]
        if m.tenant is None:
            return memo_id, None
        return memo_id, self.memos.get((m.tenant, memo_id))

    def touch(self, memo: Memo | None) -> None:
        if memo is not None:
            self.touched.add((memo.tenant, memo.id))

    def collaborate(
        self,
        m: Member,
        memo_id: str,
        memo: Memo | None,
        kind: str,
        body: dict[str, Any],
        refusal: Refusal,
        action: str,
        event_type: str,
        data: Any,
        fresh: str,
    ) -> None:
        """A comment, source, evaluation or publication on `body["version"]`:
        the predicted refusal, or its event and the answer naming it."""
        self.touch(memo)
        r = self.mutate(m, f"/v1/decisions/{memo_id}/{kind}", body, refusal, action, fresh)
        if r is not None and memo is not None:
            version = body["version"]
            seq = self.event(memo, version, event_type, m, data)
            assert r.json() == {"event_id": seq, "memo_id": memo_id, "version": version}

    # --- plans of the search ----------------------------------------------------------

    @initialize(plan=st.sampled_from(["probe", "matches", "walk"]))
    def search_plan(self, plan: str) -> None:
        """The three ways `store.search` goes (docs/lifecycle.md), each with a
        tenant of a few memos: its limits moved so that each way is taken."""
        store.PROBE_MEMOS, store.FEW_MATCHES = {
            "probe": (50, 1000),
            "matches": (0, 1000),
            "walk": (0, 0),
        }[plan]

    @initialize(packet=PACKET, title=st.integers(0, len(WORDS) - 1))
    def seed(self, packet: list[tuple[int, int]], title: int) -> None:
        """Both tenants start with a memo of one id: memo ids are per tenant."""
        for who in (0, 4):
            self.register(who, 0, title, title, 2, packet, True, False, "fresh")
        # and a review request each, so that outcomes have something to answer
        self.request_review(0, 0, 0, [2, 6], None, "fresh")
        self.request_review(4, 0, 0, [4], "please", "fresh")

    # --- building memos --------------------------------------------------------------------

    @staticmethod
    def build(
        memo_id: str,
        version: int,
        title: int,
        question: int,
        options: int,
        packet: list[tuple[int, int]],
        highlight: bool,
    ) -> dict[str, Any]:
        """The full Memo JSON (every default filled in), as GET must answer it."""
        entries = [
            {"id": f"p{d}", "digest": digest(DOCS[d]), "media_type": MEDIA[mt], "title": f"d{d}"}
            for d, mt in packet
        ]
        return {
            "id": memo_id,
            "version": version,
            "title": f"{WORDS[title]} plan",
            "question": f"Should we adopt {WORDS[question]}?",
            "context": f"{WORDS[(title + question) % len(WORDS)]} context" if version % 2 else "",
            "options": [
                {"id": o, "title": f"option {o}", "summary": "s"} for o in OPTION_IDS[:options]
            ],
            "recommendation": {"option_id": "a", "rationale": "r"} if version % 2 else None,
            "packet": entries,
            "highlights": (
                [{"id": "h1", "packet_id": entries[0]["id"], "locator": "L1", "text": "t"}]
                if highlight and entries
                else []
            ),
            "proposed_binding_principal": "team" if version % 2 else None,
            "tags": ["x"] if version % 2 else [],
        }

    @staticmethod
    def sendable(memo: dict[str, Any], omit: bool) -> dict[str, Any]:
        """The memo as sent: with `omit`, each field at its default left out."""
        defaults: dict[str, Any] = {
            "context": "",
            "recommendation": None,
            "packet": [],
            "highlights": [],
            "proposed_binding_principal": None,
            "tags": [],
        }
        if not omit:
            return memo
        return {k: v for k, v in memo.items() if k not in defaults or defaults[k] != v}

    # --- register and revise ------------------------------------------------------------

    @rule(
        who=WHO,
        which=MEMO,
        title=st.integers(0, len(WORDS) - 1),
        question=st.integers(0, len(WORDS) - 1),
        options=st.integers(2, 3),
        packet=PACKET,
        highlight=st.booleans(),
        omit=st.booleans(),
        fresh=KEY,
    )
    def register(
        self,
        who: int,
        which: int,
        title: int,
        question: int,
        options: int,
        packet: list[tuple[int, int]],
        highlight: bool,
        omit: bool,
        fresh: str,
    ) -> None:
        m = self.member(who)
        memo_id, existing = self.memo_of(m, which)
        full = self.build(memo_id, 1, title, question, options, packet, highlight)
        docs = [
            {
                "digest": e["digest"],
                "media_type": e["media_type"],
                "content_base64": base64.b64encode(DOCS[d]).decode(),
            }
            for e, (d, _) in zip(full["packet"], packet, strict=True)
        ]
        body = {"memo": self.sendable(full, omit), "documents": docs}
        refusal: Refusal = None
        if not m.may("write"):
            refusal = (403, "policy_denied")
        elif existing is not None:
            refusal = (409, "memo_exists")
        self.touch(existing)
        r = self.mutate(m, "/v1/decisions", body, refusal, "write", fresh)
        if r is None:
            return
        assert m.tenant is not None
        memo = Memo(m.tenant, memo_id, [full], self.clock.iso())
        memo.stored = {
            e["digest"]: (e["media_type"], DOCS[d])
            for e, (d, _) in zip(full["packet"], packet, strict=True)
        }
        self.memos[(m.tenant, memo_id)] = memo
        stored = [e["digest"] for e in full["packet"]]
        seq = self.event(
            memo, 1, "memo.registered", m, {"title": full["title"], "documents": stored}
        )
        self.touch(memo)
        assert r.json() == {
            "event_id": seq,
            "memo_id": memo_id,
            "version": 1,
            "resource": f"/v1/decisions/{memo_id}?version=1",
            "workspace_url": f"https://decisions.coulomb.social/decisions/{memo_id}?version=1",
        }

    @rule(
        who=WHO,
        which=MEMO,
        stale=st.sampled_from([0, 0, 0, -1, 1]),
        # most revisions are meant to go through, so that later steps meet
        # memos past version 1 (old versions to refuse, to comment on)
        wrong_version=st.sampled_from([False, False, False, True]),
        title=st.integers(0, len(WORDS) - 1),
        question=st.integers(0, len(WORDS) - 1),
        options=st.integers(2, 3),
        packet=PACKET,
        supply=st.lists(st.sampled_from([True, True, True, False]), min_size=3, max_size=3),
        omit=st.booleans(),
        fresh=KEY,
    )
    def revise(
        self,
        who: int,
        which: int,
        stale: int,
        wrong_version: bool,
        title: int,
        question: int,
        options: int,
        packet: list[tuple[int, int]],
        supply: list[bool],
        omit: bool,
        fresh: str,
    ) -> None:
        m = self.member(who)
        memo_id, memo = self.memo_of(m, which)
        current = memo.current if memo is not None else 1
        expected = max(1, current + stale)
        version = expected + (2 if wrong_version else 1)
        full = self.build(memo_id, version, title, question, options, packet, False)
        pairs = list(zip(full["packet"], packet, strict=True))
        docs = [
            {
                "digest": e["digest"],
                "media_type": e["media_type"],
                "content_base64": base64.b64encode(DOCS[d]).decode(),
            }
            for (e, (d, _)), give in zip(pairs, supply, strict=False)
            if give
        ]
        given = {d["digest"] for d in docs}
        body = {
            "memo": self.sendable(full, omit),
            "expected_version": expected,
            "summary": f"revised by {m.name}",
            "documents": docs,
        }
        path = f"/v1/decisions/{memo_id}/revisions"
        refusal: Refusal = None
        if memo is None or not m.may("write"):
            refusal = (403, "policy_denied")
        elif wrong_version:
            refusal = (400, "invalid_request")
        elif expected != memo.current:
            refusal = (409, "version_conflict")
        else:
            retained = {e["digest"] for e in memo.revisions[-1]["packet"]}
            if any(e["digest"] not in given | retained for e in full["packet"]):
                refusal = (400, "document_missing")
            elif any(
                e["digest"] in memo.stored and memo.stored[e["digest"]][0] != e["media_type"]
                for e in full["packet"]
            ):
                refusal = (409, "media_type_conflict")
        self.touch(memo)
        r = self.mutate(m, path, body, refusal, "write", fresh)
        if r is None:
            return
        assert memo is not None
        stored = []
        for e, (d, _) in pairs:
            if e["digest"] not in memo.stored:
                memo.stored[e["digest"]] = (e["media_type"], DOCS[d])
                stored.append(e["digest"])
        memo.revisions.append(full)
        memo.updated_at = max(memo.updated_at, self.clock.iso())
        data = {"summary": body["summary"], "documents": stored}
        seq = self.event(memo, version, "memo.revised", m, data)
        assert r.json() == {
            "event_id": seq,
            "memo_id": memo_id,
            "version": version,
            "resource": f"/v1/decisions/{memo_id}?version={version}",
            "workspace_url": f"https://decisions.coulomb.social/decisions/{memo_id}?version={version}",
        }

    # --- collaboration on a version ---------------------------------------------------------

    def on_version(
        self,
        m: Member,
        memo: Memo | None,
        version: int,
        action: str,
        refusal: Refusal = None,
    ) -> Refusal:
        """The refusal of a command on `version` of `memo`: policy, then what
        the body alone shows (`refusal`), then a version that is not there."""
        if memo is None or not m.may(action):
            return (403, "policy_denied")
        if refusal is not None:
            return refusal
        if version > memo.current:
            return (404, "not_found")
        return None

    @rule(who=WHO, which=MEMO, ahead=st.sampled_from([0, 0, 1]), fresh=KEY)
    def comment(self, who: int, which: int, ahead: int, fresh: str) -> None:
        m = self.member(who)
        memo_id, memo = self.memo_of(m, which)
        version = (memo.current if memo else 1) + ahead
        text = f"comment {next(self.made)}"
        body = {"version": version, "body": {"text": text, "locator": "L2"}}
        refusal = self.on_version(m, memo, version, "comment")
        data = {"text": text, "locator": "L2"}
        self.collaborate(
            m, memo_id, memo, "comments", body, refusal, "comment", "comment.added", data, fresh
        )

    @rule(
        who=WHO,
        which=MEMO,
        back=st.integers(0, 2),
        doc=st.one_of(st.none(), st.integers(0, len(DOCS) - 1)),
        fresh=KEY,
    )
    def add_source(self, who: int, which: int, back: int, doc: int | None, fresh: str) -> None:
        m = self.member(who)
        memo_id, memo = self.memo_of(m, which)
        version = max(1, (memo.current if memo else 1) - back)
        source = {"title": "a source", "uri": "https://example.org/x", "note": None}
        source["digest"] = None if doc is None else digest(DOCS[doc])
        body = {"version": version, "source": source}
        refusal = self.on_version(m, memo, version, "write")
        if refusal is None and memo is not None and doc is not None:
            packet = {e["digest"] for e in memo.revisions[version - 1]["packet"]}
            if source["digest"] not in packet:
                refusal = (400, "invalid_request")
        self.collaborate(
            m, memo_id, memo, "sources", body, refusal, "write", "source.added", source, fresh
        )

    @rule(
        who=WHO,
        which=MEMO,
        back=st.integers(0, 2),
        option=st.sampled_from(OPTION_IDS),
        score=st.integers(-2, 2),
        fresh=KEY,
    )
    def add_evaluation(
        self, who: int, which: int, back: int, option: str, score: int, fresh: str
    ) -> None:
        m = self.member(who)
        memo_id, memo = self.memo_of(m, which)
        version = max(1, (memo.current if memo else 1) - back)
        evaluation = {"option_id": option, "criterion": "cost", "score": score, "rationale": "r"}
        body = {"version": version, "evaluation": evaluation}
        refusal = self.on_version(m, memo, version, "write")
        options = {o["id"] for o in memo.revisions[version - 1]["options"]} if memo else set()
        if refusal is None and option not in options:
            refusal = (400, "invalid_request")
        self.collaborate(
            m,
            memo_id,
            memo,
            "evaluations",
            body,
            refusal,
            "write",
            "evaluation.added",
            evaluation,
            fresh,
        )

    @rule(
        who=WHO,
        which=MEMO,
        ahead=st.sampled_from([0, 0, 1]),
        subjects=st.lists(st.sampled_from(["s1", "s2"]), max_size=2),
        groups=st.lists(st.sampled_from(["g1", "g2"]), max_size=2),
        fresh=KEY,
    )
    def publish(
        self,
        who: int,
        which: int,
        ahead: int,
        subjects: list[str],
        groups: list[str],
        fresh: str,
    ) -> None:
        m = self.member(who)
        memo_id, memo = self.memo_of(m, which)
        version = (memo.current if memo else 1) + ahead
        audience = {"subjects": subjects, "groups": groups}
        body = {"version": version, "audience": audience}
        empty = (400, "invalid_request") if not subjects and not groups else None
        refusal = self.on_version(m, memo, version, "write", empty)
        data = {"audience": audience}
        self.collaborate(
            m,
            memo_id,
            memo,
            "publications",
            body,
            refusal,
            "write",
            "publication.recorded",
            data,
            fresh,
        )

    # --- review handoff ----------------------------------------------------------------------

    @rule(
        who=WHO,
        which=MEMO,
        offset=st.sampled_from([0, 0, 0, -1, 1]),
        reviewers=st.lists(WHO, min_size=1, max_size=3),
        note=st.one_of(st.none(), st.just("please")),
        fresh=KEY,
    )
    def request_review(
        self,
        who: int,
        which: int,
        offset: int,
        reviewers: list[int],
        note: str | None,
        fresh: str,
    ) -> None:
        m = self.member(who)
        memo_id, memo = self.memo_of(m, which)
        version = max(1, (memo.current if memo else 1) + offset)
        named = [self.member(i) for i in reviewers]
        ids = [n.id for n in named]
        options = {"profile": "standard", "reviewers": ids, "due_at": None, "note": note}
        body = {"version": version, "options": options}
        refusal: Refusal = None
        if memo is None or not m.may("write"):
            refusal = (403, "policy_denied")
        elif len(set(ids)) != len(ids):
            refusal = (400, "invalid_reviewer")
        elif version != memo.current:
            refusal = (409, "version_conflict")
        elif not all(n.tenant == memo.tenant and n.role in ("reviewer", "author") for n in named):
            refusal = (400, "invalid_reviewer")
        self.touch(memo)
        path = f"/v1/decisions/{memo_id}/review-requests"
        r = self.mutate(m, path, body, refusal, "write", fresh)
        if r is None or memo is None:
            return
        receipt = r.json()
        request_id = receipt["request_id"]
        assert re.fullmatch(r"rr_[0-9a-f]{32}", request_id), request_id
        revision = memo.revisions[version - 1]
        seq = self.event(
            memo, version, "review.requested", m, {"request_id": request_id, "reviewers": ids}
        )
        assert receipt == {
            "event_id": seq,
            "memo_id": memo_id,
            "version": version,
            "request_id": request_id,
            "envelope": {
                "request_id": request_id,
                "memo_id": memo_id,
                "version": version,
                "profile": "standard",
                "reviewers": ids,
                "due_at": None,
                "note": note,
                "memo_sha256": hashlib.sha256(canonical(revision).encode()).hexdigest(),
                "packet": [
                    {"id": p["id"], "digest": p["digest"], "media_type": p["media_type"]}
                    for p in revision["packet"]
                ],
                "requested_by": m.id,
                "requested_at": self.clock.iso(),
                "tenant": memo.tenant,
            },
        }
        request = Request(request_id, ids, m.id, self.clock.iso(), r.content)
        memo.requests.setdefault(version, []).append(request)

    def all_requests(self) -> list[tuple[Memo, int, Request]]:
        return [
            (memo, version, request)
            for memo in self.memos.values()
            for version, requests in memo.requests.items()
            for request in requests
        ]

    @precondition(lambda self: self.all_requests())
    @rule(
        who=WHO,
        which=MEMO,
        disposition=st.sampled_from(["accepted", "rejected", "changes_requested"]),
    )
    def record_outcome(self, who: int, which: int, disposition: str) -> None:
        """On the public listener, with the member's `api` token (docs/lifecycle.md)."""
        m = self.member(who)
        memo, version, request = self.all_requests()[which % len(self.all_requests())]
        named = m.id in request.reviewers
        body = {"disposition": disposition, "rationale": f"because {next(self.made)}"}
        if m.kind == "agent":  # a session of its own, whatever the clock did meanwhile
            self.run(m.api.start_session())
        r = self.run(m.api.post(f"/api/v1/reviews/{request.request_id}/outcome", body))
        self.touch(memo)
        expected: tuple[int, str, str | None] | None = None
        if not named and m.tenant != memo.tenant:
            expected = (404, "not_found", None)
        elif m.kind != "human":
            expected = (403, "forbidden", "human_reviewer_required")
        elif not named:
            expected = (403, "forbidden", "not_a_reviewer")
        elif m.id in request.outcomes:
            expected = (409, "state_conflict", "outcome_recorded")
        if expected is not None:
            error = r.json().get("error", {})
            got = (r.status_code, error.get("code"), error.get("details", {}).get("reason"))
            assert got == expected, (got, expected, r.text)
            return
        assert r.status_code == 201, r.text
        outcome = {
            "request_id": request.request_id,
            "reviewer": m.id,
            "disposition": disposition,
            "rationale": body["rationale"],
            "at": self.clock.iso(),
        }
        request.outcomes[m.id] = outcome
        seq = self.event(memo, version, "outcome.recorded", m, outcome)
        assert r.json() == {**outcome, "event_id": seq, "memo_id": memo.id, "version": version}

    # --- idempotency --------------------------------------------------------------------------

    @precondition(lambda self: self.sent)
    @rule(which=WHICH)
    def replay(self, which: int) -> None:
        """The same caller, key and request: the first answer's bytes, reauthorized."""
        sent = self.sent[which % len(self.sent)]
        m = self.members[sent.who]
        r = self.post(m, sent.path, sent.raw, sent.key)
        if m.tenant == sent.tenant and m.may(sent.action):
            assert r.status_code == 200, r.text
            assert r.content == sent.answer
            assert r.headers["idempotent-replayed"] == "true"
        else:
            assert (r.status_code, r.json()) == (403, {"error": "policy_denied"}), r.text

    @precondition(lambda self: self.sent)
    @rule(which=WHICH, memo=WHICH)
    def reuse_key(self, which: int, memo: int) -> None:
        """A used key with another request: 409 once the policy allows it."""
        sent = self.sent[which % len(self.sent)]
        m = self.members[sent.who]
        memo_id, target = self.memo_of(m, memo)
        body = {"version": 1, "body": {"text": f"reuse {next(self.made)}"}}
        r = self.post(m, f"/v1/decisions/{memo_id}/comments", body, sent.key)
        if target is not None and m.may("comment"):
            expected = (409, {"error": "idempotency_key_reused"})
        else:
            expected = (403, {"error": "policy_denied"})
        assert (r.status_code, r.json()) == expected, r.text
        self.touch(target)

    # --- who may: grants move, time passes -----------------------------------------------

    @rule(grant=st.sampled_from(GRANTS))
    def regrant_flex(self, grant: tuple[str, str] | None) -> None:
        tenant, role = grant if grant is not None else (None, None)
        self.run(self._grant(self.members["flex"], tenant, role))

    @rule(ms=st.sampled_from([0, 1, 1000, -1000]))
    def tick(self, ms: int) -> None:
        """The clock may step back; a revision written then leaves `updated_at`
        as it was (docs/lifecycle.md), which the listings check when one
        follows: seldom in these runs (review64), so test_collaboration.py
        pins it too."""
        self.clock.advance(milliseconds=ms)

    @rule()
    def revoke_flex_token(self) -> None:
        """A revoked lifecycle token is 401 at once, whatever its grant."""
        flex = self.members["flex"]
        rt = self.app.state.runtime
        at = self.clock.iso()

        def rotate(conn: sqlite3.Connection) -> str:
            row = conn.execute(
                "SELECT id FROM tokens WHERE principal_id = ? AND audience = 'lifecycle'"
                " AND revoked_at IS NULL",
                (flex.id,),
            ).fetchone()
            principals.revoke_token(conn, row[0], at)
            token: str = principals.issue_token(conn, flex.id, "lifecycle", at)["token"]
            return token

        old, flex.token = flex.token, self.run(rt.db.write(rotate))
        stale = Member(**{**flex.__dict__, "token": old})
        for r in (
            self.get(stale, "/v1/decisions"),
            self.post(stale, "/v1/decisions/adr.a/comments", {"version": 1}, "k"),
        ):
            assert (r.status_code, r.json()) == (401, {"error": "unauthenticated"}), r.text

    # --- search ------------------------------------------------------------------------------

    def listing(self, tenant: str, q: str | None) -> list[dict[str, Any]]:
        memos = [
            memo
            for memo in self.memos.values()
            if memo.tenant == tenant and (q is None or q in words(memo.revisions[-1]))
        ]
        memos.sort(key=lambda memo: memo.id)
        memos.sort(key=lambda memo: memo.updated_at, reverse=True)
        return [
            {
                "id": memo.id,
                "version": memo.current,
                "title": memo.revisions[-1]["title"],
                "question": memo.revisions[-1]["question"],
                "updated_at": memo.updated_at,
            }
            for memo in memos
        ]

    def walk(self, m: Member, q: str | None, limit: int) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor = None
        for _ in range(20):
            params: dict[str, Any] = {"limit": limit}
            if q is not None:
                params["q"] = q
            if cursor is not None:
                params["cursor"] = cursor
            r = self.get(m, "/v1/decisions", **params)
            assert r.status_code == 200, r.text
            page = r.json()
            assert len(page["items"]) <= limit
            items += page["items"]
            cursor = page["next_cursor"]
            if cursor is None:
                return items
        raise AssertionError("the walk did not end")

    @rule(
        who=WHO,
        q=st.one_of(st.none(), st.sampled_from([*WORDS, "plan", "zzz"])),
        limit=st.integers(1, 3),
    )
    def search(self, who: int, q: str | None, limit: int) -> None:
        m = self.member(who)
        if m.tenant is None or not m.may("read"):
            r = self.get(m, "/v1/decisions", limit=limit)
            assert (r.status_code, r.json()) == (403, {"error": "policy_denied"}), r.text
            return
        assert self.walk(m, q, limit) == self.listing(m.tenant, q)

    @rule(
        who=WHO,
        other=WHO,
        misuse=st.sampled_from(["caller", "query", "expired", "altered"]),
    )
    def misuse_cursor(self, who: int, other: int, misuse: str) -> None:
        """A cursor is bound to its caller, tenant and query, for five minutes."""
        m = self.member(who)
        if m.tenant is None or len(self.listing(m.tenant, None)) < 2:
            return
        page = self.get(m, "/v1/decisions", limit=1).json()
        cursor = page["next_cursor"]
        assert cursor is not None, page
        user, params = m, {"limit": 1, "cursor": cursor}
        if misuse == "caller":
            user = self.member(other)
        elif misuse == "query":
            params["q"] = "plan"
        elif misuse == "expired":
            self.clock.advance(minutes=5)
        else:
            params["cursor"] = cursor[:-2] + ("AA" if cursor[-2:] != "AA" else "BB")
        r = self.get(user, "/v1/decisions", **params)
        if user.tenant is None or not user.may("read"):
            assert (r.status_code, r.json()) == (403, {"error": "policy_denied"}), r.text
        elif user is m and misuse == "caller":  # its own cursor: the next page
            assert r.status_code == 200, r.text
            assert r.json()["items"] == self.listing(m.tenant, None)[1:2]
        else:
            assert (r.status_code, r.json()) == (400, {"error": "invalid_cursor"}), (misuse, r.text)

    # --- what must hold after every step -------------------------------------------------------

    @invariant()
    def rows_agree(self) -> None:
        """Nothing more is stored than the accepted commands wrote."""
        expected = {
            "lifecycle_memos": len(self.memos),
            "lifecycle_revisions": sum(memo.current for memo in self.memos.values()),
            "lifecycle_documents": sum(len(memo.stored) for memo in self.memos.values()),
            "lifecycle_events": len(self.events),
            "lifecycle_deliveries": len(self.events),
            "lifecycle_receipts": len(self.sent),
            "lifecycle_review_requests": len(self.all_requests()),
            "lifecycle_outcomes": sum(len(r.outcomes) for _, _, r in self.all_requests()),
        }

        def count(conn: sqlite3.Connection) -> dict[str, int]:
            return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}

        assert self.run(self.app.state.runtime.db.read(count)) == expected

    @invariant()
    def listings_agree(self) -> None:
        for tenant, name in ANCHOR.items():
            r = self.get(self.members[name], "/v1/decisions", limit=100)
            assert r.status_code == 200, r.text
            assert r.json() == {"items": self.listing(tenant, None), "next_cursor": None}

    @invariant()
    def touched_memos_agree(self) -> None:
        for tenant, memo_id in sorted(self.touched):
            self.check_memo(self.memos[(tenant, memo_id)])
        self.touched.clear()

    def check_memo(self, memo: Memo) -> None:
        reader = self.members[ANCHOR[memo.tenant]]
        path = f"/v1/decisions/{memo.id}"
        r = self.get(reader, path)
        assert r.status_code == 200, r.text
        assert r.content == canonical(memo.revisions[-1]).encode()
        for version, revision in enumerate(memo.revisions, start=1):
            r = self.get(reader, path, version=version)
            assert r.content == canonical(revision).encode(), (version, r.text)
            requests = memo.requests.get(version, [])
            r = self.get(reader, f"{path}/review-requests", version=version)
            assert r.content == b'{"items":[' + b",".join(q.receipt for q in requests) + b"]}"
            outcomes = sorted(
                (o for q in requests for o in q.outcomes.values()),
                key=lambda o: (o["at"], o["request_id"], o["reviewer"]),
            )
            state = "decided" if outcomes else "requested" if requests else "not_requested"
            r = self.get(reader, f"{path}/outcomes", version=version)
            assert r.json() == {
                "memo_id": memo.id,
                "version": version,
                "submission_state": state,
                "requests": [
                    {
                        "request_id": q.request_id,
                        "reviewers": q.reviewers,
                        "requested_by": q.requested_by,
                        "requested_at": q.requested_at,
                    }
                    for q in requests
                ],
                "outcomes": outcomes,
            }, version
        missing = self.get(reader, path, version=memo.current + 1)
        assert (missing.status_code, missing.json()) == (404, {"error": "not_found"})
        for version in sorted({1, memo.current}):
            revision = memo.revisions[version - 1]
            named = {entry["digest"] for entry in revision["packet"]}
            for doc in DOCS:
                r = self.get(reader, f"{path}/documents/{digest(doc)}", version=version)
                if digest(doc) not in named:  # stored or not: not this revision's
                    assert (r.status_code, r.json()) == (404, {"error": "not_found"})
                    continue
                media_type, content = memo.stored[digest(doc)]
                assert (r.status_code, r.content) == (200, content), r.text
                assert r.headers["content-type"] == media_type
        # no one outside the tenant learns whether the memo exists
        for name in ("nob", *ANCHOR.values()):
            outsider = self.members[name]
            if outsider.tenant == memo.tenant:
                continue
            if outsider.tenant is not None and (outsider.tenant, memo.id) in self.memos:
                continue
            r = self.get(outsider, path)
            assert (r.status_code, r.json()) == (403, {"error": "policy_denied"}), name
        events = [
            {k: v for k, v in e.items() if k != "tenant"}
            for e in self.events
            if (e["tenant"], e["memo_id"]) == (memo.tenant, memo.id)
        ]
        r = self.get(reader, f"{path}/events")
        assert r.json() == {"events": events}
        if len(events) <= 2:
            return
        paged: list[dict[str, Any]] = []
        after = 0
        while True:
            page = self.get(reader, f"{path}/events", after=after, limit=2).json()["events"]
            if not page:
                break
            paged += page
            after = page[-1]["sequence"]
        assert paged == events


LifecycleMachine.TestCase.settings = machine_settings(25)
TestLifecycleStateMachine = LifecycleMachine.TestCase
