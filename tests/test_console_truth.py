"""The console shows each thing as the service says it is now (consoletruth).

Each test builds one state through the REST API of a real `waypost serve`
(its clock a file, its sweep held off for the run) and reads what headless
Chromium shows for it: each named a fault of the console's, what the page
showed and what the docs say is so.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from tests.console_support import (
    Rest,
    admin_principal,
    chromium_path,
    launched_chromium,
    pooled,
)
from tests.serve_support import START, Server, serve
from waypost.clock import format_time, parse_time

pytestmark = pytest.mark.slow
CHROMIUM = chromium_path()
if CHROMIUM is None:
    pytest.skip("no Chromium (see tests/test_console_browser.py)", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright is a dev dependency")

# the world's "now": 24 h 30 min after START
NOW = {"hours": 24, "minutes": 30}


def _at(**delta: float) -> str:
    return format_time(parse_time(START) + timedelta(**delta))


@dataclass
class World:
    served: Server
    alice: Rest
    ids: dict[str, str]

    def task(self, project: str, title: str) -> str:
        made = self.alice.send("POST", f"/api/v1/projects/{project}/tasks", {
            "title": title, "description": "d", "acceptance_criteria": ["ok"]}, 201)  # fmt: skip
        return str(made["id"])

    def decision(self, project: str, **body: Any) -> str:
        base = {"rationale": "why", "required_actor": "human", "environment": "staging",
                "options": ["Proceed", "Stop"]}  # fmt: skip
        made = self.alice.send(
            "POST", f"/api/v1/projects/{project}/decisions", {**base, **body}, 201
        )
        return str(made["id"])

    def answer(self, project: str, decision: str, disposition: str, option: str) -> None:
        self.alice.send("POST", f"/api/v1/projects/{project}/decisions/{decision}/answer", {
            "expected_generation": 1, "disposition": disposition, "answer": option,
            "rationale": "r", "conditions_confirmed": disposition == "allow"})  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _kept_alive() -> Iterator[None]:
    """The world's REST requests (over a hundred: a decision each) on
    kept-alive connections, not a new client and connection each."""
    with pooled():
        yield


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    # an hour between sweeps: none runs after the clock moves, so a decision
    # past its 24 hours stays due and unanswered, as after a pause of the
    # service (docs/decisions.md: "ones already due that the next sweep will take")
    with serve(tmp_path_factory.mktemp("truth"), "--sweep-interval", "3600") as served:
        alice = admin_principal(served, "human", "Alice")
        w = World(served, alice, {})
        for project in ["due", "many", "exp", "two", "near", "src", "old"]:
            alice.send("POST", "/api/v1/projects", {"id": project, "name": project.upper()}, 201)
        w.ids["due"] = w.decision(
            "due", question="Due for its timeout?", recommendation="Proceed", reversible=True,
            task_ids=[w.task("due", "Due task")])  # fmt: skip
        # expired an hour after it was asked, long before the world's now
        w.ids["expired"] = w.decision(
            "exp", question="Expired already?", expires_at=_at(hours=1),
            task_ids=[w.task("exp", "Expired task")])  # fmt: skip
        # reversible, expired an hour after it was asked: the sweep answers
        # no expired decision, whatever its recommendation
        w.ids["old"] = w.decision(
            "old", question="Reversible, expired?", recommendation="Proceed", reversible=True,
            expires_at=_at(hours=1), task_ids=[w.task("old", "Old task")])  # fmt: skip
        served.set_clock(hours=1)
        many = w.task("many", "Many task")
        for i in range(100):
            w.decision("many", question=f"Soon {i}?", recommendation="Proceed", reversible=True,
                       task_ids=[many])  # fmt: skip
        served.set_clock(hours=2)
        w.ids["many"] = w.decision("many", question="Not timing out?", task_ids=[many])
        # one task, two decisions: one allowed, one denied
        shared = w.task("two", "Shared task")
        w.ids["allowed"] = w.decision("two", question="First gate?", task_ids=[shared])
        w.answer("two", w.ids["allowed"], "allow", "Proceed")
        w.ids["denied"] = w.decision("two", question="Second gate?", task_ids=[shared])
        w.answer("two", w.ids["denied"], "deny", "Stop")
        served.set_clock(**NOW)
        # reversible, but expiring 2 hours from now: it expires long before
        # its 24 hours, and the sweep never answers it
        w.ids["exp"] = w.decision(
            "exp", question="Expires before its timeout?", recommendation="Proceed",
            reversible=True, expires_at=_at(hours=26, minutes=30),
            task_ids=[w.task("exp", "Exp task")])  # fmt: skip
        # expiring 3 seconds from now (the file clock stands still)
        w.ids["near"] = w.decision(
            "near", question="Near its expiry?", expires_at=_at(**NOW, seconds=3),
            task_ids=[w.task("near", "Near task")])  # fmt: skip
        w.ids["shared"] = w.alice.send("POST", "/api/v1/projects/src/knowledge", {
            "kind": "fact", "title": "Shared fact", "body": "b", "collection": "shared",
            "share_across_projects": True}, 201)["id"]  # fmt: skip
        assert w.alice.get(f"/api/v1/projects/due/decisions/{w.ids['due']}")["status"] == "pending"
        yield w


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert CHROMIUM is not None
    with launched_chromium(CHROMIUM) as launched:
        yield launched


@pytest.fixture(scope="module")
def page(browser: Any, world: World) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    p = context.new_page()
    p.set_default_timeout(15000)
    p.goto(world.served.url + "/")
    p.get_by_label("API token").fill(world.alice.token)
    p.get_by_role("button", name="Sign in").click()
    p.get_by_role("heading", name="Inbox", level=1).wait_for()
    yield p
    context.close()


def _load(page: Any, url: str) -> None:
    """A page loaded whole (the tab keeps its token): a change of the hash
    alone left the last page's DOM to be read until the new one was drawn."""
    page.goto("about:blank")
    page.goto(url)


