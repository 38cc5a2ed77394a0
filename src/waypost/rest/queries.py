"""Query-parameter models shared by list routes."""

from __future__ import annotations

from typing import Annotated

import msgspec

Limit = Annotated[int, msgspec.Meta(ge=1, le=200)]


class ListQuery(msgspec.Struct, forbid_unknown_fields=True):
    cursor: str | None = None
    limit: Limit | None = None


class EventsQuery(msgspec.Struct, forbid_unknown_fields=True):
    # bounded like SQLite's integers, so a huge value is a 400 and never reaches the store
    after: Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)] | None = None
    limit: Limit | None = None
