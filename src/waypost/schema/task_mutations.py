"""GraphQL mutations for tasks: one per REST operation, same resolvers, same rules.

Each takes one `input` with an `idempotencyKey`, the project and (except create
and claim) the task's REST id; business errors come back as `userErrors` with
the REST codes.
"""

from __future__ import annotations

from typing import Any

import strawberry

from waypost.decoding import convert
from waypost.resolvers.core.receipts import Outcome
from waypost.resolvers.tasks import leases, publication
from waypost.resolvers.tasks import operations as tasks
from waypost.resolvers.tasks.actions import SUMMARIES, TaskAction
from waypost.schema.context import Info
from waypost.schema.errors import UserError, mutate, split_input
from waypost.schema.knowledge import Knowledge
from waypost.schema.knowledge_mutations import SubmissionLessonInput
from waypost.schema.tasks import (
    Lease,
    PublicationOutcome,
    Submission,
    Task,
    TaskCheckpoint,
    TaskStatus,
)


@strawberry.input
class TaskCreateInput:
    idempotency_key: str
    project_id: str
    title: str
    description: str | None = strawberry.UNSET
    acceptance_criteria: list[str] | None = strawberry.UNSET
    kind: str | None = strawberry.UNSET
    priority: int | None = strawberry.UNSET
    depends_on: list[str] | None = strawberry.UNSET
    subject_task_id: str | None = strawberry.UNSET


@strawberry.input(description="Fields left out are unchanged; `status` takes OPEN or CANCELLED.")
class TaskUpdateInput:
    idempotency_key: str
    project_id: str
    task_id: str
    expected_revision: int
    title: str | None = strawberry.UNSET
    description: str | None = strawberry.UNSET
    acceptance_criteria: list[str] | None = strawberry.UNSET
    kind: str | None = strawberry.UNSET
    priority: int | None = strawberry.UNSET
    depends_on: list[str] | None = strawberry.UNSET
    status: TaskStatus | None = strawberry.UNSET


@strawberry.input(description="Without taskId: the highest-priority ready task (ties: oldest).")
class TaskClaimInput:
    idempotency_key: str
    project_id: str
    task_id: str | None = strawberry.UNSET


@strawberry.input
class TaskActionInput:
    idempotency_key: str
    project_id: str
    task_id: str


@strawberry.input
class TaskCheckpointInput:
    idempotency_key: str
    project_id: str
    task_id: str
    note: str


@strawberry.input(description="`lessons`: up to 50, each recorded as a knowledge record.")
class TaskSubmitInput:
    idempotency_key: str
    project_id: str
    task_id: str
    summary: str
    lessons: list[SubmissionLessonInput] | None = strawberry.UNSET
    expected_revision: int | None = strawberry.field(
        default=strawberry.UNSET,
        description="The task revision the work answers (optional): a task edited since"
        " is refused `revision_conflict` instead of being recorded against a revision"
        " its holder never read.",
    )


@strawberry.input
class TaskPublicationResultInput:
    idempotency_key: str
    project_id: str
    task_id: str
    outcome: PublicationOutcome
    detail: str | None = strawberry.UNSET


@strawberry.type
class TaskPayload:
    task: Task | None
    user_errors: list[UserError]
    replayed: bool


@strawberry.type
class TaskLeasePayload:
    task: Task | None
    lease: Lease | None
    user_errors: list[UserError]
    replayed: bool


@strawberry.type(description="The task taken over, the lease that lapsed and the latest notes.")
class TaskRecoverPayload:
    task: Task | None
    lease: Lease | None
    previous_lease: Lease | None
    checkpoints: list[TaskCheckpoint]
    user_errors: list[UserError]
    replayed: bool


@strawberry.type
class TaskCheckpointPayload:
    checkpoint: TaskCheckpoint | None
    task: Task | None
    user_errors: list[UserError]
    replayed: bool


@strawberry.type
class TaskSubmitPayload:
    submission: Submission | None
    task: Task | None
    lessons: list[Knowledge]
    user_errors: list[UserError]
    replayed: bool


async def _action(info: Info, name: str, input: Any, run: TaskAction, model: Any = None) -> Outcome:
    """Call `run(rt, actor, idem, project, task[, body])` as the REST route does, the
    rest of the input converted to `model` with the same strict rules."""
    idem, body = split_input(name, input)
    project_id, task_id = body.pop("project_id"), body.pop("task_id")
    extra = () if model is None else (convert(body, model),)
    ctx = info.context
    return await run(ctx.rt, ctx.actor, idem, project_id, task_id, *extra)


def _task_payload(outcome: Outcome | None, errors: list[UserError]) -> TaskPayload:
    return TaskPayload(
        task=Task.from_json(outcome.body) if outcome else None,
        user_errors=errors,
        replayed=bool(outcome and outcome.replayed),
    )


def _lease_payload(outcome: Outcome | None, errors: list[UserError]) -> TaskLeasePayload:
    return TaskLeasePayload(
        task=Task.from_json(outcome.body["task"]) if outcome else None,
        lease=Lease.from_json(outcome.body["lease"]) if outcome else None,
        user_errors=errors,
        replayed=bool(outcome and outcome.replayed),
    )


