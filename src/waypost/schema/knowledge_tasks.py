"""The task a knowledge record points at (`sourceTask`, `scope.tasks`), batched."""

from __future__ import annotations

from typing import Any

import strawberry

from waypost.resolvers.knowledge_store import tasks_json_many
from waypost.schema.context import Info


@strawberry.type(description="A task referenced by a knowledge record.")
class SourceTask:
    rest_id: str
    project_id: str
    title: str
    status: str
    revision: int

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SourceTask:
        return cls(
            rest_id=d["id"],
            project_id=d["project_id"],
            title=d["title"],
            status=d["status"],
            revision=d["revision"],
        )


async def load_source_task(info: Info, task_id: str) -> SourceTask | None:
    """A task by REST id, whatever its project, read once per request."""
    rt = info.context.rt

    async def batch(ids: Any) -> list[SourceTask | None]:
        now = rt.now()
        found = await rt.db.read(lambda c: tasks_json_many(c, list(ids), now))
        return [SourceTask.from_json(found[i]) if i in found else None for i in ids]

    result: SourceTask | None = await info.context.loader("knowledge_source_task", batch).load(
        task_id
    )
    return result
