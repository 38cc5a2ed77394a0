"""A stateful property test of knowledge records: random sequences of
creates (every kind, status, scope dimension, tag and provenance, project-only
and shared, in three projects, by a human, an agent in a session and an agent
without one), corrections (each a new immutable revision, status changes and
supersession chains, through the source project and through others), usefulness
feedback (through other projects too, on shared records), refusals of each of
these, list walks with every filter and the context packet's scope filters,
over REST against a real SQLite file, checked after every step against a small
independent model (docs/knowledge.md, docs/context.md, docs/api.md "Events",
service contract section 6, knowledge-and-decision contract).

The model keeps each record's revisions as the content the caller sent plus
the attribution the service must fill (caller, session, clock), and the
feedback bound to each revision. After every step the service must agree on
every record's current object (through each project's lists, with and without
`include_shared`, in the documented order), on the history of the records the
step touched, on the bytes of every earlier revision row (never rewritten), and
on the events the step wrote: exactly the one docs/api.md names, with its data,
for an accepted write; none for a refusal.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from typing import Any

import httpx
from hypothesis import strategies as st
from hypothesis.stateful import (
    initialize,
    invariant,
    precondition,
    rule,
)

from tests.conftest import Caller
from tests.knowledge_support import kpath
from tests.stateful_support import ServiceMachine, machine_settings

PROJECTS = ("kp0", "kp1", "kp2")
TASKS_PER_PROJECT = 2
MAX_RECORDS = 14
KINDS = ("lesson", "fact", "rejected_approach", "checkpoint")
NEW_STATUSES = ("observed", "validated", "deprecated")
STATUSES = (*NEW_STATUSES, "superseded")
WORDS = ("amber", "birch", "cedar", "delta")  # the words of titles, bodies, applicability
TAGS = ("red", "green", "blue")  # tags are words of the search index too
SCOPE_VALUES = {
    "components": ("api", "db"),
    "environments": ("prod", "staging"),
    "versions": ("v1", "v2"),
}
WHICH = st.integers(0, 99)
ACTOR = st.integers(0, 2)  # a human, an agent in a session, an agent without one
CREATE_FAULTS = (
    "superseded", "shared_without_opt_in", "opt_in_without_shared", "foreign_scope_task",
    "foreign_source_task", "duplicate_tag", "kind",
)  # fmt: skip
# no fault more often than any one fault
CORRECT_FAULTS = (
    None, None, None, None, "stale", "via_other", "no_replacement", "stray_replacement",
    "identity",
)  # fmt: skip
Expected = tuple[int, str, str | None]  # status code, error code, details.field or reason


def subset(values: tuple[str, ...]) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(values), max_size=len(values), unique=True)


SCOPES = st.fixed_dictionaries({k: subset(v) for k, v in SCOPE_VALUES.items()})
CONTENT = st.fixed_dictionaries(
    {
        "title": st.lists(st.sampled_from(WORDS), min_size=1, max_size=2),
        "body": st.lists(st.sampled_from(WORDS), max_size=2),
        "tags": subset(TAGS),
        "scope": SCOPES,
        "tasks": st.lists(st.integers(0, TASKS_PER_PROJECT - 1), max_size=2, unique=True),
        "applicability": st.sampled_from(["", *WORDS]),
        "summary": st.sampled_from(["", "seen in ci"]),
        "source_uri": st.sampled_from([None, "https://ci.example/run/1"]),
        "source_task": st.one_of(st.none(), st.integers(0, TASKS_PER_PROJECT - 1)),
    }
)


@dataclass
class Record:
    id: str
    project: str
    kind: str
    shared: bool
    created_at: str
    updated_at: str
    revisions: list[dict[str, Any]] = field(default_factory=list)  # content of each
    feedback: list[list[int]] = field(default_factory=list)  # [useful, not_useful] each

    @property
    def current(self) -> dict[str, Any]:
        return self.revisions[-1]

    def flat(self) -> dict[str, Any]:
        """The flat object of the contract's section 6."""
        c = self.current
        return {
            "id": self.id,
            "project_id": self.project,
            "kind": self.kind,
            **{k: v for k, v in c.items() if k != "superseded_by_id"},
            "collection": "shared" if self.shared else "project",
            "share_across_projects": self.shared,
            "superseded_by_id": c["superseded_by_id"],
            "revision": len(self.revisions),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    def history(self) -> list[dict[str, Any]]:
        """Every revision, newest first, with the feedback bound to it."""
        return [
            {
                "knowledge_id": self.id,
                "revision": n + 1,
                **self.revisions[n],
                "feedback": {"useful": self.feedback[n][0], "not_useful": self.feedback[n][1]},
            }
            for n in reversed(range(len(self.revisions)))
        ]

    def words(self) -> set[str]:
        c = self.current
        text = " ".join([c["title"], c["body"], c["applicability"], *c["tags"]])
        return set(re.findall(r"[a-z0-9]+", text.lower()))


class KnowledgeMachine(ServiceMachine):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[Record] = []  # in creation order
        self.expected_events: dict[str, list[dict[str, Any]]] = {p: [] for p in PROJECTS}
        self.touched: set[str] = set()
        self.rows: dict[tuple[str, int], tuple[Any, ...]] = {}
        self.run(self._start())

    async def _start(self) -> None:
        await self.open_service()
        self.actors = [
            await self.new_caller(kind, name)
            for kind, name in (("human", "hana"), ("agent", "ada"), ("agent", "bob"))
        ]
        await self.actors[1].start_session()  # ada writes in a session, bob without one
        human = self.actors[0]
        self.tasks: dict[str, list[str]] = {}
        self.seen: dict[str, int] = {}
        for project in PROJECTS:
            r = await human.post("/api/v1/projects", {"id": project, "name": project})
            assert r.status_code == 201, r.text
            self.tasks[project] = []
            for i in range(TASKS_PER_PROJECT):
                r = await human.post(f"/api/v1/projects/{project}/tasks", {"title": f"job {i}"})
                assert r.status_code == 201, r.text
                self.tasks[project].append(r.json()["id"])
            events = await human.get(f"/api/v1/projects/{project}/events", limit=200)
            self.seen[project] = events.json()["next_after"]

    # --- helpers ----------------------------------------------------------------

    def pick(self, which: int) -> Record:
        return self.records[which % len(self.records)]

    def content(self, project: str, drawn: dict[str, Any]) -> dict[str, Any]:
        """The content fields a request sends, from a drawn CONTENT value."""
        tasks = self.tasks[project]
        source = drawn["source_task"]
        return {
            "title": "note " + " ".join(drawn["title"]),
            "body": " ".join(drawn["body"]),
            "status": "observed",
            "scope": {"task_ids": [tasks[i] for i in drawn["tasks"]], **drawn["scope"]},
            "tags": drawn["tags"],
            "applicability": drawn["applicability"],
            "provenance": {
                "summary": drawn["summary"],
                "source_uri": drawn["source_uri"],
                "source_task_id": None if source is None else tasks[source],
                "source_submission_id": None,
            },
        }

    def attributed(self, sent: dict[str, Any], caller: Caller) -> dict[str, Any]:
        """What a revision stores: the content sent plus the server's attribution."""
        return {
            **sent,
            "provenance": {
                **sent["provenance"],
                "actor_id": caller.principal_id,
                "actor_session_id": caller.session_id,
                "recorded_at": self.clock.iso(),
            },
            "superseded_by_id": sent.get("superseded_by_id"),
        }

    def event(self, project: str, type_: str, caller: Caller, subject: str, data: Any) -> None:
        self.expected_events[project].append(
            {
                "project_id": project,
                "type": type_,
                "subject_type": "knowledge",
                "subject_id": subject,
                "actor_id": caller.principal_id,
                "actor_session_id": caller.session_id,
                "at": self.clock.iso(),
                "data": data,
            }
        )

    def expect(self, r: httpx.Response, refusal: Expected | None, ok: int) -> bool:
        """Assert the refusal the model predicts, or success."""
        if refusal is None:
            assert r.status_code == ok, r.text
            return True
        error = r.json()["error"]
        details = error.get("details", {})
        got = (r.status_code, error["code"], details.get("field", details.get("reason")))
        assert got == refusal, (got, refusal, r.text)
        return False

    def visible(self, record: Record, project: str) -> bool:
        return record.project == project or record.shared

    def leads_to(self, start: Record, target: Record) -> bool:
        """`target` is `start` or on the chain of replacements from it."""
        seen: set[str] = set()
        at: str | None = start.id
        while at is not None and at not in seen:
            if at == target.id:
                return True
            seen.add(at)
            at = next(r for r in self.records if r.id == at).current["superseded_by_id"]
        return False

    def correction_refusal(
        self, record: Record, project: str, body: dict[str, Any], identity: bool
    ) -> Expected | None:
        """The checks in the order docs/knowledge.md gives them: the body's own
        rules, the record (seen through the project; corrected only through its
        source), the revision, then what is stored now (the replacement)."""
        status, replaced_by = body["status"], body.get("superseded_by_id")
        target = next((r for r in self.records if r.id == replaced_by), None)
        if identity:
            return (400, "invalid_request", "collection")
        if (status == "superseded") is (replaced_by is None) or replaced_by == record.id:
            return (400, "invalid_request", "superseded_by_id")
        if not self.visible(record, project):
            return (404, "not_found", None)
        if project != record.project:
            return (403, "forbidden", "source_project_only")
        if body["expected_revision"] != len(record.revisions):
            return (409, "revision_conflict", None)
        if target is not None and (
            target.project != record.project or self.leads_to(target, record)
        ):
            return (400, "invalid_request", "superseded_by_id")
        return None

    # --- rules ------------------------------------------------------------------

    @initialize(
        seeds=st.lists(
            st.tuples(
                st.sampled_from(PROJECTS),
                ACTOR,
                st.sampled_from(KINDS),
                st.sampled_from(NEW_STATUSES),
                st.booleans(),
                CONTENT,
            ),
            min_size=2,
            max_size=4,
        )
    )
    def some_records(self, seeds: list[tuple[str, int, str, str, bool, dict[str, Any]]]) -> None:
        """Every run starts with a few records, so that the rules on them run often."""
        for project, actor, kind, status, shared, drawn in seeds:
            self.create(project, actor, kind, status, shared, drawn, False)

    @precondition(lambda self: len(self.records) < MAX_RECORDS)
    @rule(
        project=st.sampled_from(PROJECTS),
        actor=ACTOR,
        kind=st.sampled_from(KINDS),
        status=st.one_of(st.none(), st.sampled_from(NEW_STATUSES)),
        shared=st.booleans(),
        drawn=CONTENT,
        defaults=st.booleans(),
    )
    def create(
        self,
        project: str,
        actor: int,
        kind: str,
        status: str | None,
        shared: bool,
        drawn: dict[str, Any],
        defaults: bool,
    ) -> None:
        caller = self.actors[actor]
        sent = self.content(project, drawn)
        sent["status"] = status or "observed"
        if defaults:  # the documented defaults fill what is left out
            sent = {**sent, "scope": {k: [] for k in sent["scope"]}, "tags": [],
                    "applicability": "", "body": sent["body"]}  # fmt: skip
            sent["provenance"] = {
                "summary": "", "source_uri": None, "source_task_id": None,
                "source_submission_id": None,
            }  # fmt: skip
            body: dict[str, Any] = {"kind": kind, "title": sent["title"], "body": sent["body"]}
            if status is not None:
                body["status"] = status
            if shared:
                body |= {"collection": "shared", "share_across_projects": True}
        else:
            body = {"kind": kind, **sent, "status": sent["status"],
                    "collection": "shared" if shared else "project",
                    "share_across_projects": shared}  # fmt: skip
        r = self.run(caller.post(kpath(project), body))
        assert r.status_code == 201, r.text
        at = self.clock.iso()
        record = Record(r.json()["id"], project, kind, shared, at, at)
        record.revisions.append(self.attributed(sent, caller))
        record.feedback.append([0, 0])
        self.records.append(record)
        self.touched.add(record.id)
        assert r.json() == record.flat()
        collection = "shared" if shared else "project"
        data = {"revision": 1, "title": sent["title"], "kind": kind,
                "status": sent["status"], "collection": collection}  # fmt: skip
        self.event(project, "knowledge.created", caller, record.id, data)

    @rule(
        project=st.sampled_from(PROJECTS),
        actor=ACTOR,
        fault=st.sampled_from(CREATE_FAULTS),
        drawn=CONTENT,
    )
    def create_refused(self, project: str, actor: int, fault: str, drawn: dict[str, Any]) -> None:
        """Each refusal the create rules name: 400 naming the field, nothing written."""
        sent = self.content(project, drawn)
        body: dict[str, Any] = {"kind": "fact", **sent}
        other = PROJECTS[(PROJECTS.index(project) + 1) % len(PROJECTS)]
        expected: Expected = (400, "invalid_request", fault)
        if fault == "superseded":
            body["status"] = "superseded"
            expected = (400, "invalid_request", "status")
        elif fault == "shared_without_opt_in":
            body["collection"] = "shared"
            expected = (400, "invalid_request", "share_across_projects")
        elif fault == "opt_in_without_shared":
            body["share_across_projects"] = True
            expected = (400, "invalid_request", "share_across_projects")
        elif fault == "foreign_scope_task":
            body["scope"]["task_ids"] = [self.tasks[other][0]]
            expected = (400, "invalid_request", "scope.task_ids[0]")
        elif fault == "foreign_source_task":
            body["provenance"]["source_task_id"] = self.tasks[other][0]
            expected = (400, "invalid_request", "provenance.source_task_id")
        elif fault == "duplicate_tag":
            body["tags"] = ["red", "red"]
            expected = (400, "invalid_request", "tags[1]")
        else:
            body["kind"] = "rule"
            expected = (400, "invalid_request", "kind")
        r = self.run(self.actors[actor].post(kpath(project), body))
        self.expect(r, expected, 201)

    @precondition(lambda self: self.records)
    @rule(
        which=WHICH,
        actor=ACTOR,
        keep=st.booleans(),
        status=st.sampled_from(STATUSES),
        replacement=WHICH,
        drawn=CONTENT,
        fault=st.sampled_from(CORRECT_FAULTS),
        other=st.integers(1, len(PROJECTS) - 1),
    )
    def correct(
        self,
        which: int,
        actor: int,
        keep: bool,
        status: str,
        replacement: int,
        drawn: dict[str, Any],
        fault: str | None,
        other: int,
    ) -> None:
        record = self.pick(which)
        caller = self.actors[actor]
        current = record.current
        revision = len(record.revisions)
        if keep:  # the same content again: still a new revision
            sent = {k: v for k, v in current.items() if k != "superseded_by_id"}
            sent["provenance"] = {
                k: v for k, v in current["provenance"].items()
                if k not in ("actor_id", "actor_session_id", "recorded_at")
            }  # fmt: skip
            replaced_by = current["superseded_by_id"]
        else:
            sent = self.content(record.project, drawn)
            sent["status"] = status
            replaced_by = self.pick(replacement).id if status == "superseded" else None
        if fault == "no_replacement":
            sent["status"], replaced_by = "superseded", None
        elif fault == "stray_replacement":
            sent["status"] = "validated"
            replaced_by = self.pick(replacement).id
        body: dict[str, Any] = {"expected_revision": revision, **sent}
        if replaced_by is not None:
            body["superseded_by_id"] = replaced_by
        if fault == "stale":
            body["expected_revision"] = revision + 1 if revision == 1 else revision - 1
        if fault == "identity":
            body["collection"] = "project"
        project = record.project
        if fault == "via_other":
            project = PROJECTS[(PROJECTS.index(record.project) + other) % len(PROJECTS)]

        expected = self.correction_refusal(record, project, body, fault == "identity")
        r = self.run(caller.patch(kpath(project, record.id), body))
        if not self.expect(r, expected, 200):
            if expected and expected[1] == "revision_conflict":
                details = r.json()["error"]["details"]
                assert details == {
                    "expected_revision": body["expected_revision"],
                    "current_revision": revision,
                }, details
            return
        sent["superseded_by_id"] = replaced_by
        new = self.attributed(sent, caller)
        before = dict(current)
        record.revisions.append(new)
        record.feedback.append([0, 0])
        record.updated_at = self.clock.iso()
        self.touched.add(record.id)
        assert r.json() == record.flat()
        changed = {n for n in ("title", "body", "status", "scope", "tags", "applicability",
                               "superseded_by_id") if before[n] != new[n]}  # fmt: skip
        members = ("summary", "source_uri", "source_task_id", "source_submission_id")
        if any(before["provenance"][m] != new["provenance"][m] for m in members):
            changed.add("provenance")
        data = {"revision": revision + 1, "status": new["status"], "changed_fields": changed,
                "values": {f: new[f] for f in ("title", "tags") if f in changed},
                "superseded_by_id": replaced_by}  # fmt: skip
        self.event(record.project, "knowledge.corrected", caller, record.id, data)

    @precondition(lambda self: self.records)
    @rule(
        which=WHICH,
        actor=ACTOR,
        via=st.sampled_from(PROJECTS),
        useful=st.booleans(),
        comment=st.sampled_from([None, "helped"]),
        stale=st.booleans(),
    )
    def feedback(
        self, which: int, actor: int, via: str, useful: bool, comment: str | None, stale: bool
    ) -> None:
        record = self.pick(which)
        caller = self.actors[actor]
        revision = len(record.revisions)
        expected_revision = revision + 1 if stale else revision
        body: dict[str, Any] = {"expected_revision": expected_revision, "useful": useful}
        if comment is not None:
            body["comment"] = comment
        r = self.run(caller.post(kpath(via, record.id, "feedback"), body))
        if not self.visible(record, via):
            self.expect(r, (404, "not_found", None), 201)
            return
        if stale:
            self.expect(r, (409, "revision_conflict", None), 201)
            details = r.json()["error"]["details"]
            assert details == {"expected_revision": expected_revision, "current_revision": revision}
            return
        assert r.status_code == 201, r.text
        got = r.json()
        assert got == {
            "id": got["id"], "knowledge_id": record.id, "project_id": record.project,
            "revision": revision, "useful": useful, "comment": comment,
            "actor_id": caller.principal_id, "actor_session_id": caller.session_id,
            "at": self.clock.iso(),
        }  # fmt: skip
        record.feedback[-1][0 if useful else 1] += 1
        self.touched.add(record.id)
        data = {"feedback_id": got["id"], "revision": revision, "useful": useful,
                "via_project_id": via}  # fmt: skip
        self.event(record.project, "knowledge.feedback_recorded", caller, record.id, data)

    @rule(milliseconds=st.sampled_from([0, 1, 250, 1500]))
    def tick(self, milliseconds: int) -> None:
        """Time passes (0: the next writes share an updated_at, ordered by id)."""
        self.clock.advance(milliseconds=milliseconds)

    @precondition(lambda self: self.records)
    @rule(
        project=st.sampled_from(PROJECTS),
        include_shared=st.booleans(),
        kind=st.one_of(st.none(), st.sampled_from(KINDS)),
        status=st.one_of(st.none(), st.sampled_from(STATUSES)),
        tag=st.one_of(st.none(), st.sampled_from(TAGS)),
        words=st.lists(st.sampled_from((*WORDS, *TAGS, "note")), max_size=2),
        limit=st.sampled_from([1, 2, 3, 200]),
    )
    def walk_list(
        self,
        project: str,
        include_shared: bool,
        kind: str | None,
        status: str | None,
        tag: str | None,
        words: list[str],
        limit: int,
    ) -> None:
        """A filtered list, page by page: exactly the model's records, in order."""
        params: dict[str, Any] = {"limit": limit}
        if include_shared:
            params["include_shared"] = "true"
        for name, value in (("kind", kind), ("status", status), ("tag", tag)):
            if value is not None:
                params[name] = value
        if words:
            params["q"] = " ".join(words)
        expected = [
            r.flat()
            for r in self.listed(project, include_shared)
            if (kind is None or r.kind == kind)
            and (status is None or r.current["status"] == status)
            and (tag is None or tag in r.current["tags"])
            and set(words) <= r.words()
        ]
        assert self.walk(project, params) == expected, params

    @precondition(lambda self: self.records)
    @rule(
        project=st.sampled_from(PROJECTS),
        word=st.sampled_from((*WORDS, *TAGS, "note")),
        include_shared=st.booleans(),
        filters=st.fixed_dictionaries(
            {k[:-1]: st.one_of(st.none(), st.sampled_from(v)) for k, v in SCOPE_VALUES.items()}
        ),
        task=st.one_of(st.none(), st.integers(0, TASKS_PER_PROJECT - 1)),
    )
    def context(
        self,
        project: str,
        word: str,
        include_shared: bool,
        filters: dict[str, str | None],
        task: int | None,
    ) -> None:
        """The packet's knowledge: matching `q` and the scope filters (an empty
        dimension applies everywhere; a populated one only to a filter it lists)."""
        params: dict[str, Any] = {"q": word, "limit": 100, "budget": 131072}
        params |= {k: v for k, v in filters.items() if v is not None}
        task_id = None if task is None else self.tasks[project][task]
        if task_id is not None:
            params["task_id"] = task_id
        if include_shared:
            params["include_shared"] = "true"

        def applies(r: Record) -> bool:
            scope = r.current["scope"]
            for dimension, value in filters.items():
                listed = scope[dimension + "s"]
                if listed and value not in listed:
                    return False
            return not scope["task_ids"] or task_id in scope["task_ids"]

        expected = {
            r.id for r in self.listed(project, include_shared) if word in r.words() and applies(r)
        }
        packet = self.run(self.actors[0].get(f"/api/v1/projects/{project}/context", **params))
        assert packet.status_code == 200, packet.text
        items = packet.json()["items"]
        found = {i["id"] for i in items if i["type"] == "knowledge"}
        assert found == expected, (params, found, expected)
        assert packet.json()["truncated"] is False
        for item in items:
            if item["type"] == "knowledge":
                record = next(r for r in self.records if r.id == item["id"])
                assert {k: v for k, v in item.items() if k != "type"} == record.flat()

    @precondition(lambda self: self.records)
    @rule(which=WHICH, via=st.sampled_from(PROJECTS), limit=st.sampled_from([1, 2, 200]))
    def read_detail(self, which: int, via: str, limit: int) -> None:
        """A record through any project: its history page by page, or 404 where unseen."""
        record = self.pick(which)
        if not self.visible(record, via):
            r = self.run(self.actors[2].get(kpath(via, record.id)))
            self.expect(r, (404, "not_found", None), 200)
            return
        self.check_detail(record, via, limit)

    # --- what must hold after every step -----------------------------------------

    def listed(self, project: str, include_shared: bool) -> list[Record]:
        """The project's list, newest first (updated_at, then id, descending)."""
        seen = [r for r in self.records if r.project == project or (include_shared and r.shared)]
        return sorted(seen, key=lambda r: (r.updated_at, r.id), reverse=True)

    def walk(self, project: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor = None
        for _ in range(MAX_RECORDS + 2):
            page = dict(params) if cursor is None else {**params, "cursor": cursor}
            r = self.run(self.actors[1].get(kpath(project), **page))
            assert r.status_code == 200, r.text
            items += r.json()["items"]
            assert len(r.json()["items"]) <= params["limit"]
            cursor = r.json()["next_cursor"]
            if cursor is None:
                return items
        raise AssertionError(f"the walk of {params} did not end")

    def check_detail(self, record: Record, via: str, limit: int) -> None:
        history: list[dict[str, Any]] = []
        cursor = None
        for _ in range(len(record.revisions) + 2):
            params: dict[str, Any] = {"limit": limit}
            if cursor is not None:
                params["cursor"] = cursor
            r = self.run(self.actors[0].get(kpath(via, record.id), **params))
            assert r.status_code == 200, r.text
            detail = r.json()
            assert {k: v for k, v in detail.items() if k not in ("history", "feedback")} == (
                record.flat()
            )
            useful = sum(f[0] for f in record.feedback)
            not_useful = sum(f[1] for f in record.feedback)
            assert detail["feedback"] == {"useful": useful, "not_useful": not_useful}
            history += detail["history"]["items"]
            cursor = detail["history"]["next_cursor"]
            if cursor is None:
                break
        assert history == record.history(), (record.id, history)

    @invariant()
    def lists_agree(self) -> None:
        """Every record's current object, in every project's lists, in order."""
        for project in PROJECTS:
            for include_shared in (False, True):
                params: dict[str, Any] = {"limit": 200}
                if include_shared:
                    params["include_shared"] = "true"
                r = self.run(self.actors[0].get(kpath(project), **params))
                assert r.status_code == 200, r.text
                expected = [rec.flat() for rec in self.listed(project, include_shared)]
                assert r.json() == {"items": expected, "next_cursor": None}, (project, params)

    @invariant()
    def touched_histories_agree(self) -> None:
        for record in self.records:
            if record.id in self.touched:
                self.check_detail(record, record.project, 200)
        self.touched.clear()

    @invariant()
    def revisions_never_change(self) -> None:
        """Every revision row is the model's, and an earlier one keeps its bytes."""
        conn = sqlite3.connect(self.db_path)
        conn.text_factory = bytes
        try:
            rows = conn.execute("SELECT * FROM knowledge_revisions").fetchall()
        finally:
            conn.close()
        found = {(row[0].decode(), row[1]): tuple(row) for row in rows}
        assert set(found) == {(r.id, n + 1) for r in self.records for n in range(len(r.revisions))}
        for key, row in self.rows.items():
            assert found[key] == row, key
        self.rows = found

    @invariant()
    def events_agree(self) -> None:
        """Each accepted write wrote the one event docs/api.md names; refusals none."""
        for project in PROJECTS:
            r = self.run(
                self.actors[0].get(
                    f"/api/v1/projects/{project}/events", after=self.seen[project], limit=200
                )
            )
            assert r.status_code == 200, r.text
            got = r.json()["items"]
            for event in got:
                event.pop("sequence")
                if event["type"] == "knowledge.corrected":
                    event["data"]["changed_fields"] = set(event["data"]["changed_fields"])
            assert got == self.expected_events[project], (project, got)
            self.seen[project] = r.json()["next_after"]
            self.expected_events[project] = []


KnowledgeMachine.TestCase.settings = machine_settings(30)
TestKnowledgeStateMachine = KnowledgeMachine.TestCase
