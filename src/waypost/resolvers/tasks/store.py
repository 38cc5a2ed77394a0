"""Task rows: lists, look-ups, dependencies, revisions, leases, checkpoints,
submissions, publication columns and history pages (the domain's SQL; the
readiness predicate and the queries that walk it are in ready_store.py).

Plain functions over one `sqlite3.Connection`, called inside a unit of work;
the rules (validation, authority, order of checks, errors) stay in the
operation modules. Ids travel as one JSON array through `json_each`, so a
batch costs one statement whatever its size.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any, Final

from waypost.pagination import keyset
from waypost.resolvers.context.lists_store import list_match
from waypost.resolvers.tasks.ready_store import GATE_OPEN_SQL, READY_SQL
from waypost.storage.key_lists import ids_param

# SET clause that ends a lease (release, submit, status changes)
_CLEAR_LEASE: Final = (
    "lease_owner_id = NULL, lease_session_id = NULL, lease_expires_at = NULL, lease_workflow = 0"
)


def _list_filter(
    project_id: str,
    status: str | None,
    ready: bool | None,
    ready_params: Mapping[str, str] | None,
) -> tuple[list[str], dict[str, Any]]:
    """(WHERE terms, parameters) of a task list's filters (`q` aside: `_source`)."""
    where = ["t.project_id = :project"]
    params: dict[str, Any] = {"project": project_id}
    if status is not None:
        where.append("t.status = :status")
        params["status"] = status
    if ready is not None:
        assert ready_params is not None
        # READY_SQL as separate AND terms, so a ready page can walk the
        # `tasks_ready_by_created` index (migration 0014) past blocked work
        where.append(READY_SQL if ready else f"NOT ({READY_SQL})")
        params.update(ready_params)
    return where, params


def _walked(ready: bool | None, counting: bool) -> str:
    """The FROM clause of a task list: `ready=true` is pinned to the index of
    ready tasks, which holds no blocked, leased or closed task. The planner
    would otherwise take `tasks_by_status` (project, 'open', creation order:
    one more equality term) and step over every blocked task for one page.
    A count reads `tasks_claimable`, whose entries hold every column the
    predicate needs (9.0 -> 3.5 ms at 10,000 ready tasks, in-process)."""
    if not ready:
        return "tasks t"
    return f"tasks t INDEXED BY {'tasks_claimable' if counting else 'tasks_ready_by_created'}"


def _source(
    conn: sqlite3.Connection,
    match: str | None,
    walked: str,
    where: list[str],
    params: dict[str, Any],
) -> str:
    """The FROM clause of a task list: its own walk (`walked`), or with a few
    rows matching `q` (`match`, already escaped) those rows first; adds the
    match's WHERE term and parameter."""
    if match is None:
        return walked
    found = list_match(conn, "tasks", "t", match, ":match")
    params["match"] = found.bound
    if found.source is None:
        where.append(found.walk_term)
        return walked
    where.append(found.source_term)
    return found.source


def list_rows(
    conn: sqlite3.Connection,
    project_id: str,
    after: tuple[str, str] | None,
    count: int,
    *,
    status: str | None = None,
    match: str | None = None,
    ready: bool | None = None,
    ready_params: Mapping[str, str] | None = None,
    backward: bool = False,
) -> list[sqlite3.Row]:
    """Up to `count` tasks after (created_at, id) in creation order, optionally
    of one status, matching an FTS5 query (`match`, already escaped) and ready
    or not (`ready_params` needed with `ready`). Backward (GraphQL `last`):
    those before it, in reverse order."""
    where, params = _list_filter(project_id, status, ready, ready_params)
    source = _source(conn, match, _walked(ready, False), where, params)
    cmp, order = keyset(False, backward)
    if after is not None:
        params.update(created=after[0], last=after[1])
        # a row value: one range of the index over both columns, however
        # many tasks share a created_at (docs/knowledge.md, "Lists")
        where.append(f"(t.created_at, t.id) {cmp} (:created, :last)")
    return conn.execute(
        f"SELECT t.* FROM {source} WHERE {' AND '.join(where)}"
        f" ORDER BY t.created_at {order}, t.id {order} LIMIT {int(count)}",
        params,
    ).fetchall()


