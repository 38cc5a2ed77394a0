"""Knowledge rows: shaping, look-ups and the two writes (the rules that
refuse a read or a reference are in rules.py).

Every write goes through `insert_record` (a new identity and its revision 1)
or `append_revision` (the next revision and the new projection); nothing
else touches `knowledge` or `knowledge_revisions`, and nothing here ever
writes `projects.rules`: knowledge is advisory, never binding policy.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from waypost.ids import new_id
from waypost.json_text import compact
from waypost.pagination import keyset
from waypost.resolvers.context.lists_store import ListMatch, list_match
from waypost.resolvers.knowledge.models import Content, KnowledgeListQuery, NewRecord
from waypost.runtime import Actor
from waypost.storage.key_lists import ids_param

# The revisioned columns, in the order both tables and `_values` use.
CONTENT_COLUMNS = (
    "title", "body", "status", "scope_task_ids", "scope_components", "scope_environments",
    "scope_versions", "tags", "applicability", "provenance_summary", "provenance_source_uri",
    "provenance_source_task_id", "provenance_source_submission_id", "provenance_actor_id",
    "provenance_actor_session_id", "provenance_recorded_at", "superseded_by_id",
)  # fmt: skip
_COLS = ", ".join(CONTENT_COLUMNS)
_MARKS = ", ".join("?" for _ in CONTENT_COLUMNS)


def _list(values: list[str]) -> str:
    # one canonical spelling, so equal content is stored as equal bytes
    # (json.dumps's, without its per-call set-up: waypost/json_text.py)
    return compact(values) if values else "[]"


def _loads_list(text: str) -> list[Any]:
    # most scope lists are empty: "[]" needs no parser
    return [] if text == "[]" else json.loads(text)


def _values(c: Content, actor: Actor, at: str) -> tuple[Any, ...]:
    return (
        c.title, c.body, c.status, _list(c.task_ids), _list(c.components),
        _list(c.environments), _list(c.versions), _list(c.tags), c.applicability, c.summary,
        c.source_uri, c.source_task_id, c.source_submission_id, actor.principal_id,
        actor.session_id, at, c.superseded_by_id,
    )  # fmt: skip


def _content_json(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "title": row["title"],
        "body": row["body"],
        "status": row["status"],
        "scope": {
            "task_ids": _loads_list(row["scope_task_ids"]),
            "components": _loads_list(row["scope_components"]),
            "environments": _loads_list(row["scope_environments"]),
            "versions": _loads_list(row["scope_versions"]),
        },
        "tags": _loads_list(row["tags"]),
        "applicability": row["applicability"],
        "provenance": {
            "summary": row["provenance_summary"],
            "source_uri": row["provenance_source_uri"],
            "source_task_id": row["provenance_source_task_id"],
            "source_submission_id": row["provenance_source_submission_id"],
            "actor_id": row["provenance_actor_id"],
            "actor_session_id": row["provenance_actor_session_id"],
            "recorded_at": row["provenance_recorded_at"],
        },
        "superseded_by_id": row["superseded_by_id"],
    }


def knowledge_json(row: sqlite3.Row) -> dict[str, Any]:
    """The flat knowledge object of the service contract (section 6)."""
    content = _content_json(row)
    return {
        "id": row["id"],
        "project_id": row["project_id"],
        "kind": row["kind"],
        "title": content["title"],
        "body": content["body"],
        "status": content["status"],
        "scope": content["scope"],
        "tags": content["tags"],
        "applicability": content["applicability"],
        "provenance": content["provenance"],
        "collection": row["collection"],
        "share_across_projects": bool(row["share_across_projects"]),
        "superseded_by_id": content["superseded_by_id"],
        "revision": row["revision"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def revision_json(row: sqlite3.Row) -> dict[str, Any]:
    """One immutable revision with the feedback bound to it (`useful`/`not_useful` columns)."""
    return {
        "knowledge_id": row["knowledge_id"],
        "revision": row["revision"],
        **_content_json(row),
        "feedback": {"useful": row["useful"], "not_useful": row["not_useful"]},
    }


# One page of revisions (newest first) for each of several records in one
# statement: each record's page is a LIMIT on one range of its primary key
# (a window numbering every revision below the cursor read the record's
# whole history: 22 ms at 5,000 revisions), with the feedback bound to each.
_REVISION_PAGES = """
SELECT r.*,
  (SELECT count(*) FROM knowledge_feedback f WHERE f.knowledge_id = r.knowledge_id
     AND f.revision = r.revision AND f.useful = 1) AS useful,
  (SELECT count(*) FROM knowledge_feedback f WHERE f.knowledge_id = r.knowledge_id
     AND f.revision = r.revision AND f.useful = 0) AS not_useful
