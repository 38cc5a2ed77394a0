"""The console over a bad network: late, lost and offline requests
(consoleslownet). Its own module, and so its own service: the inbox takes
the socket only while it lists at most 8 projects (live.js
SOCKET_PROJECTS), and the browser tests' module makes more than that, so
these tests, last in it, found the page polling."""

from __future__ import annotations

from typing import Any

import pytest

from tests import test_console_browser as browser_tests
from tests.test_console_browser import (
    Tab,
    World,
    _half_answered,
    _hold_the_first,
    _offers_subscriptions,
    _record_announcements,
    _wait_for_held,
)

pytestmark = pytest.mark.slow

# the browser tests' fixtures, made anew for this module (a service of its own)
_kept_alive = browser_tests._kept_alive
browser = browser_tests.browser
tab = browser_tests.tab
world = browser_tests.world


def _slow_reply(page: Any, operation: str, holding: str) -> list[Any]:
    """The first `operation` query whose answer holds `holding` is read by
    the service at once and its reply held back (a slow network) until the
    test lets it go on, `route.fulfill(response=reply)`: [(route, reply)]."""
    held: list[Any] = []

    def slow(route: Any) -> None:
        if held or f"query {operation}" not in (route.request.post_data or ""):
            route.continue_()
            return
        reply = route.fetch()
        if holding in reply.text():
            held.append((route, reply))
        else:
            route.fulfill(response=reply)

    page.route("**/graphql", slow)
    return held


def test_a_late_inbox_refresh_does_not_bring_back_an_answered_decision(
    tab: Tab, world: World
) -> None:
    """Two refreshes on their way at once (the socket's refresh comes a
    second after the one before began, not after it ended): on a slow
    network the older reply came last and was drawn over the newer. A
    decision answered elsewhere came back under "Awaiting an answer", said
    as "1 new decision awaits an answer.", and stayed until the next event
    or the minute's poll (consoleslownet)."""
    if not _offers_subscriptions(world):
        pytest.skip("the poll refreshes one at a time")
    page = tab.page
    answered = world.open_decision(world.agent, question="Answered while a refresh was slow?",
                                   task_ids=[world.tasks["docs"]])  # fmt: skip
    tab.sign_in(world.alice.token)
    page.locator("html[data-live=socket]").wait_for(state="attached")
    card = page.locator(f"[data-group=awaiting] [data-decision='{answered}']")
    card.wait_for()
    asked = "Asked as the network slowed?"
    held = _slow_reply(page, "Inbox", asked)
    _record_announcements(page)
    world.open_decision(world.agent, question=asked, task_ids=[world.tasks["docs"]])
    _wait_for_held(page, held, "no refresh read the new decision")
    world.admin.send("POST", f"/api/v1/projects/demo/decisions/{answered}/answer", {
        "expected_generation": 1, "disposition": "deny", "answer": "Stop",
        "rationale": "Not now."})  # fmt: skip
    page.wait_for_timeout(3000)  # a later refresh may be sent, and answered at once
    route, reply = held[0]
    route.fulfill(response=reply)  # the older reply comes in now
    for _ in range(100):
        if card.count() == 0:
            break
        page.wait_for_timeout(100)
    page.wait_for_timeout(1500)
    page.unroute("**/graphql")
    assert world.decision(answered)["status"] == "denied"
    assert card.count() == 0, "the inbox shows an answered decision awaiting an answer"
    # one decision arrived: the one asked (the answered one came back as a second)
    said = page.evaluate("() => window.said")
    assert len([s for s in said if "new decision" in s]) == 1, said


def test_a_late_look_at_an_open_decision_does_not_undo_a_newer_change(
    tab: Tab, world: World
) -> None:
    """A decision's page looks again at each change; two looks on their way
    at once, the older reply last: the page said "it is now denied" (its
    status too) of a decision reopened since, pending in generation 2, and
    announced it as a change again (consoleslownet)."""
    if not _offers_subscriptions(world):
        pytest.skip("the poll looks one at a time")
    page, decision_id = _half_answered(tab, world, "Reopened while a look was slow?", "Half typed.")
    page.locator("html[data-live=socket]").wait_for(state="attached")
    held = _slow_reply(page, "DecisionVersion", '"DENIED"')
    _record_announcements(page)
    world.admin.send("POST", f"/api/v1/projects/demo/decisions/{decision_id}/answer", {
        "expected_generation": 1, "disposition": "deny", "answer": "Stop",
        "rationale": "Not now."})  # fmt: skip
    _wait_for_held(page, held, "no look read the answer")
    world.admin.send("POST", f"/api/v1/projects/demo/decisions/{decision_id}/reopen",
                     {"expected_generation": 1, "rationale": "Ask again."})  # fmt: skip
    page.wait_for_timeout(3000)  # a later look may be sent, and answered at once
    route, reply = held[0]
    route.fulfill(response=reply)  # the older reply comes in now
    banner = page.locator("#changed-elsewhere")
    banner.get_by_text("it is now pending, generation 2").wait_for()
    page.wait_for_timeout(1500)
    page.unroute("**/graphql")
    recorded = world.decision(decision_id)
    assert (recorded["status"], recorded["generation"]) == ("pending", 2)
    # what was said follows what happened: never "denied" after "pending"
    said = [s for s in page.evaluate("() => window.said") if "it is now" in s]
    assert said and "pending" in said[-1], said
    first_pending = next(i for i, s in enumerate(said) if "pending" in s)
    assert not [s for s in said[first_pending:] if "denied" in s], said
    assert page.locator("#decision-status").inner_text() == "pending"
    assert "it is now pending, generation 2" in banner.inner_text(), banner.inner_text()
    assert page.get_by_label("Why (required)").input_value() == "Half typed."


