"""Decision request models: the decoded types REST and GraphQL share."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

RequiredActor = Literal["human", "agent", "either"]
StatusFilter = Literal["pending", "allowed", "denied", "deferred", "expired", "stale"]
Question = Annotated[str, msgspec.Meta(min_length=1, max_length=4000)]
Option = Annotated[str, msgspec.Meta(min_length=1, max_length=500)]
Text = Annotated[str, msgspec.Meta(min_length=1, max_length=16384)]
RelayText = Annotated[str, msgspec.Meta(min_length=1, max_length=16384)]
Environment = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Condition = Annotated[str, msgspec.Meta(min_length=1, max_length=1000)]
CONDITIONS_MAX = 50
OPTIONS_MIN, OPTIONS_MAX = 2, 20
AFFECTED_MAX = 100  # the tasks one generation pins
Conditions = Annotated[list[Condition], msgspec.Meta(max_length=CONDITIONS_MAX)]
TaskId = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]


class DecisionCreate(msgspec.Struct, forbid_unknown_fields=True):
    question: Question
    options: Annotated[list[Option], msgspec.Meta(min_length=OPTIONS_MIN, max_length=OPTIONS_MAX)]
    rationale: Text
    required_actor: RequiredActor
    task_ids: Annotated[list[TaskId], msgspec.Meta(min_length=1, max_length=AFFECTED_MAX)]
    environment: Environment
    conditions: Conditions = msgspec.field(default_factory=list)
    expires_at: str | None = None
    recommendation: Option | None = None
    reversible: bool = False


class Relay(msgspec.Struct, forbid_unknown_fields=True):
    """What the agent showed the human and what the human said, verbatim."""

    prompt: RelayText
    response: RelayText


class DecisionAnswer(msgspec.Struct, forbid_unknown_fields=True):
    expected_generation: Annotated[int, msgspec.Meta(ge=1)]
    disposition: Literal["allow", "deny", "defer"]
    answer: Option
    rationale: Text
    conditions_confirmed: bool = False
    relay: Relay | None = None


class DecisionReopen(msgspec.Struct, forbid_unknown_fields=True):
    expected_generation: Annotated[int, msgspec.Meta(ge=1)]
    rationale: Text
    environment: Environment | msgspec.UnsetType = msgspec.UNSET
    conditions: Conditions | msgspec.UnsetType = msgspec.UNSET
    expires_at: str | msgspec.UnsetType | None = msgspec.UNSET


class DecisionListQuery(msgspec.Struct, forbid_unknown_fields=True):
    """The REST list's query string (GraphQL takes the same filter as arguments)."""

    status: StatusFilter | None = None
    cursor: str | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=200)] | None = None
