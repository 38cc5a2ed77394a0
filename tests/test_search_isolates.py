"""A bidi isolate or the Arabic letter mark is no letter, digit or mark, so
it must end a word (docs/context.md, "What a word is": "a word is a run of
letters, digits, combining marks (and private-use characters) between
anything else"). Right-to-left text is written with them: docs/knowledge.md
and docs/decisions.md keep U+061C and U+2066-U+2069 inside text (they are
how a left-to-right word sits in a Hebrew or Arabic sentence, the plain-text
form the console itself uses). But they are newer than SQLite's Unicode 6.1
tables (Unicode 6.3), unassigned there, and `unicode61` reads an unassigned
code point as a word character: `גרסה ⁨rollback⁩ נכשלה` was indexed with the
word `⁨rollback⁩`, which `rollback` does not find (i18njourney)."""

from __future__ import annotations

import pytest

from tests.conftest import Caller
from tests.knowledge_support import kpath, new_body
from waypost.resolvers.context.words_store import words_of

TASKS = "/api/v1/projects/demo/tasks"
CONTEXT = "/api/v1/projects/demo/context"

# Hebrew: "version <FSI>rollback<PDI> failed"; Arabic: "<ALM>rollback<ALM> failed"
ISOLATED = {
    "FSI-PDI": "גרסה \u2068rollback\u2069 נכשלה",
    "LRI-PDI": "גרסה \u2066rollback\u2069 נכשלה",
    "RLI-PDI": "Release \u2067rollback\u2069 failed",
    "ALM": "فشل \u061crollback\u061c الإصدار",
}


@pytest.mark.parametrize("control", sorted(ISOLATED))
def test_an_isolate_ends_a_word(control: str) -> None:
    assert words_of(["\u2068rollback\u2069"]) == [("rollback",)]
    words = words_of(ISOLATED[control].split())
    assert ("rollback",) in words, words


@pytest.mark.parametrize("control", sorted(ISOLATED))
async def test_a_word_between_isolates_is_found(human: Caller, project: str, control: str) -> None:
    text = ISOLATED[control]
    task = await human.post(TASKS, {"title": text})
    record = await human.post(kpath("demo"), new_body(title="a record", body=text))
    assert task.status_code == record.status_code == 201, (task.text, record.text)
    tasks = await human.get(TASKS, q="rollback")
    records = await human.get(kpath("demo"), q="rollback")
    packet = await human.get(CONTEXT, q="rollback")
    assert tasks.status_code == records.status_code == packet.status_code == 200
    assert [t["id"] for t in tasks.json()["items"]] == [task.json()["id"]]
    assert [r["id"] for r in records.json()["items"]] == [record.json()["id"]]
    assert {i["id"] for i in packet.json()["items"]} == {task.json()["id"], record.json()["id"]}
