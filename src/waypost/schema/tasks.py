"""GraphQL: tasks, their revisions, leases, publication authority and readiness.

Types are built from the REST JSON of the same resolvers. References are
objects (`dependsOn`, `subject`, `activities`, `lease.owner`, ...) read through
per-request DataLoaders, so a page of tasks with their revisions, dependencies
and subjects costs a fixed number of statements however long the page is.
"""

from __future__ import annotations

import asyncio
import enum
from typing import TYPE_CHECKING, Annotated, Any

import strawberry
from strawberry.dataloader import DataLoader

from waypost.clock import format_time
from waypost.errors import NotFound
from waypost.pagination import Page
from waypost.resolvers.tasks import reads as task_reads
from waypost.schema.context import Info
from waypost.schema.principals import Principal, load_principal
from waypost.schema.relay import NODE_RESOLVERS, Connection, Node, first_to_limit, global_id

if TYPE_CHECKING:
    from waypost.schema.projects import Project

LazyProject = Annotated["Project", strawberry.lazy("waypost.schema.projects")]


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
    expires_at: str
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
    at: str


@strawberry.type(description="Exclusive integration publication authority over a task.")
class Publication:
    holder_id: strawberry.Private[str]
    holder_session_id: str | None
    prepared_at: str
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
    async def decisions(self, info: Info) -> list[Node]:
        resolve = NODE_RESOLVERS.get("Decision")
        if resolve is None:
            return []
        # all at once, so the per-request loader batches them (one by one would
        # cost a statement per blocking decision)
        found = await asyncio.gather(*(resolve(info, d) for d in self.decision_ids))
        return [d for d in found if d is not None]

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
    at: str

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
    created_at: str
    updated_at: str

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
        rt = info.context.rt

        async def batch(ids: Any) -> list[list[Task]]:
            now = rt.now()
            found = await rt.db.read(lambda c: task_reads.activities_json(c, list(ids), now))
            return [[Task.from_json(t) for t in found[i]] for i in ids]

        result: list[Task] = await info.context.loader("task_activities", batch).load(self.rest_id)
        return result

    @strawberry.field(description="Immutable revisions, newest first.")
    async def revisions(
        self, info: Info, first: int | None = None, after: str | None = None
    ) -> Connection[TaskRevision]:
        page = await load_history(info, task_reads.REVISIONS, (self.rest_id, first, after))
        return Connection.of(page, TaskRevision.from_json)

    @strawberry.field(description="Checkpoint notes, newest first.")
    async def checkpoints(
        self, info: Info, first: int | None = None, after: str | None = None
    ) -> Connection[TaskCheckpoint]:
        page = await load_history(info, task_reads.CHECKPOINTS, (self.rest_id, first, after))
        return Connection.of(page, TaskCheckpoint.from_json)

    @strawberry.field(description="Submissions, newest first.")
    async def submissions(
        self, info: Info, first: int | None = None, after: str | None = None
    ) -> Connection[Submission]:
        page = await load_history(info, task_reads.SUBMISSIONS, (self.rest_id, first, after))
        return Connection.of(page, Submission.from_json)

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


def _task_loader(info: Info) -> DataLoader[str, Task | None]:
    rt = info.context.rt

    async def batch(ids: Any) -> list[Task | None]:
        now = rt.now()
        found = await rt.db.read(lambda c: task_reads.tasks_json_by_ids(c, list(ids), now))
        return [Task.from_json(found[i]) if i in found else None for i in ids]

    return info.context.loader("task", batch)


async def load_task(info: Info, task_id: str) -> Task | None:
    """A task by REST id, whatever its project, batched per request."""
    return await _task_loader(info).load(task_id)


async def load_tasks(info: Info, task_ids: list[str]) -> list[Task]:
    """Several tasks in the order given, through the same per-request loader."""
    found = await _task_loader(info).load_many(task_ids)
    return [t for t in found if t is not None]


async def load_history(
    info: Info, history: task_reads.History, key: tuple[str, int | None, str | None]
) -> Page[dict[str, Any]]:
    """A page of a task's history, batched per request across tasks."""
    rt = info.context.rt

    async def batch(keys: Any) -> list[Page[dict[str, Any]]]:
        found = await rt.db.read(lambda c: task_reads.history_pages(c, history, list(keys)))
        return [found[k] for k in keys]

    task_id, first, after = key
    loader = info.context.loader(f"task_history:{history.table}", batch)
    page: Page[dict[str, Any]] = await loader.load((task_id, first_to_limit(first), after))
    return page


NODE_RESOLVERS["Task"] = load_task


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
        q: str | None = None,
    ) -> Connection[Task]:
        page = await task_reads.list_tasks(
            info.context.rt,
            self.rest_id,
            status=status.value if status else None,
            ready=ready,
            cursor=after,
            limit=first_to_limit(first),
            q=q,
        )
        return Connection.of(page, Task.from_json)

    @strawberry.field(description="A task of this project by REST id.")
    async def task(self, info: Info, id: str) -> Task | None:
        try:
            return Task.from_json(await task_reads.get(info.context.rt, self.rest_id, id))
        except NotFound:
            return None
