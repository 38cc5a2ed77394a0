"""A task create's dependency check looks ids up by key: its cost does not
grow with the number of tasks the project already holds (counted in SQLite
VM steps, not timed)."""

from __future__ import annotations

from pathlib import Path

from tests.cost_support import add_tasks, counting_steps, demo_db
from waypost.resolvers.tasks import store


def test_the_dependency_check_does_not_walk_the_projects_tasks(
    tmp_path: Path, migrated_template: Path
) -> None:
    conn, actor = demo_db(tmp_path / "cost.db", migrated_template)
    add_tasks(conn, actor, 10, 0)
    asked = ["task_000003", "task_000007", "missing"]
    found, few = counting_steps(conn, lambda: store.existing_task_ids(conn, "demo", asked))
    assert found == {"task_000003", "task_000007"}
    add_tasks(conn, actor, 3000, 10)
    found, many = counting_steps(conn, lambda: store.existing_task_ids(conn, "demo", asked))
    assert found == {"task_000003", "task_000007"}
    assert many <= few * 1.5, (few, many)
    # no dependencies: no statement at all
    assert counting_steps(conn, lambda: store.existing_task_ids(conn, "demo", [])) == (set(), 0)
