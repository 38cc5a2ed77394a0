"""Another write committed between a request's checks outside its unit of
work (authentication, the lifecycle's admission, the receipt look-up) and
its unit: `Meanwhiles` runs it just before the request's unit is handed to
the writer, to its commit (no timing involved)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.conftest import Service

Meanwhile = Callable[[], Awaitable[Any]]


class Meanwhiles:
    """`before_next_write(action)`: `action` runs to its end just before the
    next unit of work is handed to the writer (the request's own)."""

    def __init__(self, service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
        self._write = service.rt.db.write
        self._pending: Meanwhile | None = None
        monkeypatch.setattr(service.rt.db, "write", self._write_after)

    def before_next_write(self, action: Meanwhile) -> None:
        self._pending = action

    async def _write_after(self, fn: Any, *, solo: bool = False, who: Any = None) -> Any:
        if self._pending is not None:
            action, self._pending = self._pending, None
            await action()
        return await self._write(fn, solo=solo, who=who)

    @property
    def ran(self) -> bool:
        return self._pending is None
