"""A review request checks its reviewers' grants one by one: reading every
grant of the tenant cost about 1 ms in a tenant of thousands, in the writer.
Counted in SQLite VM steps, not timed; and only a reviewer or author of this
tenant passes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.cost_support import counting_steps, demo_db
from waypost.resolvers.lifecycle import store
from waypost.resolvers.lifecycle.reviews import REVIEWER_ROLES

AT = "2026-11-30T00:00:00.000Z"


def _grant(conn: sqlite3.Connection, grants: list[tuple[str, str, str]]) -> None:
    conn.executemany(
        "INSERT INTO lifecycle_grants (principal_id, tenant, role, granted_at) VALUES (?, ?, ?, ?)",
        [(*g, AT) for g in grants],
    )


def test_the_reviewers_are_looked_up_not_the_tenant(
    tmp_path: Path, migrated_template: Path
) -> None:
    conn, _ = demo_db(tmp_path / "grants.db", migrated_template)
    _grant(conn, [("rev", "acme", "reviewer"), ("auth", "acme", "author"),
                  ("read", "acme", "reader"), ("else", "other", "reviewer")])  # fmt: skip
    named = ["rev", "auth", "read", "else", "nobody"]

    def check() -> set[str]:
        return store.members_among(conn, "acme", REVIEWER_ROLES, named)

    found, few = counting_steps(conn, check)
    assert found == {"rev", "auth"}
    _grant(conn, [(f"p{i}", "acme", "reviewer") for i in range(3000)])
    found, many = counting_steps(conn, check)
    assert found == {"rev", "auth"}
    assert many <= few + few // 100, (few, many)
