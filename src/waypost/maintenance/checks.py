"""The checks `waypost admin verify` runs, each on one open connection.

Each finds what must hold whatever happened to the process: SQLite's
integrity and foreign keys, the full-text indexes against their tables, every
record's revision counter against its history rows, every idempotency receipt
against the event its transaction wrote, and the gate state stored with each
task against the decisions' history.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from waypost.clock import format_time
from waypost.resolvers.decisions import gate, status
from waypost.resolvers.decisions.lists_store import TIMEOUT_OPENED_AT_SQL
from waypost.resolvers.tasks.ready_store import GATE_OPEN_SQL
from waypost.storage.connection import rollback_if_open
from waypost.storage.migrate import available, recorded, refusals

# At most this many problems are listed per check (the count is complete).
SHOWN = 20
FTS_TABLES = ("tasks_fts", "knowledge_fts")
# each index's external content since migration 0039: a view that adds the
# owner words to its records (without it the index cannot be checked: FTS5
# answered "SQL logic error", and verify stopped instead of reporting)
FTS_CONTENT = {"tasks_fts": "tasks_search", "knowledge_fts": "knowledge_search"}
# (record table, its revision column, history table, its key column, its revision column)
HISTORIES = (
    ("projects", "policy_revision", "policy_revisions", "project_id", "revision"),
    ("tasks", "revision", "task_revisions", "task_id", "revision"),
    ("knowledge", "revision", "knowledge_revisions", "knowledge_id", "revision"),
    ("decisions", "generation", "decision_generations", "decision_id", "generation"),
)
# The text a record's current row repeats from its latest history row: an edit
# of the current row around the history (the triggers dropped) was not found.
CONTENTS = (
    ("projects", "policy_revision", "policy_revisions", "project_id", "revision", ("rules",)),
    ("tasks", "revision", "task_revisions", "task_id", "revision",
     ("title", "description", "acceptance_criteria")),
    ("knowledge", "revision", "knowledge_revisions", "knowledge_id", "revision",
     ("title", "body")),
)  # fmt: skip


@dataclass
class Check:
    name: str
    count: int = 0
    problems: list[str] = field(default_factory=list)

    def add(self, problem: str) -> None:
        self.count += 1
        if len(self.problems) < SHOWN:
            self.problems.append(problem)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.count == 0, "problems": self.count, "shown": self.problems}


def _integrity(conn: sqlite3.Connection, check: Check) -> None:
    for (line,) in conn.execute("PRAGMA integrity_check"):
        if line != "ok":
            check.add(str(line))


def _foreign_keys(conn: sqlite3.Connection, check: Check) -> None:
    for row in conn.execute("PRAGMA foreign_key_check"):
        check.add(f"{row[0]} rowid {row[1]} -> {row[2]}")


def _fts(conn: sqlite3.Connection, check: Check) -> None:
    """FTS5's own check of each index against its content table (rank 1).

    It is written as an INSERT, so it runs in a transaction that is rolled
    back: nothing changes. The transaction takes the write lock first
    (IMMEDIATE), waiting out the busy timeout for it: a deferred one read a
    snapshot, and once `serve` committed after it, its write was refused at
    once ("database is locked") instead of waiting its turn."""
    for table in FTS_TABLES:
        # a file whose index (or its content view) was dropped is damage to
        # report, not a failure of the whole check ("no such table" is an
        # OperationalError, re-raised below)
        missing = [
            name
            for name, kind in ((table, "table"), (FTS_CONTENT[table], "view"))
            if not conn.execute(
                "SELECT 1 FROM sqlite_schema WHERE type = ? AND name = ?", (kind, name)
            ).fetchone()
        ]
        if missing:
            check.add(f"{missing[0]}: missing")
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")
        except sqlite3.OperationalError:
            raise  # busy or locked (a live database): no finding about the file
        except sqlite3.DatabaseError as exc:
            check.add(f"{table}: {exc}")
        finally:
            rollback_if_open(conn)


def _histories(conn: sqlite3.Connection, check: Check) -> None:
    """Each record's current revision is its last history row, with none missing."""
    for table, current, history, key, number in HISTORIES:
        rows = conn.execute(
            f"SELECT r.id, r.{current} AS current, COUNT(h.{number}) AS rows,"
            f" MAX(h.{number}) AS last FROM {table} r"
            f" LEFT JOIN {history} h ON h.{key} = r.id GROUP BY r.id"
            f" HAVING last IS NULL OR last != current OR rows != current"
        )
        for row in rows:
            check.add(
                f"{table} {row['id']}: {current} {row['current']}, history has"
                f" {row['rows']} rows up to {row['last']}"
            )
        orphans = conn.execute(
            f"SELECT DISTINCT h.{key} FROM {history} h"
            f" LEFT JOIN {table} r ON r.id = h.{key} WHERE r.id IS NULL"
        )
        for (orphan,) in orphans:
            check.add(f"{history} rows for a missing {table} row {orphan}")
    for table, current, history, key, number, columns in CONTENTS:
        differs = " OR ".join(f"r.{c} IS NOT h.{c}" for c in columns)
        rows = conn.execute(
            f"SELECT r.id FROM {table} r JOIN {history} h"
            f" ON h.{key} = r.id AND h.{number} = r.{current} WHERE {differs}"
        )
        for (record,) in rows:
            check.add(
                f"{table} {record}: its current {', '.join(columns)} differ from its"
                f" {history} row {current}"
            )


