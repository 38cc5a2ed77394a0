"""GraphQL: decisions, their generations and answers, and the digest (the
mutations are decision_mutations.py).

Types are built from the REST JSON of the same resolvers. Generations, tasks
and principals are read through per-request DataLoaders, so a dashboard of
fifty decisions with every generation and affected task costs a fixed number
of statements however many decisions it shows.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Annotated, Any, cast

import strawberry

from waypost.resolvers.decisions import operations as decisions
from waypost.schema import loop_slice
from waypost.schema.context import Info
from waypost.schema.principals import Principal, load_principal
from waypost.schema.relay import (
    NODE_RESOLVERS,
    Connection,
    DateTime,
    Node,
    global_id,
    known_count,
    position_page,
    window,
)
from waypost.schema.tasks import Task, load_task

if TYPE_CHECKING:
    from waypost.schema.projects import Project

LazyProject = Annotated["Project", strawberry.lazy("waypost.schema.projects")]


@strawberry.enum
class DecisionStatus(enum.Enum):
    PENDING = "pending"
    ALLOWED = "allowed"
    DENIED = "denied"
    DEFERRED = "deferred"
    EXPIRED = "expired"
    STALE = "stale"


@strawberry.enum
class RequiredActor(enum.Enum):
    HUMAN = "human"
    AGENT = "agent"
    EITHER = "either"


@strawberry.enum
class Disposition(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    DEFER = "defer"


@strawberry.type(description="What an agent showed a human and the human's reply, verbatim.")
class Relay:
    prompt: str
    response: str


@strawberry.type(description="The one answer a generation may take.")
class DecisionAnswer:
    disposition: Disposition
    answer: str
    rationale: str
    conditions_confirmed: bool
    actor_id: str
    actor_session_id: str | None
    relayed: bool
    relay: Relay | None
    authorized_by_id: strawberry.Private[str | None]
    relay_policy_revision: int | None
    timed_out: bool
    at: DateTime

    @strawberry.field
    async def actor(self, info: Info) -> Principal | None:
        return await load_principal(info, self.actor_id)

    @strawberry.field(description="For a relayed answer: the human who enabled relaying.")
    async def authorized_by(self, info: Info) -> Principal | None:
        if self.authorized_by_id is None:
            return None
        return await load_principal(info, self.authorized_by_id)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DecisionAnswer:
        relay = d["relay"]
        return cls(
            disposition=Disposition(d["disposition"]),
            answer=d["answer"],
            rationale=d["rationale"],
            conditions_confirmed=d["conditions_confirmed"],
            actor_id=d["actor_id"],
            actor_session_id=d["actor_session_id"],
            relayed=d["relayed"],
            relay=Relay(prompt=relay["prompt"], response=relay["response"]) if relay else None,
            authorized_by_id=d["authorized_by"],
            relay_policy_revision=d["relay_policy_revision"],
            timed_out=d["timed_out"],
            at=d["at"],
        )


@strawberry.type(description="A task a generation affects, at the revision it pinned.")
class DecisionAffected:
    task_id: str
    pinned_revision: int
    # the task, when the field that listed this entry loaded it already
    loaded: strawberry.Private[Task | None] = None

    @strawberry.field
    def task(self, info: Info) -> Task | None:
        # synchronous when prefetched (no event-loop round trip per entry of a
        # dashboard), else the per-request loader
        if self.loaded is not None:
            return self.loaded
        return cast("Task | None", load_task(info, self.task_id))

    @strawberry.field(
        description=(
            "The task's revision now. Only a judged edit since the pin (title, description,"
            " acceptance criteria, kind) stales the decision; a priority or dependency edit"
            " moves this number too, so it may differ from pinnedRevision while the decision"
            " still counts (status says whether it does)."
        )
    )
    def current_revision(self, info: Info) -> int | None:
        if self.loaded is not None:
            return self.loaded.revision
        return cast("int | None", _revision(load_task(info, self.task_id)))


async def _revision(task: Awaitable[Task | None]) -> int | None:
    found = await task
    return found.revision if found else None


async def prefetch_affected(info: Info, generations: list[DecisionGeneration]) -> None:
    """Load every affected task of these generations at once (one loader batch
    with every other list resolving in the same tick) and attach them."""
    entries = [a for g in generations for a in g.affected_entries()]
    if not entries:
        return
    found = await info.context.loaders.task.load_many([a.task_id for a in entries])
    if loop_slice.spent():  # every list's tasks came in the same turn
        await loop_slice.next_turn()
    for entry, task in zip(entries, found, strict=True):
        entry.loaded = info.context.loaders.shared_object(task, Task.from_json)


@strawberry.type(description="One immutable cycle of a decision: its pins and its answer.")
class DecisionGeneration:
    generation: int
    # the affected entries as stored, made into objects once asked for: every
    # decision of a list carries its current generation, and making the
    # entries of each (100 per decision of a task's list) took 1.6 of 2.6 s
    # where no `affected` was selected (gqlloopaudit)
    affected_json: strawberry.Private[list[dict[str, Any]]]
    affected: list[DecisionAffected] = strawberry.field(
        resolver=lambda self: self.affected_entries()
    )
    policy_revision: int
    environment: str
    conditions: list[str]
    expires_at: DateTime | None
    reopen_rationale: str | None
    actor_id: str
    actor_session_id: str | None
    at: DateTime
    answer: DecisionAnswer | None
    affected_made: strawberry.Private[list[DecisionAffected] | None] = None

    def affected_entries(self) -> list[DecisionAffected]:
        """The entries, made once (a prefetch attaches their tasks to them)."""
        if self.affected_made is None:
            self.affected_made = [
                DecisionAffected(task_id=a["task_id"], pinned_revision=a["task_revision"])
                for a in self.affected_json
            ]
        return self.affected_made

    @strawberry.field(description="Who opened this cycle (the creator, or the reopener).")
    async def actor(self, info: Info) -> Principal | None:
        return await load_principal(info, self.actor_id)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DecisionGeneration:
        return cls(
            generation=d["generation"],
            affected_json=d["affected"],
            policy_revision=d["policy_revision"],
            environment=d["environment"],
            conditions=d["conditions"],
            expires_at=d["expires_at"],
            reopen_rationale=d["reopen_rationale"],
            actor_id=d["actor_id"],
            actor_session_id=d["actor_session_id"],
            at=d["at"],
            answer=DecisionAnswer.from_json(d["answer"]) if d["answer"] else None,
        )


@strawberry.type(description="A narrow question that gates the tasks it affects.")
class Decision(Node):
    rest_id: str
    project_id: str
    question: str
    options: list[str]
    rationale: str
    required_actor: RequiredActor
    recommendation: str | None
    reversible: bool
    status: DecisionStatus
    work_allowed: bool
    generation: int
    current: DecisionGeneration
    created_at: DateTime
    created_by_id: strawberry.Private[str]

    @strawberry.field(description="The tasks the current generation affects.")
    def affected(self) -> list[DecisionAffected]:
        return self.current.affected_entries()

    @strawberry.field
    async def created_by(self, info: Info) -> Principal | None:
        return await load_principal(info, self.created_by_id)

    @strawberry.field
    async def project(self, info: Info) -> LazyProject | None:
        from waypost.schema.projects import load_project

        return await load_project(info, self.project_id)

    @strawberry.field(description="Generations newest first, each with its answer.")
    async def generations(
        self,
        info: Info,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> Connection[DecisionGeneration]:
        page = await position_page(
            info.context.loaders.generations.load, self.rest_id, self.generation,
            window(first, after, last, before),
        )  # fmt: skip
        if loop_slice.spent():  # every decision's page came in the same turn
            await loop_slice.next_turn()

        # generations are numbered 1..n: the current one is their count. This
        # object's own generation is shown as the object holds it (`current`),
        # as the fast path does: a replay's record or a subscription's earlier
        # state has no answer yet, where the row read now may have one.
        def node(g: dict[str, Any]) -> DecisionGeneration:
            own = g["generation"] == self.generation
            return self.current if own else DecisionGeneration.from_json(g)

        connection = Connection.of(page, node, known_count(self.generation))
        if _selects_affected_task(info):
            await prefetch_affected(info, connection.nodes)
        return connection

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Decision:
        return cls(
            id=global_id("Decision", d["id"]),
            rest_id=d["id"],
            project_id=d["project_id"],
            question=d["question"],
            options=d["options"],
            rationale=d["rationale"],
            required_actor=RequiredActor(d["required_actor"]),
            recommendation=d["recommendation"],
            reversible=d["reversible"],
            status=DecisionStatus(d["status"]),
            work_allowed=d["work_allowed"],
            generation=d["generation"],
            current=DecisionGeneration.from_json(d["current"]),
            created_at=d["created_at"],
            created_by_id=d["created_by"],
        )


def _selects_affected_task(info: Info) -> bool:
    """Whether the selection under this field asks for `affected { task }` or
    `affected { currentRevision }` anywhere (fragments included)."""

    def walk(selections: list[Any], under_affected: bool) -> bool:
        for sel in selections:
            name = getattr(sel, "name", None)  # fragments have none: look inside
            if under_affected and name in ("task", "currentRevision"):
                return True
            if walk(getattr(sel, "selections", []), under_affected or name == "affected"):
                return True
        return False

    # the same field in every item of a list has the same selection: work it out
    # once per request (converting the selection is costly)
    key: list[object] = []
    path: Any = info.path
    while path is not None:
        if not isinstance(path.key, int):
            key.append(path.key)
        path = path.prev
    cache = info.context.memo
    found = cache.get(("affected-task", *key))
    if found is None:
        found = cache[("affected-task", *key)] = walk(list(info.selected_fields), False)
    return bool(found)


async def load_decision(info: Info, decision_id: str) -> Decision | None:
    """A decision by REST id, whatever its project, batched per request."""
    found = await info.context.loaders.decision.load(decision_id)
    return Decision.from_json(found) if found else None


NODE_RESOLVERS["Decision"] = load_decision


@strawberry.type
class DigestTruncated:
    pending_decisions: bool
    proceeded_by_timeout: bool
    timing_out_soon: bool
    blocked_tasks: bool


@strawberry.type(description="What awaits a human, what proceeded by timeout, what will soon.")
class Digest:
    project_id: str
    generated_at: DateTime
    pending_decisions: list[Decision]
    proceeded_by_timeout: list[Decision]
    timing_out_soon: list[Decision]
    blocked_tasks: list[Task]
    ready_task_count: int
    truncated: DigestTruncated

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Digest:
        return cls(
            project_id=d["project_id"],
            generated_at=d["generated_at"],
            pending_decisions=[Decision.from_json(x) for x in d["pending_decisions"]],
            proceeded_by_timeout=[Decision.from_json(x) for x in d["proceeded_by_timeout"]],
            timing_out_soon=[Decision.from_json(x) for x in d["timing_out_soon"]],
            blocked_tasks=[Task.from_json(t) for t in d["blocked_tasks"]],
            ready_task_count=d["ready_task_count"],
            truncated=DigestTruncated(**d["truncated"]),
        )


@strawberry.type
class ProjectDecisionFields:
    """`Project.decisions`, `Project.decision` and `Project.digest` (a base of Project)."""

    if TYPE_CHECKING:
        rest_id: str

    @strawberry.field(description="Decisions by creation time; filter by computed status.")
    async def decisions(
        self,
        info: Info,
        status: DecisionStatus | None = None,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> Connection[Decision]:
        w = window(first, after, last, before)
        rt, project_id = info.context.rt, self.rest_id
        status_value = status.value if status else None

        return await info.context.loaders.connection(
            ("Project.decisions", project_id, status_value, w.cursor, w.limit, w.backward),
            lambda: decisions.list_decisions(
                rt, project_id, status_value, w.cursor, w.limit, w.backward
            ),
            Decision.from_json,
            lambda: decisions.count_decisions(rt, project_id, status_value),
        )

    @strawberry.field(description="A decision of this project by REST id.")
    async def decision(self, info: Info, id: str) -> Decision | None:
        found = await load_decision(info, id)
        return found if found is not None and found.project_id == self.rest_id else None

    @strawberry.field
    async def digest(self, info: Info) -> Digest:
        loaders = info.context.loaders
        # one object per digest read: its lists hold up to 800 objects, and a
        # query may reach the digest through every task it lists
        found = loaders.shared_object(await loaders.digest.load(self.rest_id), Digest.from_json)
        assert found is not None
        return found
