"""The per-request GraphQL context: runtime, caller and DataLoaders."""

from __future__ import annotations

from collections.abc import Hashable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime

from strawberry.types import Info as _Info

from waypost.runtime import Actor, Runtime
from waypost.schema.loaders import Loaders

# The loaders of the operation this task runs, with the context they belong
# to. A WebSocket keeps one Context for all its operations, which run at once
# (each in its own task): loaders kept on the Context alone were replaced by
# each operation that started, so an operation read through another's (its
# search count, its memo of connections, its cached records).
_OPERATION_LOADERS: ContextVar[tuple[Context, Loaders] | None] = ContextVar(
    "operation_loaders", default=None
)


@dataclass
class Context:
    rt: Runtime
    actor: Actor
    # the bearer token itself: long-lived subscriptions re-check it (revocation)
    token: str = ""
    # made with the context, so they live for one request (or one subscription
    # event) only: a dashboard query reads each record once, and no answer is
    # cached across requests
    _loaders: Loaders = field(init=False)
    # the request's key when the fast path may learn it (schema/fastpath/known.py)
    known_key: Hashable | None = None
    # the instant a query was judged at (schema/snapshot.py): its `Waypost-Now`
    judged_at: datetime | None = None

    def __post_init__(self) -> None:
        self._loaders = Loaders(self.rt)

    @property
    def memo(self) -> dict[tuple[object, ...], object]:
        """The running operation's answers worth computing once (keys name
        their use): kept on the Context, a WebSocket's grew with every
        operation for the socket's life (cacheaudit)."""
        return self.loaders.memo

    @property
    def loaders(self) -> Loaders:
        """The running operation's loaders (execution.py gives each its own)."""
        found = _OPERATION_LOADERS.get()
        if found is not None and found[0] is self:
            return found[1]
        return self._loaders

    def start_operation(self) -> Loaders:
        """Fresh loaders for the operation this task runs (and its child tasks)."""
        loaders = self._loaders = Loaders(self.rt)
        _OPERATION_LOADERS.set((self, loaders))
        return loaders


Info = _Info[Context, None]
