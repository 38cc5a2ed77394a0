"""GraphQL: tasks, their revisions, leases, publication authority and readiness.

Types are built from the REST JSON of the same resolvers. References are
objects (`dependsOn`, `subject`, `activities`, `lease.owner`, ...) read through
per-request DataLoaders, so a page of tasks with their revisions, dependencies
and subjects costs a fixed number of statements however long the page is.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Annotated, Any

import strawberry

from waypost.clock import format_time
from waypost.pagination import Page
from waypost.resolvers.context.params import search_terms
from waypost.resolvers.tasks import reads as task_reads
from waypost.schema.context import Info
from waypost.schema.mutation_arguments import checked_before_mutations
from waypost.schema.principals import Principal, load_principal
from waypost.schema.relay import (
    NODE_RESOLVERS,
    Connection,
    DateTime,
    Node,
    Window,
    check_cursor,
    global_id,
    known_count,
    position_page,
    window,
)
from waypost.schema.searches import start_search

if TYPE_CHECKING:
    from waypost.schema.decisions import Decision
    from waypost.schema.projects import Project

LazyProject = Annotated["Project", strawberry.lazy("waypost.schema.projects")]
LazyDecision = Annotated["Decision", strawberry.lazy("waypost.schema.decisions")]


@strawberry.enum
class TaskStatus(enum.Enum):
    OPEN = "open"
    CLAIMED = "claimed"
    SUBMITTED = "submitted"
    DONE = "done"
    CANCELLED = "cancelled"


@strawberry.enum
class PublicationOutcome(enum.Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@strawberry.type(
    description="A lease: one principal (and, for an agent, one session) owns the work."
)
class Lease:
    owner_id: strawberry.Private[str]
    session_id: str | None
    expires_at: DateTime
    workflow: bool = strawberry.field(description="True when the task is an activity.")

    @strawberry.field(description="Past expiry: only `taskRecover` takes it over.")
    def expired(self, info: Info) -> bool:
        # judged at the service time of this response (the REST lease has no such field)
        return self.expires_at <= format_time(info.context.rt.now())

    @strawberry.field
    async def owner(self, info: Info) -> Principal | None:
        return await load_principal(info, self.owner_id)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Lease:
        return cls(
            owner_id=d["owner_id"],
            session_id=d["session_id"],
            expires_at=d["expires_at"],
            workflow=d["workflow"],
        )


@strawberry.type
class PublicationResult:
    outcome: PublicationOutcome
    detail: str
    at: DateTime


@strawberry.type(description="Exclusive integration publication authority over a task.")
class Publication:
    holder_id: strawberry.Private[str]
    holder_session_id: str | None
    prepared_at: DateTime
    result: PublicationResult | None

    @strawberry.field
    async def holder(self, info: Info) -> Principal | None:
        return await load_principal(info, self.holder_id)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Publication:
        result = d["result"]
        return cls(
            holder_id=d["holder_id"],
            holder_session_id=d["holder_session_id"],
            prepared_at=d["prepared_at"],
            result=PublicationResult(
                outcome=PublicationOutcome(result["outcome"]), detail=result["detail"],
                at=result["at"],
            ) if result else None,
        )  # fmt: skip


@strawberry.type(description="What keeps a task from being ready.")
class BlockedBy:
    decision_ids: list[str] = strawberry.field(description="At most 20, in a stable order.")
    decisions_truncated: bool
    dependency_ids: strawberry.Private[list[str]]

    @strawberry.field(description="The blocking decisions (at most 20), as objects.")
    async def decisions(self, info: Info) -> list[LazyDecision]:
        from waypost.schema.decisions import Decision

        # all at once, so the per-request loader batches them
        found = await info.context.loaders.decision.load_many(self.decision_ids)
        return [Decision.from_json(d) for d in found if d is not None]

    @strawberry.field(description="Dependencies that are not done yet.")
    async def dependencies(self, info: Info) -> list[Task]:
        return await load_tasks(info, self.dependency_ids)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BlockedBy:
        return cls(
            decision_ids=d["decisions"],
            decisions_truncated=d["decisions_truncated"],
            dependency_ids=d["dependencies"],
        )


@strawberry.type
class Attributed:
    """A history record: who wrote it (an object) and when."""

    actor_id: strawberry.Private[str]
    at: DateTime

    @strawberry.field
    async def actor(self, info: Info) -> Principal | None:
        return await load_principal(info, self.actor_id)


@strawberry.type(description="One immutable task revision.")
class TaskRevision(Attributed):
    revision: int
    title: str
    description: str
    acceptance_criteria: list[str]
    kind: str
    priority: int
    depends_on_ids: list[str]
    changed_fields: list[str]
    judged_change: bool = strawberry.field(
        description="True when title, description, acceptance criteria or kind changed."
    )

    @strawberry.field(description="The dependencies this revision named, in order.")
    async def depends_on(self, info: Info) -> list[Task]:
        return await load_tasks(info, self.depends_on_ids)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TaskRevision:
        return cls(
            revision=d["revision"],
            title=d["title"],
            description=d["description"],
            acceptance_criteria=d["acceptance_criteria"],
            kind=d["kind"],
            priority=d["priority"],
            depends_on_ids=d["depends_on"],
            changed_fields=d["changed_fields"],
            judged_change=d["judged_change"],
            actor_id=d["actor_id"],
            at=d["at"],
        )


@strawberry.type(description="A progress note left by a lease owner.")
class TaskCheckpoint(Attributed):
    rest_id: str
    note: str
    actor_session_id: str | None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TaskCheckpoint:
        return cls(
            rest_id=d["id"],
            note=d["note"],
            actor_id=d["actor_id"],
            actor_session_id=d["actor_session_id"],
            at=d["at"],
        )


@strawberry.type(description="Submitted work: immutable, pinned to the task revision it answers.")
class Submission(Attributed):
    rest_id: str
    task_id: strawberry.Private[str]
    task_revision: int
    summary: str
    actor_session_id: str | None

    @strawberry.field
    async def task(self, info: Info) -> Task | None:
        return await load_task(info, self.task_id)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Submission:
        return cls(
            rest_id=d["id"],
            task_id=d["task_id"],
            task_revision=d["task_revision"],
            summary=d["summary"],
            actor_id=d["actor_id"],
            actor_session_id=d["actor_session_id"],
            at=d["at"],
        )


@strawberry.type(description="A unit of work; with a subject it is an activity on that task.")
class Task(Node):
    rest_id: str
    project_id: str
    title: str
    description: str
    acceptance_criteria: list[str]
    kind: str
    priority: int
    depends_on_ids: strawberry.Private[list[str]]
    subject_task_id: strawberry.Private[str | None]
    status: TaskStatus
    revision: int
    ready: bool
    blocked_by: BlockedBy
    lease: Lease | None
    publication: Publication | None
    created_at: DateTime
    updated_at: DateTime

    @strawberry.field
    async def project(self, info: Info) -> LazyProject | None:
        from waypost.schema.projects import load_project

        return await load_project(info, self.project_id)

    @strawberry.field(description="The tasks this one depends on, in the order given.")
    async def depends_on(self, info: Info) -> list[Task]:
        return await load_tasks(info, self.depends_on_ids)

    @strawberry.field(description="The task this activity works on (a review, a verification).")
    async def subject(self, info: Info) -> Task | None:
        if self.subject_task_id is None:
            return None
        return await load_task(info, self.subject_task_id)

    @strawberry.field(description="Activities on this task, oldest first.")
    async def activities(self, info: Info) -> list[Task]:
        found = await info.context.loaders.activities.load(self.rest_id)
        return [Task.from_json(t) for t in found]

    @strawberry.field(description="Immutable revisions, newest first.")
    async def revisions(
        self,
        info: Info,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> Connection[TaskRevision]:
        loader = info.context.loaders.history(task_reads.REVISIONS)

        def forward(key: tuple[str, str | None, int]) -> Awaitable[Page[dict[str, Any]]]:
            task_id, cursor, limit = key
            return loader.load((task_id, limit, cursor, False))

        w = window(first, after, last, before)
        page = await position_page(forward, self.rest_id, self.revision, w)
        # revisions are numbered 1..n: the task's revision is their count
        return Connection.of(page, TaskRevision.from_json, known_count(self.revision))

    @strawberry.field(description="Checkpoint notes, newest first.")
    async def checkpoints(
        self,
        info: Info,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> Connection[TaskCheckpoint]:
        w = window(first, after, last, before)
        page = await load_history(info, task_reads.CHECKPOINTS, self.rest_id, w)
        count = info.context.loaders.history_count(task_reads.CHECKPOINTS)
        return Connection.of(page, TaskCheckpoint.from_json, lambda: count.load(self.rest_id))

    @strawberry.field(description="Submissions, newest first.")
    async def submissions(
        self,
        info: Info,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> Connection[Submission]:
        w = window(first, after, last, before)
        page = await load_history(info, task_reads.SUBMISSIONS, self.rest_id, w)
        count = info.context.loaders.history_count(task_reads.SUBMISSIONS)
        return Connection.of(page, Submission.from_json, lambda: count.load(self.rest_id))

    @strawberry.field(
        description="Every decision that has ever affected this task (in any generation),"
        " newest first."
    )
    async def decisions(
        self,
        info: Info,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> Connection[LazyDecision]:
        from waypost.schema.decisions import Decision

        w = window(first, after, last, before)
        check_cursor(w, str, str)
        loaders = info.context.loaders
        page = await loaders.task_decisions.load((self.rest_id, w.limit, w.cursor, w.backward))
        return Connection.of(
            page, Decision.from_json, lambda: loaders.task_decision_counts.load(self.rest_id)
        )

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Task:
        return cls(
            id=global_id("Task", d["id"]),
            rest_id=d["id"],
            project_id=d["project_id"],
            title=d["title"],
            description=d["description"],
            acceptance_criteria=d["acceptance_criteria"],
            kind=d["kind"],
            priority=d["priority"],
            depends_on_ids=d["depends_on"],
            subject_task_id=d["subject_task_id"],
            status=TaskStatus(d["status"]),
            revision=d["revision"],
            ready=d["ready"],
            blocked_by=BlockedBy.from_json(d["blocked_by"]),
            lease=Lease.from_json(d["lease"]) if d["lease"] else None,
            publication=Publication.from_json(d["publication"]) if d["publication"] else None,
            created_at=d["created_at"],
            updated_at=d["updated_at"],
        )


async def load_task(info: Info, task_id: str) -> Task | None:
    """A task by REST id, whatever its project, batched per request."""
    found = await info.context.loaders.task.load(task_id)
    return Task.from_json(found) if found else None


async def load_tasks(info: Info, task_ids: list[str]) -> list[Task]:
    """Several tasks in the order given, through the same per-request loader."""
    found = await info.context.loaders.task.load_many(task_ids)
    return [Task.from_json(t) for t in found if t is not None]


async def load_history(
    info: Info, history: task_reads.History, task_id: str, w: Window
) -> Page[dict[str, Any]]:
    """A page of a task's history, batched per request across tasks."""
    check_cursor(w, int)
    key = (task_id, w.limit, w.cursor, w.backward)
    return await info.context.loaders.history(history).load(key)


