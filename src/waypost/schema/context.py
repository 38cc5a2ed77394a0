"""The per-request GraphQL context: runtime, caller and DataLoaders."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from strawberry.types import Info as _Info

from waypost.runtime import Actor, Runtime
from waypost.schema.loaders import Loaders


@dataclass
class Context:
    rt: Runtime
    actor: Actor
    # the bearer token itself: long-lived subscriptions re-check it (revocation)
    token: str = ""
    # made with the context, so they live for one request (or one subscription
    # event) only: a dashboard query reads each record once, and no answer is
    # cached across requests
    loaders: Loaders = field(init=False)
    # per-request answers worth computing once (keys name their use)
    memo: dict[tuple[object, ...], object] = field(default_factory=dict)
    # the request's key when the fast path may learn it (schema/fastpath/known.py)
    known_key: Hashable | None = None

    def __post_init__(self) -> None:
        self.loaders = Loaders(self.rt)


Info = _Info[Context, None]
