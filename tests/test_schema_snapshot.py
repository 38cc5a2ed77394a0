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


def _signature(type_name: str, field_name: str) -> str:
    """`name(arg: Type, ...): Type` of one field (the printed schema spreads
    described arguments over several lines)."""
    field = schema._schema.get_type(type_name).fields[field_name]  # type: ignore[union-attr]
    args = ", ".join(f"{name}: {arg.type}" for name, arg in field.args.items())
    return f"{field_name}({args}): {field.type}" if args else f"{field_name}: {field.type}"


def test_schema_has_the_core_root_fields_and_node_interface() -> None:
    assert "interface Node" in str(schema)
    for type_name, field_name, signature in (
        ("Query", "me", "me: Principal!"),
        ("Query", "projects",
         "projects(first: Int, after: String, last: Int, before: String): ProjectConnection!"),
        ("Query", "project", "project(id: String!): Project"),
        ("Query", "node", "node(id: ID!): Node"),
        ("Mutation", "projectCreate",
         "projectCreate(input: ProjectCreateInput!): ProjectCreatePayload!"),
        ("Mutation", "policyUpdate",
         "policyUpdate(input: PolicyUpdateInput!): PolicyUpdatePayload!"),
    ):  # fmt: skip
        assert _signature(type_name, field_name) == signature
