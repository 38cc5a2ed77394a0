"""Helpers shared by the knowledge tests (not a test module)."""

from __future__ import annotations

import copy
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.conftest import Caller


def kpath(project: str, *rest: str) -> str:
    return "/".join([f"/api/v1/projects/{project}/knowledge", *rest])


def new_body(**fields: Any) -> dict[str, Any]:
    """A valid create body; keyword arguments replace or add fields."""
    return {
        "kind": "lesson",
        "title": "Retry the flaky step",
        "body": "It passes on retry.",
        **fields,
    }


async def create(caller: Caller, project: str, **fields: Any) -> dict[str, Any]:
    r = await caller.post(kpath(project), new_body(**fields))
    assert r.status_code == 201, r.text
    record: dict[str, Any] = r.json()
    return record


def correction(record: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """The complete PATCH body that keeps `record` as it is, with `changes` applied."""
    provenance = {
        k: record["provenance"][k]
        for k in ("summary", "source_uri", "source_task_id", "source_submission_id")
    }
    body = {
        "expected_revision": record["revision"],
        "title": record["title"],
        "body": record["body"],
        "status": record["status"],
        "scope": copy.deepcopy(record["scope"]),
        "tags": list(record["tags"]),
        "applicability": record["applicability"],
        "provenance": provenance,
    }
    if record["superseded_by_id"] is not None:
        body["superseded_by_id"] = record["superseded_by_id"]
    body.update(changes)
    return body


async def make_project(human: Caller, project_id: str) -> str:
    r = await human.post("/api/v1/projects", {"id": project_id, "name": project_id})
    assert r.status_code == 201, r.text
    return project_id


async def make_task(caller: Caller, project: str, title: str = "a task") -> str:
    r = await caller.post(f"/api/v1/projects/{project}/tasks", {"title": title})
    assert r.status_code == 201, r.text
    task_id: str = r.json()["id"]
    return task_id


def error_of(response: Any) -> tuple[int, str, Any]:
    """(status, code, details.field) of an error response."""
    error = response.json()["error"]
    return response.status_code, error["code"], error["details"].get("field")


@contextmanager
def raw(db_path: Path) -> Iterator[sqlite3.Connection]:
    """A plain connection to the service's database file, for trigger and row checks."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    try:
        yield conn
    finally:
        conn.close()
