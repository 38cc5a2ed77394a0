"""Each GraphQL query reads one snapshot of the database (storage/snapshots.py).

graphql-core resolves a query level by level, each DataLoader batch and root
list a read of its own; pinned, all of them see the database as of the
query's first read, so one answer never mixes moments (a task shown blocked
by a decision the same answer shows allowed). Mutations are not pinned:
their answers must see their own writes. Subscriptions are not either: each
event's answer is read when the event comes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from strawberry.extensions import SchemaExtension
from strawberry.types.graphql import OperationType


class QuerySnapshot(SchemaExtension):
    async def on_execute(self) -> AsyncIterator[None]:
        ctx = self.execution_context
        try:
            kind = ctx.operation_type
        except RuntimeError:  # no such operation: refused before anything runs
            kind = None
        if kind is OperationType.QUERY:
            async with ctx.context.rt.db.pinned():
                yield
        else:
            yield
