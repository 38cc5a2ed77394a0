"""The context packet without reranking: search, scope, ordering, budget, bounds."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.conftest import Caller, MovableClock, Service, serving
from tests.context_support import context, context_response, ids, knowledge, task, types
from tests.knowledge_support import correction, kpath, make_project, raw
from tests.tasks_support import allow, decline, open_decision, set_policy
from waypost.settings import RerankSettings, Settings


def size(value: Any) -> int:
    return len(msgspec.json.encode(value))


async def test_search_covers_every_text_field_of_tasks_and_knowledge(
    human: Caller, project: str
) -> None:
    t1 = await task(human, "alpha")
    t2 = await task(human, "t", description="bravo")
    t3 = await task(human, "t", acceptance_criteria=["charlie holds"])
    k1 = await knowledge(human, "delta", body="x")
    k2 = await knowledge(human, "k", body="echo")
    k3 = await knowledge(human, "k", body="x", tags=["foxtrot"])
    k4 = await knowledge(human, "k", body="x", applicability="golf hosts")
    expected = {"alpha": t1, "bravo": t2, "charlie": t3, "delta": k1, "echo": k2,
                "foxtrot": k3, "golf": k4}  # fmt: skip
    for word, record in expected.items():
        packet = await context(human, word)
        assert ids(packet) == [record["id"]], word
    assert types(await context(human, "alpha")) == ["task"]
    assert types(await context(human, "delta")) == ["knowledge"]


async def test_search_sees_only_the_current_text(human: Caller, project: str) -> None:
    record = await knowledge(human, "zebra crossing", body="a crossing")
    await human.patch(kpath(project, record["id"]), correction(record, title="okapi crossing"))
    t = await task(human, "walrus")
    r = await human.patch(
        f"/api/v1/projects/demo/tasks/{t['id']}", {"expected_revision": 1, "title": "narwhal"}
    )
    assert r.status_code == 200, r.text
    assert ids(await context(human, "zebra")) == []
    assert ids(await context(human, "walrus")) == []
    assert ids(await context(human, "okapi")) == [record["id"]]
    assert ids(await context(human, "narwhal")) == [t["id"]]
    assert (await context(human, "okapi"))["items"][0]["revision"] == 2


async def test_terms_are_all_required_and_ranked_best_first(human: Caller, project: str) -> None:
    weak = await knowledge(human, "rollback", body="a long body about many other things " * 20)
    strong = await knowledge(human, "rollback rollback owner", body="rollback owner")
    both_only = await task(human, "rollback owner")
    packet = await context(human, "rollback owner")
    assert weak["id"] not in ids(packet)  # "owner" missing: every term is required
    assert set(ids(packet)) == {strong["id"], both_only["id"]}
    packet = await context(human, "rollback")
    assert ids(packet)[-1] == weak["id"]  # the diluted match ranks last


async def test_equal_ranks_come_back_in_id_order(human: Caller, project: str) -> None:
    made = [(await knowledge(human, "identical text", body="same"))["id"] for _ in range(6)]
    first = ids(await context(human, "identical"))
    assert first == sorted(made)
    assert ids(await context(human, "identical")) == first


async def test_a_task_and_a_record_of_equal_rank_come_back_in_id_order(
    human: Caller, project: str
) -> None:
    """docs/context.md: equal ranks are ordered by the item's id, across types
    too (the test above has records alone)."""
    made = await task(human, "identical", description="identical")
    record = await knowledge(human, "identical", body="identical")
    assert ids(await context(human, "identical")) == sorted([made["id"], record["id"]])


async def test_operators_and_quotes_are_searched_as_words(human: Caller, project: str) -> None:
    record = await knowledge(human, "use NEAR and OR wisely", body='say "hello" to title:x')
    for q in ['"hello"', "NEAR", "OR", "title:x", "hello*", 'NEAR("a" "b")', "(", "^hello", "-"]:
        r = await context_response(human, q=q)
        assert r.status_code == 200, (q, r.text)
    assert ids(await context(human, "NEAR OR")) == [record["id"]]
    assert ids(await context(human, 'say "hello"')) == [record["id"]]
    assert ids(await context(human, "title:x")) == [record["id"]]


async def test_pending_and_invalidated_decisions_come_first(
    service: Service, human: Caller, project: str
) -> None:
    a = await task(human, "zebra first")
    b = await task(human, "zebra second")
    await knowledge(human, "zebra facts")
    pending_a = await open_decision(human, a["id"])
    service.clock.advance(seconds=1)  # oldest first
    pending_b = await open_decision(human, b["id"])
    allowed = await open_decision(human, a["id"])
    await allow(human, allowed)
    packet = await context(human, "zebra")
    assert types(packet)[:2] == ["decision", "decision"]
    assert sorted(types(packet)[2:]) == ["knowledge", "task", "task"]
    assert ids(packet)[:2] == [pending_a, pending_b]
    assert allowed not in ids(packet)
    # with task_id only the decisions affecting that task
    packet = await context(human, "zebra", task_id=a["id"])
    assert [i["id"] for i in packet["items"] if i["type"] == "decision"] == [pending_a]
    # invalidated decisions come first too: a rules edit makes both stale,
    # the allowed one included (its allow no longer counts)
    await set_policy(human, rules="new rules")
    packet = await context(human, "zebra", task_id=a["id"])
    decisions = [i for i in packet["items"] if i["type"] == "decision"]
    assert [d["id"] for d in decisions] == [pending_a, allowed]
    assert {d["status"] for d in decisions} == {"stale"}


async def test_a_tasks_expired_and_stale_decisions_come_first_and_others_do_not(
    service: Service, human: Caller, project: str
) -> None:
    """The task's decisions judged by their stored state: an allow past its
    expiry is `expired` (its task's edit notwithstanding), an allow whose
    task was edited is `stale`; a live denial and another task's pending
    decision stay out."""
    a = await task(human, "zebra")
    other = await task(human, "other")
    expiring = await human.post(
        "/api/v1/projects/demo/decisions",
        {"question": "Ship it?", "options": ["Proceed", "Stop"], "rationale": "risky",
         "required_actor": "human", "task_ids": [a["id"]], "environment": "staging",
         "expires_at": "2026-11-29T18:10:00Z"},
    )  # fmt: skip
    assert expiring.status_code == 201, expiring.text
    expired = expiring.json()["id"]
    await allow(human, expired)
    service.clock.advance(seconds=1)
    stale = await open_decision(human, a["id"], other["id"])
    await allow(human, stale)
    await open_decision(human, other["id"])
    edit = await human.patch(
        f"/api/v1/projects/demo/tasks/{a['id']}",
        {"expected_revision": a["revision"], "description": "changed"},
    )
    assert edit.status_code == 200, edit.text
    # a denial pinned to the edited revision is no stale decision
    await decline(human, await open_decision(human, a["id"]))
    service.clock.advance(minutes=20)
    packet = await context(human, "nothingmatchesthis", task_id=a["id"])
    assert [(i["id"], i["status"]) for i in packet["items"]] == [
        (expired, "expired"), (stale, "stale")
    ]  # fmt: skip


async def test_a_task_held_by_a_denial_or_deferral_says_so(
    service: Service, human: Caller, project: str
) -> None:
    """Decisions answered deny or defer are no items (neither pending nor
    invalidated), and the empty packet of a task they hold said only that
    nothing was pending, while its claim answered decision_required: an
    agent reading it took the task for free (agentflow)."""
    subject = await task(human, "zebra subject")
    review = await task(human, "zebra review", subject_task_id=subject["id"])
    answers = {}
    for disposition, on in (("deny", subject), ("defer", review)):
        decision = await open_decision(human, on["id"])
        await decline(human, decision, disposition)
        answers[disposition] = decision
        service.clock.advance(seconds=1)
    pending = await open_decision(human, review["id"])
    packet = await context(human, "nothingmatchesthis", task_id=review["id"])
    assert ids(packet) == [pending]  # the items are as before
    held, *rest = packet["next_actions"]
    # the activity's own first, then its subject's, as a refusal names them
    assert f"Task {review['id']} is held by decision(s) {answers['defer']}, {answers['deny']}" in (
        held
    )
    assert "deny or defer" in held and rest == []
    empty = await context(human, "nothingmatchesthis", task_id=subject["id"])
    assert empty["items"] == []
    held, nothing = empty["next_actions"]
    assert answers["deny"] in held and answers["defer"] not in held
    assert nothing.startswith("Nothing matched")
    # without task_id nothing is said of any one task
    assert (await context(human, "nothingmatchesthis"))["next_actions"] == []
    claim = await human.post("/api/v1/projects/demo/claims", {"task_id": review["id"]})
    details = claim.json()["error"]["details"]
    assert details["declined"] == [answers["defer"], answers["deny"]]


async def test_an_activitys_packet_lists_the_decisions_that_gate_it(
    service: Service, human: Caller, project: str
) -> None:
    """The gate checks an activity and its subject (section 5): the packet for
    an activity listed only the activity's own decisions and said "no decision
    is pending" while its claim answered decision_required."""
    subject = await task(human, "zebra subject")
    review = await task(human, "zebra review", subject_task_id=subject["id"])
    on_subject = await open_decision(human, subject["id"])
    service.clock.advance(seconds=1)
    on_both = await open_decision(human, subject["id"], review["id"])
    service.clock.advance(seconds=1)
    on_review = await open_decision(human, review["id"])
    packet = await context(human, "nothingmatchesthis", task_id=review["id"])
    assert ids(packet) == [on_subject, on_both, on_review]  # oldest first, each once
    claim = await human.post("/api/v1/projects/demo/claims", {"task_id": review["id"]})
    assert claim.status_code == 409, claim.text
    assert set(claim.json()["error"]["details"]["decision_ids"]) == set(ids(packet))
    # the subject is gated by its own decisions only, not by its activities'
    assert ids(await context(human, "nothingmatchesthis", task_id=subject["id"])) == [
        on_subject, on_both
    ]  # fmt: skip


async def test_decisions_come_first_even_without_text_matches(human: Caller, project: str) -> None:
    a = await task(human, "unrelated")
    pending = await open_decision(human, a["id"])
    packet = await context(human, "nothingmatchesthis")
    assert ids(packet) == [pending] and packet["next_actions"] == []


@pytest.mark.parametrize(
    ("scope", "params", "visible"),
    [
        ({}, {}, True),
        ({"components": ["api"]}, {}, False),
        ({"components": ["api"]}, {"component": "api"}, True),
        ({"components": ["api"]}, {"component": "web"}, False),
        ({"environments": ["prod", "staging"]}, {"environment": "staging"}, True),
        ({"versions": ["2.1"]}, {"version": "2.1", "component": "x"}, True),
        ({"versions": ["2.1"]}, {"version": "2.0"}, False),
        ({"components": ["api"], "versions": ["2"]}, {"component": "api"}, False),
        # matched exactly, code point for code point (docs/context.md): no
        # case folding, and `%` and `_` are characters, not wildcards
        ({"environments": ["prod"]}, {"environment": "PROD"}, False),
        ({"environments": ["prod"]}, {"environment": "pr%"}, False),
        ({"environments": ["prod"]}, {"environment": "pr_d"}, False),
        ({"environments": ["pr%"]}, {"environment": "pr%"}, True),
    ],
)
async def test_scope_dimensions_match_the_requested_filters(
    human: Caller, project: str, scope: dict[str, Any], params: dict[str, str], visible: bool
) -> None:
    record = await knowledge(human, "scoped zebra", scope=scope)
    assert (record["id"] in ids(await context(human, "zebra", **params))) is visible


async def test_task_scope_needs_that_task_or_none(human: Caller, project: str) -> None:
    a = await task(human, "first")
    b = await task(human, "second")
    general = await knowledge(human, "zebra general")
    for_a = await knowledge(human, "zebra for a", scope={"task_ids": [a["id"]]})
    assert set(ids(await context(human, "zebra", task_id=a["id"]))) == {general["id"], for_a["id"]}
    assert ids(await context(human, "zebra", task_id=b["id"])) == [general["id"]]
    assert ids(await context(human, "zebra")) == [general["id"]]


async def test_unknown_task_id_is_a_400_naming_it(human: Caller, project: str) -> None:
    r = await context_response(human, q="zebra", task_id="task_nope")
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "task_id"


async def test_shared_knowledge_of_other_projects_only_on_request(
    human: Caller, project: str
) -> None:
    await make_project(human, "other")
    r = await human.post(
        "/api/v1/projects/other/knowledge",
        {"kind": "fact", "title": "zebra shared", "body": "b", "collection": "shared",
         "share_across_projects": True},
    )  # fmt: skip
    shared = r.json()
    r = await human.post(
        "/api/v1/projects/other/knowledge", {"kind": "fact", "title": "zebra private", "body": "b"}
    )
    own = await knowledge(human, "zebra own")
    assert ids(await context(human, "zebra")) == [own["id"]]
    assert set(ids(await context(human, "zebra", include_shared="true"))) == {
        own["id"],
        shared["id"],
    }


async def test_other_projects_tasks_never_appear(human: Caller, project: str) -> None:
    await make_project(human, "other")
    r = await human.post("/api/v1/projects/other/tasks", {"title": "zebra elsewhere"})
    assert r.status_code == 201
    assert ids(await context(human, "zebra", include_shared="true")) == []


async def test_budget_counts_policy_and_items_as_compact_json(human: Caller, project: str) -> None:
    await set_policy(human, rules="Always name a rollback owner. Ünïcödé counts in bytes.")
    for n in range(5):
        await knowledge(human, f"zebra {n}", body="é" * (50 + n))
    full = await context(human, "zebra", budget=131072)
    assert len(full["items"]) == 5 and not full["truncated"]
    costs = [size(i) for i in full["items"]]
    policy_cost = size(full["policy"])
    # exactly enough for the policy and the first three items
    budget = max(1024, policy_cost + sum(costs[:3]))
    assert budget == policy_cost + sum(costs[:3]), "items are large enough to need > 1 KiB"
    packet = await context(human, "zebra", budget=budget)
    assert packet["items"] == full["items"][:3]
    assert packet["truncated"] is True and packet["instructions_complete"] is True
    assert any("budget" in a for a in packet["next_actions"])
    # one byte less and the third item no longer fits: never a later, smaller one instead
    packet = await context(human, "zebra", budget=budget - 1)
    assert packet["items"] == full["items"][:2]
    assert policy_cost + sum(size(i) for i in packet["items"]) <= budget - 1


async def test_filling_stops_at_the_first_item_over_the_budget(human: Caller, project: str) -> None:
    """The contract: items are included "stopping at the item count or byte
    budget". The test above grows its items down the order, so a fill that
    skipped an item over the budget and went on to a smaller one passed it."""
    t = await task(human, "unrelated")
    r = await human.post(
        "/api/v1/projects/demo/decisions",
        {"question": "Ship it? " + "Long question. " * 250, "options": ["Proceed", "Stop"],
         "rationale": "risky", "required_actor": "human", "task_ids": [t["id"]],
         "environment": "staging"},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    small = await knowledge(human, "zebra")
    full = await context(human, "zebra", budget=131072)
    assert ids(full) == [r.json()["id"], small["id"]]  # the decision first, as ever
    decision_cost, small_cost = (size(i) for i in full["items"])
    policy_cost = size(full["policy"])
    budget = max(1024, policy_cost + small_cost)
    assert policy_cost + decision_cost > budget  # the first item does not fit, the second would
    packet = await context(human, "zebra", budget=budget)
    assert packet["items"] == []
    assert packet["truncated"] is True and packet["instructions_complete"] is True
    assert any("budget" in a for a in packet["next_actions"])


async def test_the_default_limit_is_20_items(human: Caller, project: str) -> None:
    """service-contract section 14: context `limit` defaults to 20 (every
    test named its limit: mutantaudit11)."""
    for n in range(21):
        await knowledge(human, f"zebra {n}")
    packet = await context(human, "zebra")
    assert len(packet["items"]) == 20 and packet["truncated"] is True
    assert any("limit" in a for a in packet["next_actions"])


@pytest.mark.parametrize("over", [0, 1])
async def test_the_default_budget_is_16384_bytes(human: Caller, project: str, over: int) -> None:
    """service-contract section 14: context `budget` defaults to 16,384: a
    policy of exactly that many bytes is complete without a budget, one byte
    more is not (every test named its budget: mutantaudit11)."""
    await task(human, "zebra")
    await set_policy(human, rules="x" * 16000)
    grown = 16384 - size((await context(human, "zebra", budget=131072))["policy"])
    await set_policy(human, rules="x" * (16000 + grown + over))
    packet = await context(human, "zebra")
    assert size(packet["policy"]) == 16384 + over
    assert packet["items"] == [] and packet["truncated"] is True
    assert packet["instructions_complete"] is (over == 0)


async def test_limit_counts_items_and_truncates(human: Caller, project: str) -> None:
    t = await task(human, "zebra task")
    pending = await open_decision(human, t["id"])
    for n in range(4):
        await knowledge(human, f"zebra {n}")
    packet = await context(human, "zebra", limit=3)
    assert len(packet["items"]) == 3 and packet["items"][0]["id"] == pending
    assert packet["truncated"] is True and any("limit" in a for a in packet["next_actions"])
    packet = await context(human, "zebra", limit=6)
    assert len(packet["items"]) == 6 and packet["truncated"] is False
    assert packet["next_actions"] == []


async def test_policy_larger_than_the_budget_returns_it_alone(human: Caller, project: str) -> None:
    rules = "Never skip review. " * 200
    await set_policy(human, rules=rules)
    t = await task(human, "zebra")
    await open_decision(human, t["id"])
    packet = await context(human, "zebra", budget=1024)
    assert packet["policy"]["rules"] == rules  # complete, never cut
    assert packet["items"] == []
    assert packet["instructions_complete"] is False and packet["truncated"] is True
    assert str(size(packet["policy"])) in packet["next_actions"][0]


async def test_the_budget_advice_names_a_size_that_takes_the_next_item(
    human: Caller, project: str
) -> None:
    """Told only to raise the budget, an agent asked three times to see one
    item (contextjourney): each refusal names the budget that holds the next
    item, and asking with exactly that size returns it."""
    await set_policy(human, rules="Never skip review. " * 200)
    first = await knowledge(human, "zebra one", body="stripes " * 40)
    await knowledge(human, "zebra two", body="stripes " * 300)
    whole = await context(human, "zebra", budget=131072)
    policy_size = size(whole["policy"])
    one_size, two_size = (size(item) for item in whole["items"])
    over = await context(human, "zebra", budget=1024)
    [advice] = over["next_actions"]
    wanted = policy_size + one_size
    assert advice.startswith(f"Increase budget to at least {wanted} bytes"), advice
    assert f"policy alone takes {policy_size} bytes" in advice
    one = await context(human, "zebra", budget=wanted)
    assert ids(one) == [first["id"]] and one["instructions_complete"] is True
    [more] = one["next_actions"]
    assert f"raise budget to at least {wanted + two_size} bytes" in more, more
    assert len((await context(human, "zebra", budget=wanted + two_size))["items"]) == 2
    assert (await context(human, "zebra", budget=wanted - 1))["items"] == []


async def test_an_item_no_budget_can_hold_is_sent_to_the_lists(human: Caller, project: str) -> None:
    """The next item would not fit beside the policy in the largest budget:
    raising the budget (the old advice below the largest) cannot help."""
    await set_policy(human, rules='"' * 40000)  # 80,000 bytes of JSON
    await knowledge(human, "zebra", body="é" * 32000)  # 64,000
    packet = await context(human, "zebra", budget=4096)
    [advice] = packet["next_actions"]
    assert advice.startswith(f"Increase budget to at least {size(packet['policy'])} bytes"), advice
    assert "even in the largest budget" in advice and "knowledge routes with q" in advice
    small = await knowledge(human, "zebra", body="zebra")
    packet = await context(human, "zebra", budget=100000)
    assert ids(packet) == [small["id"]]
    [advice] = packet["next_actions"]
    assert "raise budget" not in advice and "knowledge routes with q" in advice, advice


async def test_a_decision_left_out_at_the_largest_budget_is_pointed_to(
    human: Caller, project: str
) -> None:
    """The rules fill the largest budget to the byte and their edit made the
    open decision stale; the budget left it out, and the advice said only to
    list "the matches" from the lists with q or to narrow the terms. No
    search finds a decision (they come first whatever q is): only the
    decisions route does (policyjourney)."""
    t = await task(human, "deploy billing")
    await open_decision(human, t["id"])
    await set_policy(human, rules='"' * 65536)
    overhead = size((await context(human, "walrus", budget=1024))["policy"]) - 131072
    await set_policy(human, rules='"' * (65536 - overhead) + "x" * overhead)
    packet = await context(human, "walrus", budget=131072)  # no task or record matches
    assert size(packet["policy"]) == 131072
    assert packet["items"] == [] and packet["truncated"] is True
    [advice] = packet["next_actions"]
    assert "read the decisions left out from the decisions route" in advice, advice
    below = await context(human, "walrus", budget=65536)
    assert "decisions route" in below["next_actions"][0], below["next_actions"]


async def test_more_decisions_than_the_largest_limit_are_pointed_to(
    human: Caller, project: str
) -> None:
    """At limit=100 raising the limit cannot help, and narrowing the terms
    leaves every decision in front."""
    t = await task(human, "deploy billing")
    for _ in range(101):
        await open_decision(human, t["id"])
    packet = await context(human, "walrus", limit=100, budget=131072)
    assert types(packet) == ["decision"] * 100 and packet["truncated"] is True
    [advice] = packet["next_actions"]
    assert "raise limit" not in advice and "decisions left out from the decisions route" in advice
    assert (
        "raise limit (up to 100)"
        in (await context(human, "walrus", limit=99, budget=131072))["next_actions"][0]
    )


async def test_narrowing_advice_names_only_filters_not_sent(
    service: Service, human: Caller, project: str
) -> None:
    t = await task(human, "zebra task")
    for n in range(3):
        await knowledge(human, f"zebra {n}", scope={"task_ids": [t["id"]]})
    limited = await context(human, "zebra", task_id=t["id"], limit=1)
    [advice] = limited["next_actions"]
    assert "scope filter (component, environment, version)" in advice, advice
    everything = {"component": "c", "environment": "e", "version": "v"}
    for n in range(60):  # enough steps for the progress handler to look at the clock
        await knowledge(human, f"zebra scoped {n}", body="zebra " * 40,
                        scope={"components": ["c"], "environments": ["e"], "versions": ["v"],
                               "task_ids": [t["id"]]})  # fmt: skip
    settings = service.rt.settings
    assert settings is not None
    service.rt.settings = dataclasses.replace(settings, search_time_limit_ms=0)
    try:
        packet = await context(human, "zebra", task_id=t["id"], **everything)
    finally:
        service.rt.settings = settings
    [advice] = [a for a in packet["next_actions"] if "time limit" in a]
    assert "scope filter" not in advice and "more specific terms" in advice, advice


async def test_a_policy_no_budget_can_hold_points_to_the_routes_that_can(
    human: Caller, project: str
) -> None:
    """64 KiB of quotes take 128 KiB and more in JSON: the advice was to ask
    again with the largest budget, which answered the same."""
    await set_policy(human, rules='"' * 65536)
    await task(human, "zebra")
    packet = await context(human, "zebra", budget=131072)
    assert packet["items"] == [] and packet["instructions_complete"] is False
    [advice] = packet["next_actions"]
    assert str(size(packet["policy"])) in advice and "budget of" not in advice
    assert "decisions route" in advice and "knowledge routes with q" in advice


@pytest.mark.parametrize("over", [0, 1])
async def test_a_policy_of_exactly_the_largest_budget_is_advised_to_it(
    human: Caller, project: str, over: int
) -> None:
    """A policy of exactly 131,072 bytes fits the largest budget (complete
    instructions, no room for an item), so the advice is to raise the budget
    to it; one byte more and no budget can hold it, so the advice names the
    routes instead (docs/context.md)."""
    await task(human, "zebra")
    await set_policy(human, rules='"' * 65536)
    # 64 KiB of rules, quotes costing two bytes and x one: as many x as the
    # policy object's own keys take, so that the whole comes to 131,072
    overhead = size((await context(human, "zebra", budget=1024))["policy"]) - 131072
    await set_policy(human, rules='"' * (65536 - overhead + over) + "x" * (overhead - over))
    packet = await context(human, "zebra", budget=1024)
    assert size(packet["policy"]) == 131072 + over
    [advice] = packet["next_actions"]
    assert advice.startswith("Increase budget to at least 131072") == (over == 0), advice
    if not over:
        largest = await context(human, "zebra", budget=131072)
        assert largest["instructions_complete"] is True and largest["items"] == []


async def test_at_the_largest_budget_the_advice_is_not_to_raise_it(
    human: Caller, project: str
) -> None:
    for n in range(3):  # 64,000 bytes each: two fit in the largest budget
        await knowledge(human, f"zebra {n}", body="é" * 32000)
    below = await context(human, "zebra", budget=65536)
    assert len(below["items"]) == 1 and "raise budget" in below["next_actions"][0]
    largest = await context(human, "zebra", budget=131072)
    assert len(largest["items"]) == 2 and largest["truncated"] is True
    [advice] = largest["next_actions"]
    assert "raise budget" not in advice and "routes with q" in advice


async def test_a_policy_of_exactly_the_budget_is_complete(human: Caller, project: str) -> None:
    """The policy fills the budget to the byte: instructions are complete,
    and no item fits beside it (the `>` of the budget check was untested)."""
    await task(human, "zebra")
    await set_policy(human, rules="x" * 900)
    grown = 1024 - size((await context(human, "zebra", budget=131072))["policy"])
    await set_policy(human, rules="x" * (900 + grown))
    packet = await context(human, "zebra", budget=1024)
    assert size(packet["policy"]) == 1024
    assert packet["items"] == []
    assert packet["instructions_complete"] is True and packet["truncated"] is True


async def test_empty_result_says_what_to_do(human: Caller, project: str) -> None:
    packet = await context(human, "nothing here")
    assert packet["items"] == [] and packet["truncated"] is False
    assert packet["next_actions"] and "include_shared" in packet["next_actions"][0]
    # a scope filter is named only when one was sent (an audit was told to
    # drop one it had not sent)
    assert "scope filter" not in packet["next_actions"][0]
    scoped = await context(human, "nothing here", component="api", include_shared="true")
    [advice] = scoped["next_actions"]
    assert "drop a scope filter (component)" in advice and "include_shared" not in advice


@pytest.mark.parametrize("stored", ["api ", "\u200bapi", "api\nweb"])
async def test_a_scope_value_stored_before_todays_rules_is_still_found_by_its_filter(
    service: Service, human: Caller, project: str, stored: str
) -> None:
    """Scope values are refused today with whitespace at an end, nothing to
    see, a control character or NUL, but earlier builds stored them
    (docs/knowledge.md): a filter refusing what no record could hold now
    would keep such a record out of every packet. Stored as such a build
    left it (the row an older build wrote), it is found by its exact value."""
    record = await knowledge(human, "legacy zebra", scope={"components": ["api"]})
    with raw(service.db_path) as conn:
        conn.execute(
            "UPDATE knowledge SET scope_components = ? WHERE id = ?",
            (json.dumps([stored]), record["id"]),
        )
    assert ids(await context(human, "zebra", component=stored)) == [record["id"]]
    assert ids(await context(human, "zebra", component="api")) == []


async def test_search_past_the_time_limit_answers_honestly(
    service: Service, human: Caller, project: str
) -> None:
    t = await task(human, "zebra task")
    pending = await open_decision(human, t["id"])
    for n in range(60):
        await knowledge(human, f"zebra record {n}", body="zebra " * 40)
    settings = service.rt.settings
    assert settings is not None
    service.rt.settings = dataclasses.replace(settings, search_time_limit_ms=0)
    packet = await context(human, "zebra")
    assert ids(packet) == [pending]  # decisions complete, no text matches
    assert packet["truncated"] is True and packet["instructions_complete"] is True
    assert packet["policy"]["revision"] == 1
    assert any("time limit" in a and "scope filter" in a for a in packet["next_actions"])
    # a policy over the budget as well: both pieces of advice (section 14)
    await set_policy(human, rules="Never skip review. " * 200)
    packet = await context(human, "zebra", budget=1024)
    assert packet["items"] == [] and packet["instructions_complete"] is False
    assert "Increase budget" in packet["next_actions"][0]
    assert "time limit" in packet["next_actions"][1] and len(packet["next_actions"]) == 2
    service.rt.settings = settings
    assert len((await context(human, "zebra", limit=100, budget=131072))["items"]) == 62


async def test_a_list_filter_past_the_time_limit_is_refused_naming_q(
    service: Service, human: Caller, project: str
) -> None:
    """The lists' `q` filter ran with no time limit: a filter of many common
    words read every match of every project for seconds, on a search reader
    that context packets then waited for (27 s in the audit)."""
    for n in range(30):
        await task(human, f"zebra task {n}", description="zebra " * 40)
        await knowledge(human, f"zebra record {n}", body="zebra " * 40)
    lists = [f"/api/v1/projects/{project}/tasks", f"/api/v1/projects/{project}/knowledge"]
    for path in lists:
        assert len((await human.get(path, q="zebra", limit=100)).json()["items"]) == 30
    settings = service.rt.settings
    assert settings is not None
    service.rt.settings = dataclasses.replace(settings, search_time_limit_ms=0)
    try:
        for path in lists:
            r = await human.get(path, q="zebra", limit=100)
            assert r.status_code == 400, r.text
            error = r.json()["error"]
            assert (error["code"], error["details"]["field"]) == ("invalid_request", "q")
            assert "time limit" in error["message"]
        query = f'{{ project(id: "{project}") {{ tasks(q: "zebra") {{ totalCount }} }} }}'
        answer = await human.gql(query)
        assert answer["errors"][0]["extensions"]["code"] == "invalid_request", answer
        # without q, nothing to bound
        assert (await human.get(lists[0], limit=100)).status_code == 200
    finally:
        service.rt.settings = settings


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "q"),
        ({"q": ""}, "q"),
        ({"q": "   "}, "q"),
        ({"q": "x" * 1025}, "q"),
        ({"q": "é" * 513}, "q"),
        ({"q": " ".join(["a"] * 33)}, "q"),
        # terms are split at any whitespace, tabs and newlines too (mutantaudit11)
        ({"q": "\t".join(["a"] * 16) + "\n" + " ".join(["a"] * 17)}, "q"),
        ({"q": "a", "environment": "e" * 201}, "environment"),
        ({"q": "a\x00b"}, "q"),
        ({"q": "a", "limit": "0"}, "limit"),
        ({"q": "a", "limit": "101"}, "limit"),
        ({"q": "a", "budget": "1023"}, "budget"),
        ({"q": "a", "budget": "131073"}, "budget"),
        ({"q": "a", "include_shared": "maybe"}, "include_shared"),
        ({"q": "a", "component": ""}, "component"),
        # a filter holding NUL matches nothing, not even an older build's
        # stored value holding one (SQLite's JSON reads up to the NUL)
        ({"q": "a", "component": "a\x00b"}, "component"),
        ({"q": "a", "version": "\x00"}, "version"),
        ({"q": "a", "task_id": "t\x00"}, "task_id"),
        ({"q": "a", "extra": "1"}, "extra"),
    ],
)
async def test_out_of_bounds_parameters_are_400_naming_the_field(
    human: Caller, project: str, params: dict[str, str], field: str
) -> None:
    r = await context_response(human, **params)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["details"]["field"] == field