def _receipts(conn: sqlite3.Connection, check: Check) -> None:
    """A stored receipt records a mutation that committed with its event: the
    same transaction wrote an event by the same principal at the same instant,
    in the project log or (a review outcome, recorded on the public listener)
    the lifecycle log."""
    # One set difference, sorted once (no index on the events' actor and time:
    # a look-up per receipt scanned every event; 30,682 receipts and events
    # took 27.4 s that way and take 0.04 s this way)
    rows = conn.execute(
        "WITH missing AS (SELECT principal_id, created_at FROM receipts"
        " EXCEPT SELECT actor_id, at FROM events"
        " EXCEPT SELECT actor, at FROM lifecycle_events)"
        # back to the receipts: every one is counted, with its key
        " SELECT r.principal_id, r.key, r.created_at FROM receipts r"
        " JOIN missing m ON m.principal_id = r.principal_id AND m.created_at = r.created_at"
    )
    for row in rows:
        check.add(
            f"receipt {row['key']!r} of {row['principal_id']} at {row['created_at']} has no event"
        )
    # and its stored answer is one a replay can send: a 2xx (refusals store
    # none) whose body is a JSON object. A damaged one passed, and its replay
    # was a 500 for the service.
    unusable = conn.execute(
        "SELECT principal_id, key FROM receipts WHERE status NOT BETWEEN 200 AND 299"
        " OR NOT json_valid(body) OR json_type(body) <> 'object'"
    )
    for row in unusable:
        check.add(
            f"receipt {row['key']!r} of {row['principal_id']}: its stored answer is not"
            " a success with a JSON object (a replay could not send it)"
        )
    _lifecycle_receipts(conn, check)


def _lifecycle_receipts(conn: sqlite3.Connection, check: Check) -> None:
    """The lifecycle listener's receipts, held to the same: each command that
    stored one appended its lifecycle event, by its caller at its instant,
    and stored only its success's JSON object (docs/operations.md says
    "every idempotency receipt"; these went unchecked: mutanttests)."""
    rows = conn.execute(
        "WITH missing AS (SELECT caller, created_at FROM lifecycle_receipts"
        " EXCEPT SELECT actor, at FROM lifecycle_events)"
        " SELECT r.caller, r.key, r.created_at FROM lifecycle_receipts r"
        " JOIN missing m ON m.caller = r.caller AND m.created_at = r.created_at"
    )
    for row in rows:
        check.add(
            f"lifecycle receipt {row['key']!r} of {row['caller']} at {row['created_at']}"
            " has no lifecycle event"
        )
    unusable = conn.execute(
        "SELECT caller, key FROM lifecycle_receipts"
        " WHERE NOT json_valid(body) OR json_type(body) <> 'object'"
    )
    for row in unusable:
        check.add(
            f"lifecycle receipt {row['key']!r} of {row['caller']}: its stored answer is not"
            " a JSON object (a replay could not send it)"
        )