FROM json_each(?) AS k JOIN knowledge_revisions r ON r.knowledge_id = k.value
  AND r.revision IN (SELECT revision FROM knowledge_revisions
    WHERE knowledge_id = k.value AND revision < ? ORDER BY revision DESC LIMIT ?)
ORDER BY r.knowledge_id, r.revision DESC
"""


def revision_rows(
    conn: sqlite3.Connection, ids: Sequence[str], before: int, count: int
) -> dict[str, list[sqlite3.Row]]:
    """Up to `count` revisions below `before` of each record, newest first."""
    unique = sorted(set(ids))
    found: dict[str, list[sqlite3.Row]] = {i: [] for i in unique}
    if unique:
        for row in conn.execute(_REVISION_PAGES, (json.dumps(unique), before, count)):
            found[row["knowledge_id"]].append(row)
    return found


def feedback_totals(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """Useful / not-useful totals over every revision, for several records at once."""
    unique = sorted(set(ids))
    found = {i: {"useful": 0, "not_useful": 0} for i in unique}
    if unique:
        rows = conn.execute(
            "SELECT knowledge_id, sum(useful) AS useful, sum(1 - useful) AS not_useful"
            " FROM knowledge_feedback WHERE knowledge_id IN (SELECT value FROM json_each(?))"
            " GROUP BY knowledge_id",
            (ids_param(unique),),
        )
        for r in rows:
            found[r["knowledge_id"]] = {"useful": r["useful"], "not_useful": r["not_useful"]}
    return found


def insert_feedback(
    conn: sqlite3.Connection,
    feedback_id: str,
    target: tuple[str, int],
    verdict: tuple[bool, str | None],
    actor: tuple[str, str | None],
    at: str,
) -> sqlite3.Row:
    """Append feedback on `target` (knowledge id, revision): `verdict` is
    (useful, comment), `actor` (principal id, session id); returns the row."""
    conn.execute(
        "INSERT INTO knowledge_feedback (id, knowledge_id, revision, useful, comment,"
        " actor_id, actor_session_id, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (feedback_id, *target, *verdict, *actor, at),
    )
    row: sqlite3.Row = conn.execute(
        "SELECT * FROM knowledge_feedback WHERE id = ?", (feedback_id,)
    ).fetchone()
    return row


def get_row(conn: sqlite3.Connection, knowledge_id: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM knowledge WHERE id = ?", (knowledge_id,)
    ).fetchone()
    return row


def get_rows(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, sqlite3.Row]:
    """Records by id, whatever their project, in one statement."""
    unique = sorted(set(ids))
    if not unique:
        return {}
    rows = conn.execute(
        "SELECT * FROM knowledge WHERE id IN (SELECT value FROM json_each(?))",
        (ids_param(unique),),
    )
    return {row["id"]: row for row in rows}


def _list_filter(q: KnowledgeListQuery) -> tuple[list[str], list[Any]]:
    """(WHERE terms, arguments) of a knowledge list's filters on the record
    (the project, the tag and the cursor belong to each part's walk, `_parts`;
    `q` to `_matching`)."""
    where: list[str] = []
    args: list[Any] = []
    for column, value in (("kind", q.kind), ("status", q.status)):
        if value is not None:
            where.append(f"k.{column} = ?")
            args.append(value)
    return where, args


def _matching(found: ListMatch | None, part: _Part) -> tuple[str, list[str]]:
    """(FROM clause, WHERE terms) of one part for the records matching `q`
    (`found`, None without `q`): a part walking the records starts from the
    matches when they are few; a tag's walk, narrow already, keeps them."""
    if found is None:
        return part.source, []
    if found.source is not None and part.source == _RECORDS:
        return found.source, [found.source_term]
    return part.source, [found.walk_term]


@dataclass(frozen=True)
class _Part:
    """One part of a list, walked in list order: where its rows come from,
    the WHERE term that picks them (with its arguments), and the two columns
    of that walk's order (updated_at, id)."""

    source: str
    where: str
    args: tuple[Any, ...]
    order: tuple[str, str] = ("k.updated_at", "k.id")