def _inbox_project(page: Any, world: World, project: str) -> Any:
    _load(page, f"{world.served.url}/console#/")
    section = page.locator(f"section.project[aria-labelledby='proj-{project}']")
    section.locator("[data-group=blocked]").wait_for()
    return section


def _decision_page(page: Any, world: World, project: str, key: str) -> Any:
    _load(page, f"{world.served.url}/console#/p/{project}/d/{world.ids[key]}")
    page.locator("#asked").wait_for()
    return page


def _fact(page: Any, label: str) -> str:
    text: str = page.locator(f"dl.facts dt:text-is('{label}') + dd").inner_text()
    return text


def test_a_timeout_already_due_is_not_said_to_apply_in_the_past(page: Any, world: World) -> None:
    """docs/decisions.md: timing_out_soon includes "ones already due that
    the next sweep will take". 24 h 30 min after it was asked, unanswered
    (no sweep since), the card read "Applies 30 min ago unless someone
    answers": the recommendation has not applied, and a human can still
    answer before the next sweep. It says from when the sweep may apply it,
    which holds on either side of that instant."""
    card = _inbox_project(page, world, "due").locator(
        f"[data-group=soon] [data-decision='{world.ids['due']}']"
    )
    text = card.inner_text()
    due = "The sweep may apply it from 2026-11-30 18:00:00 UTC (30 min ago) unless someone"
    assert due in text and "Applies" not in text, text


def test_a_pending_decision_behind_100_timing_out_soon_is_not_nothing(
    page: Any, world: World
) -> None:
    """docs/console.md: "Awaiting an answer" lists the pending decisions not
    timing out soon. With 100 reversible ones timing out soon and one more
    pending after them, the summary said "1 awaiting an answer" and the
    group "(0+)", "Nothing awaits an answer." and "Only the first 100 are
    listed": the one awaiting was on no group of the inbox. The group now
    says why it lists none, and links to every one awaiting an answer."""
    section = _inbox_project(page, world, "many")
    summary = section.locator("p.muted").first.inner_text()
    assert summary.startswith("1 awaiting an answer"), summary
    awaiting = section.locator("[data-group=awaiting]")
    text = awaiting.inner_text()
    assert "Nothing awaits an answer." not in text, text
    assert "The first 100 read all time out soon (listed below)." in text, text
    awaiting.get_by_role("link", name="every one awaiting an answer").click()
    page.get_by_text("25 decision(s) shown.").wait_for()
    for shown in (50, 75, 100, 101):  # oldest first, 25 a page: the 101st on the fifth
        page.get_by_role("button", name="Load more").click()
        page.get_by_text(f"{shown} decision(s) shown.").wait_for()
    page.get_by_role("link", name="Not timing out?").wait_for()


def test_a_reversible_decision_expiring_first_is_not_promised_its_timeout(
    page: Any, world: World
) -> None:
    """docs/decisions.md: a cycle times out only if it is "not expiring by
    the time 24 hours have passed", and the digest leaves such ones out of
    timing_out_soon. Pending, expiring in 2 hours, its page said
    "Reversible: yes: unanswered for 24 hours, the recommendation applies"."""
    _decision_page(page, world, "exp", "exp")
    assert "in 2 h" in _fact(page, "Expires")
    reversible = _fact(page, "Reversible")
    assert reversible == "yes, but not this cycle: it expires before its 24 hours", reversible
    _decision_page(page, world, "due", "due")  # one that does time out: from when
    assert _fact(page, "Reversible") == (
        "yes: the sweep may apply the recommendation from 2026-11-30 18:00:00 UTC"
        " (30 min ago) unless someone answers first"
    )