# Each history table, the instant its rows were written at, and the way to the
# project of their record.
HISTORY_WRITES = (
    ("policy_revisions", "h.project_id", "h.at", ""),
    ("task_revisions", "r.project_id", "h.at", "JOIN tasks r ON r.id = h.task_id"),
    ("knowledge_revisions", "r.project_id", "h.provenance_recorded_at",
     "JOIN knowledge r ON r.id = h.knowledge_id"),
    ("decision_generations", "r.project_id", "h.at", "JOIN decisions r ON r.id = h.decision_id"),
)  # fmt: skip


def _events(conn: sqlite3.Connection, check: Check) -> None:
    """Every event's project exists, and every history row was written with an
    event: the same transaction wrote one in its record's project at the same
    instant (a history row with none was written around the service); every
    timeout the sweep answered has its `decision.timed_out` event."""
    rows = conn.execute(
        "SELECT e.sequence, e.project_id FROM events e WHERE e.project_id IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM projects p WHERE p.id = e.project_id)"
    )
    for row in rows:
        check.add(f"event {row['sequence']} names a missing project {row['project_id']}")
    for history, project, at, join in HISTORY_WRITES:
        # one set difference, as for the receipts (no index on the events' time)
        missing = conn.execute(
            f"SELECT {project} AS project_id, {at} AS at FROM {history} h {join}"
            " EXCEPT SELECT project_id, at FROM events ORDER BY 1, 2"
        )
        for row in missing:
            check.add(
                f"{history}: a row of project {row['project_id']} written at {row['at']}"
                " has no event"
            )
    # the digest's `proceeded_by_timeout` reads these events, not the answers
    # (migration 0030): each timeout the sweep recorded has its own, and each
    # such event a timeout of its decision at its time
    for row in conn.execute(_TIMEOUTS_WITHOUT_EVENT):
        check.add(
            f"decision {row['decision_id']}: its timeout at {row['at']} has no"
            " decision.timed_out event"
        )
    for row in conn.execute(_EVENTS_WITHOUT_TIMEOUT):
        check.add(
            f"event {row['sequence']}: decision.timed_out of decision {row['subject_id']} at"
            f" {row['at']}, which no timed-out answer of that decision in that project has"
        )


# (no INDEXED BY: a file missing the index is still checked, by a slower plan)
_TIMEOUTS_WITHOUT_EVENT = (
    "SELECT a.decision_id, a.at FROM decision_answers a JOIN decisions d ON d.id = a.decision_id"
    " WHERE a.timed_out = 1 AND NOT EXISTS (SELECT 1 FROM events e"
    "  WHERE e.project_id = d.project_id AND e.type = 'decision.timed_out' AND e.at = a.at"
    "  AND e.subject_id = a.decision_id)"
    " ORDER BY a.decision_id, a.at"
)
_EVENTS_WITHOUT_TIMEOUT = (
    "SELECT e.sequence, e.subject_id, e.at FROM events e WHERE e.type = 'decision.timed_out'"
    " AND NOT EXISTS (SELECT 1 FROM decision_answers a JOIN decisions d ON d.id = a.decision_id"
    "  WHERE a.decision_id = e.subject_id AND a.timed_out = 1 AND a.at = e.at"
    "  AND d.project_id IS e.project_id)"
    " ORDER BY e.sequence"
)


# How many tasks one look-up of the decisions' history covers.
GATE_BATCH = 500