# A tag filter walks the tag's rows (migration 0022), which carry the
# record's project, status, updated_at and sharing: CROSS JOIN keeps them the
# outer loop, so a page is one range of an index whatever the tag. (Through
# `k.id IN (... tag = ?)` SQLite sorted all of a tag's records for a page:
# 47-205 ms at 100,000 records for tags 5,500-22,000 of them hold.)
_TAGGED = "knowledge_tags g CROSS JOIN knowledge k ON k.id = g.knowledge_id"
_RECORDS = "knowledge k"
_TAG_ORDER = ("g.updated_at", "g.knowledge_id")
_TAG_ROWS = "knowledge_tags g"


def _parts(project_id: str, q: KnowledgeListQuery, counting: bool = False) -> list[_Part]:
    """The parts of the list: the project's own records, and with
    `include_shared` the shared ones. Each walks an index of its own in list
    order (`knowledge_by_project`, `knowledge_shared`, or their
    `knowledge_tags_*` twins); one `project_id = ? OR collection = 'shared'`
    could use none and sorted every record of the file (70 ms at 100k).

    A page's shared part takes every shared record, the project's own too,
    and the page merges the parts without repeats (`list_rows`): leaving
    the project's own out made the walk step over each of them (4.4 ms at
    50,000 records, 5,000 of them the project's shared). A count
    (`counting`) leaves them out, so as to count each record once."""
    others = " AND {} <> ?" if counting else ""
    if q.tag is None:
        own = _Part(_RECORDS, "k.project_id = ?", (project_id,))
        shared = _Part(
            _RECORDS,
            "k.collection = 'shared'" + others.format("k.project_id"),
            (project_id,) if counting else (),
        )
    else:
        where = "g.tag = ? AND g.project_id = ?"
        args: tuple[Any, ...] = (q.tag, project_id)
        if q.status is not None:
            # one range of `knowledge_tags_by_status`, so that a status few of
            # the tag's records hold costs what a page costs
            where, args = f"{where} AND g.status = ?", (*args, q.status)
        own = _Part(_TAGGED, where, args, _TAG_ORDER)
        shared_where = "g.tag = ? AND g.shared = 1"
        shared_args: tuple[Any, ...] = (q.tag,)
        if q.status is not None:
            # likewise one range of `knowledge_tags_shared_by_status` (0036)
            shared_where, shared_args = f"{shared_where} AND g.status = ?", (q.tag, q.status)
        shared = _Part(
            _TAGGED,
            shared_where + others.format("g.project_id"),
            (*shared_args, project_id) if counting else shared_args,
            _TAG_ORDER,
        )
    return [own, shared] if q.include_shared else [own]


def list_rows(
    conn: sqlite3.Connection,
    project_id: str,
    q: KnowledgeListQuery,
    match: str | None,
    after: tuple[str, str] | None,
    count: int,
    backward: bool = False,
) -> list[sqlite3.Row]:
    """Up to `count` records the list's filters keep, newest first (updated_at,
    then id) past `after`; backward (GraphQL `last`): those before it, reversed."""
    filters, filter_args = _list_filter(q)
    found = None if match is None else list_match(conn, "knowledge", "k", match, "?")
    cmp, order = keyset(True, backward)
    parts: list[str] = []
    args: list[Any] = []
    for part in _parts(project_id, q):
        at, last = part.order
        source, matched = _matching(found, part)
        where = [part.where, *filters, *matched]
        args.extend([*part.args, *filter_args, *([found.bound] if found and matched else [])])
        if after is not None:
            # a row value, which SQLite turns into a range of the index: the
            # equivalent `a < ? OR (a = ? AND id < ?)` filtered the project's
            # records one by one up to the cursor (18.6 ms 90,000 records deep)
            where.append(f"({at}, {last}) {cmp} (?, ?)")
            args.extend(after)
        parts.append(
            f"SELECT k.* FROM {source} WHERE {' AND '.join(where)}"
            f" ORDER BY {at} {order}, {last} {order} LIMIT ?"
        )
        args.append(count)
    if len(parts) == 1:
        return conn.execute(parts[0], args).fetchall()
    # each part's own best `count`, merged: the best `count` of the whole
    # list are among them; UNION drops the project's shared records, which
    # both parts hold
    merged = " UNION ".join(f"SELECT * FROM ({part})" for part in parts)
    return conn.execute(
        f"{merged} ORDER BY updated_at {order}, id {order} LIMIT ?", (*args, count)
    ).fetchall()