async def test_bounds_at_their_edges_are_accepted(human: Caller, project: str) -> None:
    for params in (
        {"q": "x" * 1024},
        {"q": " ".join(["a"] * 32)},
        {"q": "a", "limit": "1", "budget": "1024"},
        {"q": "a", "limit": "100", "budget": "131072"},
        {"q": "a", "component": "c" * 200, "environment": "e" * 200, "version": "v" * 200},
    ):
        r = await context_response(human, **params)
        assert r.status_code == 200, (params, r.text)


async def test_unknown_project_is_404(human: Caller, project: str) -> None:
    r = await human.get("/api/v1/projects/nope/context", q="a")
    assert r.status_code == 404


async def test_needs_a_token(service: Service, project: str) -> None:
    r = await service.client.get("/api/v1/projects/demo/context", params={"q": "a"})
    assert r.status_code == 401


@pytest.mark.parametrize("key", [None, "", "   \t"])
async def test_a_missing_or_blank_key_disables_reranking(
    tmp_path: Path, clock: MovableClock, key: str | None
) -> None:
    env = {"TYPESAFE_URL": "https://127.0.0.1:9/never-called"}
    if key is not None:
        env["TYPESAFE_API_KEY"] = key
    rerank = RerankSettings.from_environ(env)
    settings = Settings(db_path=tmp_path / "w.db", sweep_interval=3600, rerank=rerank)
    async with serving(settings, clock) as svc:
        assert svc.rt.reranker is None
        human = await svc.principal("human")
        await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
        for n in range(3):
            await knowledge(human, f"zebra {n}")
        packet = await context(human, "zebra")
        assert packet["rerank"] == {"applied": False, "reason": "disabled"}
        assert len(packet["items"]) == 3