def _gate_state(conn: sqlite3.Connection, check: Check) -> None:
    """Each task's stored gate state (migration 0014, kept exact by triggers)
    says what the decisions' history says, now: a task is open exactly when
    no decision blocks it or its subject (the claim and the ready lists read
    the stored state; a row written around the triggers would mislead them).
    So does each decision's stored state (migrations 0023, 0025, 0027 and
    0029: its row, generation, expiry, `stale`, `answered`, disposition,
    project, creation time and when it can time out, which the decision
    lists' status filters, the digest and the sweep read)."""
    status.install(conn)  # the SQL function the history's gate needs
    now = datetime.now(UTC)
    conn.execute("BEGIN")  # one snapshot for the stored state and the history
    try:
        projects = [row[0] for row in conn.execute("SELECT id FROM projects")]
        for project_id in projects:
            rows = conn.execute(
                "SELECT t.id AS id, t.subject_task_id AS subject,"
                f" ({GATE_OPEN_SQL}) AS open FROM tasks t WHERE t.project_id = :project",
                {"now": format_time(now), "project": project_id},
            ).fetchall()
            for start in range(0, len(rows), GATE_BATCH):
                batch = rows[start : start + GATE_BATCH]
                ids = [r["id"] for r in batch] + [r["subject"] for r in batch if r["subject"]]
                blocking = gate.blocking_decisions(conn, project_id, ids, now)
                for r in batch:
                    subject_blocked = bool(r["subject"]) and bool(blocking[r["subject"]])
                    derived = not blocking[r["id"]] and not subject_blocked
                    if bool(r["open"]) != derived:
                        check.add(
                            f"task {r['id']}: the stored gate state says"
                            f" {'open' if r['open'] else 'blocked'}, the decisions' history says"
                            f" {'open' if derived else 'blocked'}"
                        )
        # each decision's stored state (migrations 0023, 0025 and 0027)
        for row in conn.execute(
            "SELECT s.decision_id, s.generation, s.expires_at, s.stale,"
            " s.disposition IS NOT NULL AS answered, s.disposition, s.project_id, s.created_at,"
            " h.decision_id AS stored, h.generation AS stored_generation,"
            " h.expires_at AS stored_expiry, h.stale AS stored_stale,"
            " h.answered AS stored_answered, h.disposition AS stored_disposition,"
            " h.project_id AS stored_project,"
            " h.created_at AS stored_created_at,"
            f" {TIMEOUT_OPENED_AT_SQL} AS timeout_opened_at,"
            " h.timeout_opened_at AS stored_timeout_opened_at"
            " FROM decision_current s LEFT JOIN decision_holds h ON h.decision_id = s.decision_id"
            " WHERE h.decision_id IS NULL OR h.generation IS NOT s.generation"
            " OR h.expires_at IS NOT s.expires_at OR h.stale IS NOT s.stale"
            " OR h.answered IS NOT (s.disposition IS NOT NULL)"
            " OR h.disposition IS NOT s.disposition"
            " OR h.project_id IS NOT s.project_id OR h.created_at IS NOT s.created_at"
            f" OR h.timeout_opened_at IS NOT ({TIMEOUT_OPENED_AT_SQL})"
        ):
            check.add(f"decision {row['decision_id']}: {_stored_difference(row)}")
    finally:
        rollback_if_open(conn)


# A tag row that does not say what its record's current row says (or whose
# record is gone), and a tag of a record with no row: one pass over the tag
# rows with a look-up of each record, and one over the records with a look-up
# of each tag (8.5-12.3 s at 1M records and 1,955,053 tags, where two EXCEPTs of
# the whole sets took 43.2 s).
_TAG_ROWS_STALE = (
    "SELECT g.tag, g.knowledge_id FROM knowledge_tags g"
    " LEFT JOIN knowledge k ON k.id = g.knowledge_id"
    " WHERE k.id IS NULL OR g.project_id IS NOT k.project_id OR g.status IS NOT k.status"
    " OR g.updated_at IS NOT k.updated_at OR g.shared IS NOT (k.collection = 'shared')"
    " OR NOT EXISTS (SELECT 1 FROM json_each(k.tags) t WHERE t.value = g.tag)"
)
_TAG_ROWS_MISSING = (
    "SELECT t.value AS tag, k.id AS knowledge_id FROM knowledge k, json_each(k.tags) t"
    " WHERE NOT EXISTS (SELECT 1 FROM knowledge_tags g"
    "  WHERE g.knowledge_id = k.id AND g.tag = t.value)"
)


