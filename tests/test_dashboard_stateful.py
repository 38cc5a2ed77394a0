"""A stateful property test of the dashboard read: random writes, half over
REST and half over the equivalent GraphQL mutations (tasks created, edited
under `expected_revision`, claimed, submitted and completed by agents in
sessions; knowledge recorded, corrected and given feedback; policy edits;
decisions opened on tasks, answered and reopened; the clock moving), over a
real SQLite file, checked after every step by ONE nested dashboard query
against what the REST reads say (docs/graphql.md; service contract sections
12-14).

No model of the business rules: the oracle is agreement. After each step the
dashboard's project, policy and `policyHistory`, `tasks` (each with its
`revisions`, `submissions` and `decisions` connections, `blockedBy` and
`lease`), `knowledge` (each with `revisions` and feedback totals),
`decisions` (with `current` and `generations`), `events` and `digest` must
equal the REST list, detail and history routes field for field, under the
naming differences docs/graphql.md documents (camelCase, UPPER_CASE enums,
`restId`, references as objects, `pinnedRevision` for `task_revision`,
`dependsOnIds` on a revision, `feedbackTotals` for `feedback`), with the
same `totalCount`s and order (oldest first for tasks, decisions and events;
newest first for histories and `Task.decisions`; knowledge by last change).
The `tasks` and `events` connections are also walked a page at a time,
forward and backward, the cursors matching REST's. And the project's event
count must be one (`project.created`) plus the number of writes that
succeeded: each mutation writes exactly one event, a refusal none.

The dashboard query is one the fast path serves (schema/fastpath/), as a
dashboard's would be; that it answers as graphql-core does is
test_graphql_fastpath.py's.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from tests.conftest import Caller
from tests.stateful_support import ServiceMachine, machine_settings
from waypost.clock import format_time, parse_time

BASE = "/api/v1/projects/demo"
INNER = 30  # page size of the nested history connections
MAX_TASKS = 6
MAX_KNOWLEDGE = 4
MAX_DECISIONS = 5
WHICH = st.integers(0, 99)
VIA_GQL = st.booleans()
# the refusals a claim, submit or complete may meet (docs/tasks.md): which one is
# no part of this oracle, only that a refusal writes nothing
WORK_REFUSALS = ("state_conflict", "lease_conflict", "decision_required", "forbidden",
                 "lease_expired")  # fmt: skip

GEN = """generation policyRevision environment conditions expiresAt reopenRationale
  actorId actorSessionId at affected { taskId pinnedRevision }
  answer { disposition answer rationale conditionsConfirmed actorId actorSessionId
           relayed relayPolicyRevision timedOut at }"""
SCOPE = "scope { taskIds components environments versions }"
PROVENANCE = """provenance { summary sourceUri sourceTaskId sourceSubmissionId actorId
  actorSessionId recordedAt }"""

DASHBOARD = f"""
query Dashboard {{ project(id: "demo") {{
  restId name createdAt createdById createdBy {{ restId }}
  policy {{ projectId revision rules agentRuleEditing allowRelayedHumanAnswers leaseSeconds
            reviewMode updatedAt integrationOwner {{ restId }} updatedBy {{ restId }} }}
  policyHistory(first: 100) {{ totalCount nodes {{
    revision rules agentRuleEditing allowRelayedHumanAnswers integrationOwnerId leaseSeconds
    reviewMode actorId actorKind actorSessionId at provenance actor {{ restId }} }} }}
  tasks(first: 100) {{ totalCount pageInfo {{ hasNextPage hasPreviousPage }}
    edges {{ cursor node {{
      restId projectId title description acceptanceCriteria kind priority status revision
      ready createdAt updatedAt dependsOn {{ restId }} subject {{ restId }}
      blockedBy {{ decisionIds decisionsTruncated decisions {{ restId }}
                  dependencies {{ restId }} }}
      lease {{ sessionId expiresAt workflow expired owner {{ restId }} }}
      revisions(first: {INNER}) {{ totalCount nodes {{
        revision title description acceptanceCriteria kind priority dependsOnIds
        changedFields judgedChange at actor {{ restId }} }} }}
      submissions(first: {INNER}) {{ totalCount nodes {{
        restId taskRevision summary actorSessionId at actor {{ restId }} }} }}
      decisions(first: {INNER}) {{ totalCount nodes {{ restId }} }}
  }} }} }}
  knowledge(first: 100) {{ totalCount nodes {{
    restId projectId kind title body status tags applicability collection
    shareAcrossProjects supersededById revision createdAt updatedAt {SCOPE} {PROVENANCE}
    feedbackTotals {{ useful notUseful }}
    revisions(first: {INNER}) {{ totalCount nodes {{
      knowledgeId revision title body status tags applicability supersededById
      {SCOPE} {PROVENANCE} feedback {{ useful notUseful }} }} }} }} }}
  decisions(first: 100) {{ totalCount nodes {{
    restId projectId question options rationale requiredActor recommendation reversible
    status workAllowed generation createdAt createdBy {{ restId }}
    current {{ {GEN} }}
    generations(first: {INNER}) {{ totalCount nodes {{ {GEN} }} }} }} }}
  events(first: 100) {{ totalCount nodes {{
    sequence projectId type subjectType subjectId actorId actorSessionId at data }} }}
  digest {{ projectId generatedAt readyTaskCount
    pendingDecisions {{ restId }} proceededByTimeout {{ restId }}
    timingOutSoon {{ restId }} blockedTasks {{ restId }}
    truncated {{ pendingDecisions proceededByTimeout timingOutSoon blockedTasks }} }}
}} }}"""

PAGE = """
query Page($first: Int, $after: String, $last: Int, $before: String) {
  project(id: "demo") {
    tasks(first: $first, after: $after, last: $last, before: $before) {
      totalCount
      edges { cursor node { restId } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }
}"""

EVENT_PAGE = """
query Events($first: Int, $after: String, $last: Int, $before: String) {
  project(id: "demo") {
    events(first: $first, after: $after, last: $last, before: $before) {
      totalCount nodes { sequence }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }
}"""

# the object each mutation's payload returns (a refusal leaves it null)
PAYLOAD_OBJECT = {
    "taskCreate": ("TaskCreateInput", "task"),
    "taskUpdate": ("TaskUpdateInput", "task"),
    "taskClaim": ("TaskClaimInput", "task"),
    "taskSubmit": ("TaskSubmitInput", "task"),
    "taskComplete": ("TaskActionInput", "task"),
    "knowledgeCreate": ("KnowledgeCreateInput", "knowledge"),
    "knowledgeCorrect": ("KnowledgeCorrectInput", "knowledge"),
    "knowledgeFeedback": ("KnowledgeFeedbackInput", "feedback"),
    "policyUpdate": ("PolicyUpdateInput", "policy"),
    "decisionOpen": ("DecisionOpenInput", "decision"),
    "decisionAnswer": ("DecisionAnswerInput", "decision"),
    "decisionReopen": ("DecisionReopenInput", "decision"),
}


def mutation_text(name: str) -> str:
    input_type, obj = PAYLOAD_OBJECT[name]
    selected = "revision" if obj == "policy" else "restId"
    return (
        f"mutation M($input: {input_type}!) {{ {name}(input: $input) {{"
        f" {obj} {{ {selected} }} userErrors {{ code field message }} replayed }} }}"
    )


# --- REST JSON as docs/graphql.md says GraphQL names it ------------------------------


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def up(value: str | None) -> str | None:
    return None if value is None else value.upper()


def ref(value: str | None) -> dict[str, str] | None:
    return None if value is None else {"restId": value}


def refs(values: list[str]) -> list[dict[str, str]]:
    return [{"restId": v} for v in values]


def plain(rest: dict[str, Any], *names: str) -> dict[str, Any]:
    return {camel(n): rest[n] for n in names}


def policy_as_gql(p: dict[str, Any]) -> dict[str, Any]:
    out = plain(p, "project_id", "revision", "rules", "agent_rule_editing",
                "allow_relayed_human_answers", "lease_seconds", "updated_at")  # fmt: skip
    out["reviewMode"] = up(p["review_mode"])
    out["integrationOwner"] = ref(p["integration_owner"])
    out["updatedBy"] = ref(p["updated_by"])
    return out


def policy_revision_as_gql(p: dict[str, Any]) -> dict[str, Any]:
    out = plain(p, "revision", "rules", "agent_rule_editing", "allow_relayed_human_answers",
                "lease_seconds", "actor_id", "actor_session_id", "at", "provenance")  # fmt: skip
    out["reviewMode"] = up(p["review_mode"])
    out["actorKind"] = up(p["actor_kind"])
    out["integrationOwnerId"] = p["integration_owner"]
    out["actor"] = ref(p["actor_id"])
    return out


def task_as_gql(t: dict[str, Any], now: str) -> dict[str, Any]:
    out = plain(t, "project_id", "title", "description", "acceptance_criteria", "kind",
                "priority", "revision", "ready", "created_at", "updated_at")  # fmt: skip
    out["restId"] = t["id"]
    out["status"] = up(t["status"])
    out["dependsOn"] = refs(t["depends_on"])
    out["subject"] = ref(t["subject_task_id"])
    b = t["blocked_by"]
    out["blockedBy"] = {
        "decisionIds": b["decisions"],
        "decisionsTruncated": b["decisions_truncated"],
        "decisions": refs(b["decisions"]),
        "dependencies": refs(b["dependencies"]),
    }
    lease = t["lease"]
    out["lease"] = None
    if lease is not None:
        out["lease"] = {
            "sessionId": lease["session_id"],
            "expiresAt": lease["expires_at"],
            "workflow": lease["workflow"],
            # judged at the query's one instant (docs/tasks.md)
            "expired": parse_time(lease["expires_at"]) <= parse_time(now),
            "owner": ref(lease["owner_id"]),
        }
    return out


def task_revision_as_gql(r: dict[str, Any]) -> dict[str, Any]:
    out = plain(r, "revision", "title", "description", "acceptance_criteria", "kind",
                "priority", "changed_fields", "judged_change", "at")  # fmt: skip
    out["dependsOnIds"] = r["depends_on"]
    out["actor"] = ref(r["actor_id"])
    return out


def submission_as_gql(s: dict[str, Any]) -> dict[str, Any]:
    out = plain(s, "task_revision", "summary", "actor_session_id", "at")
    out["restId"] = s["id"]
    out["actor"] = ref(s["actor_id"])
    return out


def scope_as_gql(s: dict[str, Any]) -> dict[str, Any]:
    return plain(s, "task_ids", "components", "environments", "versions")


def provenance_as_gql(p: dict[str, Any]) -> dict[str, Any]:
    return plain(p, "summary", "source_uri", "source_task_id", "source_submission_id",
                 "actor_id", "actor_session_id", "recorded_at")  # fmt: skip


def totals_as_gql(f: dict[str, Any]) -> dict[str, Any]:
    return {"useful": f["useful"], "notUseful": f["not_useful"]}


def knowledge_as_gql(k: dict[str, Any]) -> dict[str, Any]:
    out = plain(k, "project_id", "title", "body", "tags", "applicability",
                "share_across_projects", "superseded_by_id", "revision", "created_at",
                "updated_at")  # fmt: skip
    out["restId"] = k["id"]
    out["kind"] = up(k["kind"])
    out["status"] = up(k["status"])
    out["collection"] = up(k["collection"])
    out["scope"] = scope_as_gql(k["scope"])
    out["provenance"] = provenance_as_gql(k["provenance"])
    return out


def knowledge_revision_as_gql(r: dict[str, Any]) -> dict[str, Any]:
    out = plain(r, "knowledge_id", "revision", "title", "body", "tags", "applicability",
                "superseded_by_id")  # fmt: skip
    out["status"] = up(r["status"])
    out["scope"] = scope_as_gql(r["scope"])
    out["provenance"] = provenance_as_gql(r["provenance"])
    out["feedback"] = totals_as_gql(r["feedback"])
    return out


def generation_as_gql(g: dict[str, Any]) -> dict[str, Any]:
    out = plain(g, "generation", "policy_revision", "environment", "conditions", "expires_at",
                "reopen_rationale", "actor_id", "actor_session_id", "at")  # fmt: skip
    out["affected"] = [
        {"taskId": a["task_id"], "pinnedRevision": a["task_revision"]} for a in g["affected"]
    ]
    a = g["answer"]
    out["answer"] = None
    if a is not None:
        out["answer"] = plain(a, "answer", "rationale", "conditions_confirmed", "actor_id",
                              "actor_session_id", "relayed", "relay_policy_revision",
                              "timed_out", "at")  # fmt: skip
        out["answer"]["disposition"] = up(a["disposition"])
    return out


def decision_as_gql(d: dict[str, Any]) -> dict[str, Any]:
    out = plain(d, "project_id", "question", "options", "rationale", "recommendation",
                "reversible", "work_allowed", "generation", "created_at")  # fmt: skip
    out["restId"] = d["id"]
    out["requiredActor"] = up(d["required_actor"])
    out["status"] = up(d["status"])
    out["createdBy"] = ref(d["created_by"])
    out["current"] = generation_as_gql(d["current"])
    return out


def event_as_gql(e: dict[str, Any]) -> dict[str, Any]:
    return plain(e, "sequence", "project_id", "type", "subject_type", "subject_id", "actor_id",
                 "actor_session_id", "at", "data")  # fmt: skip


def digest_as_gql(d: dict[str, Any]) -> dict[str, Any]:
    out = plain(d, "project_id", "generated_at", "ready_task_count")
    for name in ("pending_decisions", "proceeded_by_timeout", "timing_out_soon"):
        out[camel(name)] = refs([x["id"] for x in d[name]])
    out["blockedTasks"] = refs([t["id"] for t in d["blocked_tasks"]])
    out["truncated"] = {camel(k): v for k, v in d["truncated"].items()}
    return out


def connection(conn: dict[str, Any], rest_items: list[Any]) -> list[Any]:
    """A connection's page, after checking its totalCount against the REST list."""
    assert conn["totalCount"] == len(rest_items), (conn["totalCount"], len(rest_items))
    return list(conn["nodes"])


class DashboardMachine(ServiceMachine):
    def __init__(self) -> None:
        super().__init__()
        self.keys = itertools.count()
        self.writes = 0  # successful writes, each one event
        self.tasks: list[str] = []
        self.knowledge: list[str] = []
        self.decisions: list[str] = []
        self.run(self._start())

    async def _start(self) -> None:
        await self.open_service()
        (self.ada, self.bob, self.hana), _ = await self.open_team()
        self.agents = [self.ada, self.bob]
        self.by_id = {c.principal_id: c for c in (self.ada, self.bob, self.hana)}
        self.project_events = 1  # project.created

    # --- the two transports --------------------------------------------------------

    def write(
        self,
        via_gql: bool,
        caller: Caller,
        rest: tuple[str, str, dict[str, Any]],
        name: str,
        inp: dict[str, Any],
    ) -> tuple[bool, str | None, str | None]:
        """Send one write over REST or as its GraphQL mutation: (succeeded,
        the id it wrote or named, the refusal's code)."""
        key = f"dash-{next(self.keys)}"
        if via_gql:
            inp = {"idempotencyKey": key, "projectId": "demo", **inp}
            data = self.run(caller.gql(mutation_text(name), {"input": inp}))
            assert "errors" not in data, data
            payload = data["data"][name]
            assert payload["replayed"] is False
            obj = payload[PAYLOAD_OBJECT[name][1]]
            if obj is None:
                (error,) = payload["userErrors"]
                return False, None, str(error["code"])
            assert payload["userErrors"] == [], payload
            self.writes += 1
            return True, obj.get("restId"), None
        method, path, body = rest
        r = self.run(caller.send(method, f"{BASE}{path}", body, key=key))
        if not r.is_success:
            assert 400 <= r.status_code < 500, r.text
            return False, None, str(r.json()["error"]["code"])
        self.writes += 1
        got = r.json()
        got = got.get("task") or got.get("submission") or got
        return True, got.get("id"), None

    def rest_get(self, path: str, **params: Any) -> dict[str, Any]:
        r = self.run(self.hana.get(f"{BASE}{path}", **params))
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body

    def task(self, task_id: str) -> dict[str, Any]:
        return self.rest_get(f"/tasks/{task_id}")

    # --- tasks ---------------------------------------------------------------------

    @precondition(lambda self: len(self.tasks) < MAX_TASKS)
    @rule(
        via_gql=VIA_GQL,
        priority=st.integers(0, 3),
        deps=st.sampled_from([[], [], [0], [1, 5]]),
        criteria=st.lists(st.sampled_from(["a", "b"]), max_size=2),
    )
    def create_task(
        self, via_gql: bool, priority: int, deps: list[int], criteria: list[str]
    ) -> None:
        """A task (now and then depending on earlier ones)."""
        depends_on = sorted({self.tasks[i % len(self.tasks)] for i in deps} if self.tasks else [])
        title = f"task {len(self.tasks)}"
        body = {"title": title, "priority": priority, "depends_on": depends_on,
                "acceptance_criteria": criteria}  # fmt: skip
        inp = {"title": title, "priority": priority, "dependsOn": depends_on,
               "acceptanceCriteria": criteria}  # fmt: skip
        ok, made, code = self.write(via_gql, self.hana, ("POST", "/tasks", body), "taskCreate", inp)
        assert ok, code
        assert made is not None
        self.tasks.append(made)

    @precondition(lambda self: self.tasks)
    @rule(
        via_gql=VIA_GQL,
        which=WHICH,
        field=st.sampled_from(["title", "description", "priority", "kind"]),
        stale=st.sampled_from([False, False, False, True]),
    )
    def edit_task(self, via_gql: bool, which: int, field: str, stale: bool) -> None:
        task_id = self.tasks[which % len(self.tasks)]
        current = self.task(task_id)
        revision = current["revision"] - (1 if stale else 0)
        value: Any = {"priority": self.writes, "kind": f"kind-{self.writes}"}.get(
            field, f"{field} {self.writes}"
        )
        body = {"expected_revision": revision, field: value}
        inp = {"taskId": task_id, "expectedRevision": revision, field: value}
        ok, _, code = self.write(
            via_gql, self.hana, ("PATCH", f"/tasks/{task_id}", body), "taskUpdate", inp
        )
        if stale:
            assert not ok and code in ("revision_conflict", "invalid_request"), code
        else:  # a finished task takes no more edits
            assert ok or current["status"] in ("done", "cancelled"), (code, current["status"])

    @precondition(lambda self: self.tasks)
    @rule(via_gql=VIA_GQL, which=WHICH, agent=st.integers(0, 1), ready=st.booleans())
    def claim(self, via_gql: bool, which: int, agent: int, ready: bool) -> None:
        """A named claim, mostly of a task the ready list offers."""
        offered = [t["id"] for t in self.rest_get("/tasks", ready="true", limit=200)["items"]]
        pool = offered if ready and offered else self.tasks
        task_id = pool[which % len(pool)]
        ok, _, code = self.write(
            via_gql,
            self.agents[agent],
            ("POST", "/claims", {"task_id": task_id}),
            "taskClaim",
            {"taskId": task_id},
        )
        if not ok:  # not ready, held, finished, or a decision holds it
            assert code in WORK_REFUSALS, code

    def _held(self) -> list[tuple[str, Caller]]:
        held = []
        for task_id in self.tasks:
            t = self.task(task_id)
            if t["status"] == "claimed" and t["lease"]["owner_id"] in self.by_id:
                held.append((task_id, self.by_id[t["lease"]["owner_id"]]))
        return held

    @precondition(lambda self: self.tasks)
    @rule(via_gql=VIA_GQL, which=WHICH)
    def submit(self, via_gql: bool, which: int) -> None:
        held = self._held()
        if not held:
            return
        task_id, owner = held[which % len(held)]
        body = {"summary": f"did {task_id}"}
        ok, _, code = self.write(
            via_gql,
            owner,
            ("POST", f"/tasks/{task_id}/submit", body),
            "taskSubmit",
            {"taskId": task_id, **body},
        )
        if not ok:  # a lapsed lease, or a decision that stopped counting
            assert code in WORK_REFUSALS, code

    @precondition(lambda self: self.tasks)
    @rule(via_gql=VIA_GQL, which=WHICH)
    def complete(self, via_gql: bool, which: int) -> None:
        submitted = [t for t in self.tasks if self.task(t)["status"] == "submitted"]
        if not submitted:
            return
        task_id = submitted[which % len(submitted)]
        ok, _, code = self.write(
            via_gql,
            self.hana,
            ("POST", f"/tasks/{task_id}/complete", {}),
            "taskComplete",
            {"taskId": task_id},
        )
        if not ok:
            assert code in WORK_REFUSALS, code

    # --- knowledge -----------------------------------------------------------------

    @precondition(lambda self: len(self.knowledge) < MAX_KNOWLEDGE)
    @rule(via_gql=VIA_GQL, kind=st.sampled_from(["fact", "lesson", "rejected_approach"]),
          tags=st.lists(st.sampled_from(["ci", "db"]), max_size=2, unique=True),
          scoped=st.booleans())  # fmt: skip
    def record_knowledge(self, via_gql: bool, kind: str, tags: list[str], scoped: bool) -> None:
        scope = {"task_ids": self.tasks[:1] if scoped else [], "components": ["api"]}
        body = {"kind": kind, "title": f"k {len(self.knowledge)}", "body": "b", "tags": tags,
                "scope": scope}  # fmt: skip
        inp = {"kind": kind.upper(), "title": body["title"], "body": "b", "tags": tags,
               "scope": {"taskIds": scope["task_ids"], "components": ["api"]}}  # fmt: skip
        ok, made, code = self.write(
            via_gql, self.ada, ("POST", "/knowledge", body), "knowledgeCreate", inp
        )
        assert ok, code
        assert made is not None
        self.knowledge.append(made)

    @precondition(lambda self: self.knowledge)
    @rule(via_gql=VIA_GQL, which=WHICH, status=st.sampled_from(["observed", "validated",
                                                                "deprecated"]))  # fmt: skip
    def correct_knowledge(self, via_gql: bool, which: int, status: str) -> None:
        kid = self.knowledge[which % len(self.knowledge)]
        k = self.rest_get(f"/knowledge/{kid}")
        prov = {f: k["provenance"][f] for f in
                ("summary", "source_uri", "source_task_id", "source_submission_id")}  # fmt: skip
        scope = {f: k["scope"][f] for f in ("task_ids", "components", "environments", "versions")}
        body = {"expected_revision": k["revision"], "title": f"{k['title']}+", "body": k["body"],
                "status": status, "scope": scope, "tags": k["tags"],
                "applicability": f"when {self.writes}", "provenance": prov}  # fmt: skip
        inp = {"id": kid, "expectedRevision": k["revision"], "title": body["title"],
               "body": k["body"], "status": status.upper(),
               "scope": {camel(f): v for f, v in scope.items()}, "tags": k["tags"],
               "applicability": body["applicability"],
               "provenance": {camel(f): v for f, v in prov.items()}}  # fmt: skip
        ok, _, code = self.write(
            via_gql, self.hana, ("PATCH", f"/knowledge/{kid}", body), "knowledgeCorrect", inp
        )
        assert ok, code

    @precondition(lambda self: self.knowledge)
    @rule(via_gql=VIA_GQL, which=WHICH, useful=st.booleans(), agent=st.integers(0, 1))
    def feedback(self, via_gql: bool, which: int, useful: bool, agent: int) -> None:
        kid = self.knowledge[which % len(self.knowledge)]
        revision = self.rest_get(f"/knowledge/{kid}")["revision"]
        body = {"expected_revision": revision, "useful": useful}
        inp = {"id": kid, "expectedRevision": revision, "useful": useful}
        ok, _, code = self.write(
            via_gql,
            self.agents[agent],
            ("POST", f"/knowledge/{kid}/feedback", body),
            "knowledgeFeedback",
            inp,
        )
        assert ok, code

    # --- policy --------------------------------------------------------------------

    @rule(via_gql=VIA_GQL, field=st.sampled_from(["rules", "lease_seconds", "review_mode"]),
          value=st.integers(0, 2))  # fmt: skip
    def edit_policy(self, via_gql: bool, field: str, value: int) -> None:
        revision = self.rest_get("/policy")["revision"]
        v: Any = {"rules": f"rules {self.writes}", "lease_seconds": 120 + 300 * value,
                  "review_mode": ["human", "any", "none"][value]}[field]  # fmt: skip
        body = {"expected_revision": revision, field: v, "provenance": f"p{self.writes}"}
        inp = {"expectedRevision": revision, camel(field): v.upper() if field == "review_mode"
               else v, "provenance": body["provenance"]}  # fmt: skip
        ok, _, code = self.write(
            via_gql, self.hana, ("PATCH", "/policy", body), "policyUpdate", inp
        )
        assert ok, code

    # --- decisions -----------------------------------------------------------------

    @precondition(lambda self: self.tasks and len(self.decisions) < MAX_DECISIONS)
    @rule(
        via_gql=VIA_GQL,
        picks=st.lists(WHICH, min_size=1, max_size=2, unique=True),
        expires_in=st.one_of(st.none(), st.integers(5, 60)),
        reversible=st.booleans(),
    )
    def open_decision(
        self, via_gql: bool, picks: list[int], expires_in: int | None, reversible: bool
    ) -> None:
        task_ids = sorted({self.tasks[i % len(self.tasks)] for i in picks})
        expires = (
            format_time(self.clock.now() + timedelta(minutes=expires_in)) if expires_in else None
        )
        body = {"question": "Go?", "options": ["Proceed", "Stop"], "rationale": "r",
                "required_actor": "either", "task_ids": task_ids, "environment": "staging",
                "conditions": ["c"], "expires_at": expires, "recommendation": "Proceed",
                "reversible": reversible}  # fmt: skip
        inp = {"question": "Go?", "options": ["Proceed", "Stop"], "rationale": "r",
               "requiredActor": "EITHER", "taskIds": task_ids, "environment": "staging",
               "conditions": ["c"], "expiresAt": expires, "recommendation": "Proceed",
               "reversible": reversible}  # fmt: skip
        ok, made, code = self.write(
            via_gql, self.hana, ("POST", "/decisions", body), "decisionOpen", inp
        )
        if ok:
            assert made is not None
            self.decisions.append(made)
        else:  # a finished task takes no new decision
            assert code in ("state_conflict", "invalid_request"), code

    @precondition(lambda self: self.decisions)
    @rule(via_gql=VIA_GQL, which=WHICH, disposition=st.sampled_from(["allow", "deny", "defer"]))
    def answer(self, via_gql: bool, which: int, disposition: str) -> None:
        listed = self.rest_get("/decisions", limit=200)["items"]
        pending = [d for d in listed if d["status"] == "pending"]
        pool = pending or listed
        d = pool[which % len(pool)]
        did = d["id"]
        body = {"expected_generation": d["generation"], "disposition": disposition,
                "answer": "Proceed", "rationale": "r", "conditions_confirmed": True}  # fmt: skip
        inp = {"decisionId": did, "expectedGeneration": d["generation"],
               "disposition": disposition.upper(), "answer": "Proceed", "rationale": "r",
               "conditionsConfirmed": True}  # fmt: skip
        ok, _, code = self.write(
            via_gql, self.hana, ("POST", f"/decisions/{did}/answer", body), "decisionAnswer", inp
        )
        assert ok is (d["status"] == "pending"), (d["status"], code)

    @precondition(lambda self: self.decisions)
    @rule(via_gql=VIA_GQL, which=WHICH, renew=st.booleans())
    def reopen(self, via_gql: bool, which: int, renew: bool) -> None:
        did = self.decisions[which % len(self.decisions)]
        d = self.rest_get(f"/decisions/{did}")
        body: dict[str, Any] = {"expected_generation": d["generation"], "rationale": "again"}
        inp: dict[str, Any] = {"decisionId": did, "expectedGeneration": d["generation"],
                               "rationale": "again"}  # fmt: skip
        expires = d["current"]["expires_at"]
        if renew or (expires is not None and parse_time(expires) <= self.clock.now()):
            later = format_time(self.clock.now() + timedelta(minutes=30))
            body["expires_at"] = inp["expiresAt"] = later
        ok, _, code = self.write(
            via_gql, self.hana, ("POST", f"/decisions/{did}/reopen", body), "decisionReopen", inp
        )
        assert ok, code

    # --- time ----------------------------------------------------------------------

    @rule(minutes=st.sampled_from([1, 4, 9]))
    def move_clock(self, minutes: int) -> None:
        """Time passes (leases lapse, decisions expire); the agents' sessions
        beat first (a session event belongs to no project)."""
        for agent in self.agents:
            r = self.run(agent.post(f"/api/v1/sessions/{agent.session_id}/heartbeat"))
            assert r.status_code == 200, r.text
        self.clock.advance(minutes=minutes)

    # --- the oracle ----------------------------------------------------------------

    @invariant()
    def dashboard_agrees_with_rest(self) -> None:
        r = self.run(
            self.hana.client.post(
                "/graphql", json={"query": DASHBOARD}, headers=self.hana.headers()
            )
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert "errors" not in body, body
        now = r.headers["Waypost-Now"]
        assert now == self.clock.iso()
        p = body["data"]["project"]

        project = self.run(self.hana.get(BASE)).json()
        assert {k: p[k] for k in ("restId", "name", "createdAt", "createdById", "createdBy")} == {
            "restId": project["id"], "name": project["name"],
            "createdAt": project["created_at"], "createdById": project["created_by"],
            "createdBy": ref(project["created_by"]),
        }  # fmt: skip

        assert p["policy"] == policy_as_gql(self.rest_get("/policy"))
        history = self.rest_get("/policy/history", limit=200)["items"]
        assert connection(p["policyHistory"], history) == [
            policy_revision_as_gql(h) for h in history
        ]
        assert [h["revision"] for h in history] == sorted(
            (h["revision"] for h in history), reverse=True
        )  # newest first

        self._check_tasks(p["tasks"], now)
        self._check_knowledge(p["knowledge"])
        self._check_decisions(p["decisions"])

        events = self.rest_get("/events", limit=200)["items"]
        assert len(events) == self.project_events + self.writes, (len(events), self.writes)
        assert connection(p["events"], events) == [event_as_gql(e) for e in events]
        assert p["digest"] == digest_as_gql(self.rest_get("/digest"))

        self._walk_tasks()
        self._walk_events([e["sequence"] for e in events])

    def _check_tasks(self, conn: dict[str, Any], now: str) -> None:
        listed = self.rest_get("/tasks", limit=200)["items"]
        assert [t["id"] for t in listed] == self.tasks  # oldest first
        nodes = [e["node"] for e in conn["edges"]]
        assert conn["totalCount"] == len(listed)
        assert conn["pageInfo"] == {"hasNextPage": False, "hasPreviousPage": False}
        decisions = [self.rest_get(f"/decisions/{d}", limit=200) for d in self.decisions]
        for node, t in zip(nodes, listed, strict=True):
            assert t == self.task(t["id"])  # the list and the detail agree
            expected = task_as_gql(t, now)
            got = {k: node[k] for k in expected}
            assert got == expected, (got, expected)
            revisions = self.rest_get(f"/tasks/{t['id']}/revisions", limit=INNER)["items"]
            rest_count = t["revision"]  # one revision per edit: 1..revision
            assert node["revisions"]["totalCount"] == rest_count
            assert node["revisions"]["nodes"] == [task_revision_as_gql(r) for r in revisions]
            assert [r["revision"] for r in revisions] == list(
                range(rest_count, max(rest_count - INNER, 0), -1)
            )
            subs = self.rest_get(f"/tasks/{t['id']}/submissions", limit=200)["items"]
            assert connection(node["submissions"], subs) == [submission_as_gql(s) for s in subs]
            # every decision that ever affected the task, newest first (createdAt, then id)
            ever = [
                d for d in decisions
                if any(a["task_id"] == t["id"] for g in d["history"]["items"]
                       for a in g["affected"])
            ]  # fmt: skip
            ever.sort(key=lambda d: (d["created_at"], d["id"]), reverse=True)
            assert connection(node["decisions"], ever) == refs([d["id"] for d in ever])

    def _check_knowledge(self, conn: dict[str, Any]) -> None:
        listed = self.rest_get("/knowledge", limit=200)["items"]
        assert sorted(k["id"] for k in listed) == sorted(self.knowledge)
        for node, k in zip(connection(conn, listed), listed, strict=True):
            detail = self.rest_get(f"/knowledge/{k['id']}", limit=INNER)
            history = detail.pop("history")
            totals = detail.pop("feedback")
            assert detail == k  # the list and the detail agree
            expected = knowledge_as_gql(k)
            assert {f: node[f] for f in expected} == expected
            assert node["feedbackTotals"] == totals_as_gql(totals)
            assert node["revisions"]["totalCount"] == k["revision"]
            assert node["revisions"]["nodes"] == [
                knowledge_revision_as_gql(r) for r in history["items"]
            ]
            per_revision = [r["feedback"] for r in history["items"]]
            assert sum(f["useful"] for f in per_revision) == totals["useful"]
            assert sum(f["not_useful"] for f in per_revision) == totals["not_useful"]

    def _check_decisions(self, conn: dict[str, Any]) -> None:
        listed = self.rest_get("/decisions", limit=200)["items"]
        assert [d["id"] for d in listed] == self.decisions  # oldest first
        for node, d in zip(connection(conn, listed), listed, strict=True):
            detail = self.rest_get(f"/decisions/{d['id']}", limit=INNER)
            history = detail.pop("history")
            assert detail == d
            expected = decision_as_gql(d)
            assert {f: node[f] for f in expected} == expected
            assert node["generations"]["totalCount"] == d["generation"]
            gens = [generation_as_gql(g) for g in history["items"]]
            assert node["generations"]["nodes"] == gens
            assert [g["generation"] for g in gens] == list(range(d["generation"], 0, -1))
            assert gens[0] == node["current"]

    def _walk_tasks(self) -> None:
        """`tasks` a page at a time, forward with first/after (each endCursor
        REST's next_cursor for the same page) and backward with last/before."""
        size = 2
        forward: list[str] = []
        after: str | None = None
        cursor: str | None = None
        while True:
            data = self.run(self.hana.gql(PAGE, {"first": size, "after": after}))
            conn = data["data"]["project"]["tasks"]
            assert conn["totalCount"] == len(self.tasks)
            params: dict[str, Any] = {"limit": size}
            if cursor:
                params["cursor"] = cursor
            rest = self.rest_get("/tasks", **params)
            ids = [e["node"]["restId"] for e in conn["edges"]]
            assert ids == [t["id"] for t in rest["items"]]
            info = conn["pageInfo"]
            assert info["hasPreviousPage"] is (after is not None)
            assert info["hasNextPage"] is (rest["next_cursor"] is not None)
            if ids:
                assert info["endCursor"] == conn["edges"][-1]["cursor"]
                assert info["startCursor"] == conn["edges"][0]["cursor"]
            if info["hasNextPage"]:
                assert info["endCursor"] == rest["next_cursor"]
            forward += ids
            if not info["hasNextPage"]:
                break
            after = cursor = info["endCursor"]
        assert forward == self.tasks
        backward: list[str] = []
        before: str | None = None
        while True:
            data = self.run(self.hana.gql(PAGE, {"last": size, "before": before}))
            conn = data["data"]["project"]["tasks"]
            ids = [e["node"]["restId"] for e in conn["edges"]]
            info = conn["pageInfo"]
            assert info["hasNextPage"] is (before is not None)
            backward = ids + backward
            if not info["hasPreviousPage"]:
                break
            before = info["startCursor"]
        assert backward == self.tasks

    def _walk_events(self, sequences: list[int]) -> None:
        """`events` by sequence cursors: pages of three forward, and the last
        three before the newest, as REST's `after` reads them."""
        pages: list[int] = []
        after = "0"
        while True:
            conn = self.run(self.hana.gql(EVENT_PAGE, {"first": 3, "after": after}))
            conn = conn["data"]["project"]["events"]
            rest = self.rest_get("/events", after=after, limit=3)
            got = [n["sequence"] for n in conn["nodes"]]
            assert got == [e["sequence"] for e in rest["items"]]
            pages += got
            if not conn["pageInfo"]["hasNextPage"]:
                break
            after = conn["pageInfo"]["endCursor"]
            assert after == str(rest["next_after"])
        assert pages == sequences
        if len(sequences) > 1:
            conn = self.run(self.hana.gql(EVENT_PAGE, {"last": 3, "before": str(sequences[-1])}))[
                "data"
            ]["project"]["events"]
            assert [n["sequence"] for n in conn["nodes"]] == sequences[-4:-1]
            assert conn["pageInfo"]["hasNextPage"] is True
            assert conn["pageInfo"]["hasPreviousPage"] is (len(sequences) > 4)


# at most 31 events and 30 revisions a run: every connection fits its first page
DashboardMachine.TestCase.settings = machine_settings(10, steps=30)
TestDashboardStateMachine = DashboardMachine.TestCase
