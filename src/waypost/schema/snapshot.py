"""Each GraphQL query reads one snapshot of the database (storage/snapshots.py).

graphql-core resolves a query level by level, each DataLoader batch and root
list a read of its own; pinned, all of them see the database as of the
query's start, so one answer never mixes moments (a task shown blocked
by a decision the same answer shows allowed); and the service's clock is
read once for it, so what depends on time (an expiry, a lease) is judged at
one instant too. The snapshot is begun before the clock is read, so no
write it holds was stamped after that instant. Mutations are not pinned:
their answers must see their own writes. Subscriptions are not either: each
event's answer is read when the event comes.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from strawberry.extensions import SchemaExtension
from strawberry.types.graphql import OperationType

from waypost.errors import Unavailable


class QuerySnapshot(SchemaExtension):
    async def on_execute(self) -> AsyncIterator[None]:
        ctx = self.execution_context
        try:
            kind = ctx.operation_type
        except RuntimeError:  # no such operation: refused before anything runs
            kind = None
        if kind is OperationType.QUERY:
            rt = ctx.context.rt
            # one snapshot, judged at one instant (decision expiry, leases),
            # read once the snapshot has begun: a query that waited for a
            # connection showed writes committed meanwhile, stamped after it
            # in turn by principal: one's many queries never keep another's waiting
            async with rt.db.pinned(who=ctx.context.actor.principal_id):
                with contextlib.suppress(Unavailable):
                    # a store that cannot begin it now: the query's first
                    # read meets the same and answers for it, as before
                    await rt.db.begin_pinned()
                with rt.pinned_now():
                    ctx.context.judged_at = rt.now()
                    yield
        else:
            yield