def _tag_rows(conn: sqlite3.Connection, check: Check) -> None:
    """The tag rows the `tag` lists walk (kept by triggers) are exactly each
    record's current tags, with its project, status, updated_at and sharing:
    a row written around the triggers would drop a record from a list, or
    list it in the wrong place."""
    for found, query in (("missing", _TAG_ROWS_MISSING), ("stale", _TAG_ROWS_STALE)):
        for row in conn.execute(f"{query} ORDER BY 2, 1"):
            check.add(f"knowledge {row['knowledge_id']}: tag row {row['tag']!r} {found}")


# A task's decision list (`task_decisions`, migration 0031) against the pins
# it is derived from: one pass over each side with a look-up in the other.
_TASK_DECISIONS_MISSING = (
    "SELECT DISTINCT a.task_id, a.decision_id FROM decision_affected a"
    " JOIN decisions d ON d.id = a.decision_id WHERE NOT EXISTS (SELECT 1 FROM"
    " task_decisions x WHERE x.task_id = a.task_id AND x.created_at = d.created_at"
    " AND x.decision_id = d.id)"
)
_TASK_DECISIONS_STRAY = (
    "SELECT x.task_id, x.decision_id FROM task_decisions x WHERE NOT EXISTS (SELECT 1"
    " FROM decision_affected a JOIN decisions d ON d.id = a.decision_id"
    " WHERE a.task_id = x.task_id AND a.decision_id = x.decision_id"
    " AND d.created_at = x.created_at)"
)


def _task_decisions(conn: sqlite3.Connection, check: Check) -> None:
    """Each task's decision list (what `Task.decisions` pages) names exactly
    the decisions that pin the task, at their creation time: a row written
    around the trigger would drop a decision from the list, or list one in
    the wrong place or under a task it never affected."""
    for task_id, decision_id in conn.execute(f"{_TASK_DECISIONS_MISSING} ORDER BY 1, 2"):
        check.add(f"task {task_id}: decision {decision_id} pins it and is missing from its list")
    for task_id, decision_id in conn.execute(f"{_TASK_DECISIONS_STRAY} ORDER BY 1, 2"):
        check.add(
            f"task {task_id}: its list names decision {decision_id}, which does not pin it"
            " (or was not created at the time listed)"
        )


# Each owner's count of a searched table's rows (migration 0041, kept by
# triggers) against a count of the rows: one pass over each table's project
# index and one over the shared records.
_OWNER_ROWS_WRONG = (
    "WITH counted (content, owner, row_count) AS ("
    " SELECT 'tasks', project_id, count(*) FROM tasks GROUP BY project_id"
    " UNION ALL SELECT 'tasks', '*', count(*) FROM tasks"
    " UNION ALL SELECT 'knowledge', project_id, count(*) FROM knowledge GROUP BY project_id"
    " UNION ALL SELECT 'knowledge', '*', count(*) FROM knowledge"
    " UNION ALL SELECT 'knowledge', '*shared', count(*) FROM knowledge"
    "  WHERE collection = 'shared')"
    " SELECT c.content, c.owner, c.row_count AS counted,"
    " coalesce(s.row_count, 0) AS stored"
    " FROM counted c LEFT JOIN search_owner_rows s USING (content, owner)"
    " WHERE coalesce(s.row_count, 0) <> c.row_count"
    " UNION ALL SELECT s.content, s.owner, 0, s.row_count FROM search_owner_rows s"
    " WHERE s.row_count <> 0 AND NOT EXISTS (SELECT 1 FROM counted c"
    "  WHERE c.content = s.content AND c.owner = s.owner)"
)