def count_rows(
    conn: sqlite3.Connection, project_id: str, q: KnowledgeListQuery, match: str | None
) -> int:
    """How many records the list's filters keep."""
    filters, filter_args = _list_filter(q)
    found = None if match is None else list_match(conn, "knowledge", "k", match, "?")
    counts: list[str] = []
    args: list[Any] = []
    for part in _parts(project_id, q, counting=True):
        source, matched = _matching(found, part)
        where = " AND ".join([part.where, *filters, *matched])
        if part.source == _TAGGED and not filters and not matched:
            source = _TAG_ROWS  # a tag's rows alone hold all such a count needs
        counts.append(f"(SELECT count(*) FROM {source} WHERE {where})")
        args.extend([*part.args, *filter_args, *([found.bound] if found and matched else [])])
    return int(conn.execute(f"SELECT {' + '.join(counts)}", args).fetchone()[0])


def submission_task(conn: sqlite3.Connection, project_id: str, submission_id: str) -> str | None:
    """The task of a submission of `project_id`; None when it has no such submission."""
    found = conn.execute(
        "SELECT s.task_id FROM submissions s JOIN tasks t ON t.id = s.task_id"
        " WHERE s.id = ? AND t.project_id = ?",
        (submission_id, project_id),
    ).fetchone()
    return None if found is None else str(found["task_id"])


def replaced_through_chain(conn: sqlite3.Connection, start_id: str, knowledge_id: str) -> bool:
    """`knowledge_id` is `start_id` or one of the records its chain of
    replacements leads to. UNION (not UNION ALL) makes the walk stop on rows
    already seen."""
    found = conn.execute(
        "WITH RECURSIVE chain(id) AS (SELECT ? UNION SELECT k.superseded_by_id"
        " FROM knowledge k JOIN chain ON k.id = chain.id WHERE k.superseded_by_id IS NOT NULL)"
        " SELECT 1 FROM chain WHERE id = ?",
        (start_id, knowledge_id),
    ).fetchone()
    return found is not None


def insert_record(
    conn: sqlite3.Connection,
    project_id: str,
    new: NewRecord,
    content: Content,
    actor: Actor,
    at: str,
) -> dict[str, Any]:
    """A new identity: its projection and its immutable revision 1."""
    knowledge_id = new_id("kn")
    values = _values(content, actor, at)
    # RETURNING: the stored row (defaults and all) without reading it again
    row = conn.execute(
        f"INSERT INTO knowledge (id, project_id, kind, collection, share_across_projects,"
        f" {_COLS}, revision, created_at, updated_at)"
        f" VALUES (?, ?, ?, ?, ?, {_MARKS}, 1, ?, ?) RETURNING *",
        (knowledge_id, project_id, new.kind, new.collection, new.share_across_projects,
         *values, at, at),
    ).fetchone()  # fmt: skip
    conn.execute(
        f"INSERT INTO knowledge_revisions (knowledge_id, revision, {_COLS})"
        f" VALUES (?, 1, {_MARKS})",
        (knowledge_id, *values),
    )
    return knowledge_json(row)


def append_revision(
    conn: sqlite3.Connection, row: sqlite3.Row, content: Content, actor: Actor, at: str
) -> dict[str, Any]:
    """Write revision n+1 and point the projection at it; earlier rows stay as they are."""
    revision = row["revision"] + 1
    values = _values(content, actor, at)
    conn.execute(
        f"INSERT INTO knowledge_revisions (knowledge_id, revision, {_COLS})"
        f" VALUES (?, ?, {_MARKS})",
        (row["id"], revision, *values),
    )
    sets = ", ".join(f"{name} = ?" for name in CONTENT_COLUMNS)
    # updated_at never moves back (RFC 3339 text in one format sorts as
    # time): after the clock stepped back, a revision stamped earlier than
    # the record's last moved it behind a forward walk of the list, which
    # then met it twice (clockaudit)
    conn.execute(
        f"UPDATE knowledge SET {sets}, revision = ?, updated_at = max(?, updated_at) WHERE id = ?",
        (*values, revision, at, row["id"]),
    )
    updated = get_row(conn, row["id"])
    assert updated is not None
    return knowledge_json(updated)


def changed_fields(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Names of the content fields a correction changed (for the event)."""
    names = ("title", "body", "status", "scope", "tags", "applicability", "superseded_by_id")
    changed = [n for n in names if before[n] != after[n]]
    keys = ("summary", "source_uri", "source_task_id", "source_submission_id")
    if any(before["provenance"][k] != after["provenance"][k] for k in keys):
        changed.append("provenance")
    return changed
