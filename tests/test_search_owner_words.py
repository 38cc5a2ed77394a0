"""The owner words of migration 0039 (`x` + the hex of a project id, and a
record's collection, `project` or `shared`) are never a user's words: a
list's `q` equal to one finds only rows whose text holds it, as the
packet's search does (test_context_ranking.py pins the packet; these, the
lists)."""

from __future__ import annotations

from tests.conftest import Caller
from tests.knowledge_support import create, make_task
from waypost.resolvers.context.search import owner_word


async def test_a_lists_q_equal_to_an_owner_word_finds_only_text(
    human: Caller, project: str
) -> None:
    word = owner_word(project)
    plain = await make_task(human, project, "a plain task")
    await make_task(human, project, "another")
    said = await make_task(human, project, f"names {word} in its title")
    record = await create(human, project, title="a plain record")
    await create(
        human, project, title="a record for all", collection="shared", share_across_projects=True
    )
    named = await create(human, project, title=f"names {word}", body="and shared")
    for q, tasks, records in (
        (word, [said], [named["id"]]),
        ("shared", [], [named["id"]]),
        ("project", [], []),  # a private record's collection word
    ):
        r = await human.get(f"/api/v1/projects/{project}/tasks", q=q, limit=100)
        assert r.status_code == 200, r.text
        assert [t["id"] for t in r.json()["items"]] == tasks, q
        r = await human.get(f"/api/v1/projects/{project}/knowledge", q=q, limit=100)
        assert r.status_code == 200, r.text
        assert [k["id"] for k in r.json()["items"]] == records, q
        gql = await human.gql(
            "query($p: String!, $q: String!) { project(id: $p) {"
            " tasks(q: $q) { totalCount } knowledge(q: $q) { totalCount } } }",
            {"p": project, "q": q},
        )
        found = gql["data"]["project"]
        assert (found["tasks"]["totalCount"], found["knowledge"]["totalCount"]) == (
            len(tasks),
            len(records),
        ), (q, gql)
    assert plain and record  # rows the owner words would have found


async def test_a_shared_record_ranks_as_a_private_one_of_the_same_text(
    human: Caller, project: str
) -> None:
    """Every record holds two owner words, its project's and its
    collection's: with `shared` alone, a shared record was one word longer
    and BM25 ranked it below a private record of the same text, where the
    build before 0039 tied them and ordered them by id (review77)."""
    made = []
    for i in range(6):
        shared = {"collection": "shared", "share_across_projects": True} if i % 2 else {}
        made.append(await create(human, project, title="rollback plan", body="steps", **shared))
    r = await human.get(f"/api/v1/projects/{project}/context", q="rollback")
    assert r.status_code == 200, r.text
    found = [i["id"] for i in r.json()["items"] if i["type"] == "knowledge"]
    assert found == sorted(k["id"] for k in made), found  # equal ranks: by id
