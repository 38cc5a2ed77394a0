"""Task request models: the decoded types REST and GraphQL share, and the field sets
the operations reason about (which fields are judged, which are content)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from waypost.ids import END, ID_CHARS
from waypost.resolvers.knowledge.models import MAX_SUBMISSION_LESSONS

TEXT_MAX_BYTES = 64 * 1024
DETAIL_MAX = 4096
JUDGED_FIELDS = ("title", "description", "acceptance_criteria", "kind")
CONTENT_FIELDS = (*JUDGED_FIELDS, "priority", "depends_on")

Title = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Description = Annotated[str, msgspec.Meta(max_length=TEXT_MAX_BYTES)]
Criterion = Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]
CRITERIA_MAX = 100
Criteria = Annotated[list[Criterion], msgspec.Meta(max_length=CRITERIA_MAX)]
Kind = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9_-]{1,64}(?![\s\S])")]
Priority = Annotated[int, msgspec.Meta(ge=-1_000_000, le=1_000_000)]
TaskRef = Annotated[str, msgspec.Meta(pattern=f"^{ID_CHARS}{END}")]
DEPENDENCIES_MAX = 100
TaskRefs = Annotated[list[TaskRef], msgspec.Meta(max_length=DEPENDENCIES_MAX)]
Status = Literal["open", "claimed", "submitted", "done", "cancelled"]
Text = Annotated[str, msgspec.Meta(min_length=1, max_length=TEXT_MAX_BYTES)]


class TaskCreate(msgspec.Struct, forbid_unknown_fields=True):
    title: Title
    description: Description = ""
    acceptance_criteria: Criteria = msgspec.field(default_factory=list)
    kind: Kind = "feature"
    priority: Priority = 0
    depends_on: TaskRefs = msgspec.field(default_factory=list)
    subject_task_id: TaskRef | None = None


class TaskPatch(msgspec.Struct, forbid_unknown_fields=True):
    expected_revision: Annotated[int, msgspec.Meta(ge=1)]
    title: Title | msgspec.UnsetType = msgspec.UNSET
    description: Description | msgspec.UnsetType = msgspec.UNSET
    acceptance_criteria: Criteria | msgspec.UnsetType = msgspec.UNSET
    kind: Kind | msgspec.UnsetType = msgspec.UNSET
    priority: Priority | msgspec.UnsetType = msgspec.UNSET
    depends_on: TaskRefs | msgspec.UnsetType = msgspec.UNSET
    # Humans only: "cancelled" from open/claimed/submitted, "open" to reopen a
    # cancelled task or send a submitted one back for rework.
    status: Literal["open", "cancelled"] | msgspec.UnsetType = msgspec.UNSET

    def changes(self) -> dict[str, Any]:
        names = (*CONTENT_FIELDS, "status")
        return {f: getattr(self, f) for f in names if getattr(self, f) is not msgspec.UNSET}


class TaskListQuery(msgspec.Struct, forbid_unknown_fields=True):
    q: str | None = None  # full-text filter, as the context packet searches (docs/context.md)
    status: Status | None = None
    ready: bool | None = None
    cursor: str | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=200)] | None = None


class ClaimBody(msgspec.Struct, forbid_unknown_fields=True):
    task_id: TaskRef | None = None


class CheckpointBody(msgspec.Struct, forbid_unknown_fields=True):
    note: Text


class SubmitBody(msgspec.Struct, forbid_unknown_fields=True):
    summary: Text
    # Optional: the task revision the work answers. Anyone may edit a claimed
    # task's judged fields, and without it a submission is pinned to a
    # revision its holder never read (docs/tasks.md, Submit).
    expected_revision: Annotated[int, msgspec.Meta(ge=1)] | None = None
    # Each lesson is a SubmissionLessonInput; the knowledge resolver validates the
    # whole batch inside the submit transaction. Here: at most 50 JSON objects.
    lessons: Annotated[list[dict[str, Any]], msgspec.Meta(max_length=MAX_SUBMISSION_LESSONS)] = (
        msgspec.field(default_factory=list)
    )


class ResultBody(msgspec.Struct, forbid_unknown_fields=True):
    outcome: Literal["succeeded", "failed"]
    detail: Annotated[str, msgspec.Meta(max_length=DETAIL_MAX)] = ""