def count_rows(
    conn: sqlite3.Connection,
    project_id: str,
    *,
    status: str | None = None,
    match: str | None = None,
    ready: bool | None = None,
    ready_params: Mapping[str, str] | None = None,
) -> int:
    """How many tasks `list_rows` walks with these filters (GraphQL `totalCount`)."""
    where, params = _list_filter(project_id, status, ready, ready_params)
    source = _source(conn, match, _walked(ready, True), where, params)
    sql = f"SELECT count(*) FROM {source} WHERE {' AND '.join(where)}"
    return int(conn.execute(sql, params).fetchone()[0])


# ---------------------------------------------------------------- look-ups


def task_row(conn: sqlite3.Connection, project_id: str, task_id: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM tasks WHERE id = ? AND project_id = ?", (task_id, project_id)
    ).fetchone()
    return row


def task_exists(conn: sqlite3.Connection, project_id: str, task_id: str) -> bool:
    found = conn.execute(
        "SELECT 1 FROM tasks WHERE id = ? AND project_id = ?", (task_id, project_id)
    ).fetchone()
    return found is not None


def task_rows_by_ids(conn: sqlite3.Connection, task_ids: Sequence[str]) -> dict[str, sqlite3.Row]:
    """Tasks by id, whatever their project."""
    rows = conn.execute(
        "SELECT * FROM tasks WHERE id IN (SELECT value FROM json_each(?))", (ids_param(task_ids),)
    ).fetchall()
    return {row["id"]: row for row in rows}


# Asked of shown_rows_by_ids: whether the stored gate (GATE_OPEN_SQL) is open.
GATE_OPEN: Final = "gate_open"
_SHOWABLE: Final = frozenset({
    "id", "project_id", "title", "description", "acceptance_criteria", "kind", "priority",
    "subject_task_id", "status", "revision", "created_at", "updated_at",
    "lease_owner_id", "lease_session_id", "lease_expires_at", "lease_workflow",
    "publication_holder_id", "publication_holder_session_id", "publication_prepared_at",
    "publication_result",
})  # fmt: skip


def shown_rows_by_ids(
    conn: sqlite3.Connection, task_ids: Sequence[str], now_at: str, columns: Sequence[str]
) -> list[tuple[Any, ...]]:
    """Tasks by id as plain tuples of `columns` (task columns, or GATE_OPEN:
    the stored gate open at `now_at`). Tuples, because a sqlite3.Row compares
    a name with every column name on each look-up; only the columns asked
    for, because each one read costs about as much as the look-up of the row
    (tasks/stored_gate.py)."""
    unknown = set(columns) - _SHOWABLE - {GATE_OPEN}
    if unknown:
        raise ValueError(f"not a shown task column: {sorted(unknown)}")
    selected = ", ".join(GATE_OPEN_SQL if c == GATE_OPEN else f"t.{c}" for c in columns)
    cursor = conn.cursor()
    cursor.row_factory = None
    rows: list[tuple[Any, ...]] = cursor.execute(
        f"SELECT {selected} FROM tasks t WHERE t.id IN (SELECT value FROM json_each(:ids))",
        {"now": now_at, "ids": ids_param(task_ids)},
    ).fetchall()
    return rows


def existing_task_ids(
    conn: sqlite3.Connection, project_id: str, task_ids: Sequence[str]
) -> set[str]:
    """Which of `task_ids` name tasks of the project."""
    if not task_ids:
        return set()
    # `+project_id`: look each id up by its key; on `project_id = ?` SQLite
    # would walk every task of the project (a create got slower as tasks grew)
    return {
        row["id"]
        for row in conn.execute(
            "SELECT id FROM tasks WHERE id IN (SELECT value FROM json_each(?)) AND +project_id = ?",
            (ids_param(task_ids), project_id),
        )
    }


def activity_rows(conn: sqlite3.Connection, subject_ids: Sequence[str]) -> list[sqlite3.Row]:
    """Tasks naming any of `subject_ids` as their subject, oldest first."""
    return conn.execute(
        "SELECT * FROM tasks WHERE subject_task_id IN (SELECT value FROM json_each(?))"
        " ORDER BY created_at, id",
        (ids_param(subject_ids),),
    ).fetchall()


