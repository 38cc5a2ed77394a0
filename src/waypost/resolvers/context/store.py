"""The context domain's SQL besides the ranked search (ranking_store.py): the
matched tasks' rows, and the matched knowledge records as packet items,
built by SQLite in one statement.

A packet carries up to 100 full knowledge objects. Shaping them in Python
(knowledge/store.py's `knowledge_json`) parses five JSON lists per record and
builds two nested dicts, which was the largest share of the packet's own
time after the search. Here SQLite builds every object with `json_object`
(the stored lists are already JSON, so `json(...)` embeds them as they
are), aggregates them into one array and msgspec decodes that array in one
call. The object is the same as `knowledge_json` makes, key for key and in
the same order (tests compare the two on every seeded record), so the
packet's bytes and its budget count are unchanged.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import msgspec

from waypost.storage.key_lists import ids_param

_decode = msgspec.json.Decoder(list[dict[str, Any]])

# Key for key the object of `waypost.resolvers.knowledge.store.knowledge_json`.
_KNOWLEDGE_OBJECT = """json_object(
  'id', id, 'project_id', project_id, 'kind', kind, 'title', title, 'body', body,
  'status', status,
  'scope', json_object(
    'task_ids', json(scope_task_ids), 'components', json(scope_components),
    'environments', json(scope_environments), 'versions', json(scope_versions)),
  'tags', json(tags), 'applicability', applicability,
  'provenance', json_object(
    'summary', provenance_summary, 'source_uri', provenance_source_uri,
    'source_task_id', provenance_source_task_id,
    'source_submission_id', provenance_source_submission_id,
    'actor_id', provenance_actor_id, 'actor_session_id', provenance_actor_session_id,
    'recorded_at', provenance_recorded_at),
  'collection', collection,
  'share_across_projects', json(CASE WHEN share_across_projects THEN 'true' ELSE 'false' END),
  'superseded_by_id', superseded_by_id, 'revision', revision,
  'created_at', created_at, 'updated_at', updated_at)"""


def gated_tasks(conn: sqlite3.Connection, project_id: str, task_id: str) -> list[str] | None:
    """The tasks whose decisions gate work on `task_id`: itself and, for an
    activity, its subject (section 5). None when it is no task of the project."""
    row = conn.execute(
        "SELECT subject_task_id FROM tasks WHERE id = ? AND project_id = ?", (task_id, project_id)
    ).fetchone()
    if row is None:
        return None
    return [task_id] if row[0] is None else [task_id, str(row[0])]


def knowledge_objects(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The knowledge objects of `ids` (whatever their project), by id."""
    if not ids:
        return {}
    (array,) = conn.execute(
        f"SELECT json_group_array({_KNOWLEDGE_OBJECT}) FROM knowledge"
        " WHERE id IN (SELECT value FROM json_each(?))",
        (ids_param(ids),),
    ).fetchone()
    return {obj["id"]: obj for obj in _decode.decode(array)}
