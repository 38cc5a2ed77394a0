"""A word matches whichever Unicode form (composed NFC, decomposed NFD) it
was written and searched in: the index holds text as sent, and `Việt`,
`한국어`, `データ` typed in one form missed a record written in the other."""

from __future__ import annotations

import unicodedata

import pytest

from tests.conftest import Caller
from tests.knowledge_support import kpath, new_body

TASKS = "/api/v1/projects/demo/tasks"
WORDS = ["Tiếng Việt", "한국어 자료", "データ ガイド", "Ελληνικά"]


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


@pytest.mark.parametrize(("stored", "searched"), [(nfd, nfc), (nfc, nfd)])
async def test_a_word_is_found_in_either_form(
    human: Caller, project: str, stored: object, searched: object
) -> None:
    assert callable(stored) and callable(searched)
    made = {}
    for i, words in enumerate(WORDS):
        task = await human.post(TASKS, {"title": stored(words)})
        record = await human.post(kpath(project), new_body(title=f"record {i}", body=stored(words)))
        assert task.status_code == record.status_code == 201
        made[words] = (task.json()["id"], record.json()["id"])
    for words, (task_id, record_id) in made.items():
        for q in (searched(words), searched(words.split()[0]), f"{searched(words)} !!!"):
            assert stored(q) != q or q.isascii()  # the forms differ: the case at hand
            tasks = (await human.get(TASKS, q=q)).json()["items"]
            records = (await human.get(kpath(project), q=q)).json()["items"]
            packet = (await human.get("/api/v1/projects/demo/context", q=q)).json()["items"]
            assert [t["id"] for t in tasks] == [task_id], q
            assert [r["id"] for r in records] == [record_id], q
            assert {i["id"] for i in packet} == {task_id, record_id}, q


async def test_a_query_of_both_forms_and_plain_terms_still_narrows(
    human: Caller, project: str
) -> None:
    both = await human.post(TASKS, {"title": nfd("Việt rollback plan")})
    other = await human.post(TASKS, {"title": nfd("Việt deploy plan")})
    assert both.status_code == other.status_code == 201
    tasks = (await human.get(TASKS, q=nfc("Việt rollback"))).json()["items"]
    assert [t["id"] for t in tasks] == [both.json()["id"]]


async def test_a_term_with_no_word_or_a_newer_emoji_beside_an_accented_one(
    human: Caller, project: str
) -> None:
    """The review's cases: a punctuation term with two Unicode forms
    (U+037E GREEK QUESTION MARK is `;` composed) beside a word matched
    nothing, and `🤔` (a word to SQLite's Unicode 6.1 tables, a symbol to
    Python's) was dropped beside an accented word, widening the search."""
    plan = await human.post(TASKS, {"title": "plan ahead"})
    thinking = await human.post(TASKS, {"title": nfc("café 🤔 plan")})
    plain = await human.post(TASKS, {"title": nfc("café plan")})
    assert plan.status_code == thinking.status_code == plain.status_code == 201

    async def found(q: str) -> set[str]:
        return {t["id"] for t in (await human.get(TASKS, q=q)).json()["items"]}

    everything = {plan.json()["id"], thinking.json()["id"], plain.json()["id"]}
    assert await found("plan \u037e") == await found("plan ;") == everything
    assert await found(nfd("café 🤔")) == {thinking.json()["id"]}
    assert await found(nfd("café")) == {thinking.json()["id"], plain.json()["id"]}