def test_an_allow_does_not_say_work_may_go_on_while_another_decision_blocks(
    page: Any, world: World
) -> None:
    """docs/decisions.md: "A task is blocked by every decision whose current
    generation affects it and whose status is not allowed". The allowed
    decision's page said "Work may go on." while its only task was blocked
    by a denied one (the inbox lists it under Blocked tasks, waiting for
    "Second gate?")."""
    blocked = _inbox_project(page, world, "two").locator("[data-group=blocked]").inner_text()
    assert "Shared task" in blocked and "Second gate?" in blocked, blocked
    _decision_page(page, world, "two", "allowed")
    meta = page.locator("p.meta").first.inner_text()
    assert meta.startswith("allowed"), meta
    assert "This decision blocks none of its tasks (another may)." in meta, meta


def test_an_expiry_seconds_ahead_is_not_shown_as_past(page: Any, world: World) -> None:
    """A pending decision expiring 3 seconds from the service's now: the
    inbox card read "expires less than a minute ago" and its page
    "(less than a minute ago)", of a decision still pending and answerable."""
    card = _inbox_project(page, world, "near").locator(
        f"[data-group=awaiting] [data-decision='{world.ids['near']}']"
    )
    assert "expires in less than a minute" in card.inner_text(), card.inner_text()
    _decision_page(page, world, "near", "near")
    assert page.locator("p.meta").first.inner_text().startswith("pending")
    assert _fact(page, "Expires").endswith("(in less than a minute)"), _fact(page, "Expires")


def test_what_held_the_states_shown_as_they_are(page: Any, world: World) -> None:
    """The other side of the same world, as the service has it: the denied
    decision blocks and says so, the one expiring in 2 hours says when, and
    no group names a count the service did not give."""
    _decision_page(page, world, "two", "denied")
    meta = page.locator("p.meta").first.inner_text()
    assert meta.startswith("denied") and "Work on the affected tasks is blocked." in meta, meta
    section = _inbox_project(page, world, "many")
    assert section.locator("[data-group=soon] h3").inner_text() == "Timing out soon (100)"
    assert section.locator("[data-group=soon] [data-decision]").count() == 100


def test_the_decisions_list_says_an_expired_one_expired(page: Any, world: World) -> None:
    """It read "· expires 23 h 30 min ago" (minor, consoletruth)."""
    _load(page, f"{world.served.url}/console#/p/exp/decisions?status=EXPIRED")
    card = page.locator(f"[data-decision='{world.ids['expired']}']")
    assert "· expired 23 h 30 min ago" in card.inner_text(), card.inner_text()
    _load(page, f"{world.served.url}/console#/p/exp/decisions?status=PENDING")
    card = page.locator(f"[data-decision='{world.ids['exp']}']")
    assert "· expires in 2 h" in card.inner_text(), card.inner_text()


def test_an_expiry_ahead_stays_ahead_as_the_inbox_refreshes(page: Any, world: World) -> None:
    """refreshAgo rewrites every relative time in place on each quiet
    refresh: a deadline must be rewritten as a deadline (`data-deadline`),
    or the card drawn "expires in less than a minute" read "expires less
    than a minute ago" 4 s later, of a question still open (review67)."""
    card = _inbox_project(page, world, "near").locator(
        f"[data-group=awaiting] [data-decision='{world.ids['near']}']"
    )
    expiry = card.locator("time[data-deadline]")
    assert expiry.inner_text() == "in less than a minute"
    expiry.evaluate("t => { t.textContent = 'unrefreshed'; }")
    # the next quiet refresh brings it up to the service's clock
    page.wait_for_function(
        "t => t.textContent !== 'unrefreshed'", arg=expiry.element_handle(), timeout=20000
    )
    assert "expires in less than a minute" in card.inner_text(), card.inner_text()


def test_another_projects_shared_record_names_its_source_on_its_page(
    page: Any, world: World
) -> None:
    """Opened from the list of a project that sees it, its page named no
    source project (the list said "shared from src"), and its back link
    led to the list without other projects' records (consoletruth)."""
    _load(page, f"{world.served.url}/console#/p/two/knowledge?shared=1")
    card = page.locator("article.card", has_text="Shared fact")
    assert "· shared from src" in card.inner_text(), card.inner_text()
    card.get_by_role("link", name="Shared fact").click()
    page.get_by_role("heading", name="Shared fact", level=1).wait_for()
    assert "· shared from src" in page.locator("p.meta").first.inner_text()
    back = page.get_by_role("link", name="← Knowledge")
    assert back.get_attribute("href") == "#/p/two/knowledge?shared=1"
    back.click()
    page.locator("article.card", has_text="Shared fact").wait_for()
    # the source project's own page of it: no "shared from", the plain list
    _load(page, f"{world.served.url}/console#/p/src/k/{world.ids['shared']}")
    page.get_by_role("heading", name="Shared fact", level=1).wait_for()
    assert "shared from" not in page.locator("p.meta").first.inner_text()
    assert page.get_by_role("link", name="← Knowledge").get_attribute("href") == (
        "#/p/src/knowledge"
    )


