"""Acceptance criteria are searched as their text (migration 0016): the index
once held their stored JSON, where "café" was the token "u00e9" and a second
line's first word was glued to an "n"."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.conftest import Caller, Service
from waypost.maintenance import verify

TASKS = "/api/v1/projects/demo/tasks"
CRITERIA = ["first line\nsecondword here", "café crème", "tab\tthirdword", "数据库迁移 必须 回滚"]


async def _found(human: Caller, q: str) -> tuple[list[str], list[str]]:
    """(ids in the task list's q filter, task ids in the context packet)."""
    listed = (await human.get(TASKS, q=q)).json()["items"]
    packet = (await human.get("/api/v1/projects/demo/context", q=q)).json()["items"]
    return [t["id"] for t in listed], [i["id"] for i in packet if i["type"] == "task"]


async def test_criteria_words_are_found_and_escape_fragments_are_not(
    service: Service, human: Caller, project: str
) -> None:
    r = await human.post(TASKS, {"title": "plain", "acceptance_criteria": CRITERIA})
    assert r.status_code == 201, r.text
    task: dict[str, Any] = r.json()
    for word in ("secondword", "café", "crème", "thirdword", "数据库迁移", "回滚"):
        assert await _found(human, word) == ([task["id"]], [task["id"]]), word
    for fragment in ("u00e9", "nsecondword", "tthirdword", "u6570"):
        assert await _found(human, fragment) == ([], []), fragment

    edit = {"expected_revision": 1, "acceptance_criteria": ["nothing else"]}
    assert (await human.patch(f"{TASKS}/{task['id']}", edit)).status_code == 200
    assert await _found(human, "café") == ([], [])
    assert await _found(human, "nothing") == ([task["id"]], [task["id"]])
    # the index and its content column agree (FTS5 integrity-check against the table)
    report = await asyncio.to_thread(verify, service.db_path)
    assert report["checks"]["full_text"]["ok"], report


async def test_a_tag_with_a_control_character_is_400(human: Caller, project: str) -> None:
    """Tags are searched as their stored JSON, where a newline would glue an "n"
    to the next word: a tag is a label, so control characters are refused."""
    for tag in ("multi\nline", "tab\there", "bell\x07"):
        body = {"kind": "fact", "title": "t", "body": "b", "tags": ["fine", tag]}
        r = await human.post("/api/v1/projects/demo/knowledge", body)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["details"]["field"] == "tags[1]"
    body = {"kind": "fact", "title": "t", "body": "b", "tags": ["naïve", "数据库"]}
    assert (await human.post("/api/v1/projects/demo/knowledge", body)).status_code == 201
    packet = (await human.get("/api/v1/projects/demo/context", q="naïve")).json()
    assert [i["tags"] for i in packet["items"]] == [["naïve", "数据库"]]
