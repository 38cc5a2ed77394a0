"""The committed `schema.graphql` is the running schema, so every schema change
shows up in review. After an intended change run `make schema` and commit it."""

from __future__ import annotations

import difflib
from pathlib import Path

from waypost.schema import schema

SNAPSHOT = Path(__file__).resolve().parent.parent / "schema.graphql"


def test_committed_schema_matches_the_running_schema() -> None:
    committed = SNAPSHOT.read_text(encoding="utf-8").strip()
    running = str(schema).strip()
    if committed != running:
        diff = "\n".join(
            difflib.unified_diff(
                committed.splitlines(), running.splitlines(), "schema.graphql", "str(schema)",
                lineterm="",
            )
        )  # fmt: skip
        raise AssertionError(f"schema.graphql is stale; run `make schema`:\n{diff}")


def test_schema_has_the_core_root_fields_and_node_interface() -> None:
    text = str(schema)
    for needle in (
        "me: Principal!",
        "projects(first: Int = null, after: String = null): ProjectConnection!",
        "project(id: String!): Project",
        "node(id: ID!): Node",
        "interface Node",
        "projectCreate(input: ProjectCreateInput!): ProjectCreatePayload!",
        "policyUpdate(input: PolicyUpdateInput!): PolicyUpdatePayload!",
    ):
        assert needle in text, needle