def test_a_status_in_the_address_is_read_in_any_case_and_no_status_lists_all(
    page: Any, world: World
) -> None:
    """docs/console.md: "A status in the address is read in any case
    (`?status=pending`); one that is no status lists every decision"
    (consoledocaudit: no test read either)."""
    _load(page, f"{world.served.url}/console#/p/two/decisions?status=allowed")
    page.get_by_text("1 decision(s) shown.").wait_for()
    assert page.get_by_label("Status").input_value() == "ALLOWED"
    page.get_by_role("link", name="First gate?").wait_for()
    _load(page, f"{world.served.url}/console#/p/two/decisions?status=answered")
    page.get_by_text("2 decision(s) shown.").wait_for()
    assert page.get_by_label("Status").input_value() == ""


def test_a_projects_inbox_leaves_out_the_stale_group_while_it_has_none(
    page: Any, world: World
) -> None:
    """docs/console.md: the stale or expired group "is left out while a
    project has none (the others say "nothing")" (consoledocaudit)."""
    section = _inbox_project(page, world, "near")
    groups = [g.get_attribute("data-group") for g in section.locator("section.group").all()]
    assert groups == ["awaiting", "soon", "proceeded", "blocked"], groups
    assert "Nothing will time out in the next 6 hours." in section.inner_text()
    assert "Nothing proceeded by timeout." in section.inner_text()
    old = _inbox_project(page, world, "old").locator("[data-group=reopen]")
    assert "Reversible, expired?" in old.inner_text(), old.inner_text()


def test_a_reversible_decision_that_expired_is_not_this_cycles_timeout(
    page: Any, world: World
) -> None:
    """docs/console.md: "Reversible" says "why not this cycle (... it is
    stale or expired)": the sweep answers neither (consoledocaudit)."""
    _decision_page(page, world, "old", "old")
    assert page.locator("p.meta").first.inner_text().startswith("expired")
    assert _fact(page, "Reversible") == (
        "yes, but not this cycle: the sweep answers no expired decision"
    )


def test_a_record_that_is_not_there_reads_no_such_record(page: Any, world: World) -> None:
    """docs/console.md: "A project, decision or record that is not there
    reads "No such project" (or decision, or record) with a link back to
    the inbox" (consoledocaudit: the record's page was read by no test)."""
    _load(page, f"{world.served.url}/console#/p/src/k/kn_nothere")
    page.get_by_role("heading", name="No such record", level=1).wait_for()
    assert page.get_by_role("link", name="Back to the inbox").get_attribute("href") == "#/"
    assert page.title() == "No such record · Waypost console"
    # in a project that is not there either, the project is what is missing:
    # a record's and a decision's page said "No such record" and "No such
    # decision" of it, where the lists said "No such project" (consoledocaudit)
    for path in ("k/kn_nothere", "d/dec_nothere"):
        _load(page, f"{world.served.url}/console#/p/nope/{path}")
        page.get_by_role("heading", name="No such project", level=1).wait_for()
        assert page.title() == "No such project · Waypost console"


def test_a_digest_list_cut_at_200_says_so_and_counts_with_a_plus(page: Any, world: World) -> None:
    """docs/console.md: "The digest lists at most 200 of groups 3 to 5; past
    that the group says "Only the first 200 are listed", and its count, and
    the summary line's count of blocked tasks, end in `+`" (consoledocaudit).
    200 blocked tasks are a large world: the service's own answer is played
    to the page with each of the digest's lists marked cut."""

    def cut(route: Any) -> None:
        response = route.fetch()
        body = response.json()
        for edge in ((body.get("data") or {}).get("projects") or {}).get("edges", []):
            digest = edge["node"].get("digest")
            if digest:
                digest["truncated"] = {key: True for key in digest["truncated"]}
        route.fulfill(response=response, json=body)

    page.route("**/graphql", cut)
    try:
        section = _inbox_project(page, world, "two")
        summary = section.locator("p.muted").first.inner_text()
        assert " · 1+ blocked task(s) · " in summary, summary
        blocked = section.locator("[data-group=blocked]")
        assert blocked.locator("h3").inner_text() == "Blocked tasks (1+)"
        assert "Only the first 200 are listed." in blocked.inner_text()
    finally:
        page.unroute("**/graphql")
