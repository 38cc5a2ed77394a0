"""The actions on one task, as both transports describe them: each REST
route's summary (`POST .../tasks/{task}/<action>`) and the GraphQL
mutation's description are the same sentence."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from waypost.resolvers.core.receipts import Outcome

# `run(rt, actor, idem, project, task[, body])`: leases.renew, publication.prepare, ...
TaskAction = Callable[..., Awaitable[Outcome]]

SUMMARIES: Final[dict[str, str]] = {
    "renew": "Extend the caller's live lease by the policy's lease length from now.",
    "checkpoint": "Record a progress note on the caller's live lease.",
    "release": "Give the task back: it is open again.",
    "recover": "Take over a task whose lease expired; shows the lapsed lease and latest"
    " checkpoints.",
    "submit": "Submit the work with a summary and up to 50 lessons; ends the lease.",
    "complete": "Mark a submitted task done, as the policy's review mode allows.",
    "publication/prepare": "Take exclusive publication authority (integration owner, or a"
    " human when none).",
    "publication/result": "Record the external publication outcome (the holder, once).",
    "publication/finalize": "Give publication authority back; the task's `publication` is"
    " null again.",
}
