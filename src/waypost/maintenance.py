"""`waypost admin backup` and `waypost admin verify` (docs/operations.md).

A backup goes through SQLite's online backup API: one read transaction on the
live database copies every page of one consistent snapshot (in WAL mode the
writer is never blocked by it), so it is safe while `serve` runs, and commits
still in the WAL are included, which a `cp` of the file would miss.

Verify opens the database and checks what must hold whatever happened to the
process: SQLite's integrity and foreign keys, the full-text indexes against
their tables, every record's revision counter against its history rows,
every idempotency receipt against the event its transaction wrote, and the
gate state stored with each task against the decisions' history.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from waypost.clock import format_time
from waypost.resolvers.decisions import gate, status
from waypost.resolvers.decisions.lists_store import TIMEOUT_OPENED_AT_SQL
from waypost.resolvers.tasks.ready_store import GATE_OPEN_SQL
from waypost.storage.connection import check_writable, rollback_if_open, storage_refusal
from waypost.storage.migrate import MigrationError, available, migrate, recorded, refusals
from waypost.storage.schema_guard import NotWaypostDatabase, refuse_foreign

# At most this many problems are listed per check (the count is complete).
SHOWN = 20
FTS_TABLES = ("tasks_fts", "knowledge_fts")
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


class BackupError(Exception):
    """A refused backup or verify, with a code as the CLI prints it (`code: message`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def present(path: Path) -> bool:
    """Whether a file is at `path`; a path that cannot even be looked at (a
    directory this user may not search, a name too long) is `database_unusable`,
    said in one line, not a traceback."""
    try:
        return path.exists()
    except OSError as exc:
        raise BackupError("database_unusable", f"{path}: {exc.strerror or exc}") from exc


def backup(source: Path, target: Path) -> dict[str, Any]:
    """Copy `source` into the new file `target` (mode 0600) and check the copy.

    The copy is written under a temporary name beside `target` and takes
    `target`'s name only once complete: a copy cut short (SIGTERM, SIGKILL,
    a full disk) left a file under the backup's name that opened as an empty
    database. A copy that fails `integrity_check` is kept for inspection, but
    refused (`corrupt`, exit 1): a cron job's `backup || alert` must fire on it."""
    if not present(source):
        raise BackupError("not_found", f"no database at {source}")
    if source.is_dir():  # SQLite says only "disk I/O error" of it
        raise BackupError("database_unusable", f"{source}: is a directory, not a database file")
    if os.path.lexists(target):
        raise BackupError("target_exists", f"{target} exists; choose a new file")
    _refuse_foreign_source(source)
    _refuse_unnameable(target)
    partial = _partial_name(target)
    try:
        # O_EXCL: never overwrite a file by mistake
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise BackupError("cannot_create", f"{target}: {exc.strerror or exc}") from exc
    os.close(fd)
    try:
        found = _copy(source, partial)
        _take_name(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    check, pages = found
    if check != "ok":
        raise BackupError(
            "corrupt",
            f"the copy fails integrity_check ({check.splitlines()[0]}); it is kept at"
            f" {target} for inspection: the source database is damaged",
        )
    return {"backup": str(target), "bytes": target.stat().st_size, "pages": pages,
            "integrity": check}  # fmt: skip


# A file name's bytes on the file systems SQLite files live on (ext4, XFS,
# btrfs, APFS, NTFS), less the "-journal" SQLite adds to the partial copy's.
_NAME_BYTES = 255 - len("-journal")


def _partial_name(target: Path) -> Path:
    """`TARGET.partial-PID` beside the target, the target's part cut to fit
    a file name: a target of 242-255 bytes was refused as "File name too
    long", though the name the operator chose fits."""
    suffix = f".partial-{os.getpid()}"
    room = _NAME_BYTES - len(suffix)
    return target.with_name(os.fsdecode(os.fsencode(target.name)[:room]) + suffix)


def _refuse_unnameable(target: Path) -> None:
    """A name longer than its directory's file system holds is refused before
    the copy (`cannot_create`, as for a directory that does not exist): the
    partial copy's name is cut to fit, so a 300-byte name was copied whole
    first and then failed to take its name (`backup_failed`)."""
    try:
        longest = os.pathconf(target.parent, "PC_NAME_MAX")
    except OSError:
        return  # the partial copy's creation says what is wrong with the directory
    # (some FUSE and network file systems answer -1 or 0: no bound known)
    if longest > 0 and len(os.fsencode(target.name)) > longest:
        raise BackupError(
            "cannot_create", f"{target}: File name too long ({longest} bytes at most)"
        )


def _take_name(partial: Path, target: Path) -> None:
    """Give the finished copy `target`'s name, never over a file made meanwhile."""
    try:
        os.link(partial, target)  # fails if `target` exists, where rename would replace it
    except FileExistsError as exc:
        raise BackupError("target_exists", f"{target} exists; choose a new file") from exc
    except OSError:
        # a file system without hard links: rename, having looked once more
        if os.path.lexists(target):
            raise BackupError("target_exists", f"{target} exists; choose a new file") from None
        os.rename(partial, target)


def _refuse_foreign_source(source: Path) -> None:
    """Another application's SQLite file is refused, as by every other admin
    command (it was copied and the backup reported `ok`). A file SQLite cannot
    read is left to the copy, which says what it found."""
    conn = open_read_only(source)
    try:
        refuse_foreign(conn)
    except NotWaypostDatabase as exc:
        raise BackupError("database_unusable", f"{source}: {exc}") from exc
    except sqlite3.DatabaseError:
        pass
    finally:
        conn.close()


def _copy(source: Path, target: Path) -> tuple[str, int]:
    """One snapshot of `source` into `target`; its integrity_check and page count."""
    src = open_read_only(source)
    dst = sqlite3.connect(target)
    try:
        # pages=-1: the whole database in one step, so from one snapshot
        src.backup(dst, pages=-1)
        # the copy stands alone: no -wal file beside it to lose
        dst.execute("PRAGMA journal_mode = DELETE")
        check = dst.execute("PRAGMA integrity_check").fetchone()[0]
        pages = dst.execute("PRAGMA page_count").fetchone()[0]
    except BaseException as exc:
        dst.close()
        # the copy and the journal files a failed copy may leave beside it
        for leftover in [target, *(Path(f"{target}-{s}") for s in ("journal", "wal", "shm"))]:
            leftover.unlink(missing_ok=True)
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            # malformed, not a database: SQLite could not even read it through
            raise BackupError(
                "corrupt", f"the source database cannot be read through ({exc}); no copy made"
            ) from exc
        raise
    finally:
        src.close()
    dst.close()
    return check, pages


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
    kind = _kind(conn)
    if kind == "empty":
        return  # a new file: `serve` creates the schema when it starts
    if kind == "foreign":
        check.add("no schema_migrations table: not a Waypost database")
        return
    for refusal in refusals(recorded(conn), available()):
        check.add(refusal)


def _refused_schema(conn: sqlite3.Connection) -> bool:
    """`serve` refuses the schema: a newer build's migrations, an edited one."""
    try:
        return bool(refusals(recorded(conn), available()))
    except sqlite3.OperationalError:
        raise  # busy, locked, I/O: not a finding about the file (verify_failed)
    except sqlite3.DatabaseError:
        return False  # damaged: the checks run on it and report what fails


def _kind(conn: sqlite3.Connection) -> str:
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
]


def verify(path: Path) -> dict[str, Any]:
    """Every check's result; `ok` only when all pass. Changes nothing.

    Two cases are checked through a private copy made with the backup API,
    and the report says why. A database this process may not write (a backup
    on read-only media): FTS5's integrity-check is a write statement (rolled
    back). A file of an earlier build, with migrations not applied yet: the
    checks read today's schema, so they run on the copy once the migrations
    are applied to it, as `serve` would apply them at start (on the file
    itself they failed with "no such column", and a sound backup of the
    build before an upgrade was reported `verify_failed`)."""
    if not present(path):
        raise BackupError("not_found", f"no database at {path}")
    pending = _pending_migrations(path)
    writable = _writable(path)
    if writable and not pending:
        return _verify(path)
    reasons = [] if writable else ["the database is read-only"]
    if pending:
        reasons.append(
            f"{len(pending)} migrations are not applied yet ({', '.join(pending)}):"
            " checked with them applied, as serve applies them at start"
        )
    with tempfile.TemporaryDirectory(prefix="waypost-verify-") as scratch:
        copy = Path(scratch) / "copy.db"
        src = open_read_only(path)
        dst = sqlite3.connect(copy, isolation_level=None)
        unmigrated = None
        try:
            src.backup(dst, pages=-1)
            if pending:
                migrate(dst)
        except sqlite3.OperationalError:
            raise  # busy, locked, I/O: not a finding about the file (verify_failed)
        except (sqlite3.DatabaseError, MigrationError) as exc:
            # a damaged file: the migration that met the damage is rolled
            # back, and the checks that need today's schema cannot run
            unmigrated = f"the migrations could not be applied to a copy: {exc}"
        finally:
            src.close()
            dst.close()
        return {**_verify(copy, unmigrated), "checked_a_copy": "; ".join(reasons)}


def _pending_migrations(path: Path) -> list[str]:
    """The migrations this build would apply to the Waypost file at `path`
    (none when it records one this build does not know, or an edited one:
    the migrations check reports that; nor for a file that cannot be read)."""
    try:
        conn = open_read_only(path)
    except sqlite3.Error:
        return []
    try:
        if _kind(conn) != "waypost":
            return []
        applied, known = recorded(conn), available()
        if refusals(applied, known):
            return []
        return [m.name for m in known if m.name not in applied]
    except sqlite3.OperationalError:
        raise  # busy, locked, I/O: not a finding about the file (verify_failed)
    except sqlite3.DatabaseError:
        return []  # damaged: the checks run on it as it is and report what fails
    finally:
        conn.close()


def open_read_only(path: Path) -> sqlite3.Connection:
    """`path` opened read-only. Through a URI, whose path is percent-encoded
    here: `prod#1.db` was read as the file `prod` (a new, empty one), and
    `prod%41.db` as `prodA.db`.

    A WAL file at rest that this user may not write is read as immutable:
    SQLite otherwise creates its `-wal` and `-shm` with the file's read-only
    mode and leaves them, and they kept `serve` refused after the file's
    mode was mended. At rest (no `-wal`, no `-shm`: no connection has it
    open) the file holds every commit; were a service to start on it and
    checkpoint during the read, the read could fail as malformed, never
    change the file."""
    resolved = path.resolve()  # the name SQLite gives the -wal and -shm (a symlink's target)
    uri = f"{resolved.as_uri()}?mode=ro"
    if not os.access(resolved, os.W_OK) and _wal_at_rest(resolved):
        uri += "&immutable=1"
    return sqlite3.connect(uri, uri=True, timeout=5)


def _wal_at_rest(path: Path) -> bool:
    """In WAL mode by its header (bytes 18 and 19 are 2) with no `-wal` and
    no `-shm` beside it."""
    try:
        with path.open("rb") as file:
            header = file.read(20)
    except OSError:
        return False
    beside = (Path(f"{path}{suffix}") for suffix in ("-wal", "-shm"))
    return header[18:20] == b"\x02\x02" and not any(os.path.lexists(p) for p in beside)


def _writable(path: Path) -> bool:
    """Whether a write statement could run (it is not one here: rolled back).
    A file this user may not write is not opened for it: SQLite would open
    it read-only and leave a read-only `-wal` and `-shm` beside it."""
    if not os.access(path, os.W_OK):
        return False
    conn = sqlite3.connect(path, isolation_level=None, timeout=5)
    try:
        check_writable(conn)
    except sqlite3.OperationalError as exc:
        if str(exc).startswith("no such table"):
            return True  # no schema_migrations: the report says what the file is
        if storage_refusal(exc) is None:
            raise
        return False
    except sqlite3.DatabaseError:
        return True  # damaged: the checks run on it as it is and report what fails
    finally:
        conn.close()
    return True


def _verify(path: Path, unmigrated: str | None = None) -> dict[str, Any]:
    """The checks on the file at `path`; `unmigrated`: why it lacks this
    build's schema (the migrations failed on it), so that only the checks
    that hold for any file run, and `migrations` fails with that reason."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=5)
    conn.row_factory = sqlite3.Row
    try:
        try:
            kind = _kind(conn)
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError:
            kind = "waypost"  # damaged: the checks run on it and report what fails
        refused = kind == "waypost" and _refused_schema(conn)
        results = {}
        for name, run in CHECKS:
            check = Check(name)
            if unmigrated is not None and name not in ANY_FILE:
                check.add(f"not run: {unmigrated}")
                results[name] = check.to_json()
                continue
            if refused and name not in ANY_FILE:
                # not this build's schema: they ended the whole report in
                # `verify_failed: no such table`, where `migrations` says why
                check.add("not run: serve refuses this file's schema (see the migrations check)")
                results[name] = check.to_json()
                continue
            if kind != "waypost" and name not in ANY_FILE:
                # Waypost's tables are not there to check: an empty file has
                # nothing to find; another application's file is no Waypost one
                if kind == "foreign":
                    check.add("not run: not a Waypost database")
                results[name] = check.to_json()
                continue
            if unmigrated is not None and name == "migrations":
                check.add(unmigrated)
            try:
                run(conn, check)
            except sqlite3.OperationalError:
                raise  # busy, locked, I/O: not a finding about the file (verify_failed)
            except sqlite3.DatabaseError as exc:
                # a damaged file fails the checks it breaks; the report goes on
                check.add(f"the check could not run: {exc}")
            results[name] = check.to_json()
    finally:
        conn.close()
    report: dict[str, Any] = {"ok": all(r["ok"] for r in results.values()), "checks": results}
    if kind == "empty":
        report["note"] = "an empty database: serve creates the schema when it starts"
    return report