@strawberry.type
class TaskMutations:
    @strawberry.mutation(description="Create a task (revision 1).")
    async def task_create(self, info: Info, input: TaskCreateInput) -> TaskPayload:
        async def run() -> Outcome:
            idem, body = split_input("taskCreate", input)
            project_id = body.pop("project_id")
            create = convert(body, tasks.TaskCreate)
            return await tasks.create(info.context.rt, info.context.actor, idem, project_id, create)

        return _task_payload(*await mutate(run))

    @strawberry.mutation(description="Edit a task under expectedRevision (the next revision).")
    async def task_update(self, info: Info, input: TaskUpdateInput) -> TaskPayload:
        run = tasks.update
        return _task_payload(
            *await mutate(lambda: _action(info, "taskUpdate", input, run, tasks.TaskPatch))
        )

    @strawberry.mutation(description="Claim the next ready task, or the named one.")
    async def task_claim(self, info: Info, input: TaskClaimInput) -> TaskLeasePayload:
        async def run() -> Outcome:
            idem, body = split_input("taskClaim", input)
            project_id = body.pop("project_id")
            claim = convert(body, leases.ClaimBody)
            return await leases.claim(info.context.rt, info.context.actor, idem, project_id, claim)

        return _lease_payload(*await mutate(run))

    @strawberry.mutation(description=SUMMARIES["renew"])
    async def task_renew(self, info: Info, input: TaskActionInput) -> TaskLeasePayload:
        return _lease_payload(
            *await mutate(lambda: _action(info, "taskRenew", input, leases.renew))
        )

    @strawberry.mutation(description=SUMMARIES["checkpoint"])
    async def task_checkpoint(
        self, info: Info, input: TaskCheckpointInput
    ) -> TaskCheckpointPayload:
        run, model = leases.checkpoint, leases.CheckpointBody
        outcome, errors = await mutate(lambda: _action(info, "taskCheckpoint", input, run, model))
        return TaskCheckpointPayload(
            checkpoint=TaskCheckpoint.from_json(outcome.body["checkpoint"]) if outcome else None,
            task=Task.from_json(outcome.body["task"]) if outcome else None,
            user_errors=errors,
            replayed=bool(outcome and outcome.replayed),
        )

    @strawberry.mutation(description=SUMMARIES["release"])
    async def task_release(self, info: Info, input: TaskActionInput) -> TaskPayload:
        return _task_payload(
            *await mutate(lambda: _action(info, "taskRelease", input, leases.release))
        )

    @strawberry.mutation(description=SUMMARIES["recover"])
    async def task_recover(self, info: Info, input: TaskActionInput) -> TaskRecoverPayload:
        outcome, errors = await mutate(lambda: _action(info, "taskRecover", input, leases.recover))
        body = outcome.body if outcome else None
        return TaskRecoverPayload(
            task=Task.from_json(body["task"]) if body else None,
            lease=Lease.from_json(body["lease"]) if body else None,
            previous_lease=Lease.from_json(body["previous_lease"]) if body else None,
            checkpoints=[TaskCheckpoint.from_json(c) for c in body["checkpoints"]] if body else [],
            user_errors=errors,
            replayed=bool(outcome and outcome.replayed),
        )

    @strawberry.mutation(description=SUMMARIES["submit"])
    async def task_submit(self, info: Info, input: TaskSubmitInput) -> TaskSubmitPayload:
        run, model = leases.submit, leases.SubmitBody
        outcome, errors = await mutate(lambda: _action(info, "taskSubmit", input, run, model))
        body = outcome.body if outcome else None
        return TaskSubmitPayload(
            submission=Submission.from_json(body["submission"]) if body else None,
            task=Task.from_json(body["task"]) if body else None,
            lessons=[Knowledge.from_json(k, k["project_id"]) for k in body["lessons"]]
            if body
            else [],
            user_errors=errors,
            replayed=bool(outcome and outcome.replayed),
        )

    @strawberry.mutation(description=SUMMARIES["complete"])
    async def task_complete(self, info: Info, input: TaskActionInput) -> TaskPayload:
        return _task_payload(
            *await mutate(lambda: _action(info, "taskComplete", input, leases.complete))
        )

    @strawberry.mutation(description=SUMMARIES["publication/prepare"])
    async def task_publication_prepare(self, info: Info, input: TaskActionInput) -> TaskPayload:
        run = publication.prepare
        return _task_payload(
            *await mutate(lambda: _action(info, "taskPublicationPrepare", input, run))
        )

    @strawberry.mutation(description=SUMMARIES["publication/result"])
    async def task_publication_result(
        self, info: Info, input: TaskPublicationResultInput
    ) -> TaskPayload:
        run, model = publication.result, publication.ResultBody
        return _task_payload(
            *await mutate(lambda: _action(info, "taskPublicationResult", input, run, model))
        )

    @strawberry.mutation(description=SUMMARIES["publication/finalize"])
    async def task_publication_finalize(self, info: Info, input: TaskActionInput) -> TaskPayload:
        run = publication.finalize
        return _task_payload(
            *await mutate(lambda: _action(info, "taskPublicationFinalize", input, run))
        )