NODE_RESOLVERS["Task"] = load_task


@checked_before_mutations("Project", "tasks")
def _check_list(arguments: dict[str, Any]) -> None:
    """The list's one refusal that needs no data (`q`), before a mutation whose
    selection holds it; list_tasks makes the same check when it runs."""
    if arguments["q"] is not None:
        search_terms(arguments["q"])


@strawberry.type
class ProjectTaskFields:
    """`Project.tasks` and `Project.task` (a base class of Project)."""

    if TYPE_CHECKING:
        rest_id: str

    @strawberry.field(
        description="Tasks in creation order; filter by status, readiness and full text (q)."
    )
    async def tasks(
        self,
        info: Info,
        status: TaskStatus | None = None,
        ready: bool | None = None,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
        q: str | None = None,
    ) -> Connection[Task]:
        w = window(first, after, last, before)
        rt, project_id = info.context.rt, self.rest_id
        status_value = status.value if status else None

        loaders = info.context.loaders

        async def page() -> Page[dict[str, Any]]:
            if q is not None:
                start_search(loaders)  # a search this operation has not run yet
            return await task_reads.list_tasks(
                rt,
                project_id,
                status=status_value,
                ready=ready,
                cursor=w.cursor,
                limit=w.limit,
                q=q,
                backward=w.backward,
            )

        return await loaders.connection(
            ("Project.tasks", project_id, status_value, ready, w.cursor, w.limit, w.backward, q),
            page,
            Task.from_json,
            lambda: task_reads.count_tasks(rt, project_id, status=status_value, ready=ready, q=q),
        )

    @strawberry.field(description="A task of this project by REST id.")
    async def task(self, info: Info, id: str) -> Task | None:
        found = await load_task(info, id)
        return found if found is not None and found.project_id == self.rest_id else None
