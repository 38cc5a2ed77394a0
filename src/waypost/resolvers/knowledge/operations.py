"""Knowledge records: create, correct, read, list, and submission lessons.

Knowledge is advisory evidence, never binding policy: nothing here writes
`projects.rules`, and every record carries its status. Each identity is an
immutable sequence of revisions; a correction writes the next one under
`expected_revision` and never touches an earlier one. Request models live in
models.py, the SQL in store.py, the rules that refuse a read or a reference
in rules.py, feedback in feedback.py.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from waypost.clock import format_time
from waypost.decoding import convert
from waypost.errors import InvalidRequest, RevisionConflict
from waypost.pagination import Page, check_limit, decode_cursor, encode_cursor
from waypost.resolvers.context.search import filtered_read, fts_query
from waypost.resolvers.core.receipts import Idempotency, Outcome, Tx, run_mutation
from waypost.resolvers.knowledge.models import (
    MAX_SUBMISSION_LESSONS,
    Content,
    KnowledgeCorrect,
    KnowledgeCreate,
    KnowledgeListQuery,
    SubmissionLessonInput,
    check_correction_status,
    check_new,
    prefixed,
)
from waypost.resolvers.knowledge.rules import (
    check_no_supersession_cycle,
    check_references,
    own_row,
    visible_row,
)
from waypost.resolvers.knowledge.store import (
    append_revision,
    changed_fields,
    count_rows,
    feedback_totals,
    get_rows,
    insert_record,
    knowledge_json,
    list_rows,
    revision_json,
    revision_rows,
)
from waypost.resolvers.projects.operations import require_project
from waypost.runtime import Actor, Runtime

__all__ = [
    "correct",
    "create",
    "decode_submission_lessons",
    "detail",
    "detail_sync",
    "get_many_sync",
    "history_pages_sync",
    "history_sync",
    "insert_submission_lessons",
    "list_knowledge",
    "list_sync",
]


async def create(
    rt: Runtime, actor: Actor, idem: Idempotency, project_id: str, body: KnowledgeCreate
) -> Outcome:
    """A new record and its revision 1; the server fills actor, session and time."""

    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        # the rules in the unit, after the key's receipt was looked for: a
        # retry of a create an earlier build took replays its answer (as a
        # task's or a decision's does) though a rule has tightened since
        check_new(body)
        content = Content.of(body)
        require_project(tx.conn, project_id)
        check_references(tx.conn, project_id, content)
        record = insert_record(tx.conn, project_id, body, content, actor, tx.at)
        tx.event(project_id, "knowledge.created", "knowledge", record["id"], _created(record))
        return 201, record

    return await run_mutation(rt, actor, idem, unit)


def _created(record: dict[str, Any]) -> dict[str, Any]:
    # what a list shows of a new record (its title), not its body
    return {
        "revision": record["revision"],
        "title": record["title"],
        "kind": record["kind"],
        "status": record["status"],
        "collection": record["collection"],
    }


# the corrected fields whose new value `knowledge.corrected` carries: what a
# list shows, not the body (up to 64 KiB: the revision holds it)
EVENT_VALUES = ("title", "tags")


async def correct(
    rt: Runtime,
    actor: Actor,
    idem: Idempotency,
    project_id: str,
    knowledge_id: str,
    body: KnowledgeCorrect,
) -> Outcome:
    """Write the next revision holding the complete new content."""

    def unit(tx: Tx) -> tuple[int, dict[str, Any]]:
        content = Content.of(body)  # in the unit, as create's rules are
        check_correction_status(knowledge_id, body)
        require_project(tx.conn, project_id)
        row = own_row(tx.conn, project_id, knowledge_id)
        # before the checks against what is stored now (as a task edit's): a
        # caller who read an older revision is told to read again, not that
        # its request is invalid against a state it has not seen (raceaudit)
        if body.expected_revision != row["revision"]:
            raise RevisionConflict.behind(
                "knowledge record", body.expected_revision, row["revision"]
            )
        check_references(tx.conn, project_id, content)
        if content.superseded_by_id is not None:
            check_no_supersession_cycle(tx.conn, knowledge_id, content.superseded_by_id)
        before = knowledge_json(row)
        record = append_revision(tx.conn, row, content, actor, tx.at)
        changed = changed_fields(before, record)
        tx.event(
            project_id,
            "knowledge.corrected",
            "knowledge",
            knowledge_id,
            {
                "revision": record["revision"],
                "status": record["status"],
                "changed_fields": changed,
                "values": {f: record[f] for f in EVENT_VALUES if f in changed},
                "superseded_by_id": record["superseded_by_id"],
            },
        )
        return 200, record

    return await run_mutation(rt, actor, idem, unit)


# Revision numbers are far below this; it stands for "no cursor: from the newest".
_NO_CURSOR = 2**62


def history_pages_sync(
    conn: sqlite3.Connection, keys: Sequence[tuple[str, str | None, int | None]]
) -> list[Page[dict[str, Any]]]:
    """One history page per (knowledge_id, cursor, limit), newest first.

    Keys that share a cursor and limit (the usual case: a list of records each
    asking for `revisions(first: n)`) are read in one statement.
    """
    groups: dict[tuple[str | None, int | None], list[str]] = {}
    for knowledge_id, cursor, limit in keys:
        groups.setdefault((cursor, limit), []).append(knowledge_id)
    pages: dict[tuple[str, str | None, int | None], Page[dict[str, Any]]] = {}
    for (cursor, limit), ids in groups.items():
        size = check_limit(limit)
        before = _NO_CURSOR
        if cursor:
            (value,) = decode_cursor(cursor, int)
            before = cast(int, value)
        found = revision_rows(conn, ids, before, size + 1)
        for knowledge_id in ids:
            rows = Page.from_rows(found[knowledge_id], size, lambda r: encode_cursor(r["revision"]))
            pages[(knowledge_id, cursor, limit)] = Page(
                [revision_json(r) for r in rows.items], rows.cursors, rows.has_next
            )
    return [pages[key] for key in keys]


def history_sync(
    conn: sqlite3.Connection, knowledge_id: str, cursor: str | None, limit: int | None
) -> Page[dict[str, Any]]:
    """Revisions newest first, each with its own feedback totals."""
    return history_pages_sync(conn, [(knowledge_id, cursor, limit)])[0]


def detail_sync(
    conn: sqlite3.Connection,
    project_id: str,
    knowledge_id: str,
    cursor: str | None,
    limit: int | None,
) -> dict[str, Any]:
    require_project(conn, project_id)
    row = visible_row(conn, project_id, knowledge_id)
    return {
        **knowledge_json(row),
        "history": history_sync(conn, knowledge_id, cursor, limit).to_json(),
        "feedback": feedback_totals(conn, [knowledge_id])[knowledge_id],
    }


async def detail(
    rt: Runtime, project_id: str, knowledge_id: str, cursor: str | None, limit: int | None
) -> dict[str, Any]:
    """The flat object plus bounded history and the overall feedback totals."""
    return await rt.db.read(lambda c: detail_sync(c, project_id, knowledge_id, cursor, limit))


def get_many_sync(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Records by id whatever their project (GraphQL references and `node`)."""
    return {i: knowledge_json(row) for i, row in get_rows(conn, ids).items()}