def publication_held_around(conn: sqlite3.Connection, row: sqlite3.Row) -> sqlite3.Row | None:
    """A task holding publication authority among the task, its subject and its
    activities (id and holder), if any: the task itself first, then its
    subject, then its activities oldest first (the same one every time)."""
    held: sqlite3.Row | None = conn.execute(
        "SELECT id, publication_holder_id FROM tasks WHERE publication_holder_id IS NOT NULL"
        " AND (id = :task OR id = :subject OR subject_task_id = :task)"
        " ORDER BY id = :task DESC, id IS :subject DESC, created_at, id LIMIT 1",
        {"task": row["id"], "subject": row["subject_task_id"]},
    ).fetchone()
    return held


# ---------------------------------------------------------------- dependencies


def dependency_map(
    conn: sqlite3.Connection, task_ids: Sequence[str]
) -> dict[str, list[tuple[str, str]]]:
    """For each task, its dependencies in the client's order as (id, status)."""
    result: dict[str, list[tuple[str, str]]] = {task_id: [] for task_id in task_ids}
    if not task_ids:
        return result
    rows = conn.execute(
        "SELECT d.task_id, d.depends_on_id, dep.status FROM task_dependencies d"
        " JOIN tasks dep ON dep.id = d.depends_on_id"
        " WHERE d.task_id IN (SELECT value FROM json_each(?))"
        " ORDER BY d.task_id, d.position",
        (ids_param(task_ids),),
    ).fetchall()
    for row in rows:
        result[row["task_id"]].append((row["depends_on_id"], row["status"]))
    return result


def open_dependents(conn: sqlite3.Connection, task_id: str, most: int) -> list[str]:
    """The tasks, neither done nor cancelled, whose dependencies hold `task_id`,
    oldest first, at most `most` of them."""
    rows = conn.execute(
        "SELECT t.id FROM task_dependencies d JOIN tasks t ON t.id = d.task_id"
        " WHERE d.depends_on_id = ? AND t.status NOT IN ('done', 'cancelled')"
        " ORDER BY t.created_at, t.id LIMIT ?",
        (task_id, most),
    ).fetchall()
    return [row["id"] for row in rows]


def reaches(conn: sqlite3.Connection, start_ids: Sequence[str], task_id: str) -> bool:
    """Does following dependencies from `start_ids` reach `task_id`?"""
    row = conn.execute(
        "WITH RECURSIVE reach(id) AS ("
        " SELECT value FROM json_each(?)"
        " UNION SELECT d.depends_on_id FROM task_dependencies d JOIN reach r ON d.task_id = r.id"
        ") SELECT 1 FROM reach WHERE id = ? LIMIT 1",
        (ids_param(start_ids), task_id),
    ).fetchone()
    return row is not None


def replace_dependencies(conn: sqlite3.Connection, task_id: str, depends_on: list[str]) -> None:
    conn.execute("DELETE FROM task_dependencies WHERE task_id = ?", (task_id,))
    conn.executemany(
        "INSERT INTO task_dependencies (task_id, depends_on_id, position) VALUES (?, ?, ?)",
        [(task_id, dep, index) for index, dep in enumerate(depends_on)],
    )


# ---------------------------------------------------------------- content and revisions


def insert_task(conn: sqlite3.Connection, values: Mapping[str, Any]) -> None:
    """A new `open` task at revision 1; `values` names id, project_id, title,
    description, acceptance_criteria (a list), kind, priority, subject_task_id,
    created_by and at."""
    v = values
    conn.execute(
        "INSERT INTO tasks (id, project_id, title, description, acceptance_criteria, kind,"
        " priority, subject_task_id, status, revision, judged_revision, created_by,"
        " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'open', 1, 1, ?, ?, ?)",
        (v["id"], v["project_id"], v["title"], v["description"],
         json.dumps(v["acceptance_criteria"]), v["kind"], v["priority"],
         v["subject_task_id"], v["created_by"], v["at"], v["at"]),
    )  # fmt: skip


def update_task(
    conn: sqlite3.Connection,
    task_id: str,
    columns: Mapping[str, Any],
    revision: int,
    judged_revision: int,
    at: str,
) -> None:
    """Write changed columns (content, status; a status of open or cancelled ends
    any lease) with the task's next revision numbers."""
    values = dict(columns)
    if "acceptance_criteria" in values:
        values["acceptance_criteria"] = json.dumps(values["acceptance_criteria"])
    if values.get("status") in ("open", "cancelled"):
        # leaving `claimed` for either state ends any lease
        values.update(
            lease_owner_id=None, lease_session_id=None, lease_expires_at=None, lease_workflow=0
        )
    sets = "".join(f"{name} = ?, " for name in values)
    conn.execute(
        f"UPDATE tasks SET {sets}revision = ?, judged_revision = ?, updated_at = ? WHERE id = ?",
        (*values.values(), revision, judged_revision, at, task_id),
    )


