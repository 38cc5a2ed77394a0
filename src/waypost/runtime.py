"""What every resolver is handed: the store, the clock and in-process state."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from waypost.clock import Clock
from waypost.storage.db import Database


@dataclass(frozen=True)
class Actor:
    """An authenticated caller, optionally acting inside a live agent session."""

    principal_id: str
    kind: str  # "human" | "agent"
    name: str
    token_id: str
    session_id: str | None = None

    @property
    def is_human(self) -> bool:
        return self.kind == "human"

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"


@dataclass
class Runtime:
    db: Database
    clock: Clock
    # (principal id, idempotency key) of mutations running now in this process
    inflight: set[tuple[str, str]] = field(default_factory=set)

    def now(self) -> datetime:
        return self.clock.now()
