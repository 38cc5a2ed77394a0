"""REST routes: tasks, their revisions, leases, submissions and publication."""

from __future__ import annotations

from typing import Any

from waypost.pagination import Page
from waypost.resolvers.core.receipts import Outcome
from waypost.resolvers.tasks import leases, publication
from waypost.resolvers.tasks import operations as tasks
from waypost.resolvers.tasks import reads as task_reads
from waypost.resolvers.tasks.actions import SUMMARIES, TaskAction
from waypost.rest.queries import ListQuery
from waypost.rest.routing import Call, RouteTable

table = RouteTable("tasks")
TASK = "/api/v1/projects/{project}/tasks/{task}"


@table.post("/api/v1/projects/{project}/tasks", body=tasks.TaskCreate, status=201)
async def create_task(call: Call) -> Outcome:
    """Create a task (revision 1); `subject_task_id` makes it an activity."""
    assert call.idem
    return await tasks.create(call.rt, call.actor, call.idem, call.params["project"], call.body)


@table.get("/api/v1/projects/{project}/tasks", query=tasks.TaskListQuery)
async def list_tasks(call: Call) -> Page[Any]:
    """Tasks in creation order; filters `status`, `ready` and full-text `q`."""
    q = call.query
    return await task_reads.list_tasks(
        call.rt, call.params["project"], status=q.status, ready=q.ready, cursor=q.cursor,
        limit=q.limit, q=q.q,
    )  # fmt: skip


@table.get(TASK)
async def get_task(call: Call) -> dict[str, Any]:
    """One task with its readiness, lease and publication authority."""
    return await task_reads.get(call.rt, call.params["project"], call.params["task"])


@table.patch(TASK, body=tasks.TaskPatch)
async def update_task(call: Call) -> Outcome:
    """Edit a task under `expected_revision`; each accepted edit writes the next revision."""
    assert call.idem
    p = call.params
    return await tasks.update(call.rt, call.actor, call.idem, p["project"], p["task"], call.body)


async def _history(call: Call, history: task_reads.History) -> Page[Any]:
    p, q = call.params, call.query
    return await task_reads.history_of(call.rt, history, p["project"], p["task"], q.cursor, q.limit)


@table.get(f"{TASK}/revisions", query=ListQuery)
async def task_revisions(call: Call) -> Page[Any]:
    """Immutable task revisions, newest first."""
    return await _history(call, task_reads.REVISIONS)


@table.get(f"{TASK}/checkpoints", query=ListQuery)
async def task_checkpoints(call: Call) -> Page[Any]:
    """Checkpoint notes left by lease owners, newest first."""
    return await _history(call, task_reads.CHECKPOINTS)


@table.get(f"{TASK}/submissions", query=ListQuery)
async def task_submissions(call: Call) -> Page[Any]:
    """Submissions of the task, newest first."""
    return await _history(call, task_reads.SUBMISSIONS)


@table.post("/api/v1/projects/{project}/claims", body=leases.ClaimBody)
async def claim_task(call: Call) -> Outcome:
    """Claim the highest-priority ready task (ties: oldest), or the named one."""
    assert call.idem
    return await leases.claim(call.rt, call.actor, call.idem, call.params["project"], call.body)


def _task_action(name: str, action: str, run: TaskAction, body: Any = None) -> None:
    """Register `POST .../tasks/{task}/<action>`: `run(rt, actor, idem, project, task[, body])`.
    `name` is the OpenAPI operationId."""

    async def handler(call: Call) -> Outcome:
        assert call.idem
        p = call.params
        extra = () if body is None else (call.body,)
        return await run(call.rt, call.actor, call.idem, p["project"], p["task"], *extra)

    handler.__name__ = name
    table.post(f"{TASK}/{action}", body=body, summary=SUMMARIES[action])(handler)


# (operationId, path under the task, resolver, body model)
ACTIONS: list[tuple[str, str, TaskAction, Any]] = [
    ("renew_lease", "renew", leases.renew, None),
    ("checkpoint_task", "checkpoint", leases.checkpoint, leases.CheckpointBody),
    ("release_lease", "release", leases.release, None),
    ("recover_lease", "recover", leases.recover, None),
    ("submit_task", "submit", leases.submit, leases.SubmitBody),
    ("complete_task", "complete", leases.complete, None),
    ("prepare_publication", "publication/prepare", publication.prepare, None),
    ("publication_result", "publication/result", publication.result, publication.ResultBody),
    ("finalize_publication", "publication/finalize", publication.finalize, None),
]
for _name, _action, _run, _body in ACTIONS:
    _task_action(_name, _action, _run, _body)