def insert_revision(
    conn: sqlite3.Connection,
    task_id: str,
    revision: int,
    changed: list[str],
    judged: bool,
    depends_on: list[str],
    actor: tuple[str, str | None],
    at: str,
) -> None:
    """Copy the current content of the task into its next immutable revision.

    `actor` is (principal id, session id)."""
    conn.execute(
        "INSERT INTO task_revisions (task_id, revision, title, description, acceptance_criteria,"
        " kind, priority, depends_on, changed_fields, judged_change, actor_id, actor_session_id,"
        " at) SELECT id, ?, title, description, acceptance_criteria, kind, priority, ?, ?, ?, ?,"
        " ?, ? FROM tasks WHERE id = ?",
        (revision, json.dumps(depends_on), json.dumps(changed), judged,
         actor[0], actor[1], at, task_id),
    )  # fmt: skip


# ---------------------------------------------------------------- leases and work


def set_lease(
    conn: sqlite3.Connection,
    task_id: str,
    owner: tuple[str, str | None],
    expires_at: str,
    workflow: bool,
    at: str,
) -> None:
    """Claim the task for `owner` (principal id, session id) until `expires_at`."""
    conn.execute(
        "UPDATE tasks SET status = 'claimed', lease_owner_id = ?, lease_session_id = ?,"
        " lease_expires_at = ?, lease_workflow = ?, updated_at = ? WHERE id = ?",
        (owner[0], owner[1], expires_at, workflow, at, task_id),
    )


def expired_leases(
    conn: sqlite3.Connection, project_id: str, at: str, limit: int
) -> list[sqlite3.Row]:
    """The project's claimed tasks whose lease has passed, longest lapsed
    first: work only a recovery gives back (claims never pick it). Each row
    has the task's id and its stored gate state. At most `limit`, read from
    the index's range of lapsed leases, never the live ones
    (tests/test_lapsed_lease_cost.py)."""
    return conn.execute(
        "SELECT id, gate_held, gate_expires FROM tasks WHERE project_id = ?"
        " AND status = 'claimed' AND lease_expires_at <= ? ORDER BY lease_expires_at, id LIMIT ?",
        (project_id, at, limit),
    ).fetchall()


def end_lease(conn: sqlite3.Connection, task_id: str, status: str, at: str) -> None:
    """Move the task to `status` (open on release, submitted on submit) without a lease."""
    conn.execute(
        f"UPDATE tasks SET status = ?, {_CLEAR_LEASE}, updated_at = ? WHERE id = ?",
        (status, at, task_id),
    )


def set_status(conn: sqlite3.Connection, task_id: str, status: str, at: str) -> None:
    conn.execute("UPDATE tasks SET status = ?, updated_at = ? WHERE id = ?", (status, at, task_id))


def insert_checkpoint(
    conn: sqlite3.Connection,
    checkpoint_id: str,
    task_id: str,
    note: str,
    actor: tuple[str, str | None],
    at: str,
) -> sqlite3.Row:
    """Record a checkpoint (and touch the task's `updated_at`); returns its row."""
    conn.execute(
        "INSERT INTO task_checkpoints (id, task_id, note, actor_id, actor_session_id, at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (checkpoint_id, task_id, note, actor[0], actor[1], at),
    )
    conn.execute("UPDATE tasks SET updated_at = ? WHERE id = ?", (at, task_id))
    row: sqlite3.Row = conn.execute(
        "SELECT * FROM task_checkpoints WHERE id = ?", (checkpoint_id,)
    ).fetchone()
    return row


def insert_submission(
    conn: sqlite3.Connection,
    submission_id: str,
    task_id: str,
    task_revision: int,
    summary: str,
    actor: tuple[str, str | None],
    at: str,
) -> None:
    conn.execute(
        "INSERT INTO submissions (id, task_id, task_revision, summary, actor_id,"
        " actor_session_id, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (submission_id, task_id, task_revision, summary, actor[0], actor[1], at),
    )


