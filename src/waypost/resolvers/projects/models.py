"""Project and policy request models: the one decoded type both REST and GraphQL use."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from waypost.ids import END, SLUG_CHARS

# msgspec matches with re.search, where `$` also matches before a final newline
# ("demo\n" would pass); the lookahead ends the match at the true end of the
# text, in Python and in the JSON Schema the OpenAPI document publishes.
ProjectId = Annotated[str, msgspec.Meta(pattern=f"^{SLUG_CHARS}{END}")]
ProjectName = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
ReviewMode = Literal["none", "human", "any"]

# The policy fields proper, in the order of the `projects` and history columns.
POLICY_FIELDS = (
    "rules",
    "agent_rule_editing",
    "allow_relayed_human_answers",
    "integration_owner",
    "lease_seconds",
    "review_mode",
)


class ProjectCreate(msgspec.Struct, forbid_unknown_fields=True):
    id: ProjectId
    name: ProjectName


class PolicyPatch(msgspec.Struct, forbid_unknown_fields=True):
    expected_revision: Annotated[int, msgspec.Meta(ge=1)]
    rules: str | msgspec.UnsetType = msgspec.UNSET
    agent_rule_editing: bool | msgspec.UnsetType = msgspec.UNSET
    allow_relayed_human_answers: bool | msgspec.UnsetType = msgspec.UNSET
    integration_owner: str | msgspec.UnsetType | None = msgspec.UNSET
    lease_seconds: Annotated[int, msgspec.Meta(ge=30, le=86400)] | msgspec.UnsetType = msgspec.UNSET
    review_mode: ReviewMode | msgspec.UnsetType = msgspec.UNSET
    provenance: str | msgspec.UnsetType = msgspec.UNSET

    def changes(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in POLICY_FIELDS if getattr(self, f) is not msgspec.UNSET}
