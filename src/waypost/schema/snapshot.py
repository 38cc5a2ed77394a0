"""Each GraphQL query reads one snapshot of the database (storage/snapshots.py).

graphql-core resolves a query level by level, each DataLoader batch and root
list a read of its own; pinned, all of them see the database as of the
query's first read, so one answer never mixes moments (a task shown blocked
by a decision the same answer shows allowed); and the service's clock is
read once for it, so what depends on time (an expiry, a lease) is judged at
one instant too. Mutations are not pinned:
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
            rt = ctx.context.rt
            # one snapshot, judged at one instant (decision expiry, leases)
            async with rt.db.pinned():
                with rt.pinned_now():
                    ctx.context.judged_at = rt.now()
                    yield
        else:
            yield