def submission_row(conn: sqlite3.Connection, submission_id: str) -> sqlite3.Row:
    row: sqlite3.Row = conn.execute(
        "SELECT * FROM submissions WHERE id = ?", (submission_id,)
    ).fetchone()
    return row


def submission_rows_by_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> list[sqlite3.Row]:
    """Submissions by id, whatever their task's project."""
    found: list[sqlite3.Row] = conn.execute(
        "SELECT * FROM submissions WHERE id IN (SELECT value FROM json_each(?))",
        (ids_param(ids),),
    ).fetchall()
    return found


def latest_submission_row(conn: sqlite3.Connection, task_id: str) -> sqlite3.Row | None:
    """The one made last: by rowid (the table is insert-only), not by `at`,
    which a wall clock stepped back put first for the wrong submission, and
    review_mode then judged the wrong submitter."""
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM submissions WHERE task_id = ? ORDER BY rowid DESC LIMIT 1",
        (task_id,),
    ).fetchone()
    return row


# ---------------------------------------------------------------- publication


def grant_publication(
    conn: sqlite3.Connection, task_id: str, holder: tuple[str, str | None], at: str
) -> None:
    """Give `holder` (principal id, session id) the task's publication authority."""
    conn.execute(
        "UPDATE tasks SET publication_holder_id = ?, publication_holder_session_id = ?,"
        " publication_prepared_at = ?, publication_result = NULL, updated_at = ?"
        " WHERE id = ?",
        (holder[0], holder[1], at, at, task_id),
    )


def record_publication_result(
    conn: sqlite3.Connection, task_id: str, recorded: Mapping[str, Any], at: str
) -> None:
    conn.execute(
        "UPDATE tasks SET publication_result = ?, updated_at = ? WHERE id = ?",
        (json.dumps(recorded), at, task_id),
    )


def clear_publication(conn: sqlite3.Connection, task_id: str, at: str) -> None:
    conn.execute(
        "UPDATE tasks SET publication_holder_id = NULL, publication_holder_session_id = NULL,"
        " publication_prepared_at = NULL, publication_result = NULL, updated_at = ?"
        " WHERE id = ?",
        (at, task_id),
    )


# ---------------------------------------------------------------- histories

# The append-only history tables and the column a page walks down.
HISTORY_POSITIONS: Final = {
    "task_revisions": "revision",
    "task_checkpoints": "rowid",
    "submissions": "rowid",
}


def history_rows(
    conn: sqlite3.Connection,
    table: str,
    task_ids: Sequence[str],
    before: int,
    count: int,
    backward: bool = False,
) -> list[sqlite3.Row]:
    """Up to `count` rows of one history per task, below position `before`, newest
    first; backward (GraphQL `last`), above it, oldest first. Each row carries
    its `position` (the cursor of a page)."""
    position = HISTORY_POSITIONS[table]  # names become SQL: only the known tables
    cmp, order = keyset(True, backward)
    # Each task's page is a LIMIT on one range of the (task_id, position)
    # index: a window numbering the task's rows read its whole history to
    # keep `count` of them (20 ms at 5,000 revisions).
    return conn.execute(
        f"SELECT h.*, h.{position} AS position FROM json_each(?) AS t"
        f" JOIN {table} h ON h.{position} IN"
        f" (SELECT {position} FROM {table} WHERE task_id = t.value AND {position} {cmp} ?"
        f" ORDER BY {position} {order} LIMIT ?) AND h.task_id = t.value"
        f" ORDER BY h.task_id, position {order}",
        (ids_param(sorted(set(task_ids))), before, count),
    ).fetchall()


def history_counts(conn: sqlite3.Connection, table: str, task_ids: Sequence[str]) -> dict[str, int]:
    """How many rows of one history each task has (GraphQL `totalCount`)."""
    assert table in HISTORY_POSITIONS, table  # names become SQL: only the known tables
    rows = conn.execute(
        f"SELECT task_id, count(*) FROM {table}"
        " WHERE task_id IN (SELECT value FROM json_each(?)) GROUP BY task_id",
        (ids_param(sorted(set(task_ids))),),
    ).fetchall()
    found = {r[0]: int(r[1]) for r in rows}
    return {i: found.get(i, 0) for i in task_ids}