def test_a_link_followed_while_offline_does_not_say_updates_resumed(tab: Tab, world: World) -> None:
    """Offline, the inbox says its updates are paused; following a link then
    said "Updates resumed: this page is current again." (stopping the
    inbox's updates ended the pause out loud) while the page it opened
    could not load: "This browser is offline" (consoleslownet)."""
    page = tab.page
    decision_id = world.open_decision(world.agent, question="Opened while offline?",
                                      task_ids=[world.tasks["docs"]])  # fmt: skip
    tab.sign_in(world.alice.token)
    link = page.locator(f"[data-group=awaiting] [data-decision='{decision_id}'] h4 a")
    link.wait_for()
    page.context.set_offline(True)
    page.locator("#live-status").wait_for(state="visible")
    page.wait_for_timeout(300)
    _record_announcements(page)
    link.click()
    page.get_by_role("heading", name="Something went wrong").wait_for()
    page.locator("main").get_by_text("This browser is offline").wait_for()
    page.wait_for_timeout(300)
    said = page.evaluate("() => window.said")
    page.context.set_offline(False)
    assert "Updates resumed: this page is current again." not in said, said


def test_an_answer_recorded_after_its_page_was_left_is_not_said_on_another_decision(
    tab: Tab, world: World
) -> None:
    """A slow answer; the person opens another decision meanwhile; the first
    answer's reply comes: "Answer recorded." was said over the second
    decision's page, still pending, its form untouched, as a refusal of a
    form left behind once was (consoleslownet)."""
    page, first = _half_answered(tab, world, "Answered, then left?", "Left before the reply.")
    question = "Read while the first was on its way?"
    second = world.open_decision(world.agent, question=question, task_ids=[world.tasks["docs"]])
    held = _hold_the_first(page, "decisionAnswer")
    page.get_by_role("button", name="Deny: Proceed").click()
    _wait_for_held(page, held, "the answer was never sent")
    page.goto(f"{tab.origin}/console#/p/demo/d/{second}")
    page.get_by_role("heading", name=question).wait_for()
    page.get_by_role("heading", name="Answer", exact=True).wait_for()
    _record_announcements(page)
    held[0].continue_()
    for _ in range(30):
        if world.decision(first)["status"] == "denied":
            break
        page.wait_for_timeout(100)
    page.wait_for_timeout(1000)
    page.unroute("**/graphql")
    assert world.decision(first)["status"] == "denied"
    assert world.decision(second)["status"] == "pending"
    said = page.evaluate("() => window.said")
    assert not [s for s in said if "Answer recorded" in s], said


def test_a_refresh_lost_while_on_the_socket_is_tried_again_soon(tab: Tab, world: World) -> None:
    """On the socket, a refresh whose reply was lost (a dropped request) left
    "Updates paused ... Retrying…" and the new decision it would have shown
    unshown until the minute's safety poll (57 s measured), where the poll
    backs off from 4 s (docs/console.md: "the page retries, backing off to
    once a minute"; consoleslownet)."""
    if not _offers_subscriptions(world):
        pytest.skip("the poll backs off by itself")
    page = tab.page
    tab.sign_in(world.alice.token)
    page.locator("html[data-live=socket]").wait_for(state="attached")
    question = "Asked as a refresh was dropped?"
    lost: list[str] = []

    def drop(route: Any) -> None:
        if lost or "query Inbox" not in (route.request.post_data or ""):
            route.continue_()
            return
        reply = route.fetch()
        if question in reply.text():
            lost.append(question)
            route.abort()
        else:
            route.fulfill(response=reply)

    page.route("**/graphql", drop)
    decision_id = world.open_decision(world.agent, question=question,
                                      task_ids=[world.tasks["docs"]])  # fmt: skip
    _wait_for_held(page, lost, "no refresh read the new decision")
    page.locator("#live-status").wait_for(state="visible")
    card = page.locator(f"[data-group=awaiting] [data-decision='{decision_id}']")
    card.wait_for(timeout=15000)
    page.locator("#live-status").wait_for(state="hidden")
    page.unroute("**/graphql")