def test_valid_reranker_settings_are_read_from_the_environment() -> None:
    """docs/operations.md: `TYPESAFE_MAX_CONCURRENCY` "a whole number of at
    least 1", `TYPESAFE_CIRCUIT_OPEN_SECONDS` "a finite number above 0":
    only refusals were tested, and a parser that kept the default passed."""
    settings = RerankSettings.from_environ(
        {"TYPESAFE_MAX_CONCURRENCY": " 7 ", "TYPESAFE_CIRCUIT_OPEN_SECONDS": "2.5"}
    )
    assert settings.max_concurrency == 7
    assert settings.circuit_open_seconds == 2.5
    assert RerankSettings.from_environ({}).max_concurrency == 4
    # "the shared circuit opens for 60 seconds by default"
    assert RerankSettings.from_environ({}).circuit_open_seconds == 60.0


async def test_the_decisions_route_is_named_only_when_a_decision_was_left_out(
    human: Caller, project: str
) -> None:
    """The packet holds the open decision; only a record too large for any
    budget beside the policy was left out. The advice sends to the lists
    for it, and not to the decisions route: no decision is missing."""
    t = await task(human, "deploy billing")
    decision = await open_decision(human, t["id"])
    await set_policy(human, rules='"' * 40000)  # 80,000 bytes of JSON
    await knowledge(human, "zebra", body="é" * 32000)  # 64,000
    packet = await context(human, "zebra", budget=131072)
    assert ids(packet) == [decision] and packet["truncated"] is True
    [advice] = packet["next_actions"]
    assert "knowledge routes with q" in advice and "raise budget" not in advice, advice
    assert "decisions route" not in advice, advice
    # the same at a smaller budget where the policy alone stops it (its
    # advice then names the budget that holds the decision, not a route)
    small = await context(human, "zebra", budget=4096)
    [advice] = small["next_actions"]
    assert "decisions route" not in advice, advice


async def test_a_next_item_that_fills_the_largest_budget_exactly_is_one_to_raise_to(
    human: Caller, project: str
) -> None:
    """The policy and the first item take 131,072 bytes together: the
    largest budget holds both, so the advice names it (not the lists)."""
    item = await knowledge(human, "zebra", body="z" * 60000)
    await set_policy(human, rules="x")
    probe = await context(human, "zebra", budget=131072)
    [found] = probe["items"]
    overhead = size(probe["policy"]) - 1  # the policy's bytes besides its rules
    pairs, odd = divmod(131072 - size(found) - overhead, 2)  # a quote is 2 bytes of JSON
    await set_policy(human, rules='"' * pairs + "x" * odd)
    whole = await context(human, "zebra", budget=131072)
    assert size(whole["policy"]) + size(found) == 131072, "the revision's digits changed"
    assert ids(whole) == [item["id"]]
    policy_size = size(whole["policy"])
    [advice] = (await context(human, "zebra", budget=4096))["next_actions"]
    assert advice.startswith("Increase budget to at least 131072 bytes"), advice
    assert "even in the largest budget" not in advice, advice
    [advice] = (await context(human, "zebra", budget=policy_size))["next_actions"]
    assert "raise budget to at least 131072 bytes" in advice, advice