def _owner_rows(conn: sqlite3.Connection, check: Check) -> None:
    """How many rows of each searched table each project (and the whole
    table, and the shared records) holds, as the packet's search reads it to
    decide whether to ask for a project's rows alone: a wrong count changes
    no answer, only how much the search ranks."""
    for row in conn.execute(f"{_OWNER_ROWS_WRONG} ORDER BY 1, 2"):
        check.add(
            f"{row['content']} of {row['owner']}: {row['stored']} counted by the triggers,"
            f" {row['counted']} rows"
        )


def _stored_difference(row: sqlite3.Row) -> str:
    """How a decision's stored state (`decision_holds`) differs from its history."""
    if row["stored"] is None:
        return "no stored state"
    if row["stored_generation"] != row["generation"]:
        return (
            f"the stored state is of generation {row['stored_generation']},"
            f" the current generation is {row['generation']}"
        )
    if row["stored_expiry"] != row["expires_at"]:
        return (
            f"the stored expiry is {row['stored_expiry']}, the current generation's"
            f" is {row['expires_at']}"
        )
    if (row["stored_project"], row["stored_created_at"]) != (row["project_id"], row["created_at"]):
        return (
            f"the stored state places it in {row['stored_project']} at"
            f" {row['stored_created_at']}, the decision is {row['project_id']}'s of"
            f" {row['created_at']}"
        )
    if row["stored_answered"] != row["answered"]:
        said = ("unanswered", "answered")
        return (
            f"the stored state says {said[row['stored_answered']]}, its current"
            f" generation is {said[row['answered']]}"
        )
    if row["stored_disposition"] != row["disposition"]:
        return (
            f"the stored answer is {row['stored_disposition'] or 'none'}, its current"
            f" generation's is {row['disposition'] or 'none'}"
        )
    if row["stored_timeout_opened_at"] != row["timeout_opened_at"]:
        stored, derived = row["stored_timeout_opened_at"], row["timeout_opened_at"]
        return (
            f"the stored state says it can time out from {stored or 'never'},"
            f" its current generation from {derived or 'never'}"
        )
    said = ("not stale", "stale")
    return f"the stored state says {said[row['stored_stale']]}, its pins say {said[row['stale']]}"


def _migrations(conn: sqlite3.Connection, check: Check) -> None:
    """This build can run on the file: `serve` would not refuse its schema
    (a newer build's migrations, an edited one). Migrations not applied yet
    are no finding: `serve` applies them at start."""
    kind = database_kind(conn)
    if kind == "empty":
        return  # a new file: `serve` creates the schema when it starts
    if kind == "foreign":
        check.add("no schema_migrations table: not a Waypost database")
        return
    for refusal in refusals(recorded(conn), available()):
        check.add(refusal)


def schema_refused(conn: sqlite3.Connection) -> bool:
    """`serve` refuses the schema: a newer build's migrations, an edited one."""
    try:
        return bool(refusals(recorded(conn), available()))
    except sqlite3.OperationalError:
        raise  # busy, locked, I/O: not a finding about the file (verify_failed)
    except sqlite3.DatabaseError:
        return False  # damaged: the checks run on it and report what fails


def database_kind(conn: sqlite3.Connection) -> str:
    """ "waypost", "empty" (no tables at all) or "foreign" (another application's)."""
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "schema_migrations" in names:
        return "waypost"
    return "empty" if not names else "foreign"


# The checks that hold for any SQLite file; the others read Waypost's tables.
ANY_FILE = ("migrations", "integrity", "foreign_keys")

CHECKS: list[tuple[str, Callable[[sqlite3.Connection, Check], None]]] = [
    ("migrations", _migrations),
    ("integrity", _integrity),
    ("foreign_keys", _foreign_keys),
    ("full_text", _fts),
    ("history", _histories),
    ("receipts", _receipts),
    ("events", _events),
    ("gate_state", _gate_state),
    ("tag_rows", _tag_rows),
    ("task_decisions", _task_decisions),
    ("owner_rows", _owner_rows),
]
