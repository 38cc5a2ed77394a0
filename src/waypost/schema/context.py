"""The per-request GraphQL context: runtime, caller and DataLoaders."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from strawberry.dataloader import DataLoader
from strawberry.types import Info as _Info

from waypost.runtime import Actor, Runtime

BatchLoad = Callable[[Sequence[Any]], Awaitable[Sequence[Any]]]


@dataclass
class Context:
    rt: Runtime
    actor: Actor
    _loaders: dict[str, DataLoader[Any, Any]] = field(default_factory=dict)

    def loader(self, name: str, batch: BatchLoad) -> DataLoader[Any, Any]:
        """The request's DataLoader called `name`, made on first use.

        Loaders live for one request only, so a dashboard query reads each
        record once and no answer is cached across requests.
        """
        found = self._loaders.get(name)
        if found is None:
            found = DataLoader(load_fn=batch)
            self._loaders[name] = found
        return found


Info = _Info[Context, None]