def list_sync(
    conn: sqlite3.Connection, project_id: str, q: KnowledgeListQuery, backward: bool = False
) -> Page[dict[str, Any]]:
    """Newest first (updated_at, then id, descending); shared records only on request."""
    size = check_limit(q.limit)
    require_project(conn, project_id)
    after = None
    if q.cursor:
        updated_at, last_id = decode_cursor(q.cursor, str, str)
        after = (str(updated_at), str(last_id))
    rows = list_rows(conn, project_id, q, _match(q), after, size + 1, backward)
    page = Page.from_rows(
        rows,
        size,
        lambda r: encode_cursor(r["updated_at"], r["id"]),
        backward=backward,
        cursor=q.cursor,
    )
    return page.with_items([knowledge_json(r) for r in page.items])


def _match(q: KnowledgeListQuery) -> str | None:
    """The list's `q` as an FTS5 query (each term escaped), None without one."""
    return None if q.q is None else fts_query(q.q)


async def list_knowledge(
    rt: Runtime, project_id: str, q: KnowledgeListQuery, backward: bool = False
) -> Page[dict[str, Any]]:
    def read(conn: sqlite3.Connection) -> Page[dict[str, Any]]:
        return list_sync(conn, project_id, q, backward)

    return await (rt.db.read(read) if q.q is None else filtered_read(rt, read))


def count_sync(conn: sqlite3.Connection, project_id: str, q: KnowledgeListQuery) -> int:
    """How many records the list with these filters holds (GraphQL `totalCount`)."""
    return count_rows(conn, project_id, q, _match(q))


async def count_knowledge(rt: Runtime, project_id: str, q: KnowledgeListQuery) -> int:
    def read(conn: sqlite3.Connection) -> int:
        return count_sync(conn, project_id, q)

    return await (rt.db.read(read) if q.q is None else filtered_read(rt, read))


def decode_submission_lessons(
    lessons: list[dict[str, Any]], task_id: str, submission_id: str
) -> list[tuple[SubmissionLessonInput, Content]]:
    """The whole batch checked as a body is (types, fields, text), with each
    lesson's provenance pinned to the task and the submission: before the
    task's state is, so that a malformed lesson is the 400 it is (it was a
    409 `not_claimed` on a task not claimed, which told the caller to fix
    the wrong thing)."""
    if not isinstance(lessons, list):
        raise InvalidRequest.field("lessons", "lessons must be an array")
    if len(lessons) > MAX_SUBMISSION_LESSONS:
        raise InvalidRequest.field(
            "lessons", f"a submission may carry at most {MAX_SUBMISSION_LESSONS} lessons"
        )
    batch: list[tuple[SubmissionLessonInput, Content]] = []
    for index, raw in enumerate(lessons):
        try:
            lesson = convert(raw, SubmissionLessonInput)
            check_new(lesson)
            content = Content.of(lesson, source_task_id=task_id, source_submission_id=submission_id)
        except InvalidRequest as error:
            raise prefixed(error, f"lessons[{index}]") from error
        batch.append((lesson, content))
    return batch


def insert_submission_lessons(
    conn: sqlite3.Connection,
    actor: Actor,
    now: datetime,
    project_id: str,
    task_id: str,
    submission_id: str,
    lessons: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Validate the whole batch (`decode_submission_lessons`, then every
    lesson's references in the project), then insert each lesson and its
    revision 1: the call the knowledge-and-decision contract fixes.

    Runs inside the submission's writer transaction; an error rolls back the
    submission and every lesson together. Returns flat knowledge objects, with
    provenance pinned to the task, the submission, the actor, its session and
    the service time `now`.
    """
    batch = decode_submission_lessons(lessons, task_id, submission_id)
    for index, (_, content) in enumerate(batch):
        # the pinned task and submission are the caller's own; only the
        # lesson's scope references can be wrong
        check_references(conn, project_id, _without_pins(content), prefix=f"lessons[{index}].")
    at = format_time(now)
    # No event per lesson: the submit writes its one event (task.submitted),
    # which lists the lesson ids.
    return [
        insert_record(conn, project_id, lesson, content, actor, at) for lesson, content in batch
    ]


def _without_pins(content: Content) -> Content:
    return dataclasses.replace(content, source_task_id=None, source_submission_id=None)
