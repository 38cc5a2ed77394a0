"""The human console in a real browser against a real `waypost serve`.

Headless Chromium from the operating system, driven by Playwright. Every
page's requests are recorded: none may leave for another origin. Screenshots
of the inbox and a decision's page go to a temporary folder, and into
docs/img/ when WAYPOST_UPDATE_SCREENSHOTS=1 (so ordinary runs leave the
working tree alone).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.console_support import (
    Rest,
    admin_json,
    admin_principal,
    chromium_path,
    launched_chromium,
    pooled,
)
from tests.serve_support import Server, serve, write_clock
from waypost.clock import format_time, parse_time
from waypost.http.starting import public_answer

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = chromium_path()

if CHROMIUM is None:
    pytest.skip(
        "no Chromium: install the OS package (`apt-get install chromium`; `make test` does "
        "this as root) or set WAYPOST_CHROMIUM",
        allow_module_level=True,
    )
playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is a dev dependency")


@dataclass
class World:
    served: Server
    alice: Rest  # a human
    agent: Rest
    admin: Rest  # another human
    tasks: dict[str, str]
    decisions: dict[str, str]

    def open_decision(self, by: Rest, **body: Any) -> str:
        base = {"rationale": "Needs a human's judgement.", "required_actor": "human",
                "environment": "staging", "options": ["Proceed", "Stop"]}  # fmt: skip
        made = by.send("POST", "/api/v1/projects/demo/decisions", {**base, **body}, 201)
        return str(made["id"])

    def decision(self, decision_id: str) -> Any:
        return self.alice.get(f"/api/v1/projects/demo/decisions/{decision_id}")


def _wait(check: Any, what: str, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module", autouse=True)
def _kept_alive() -> Iterator[None]:
    """The tests' own REST requests (hundreds: records made by the page-full)
    on kept-alive connections, not a new client and connection each."""
    with pooled():
        yield


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("console")
    with serve(tmp, "--graphiql", "--sweep-interval", "0.5") as served:
        alice = admin_principal(served, "human", "Alice")
        agent = admin_principal(served, "agent", "builder-7")
        admin = Rest(served.url, served.admin_token)
        admin.principal_id = admin.get("/api/v1/me")["principal"]["id"]
        alice.send("POST", "/api/v1/projects", {"id": "demo", "name": "Demo shop"}, 201)
        tasks = {}
        titles = {"orders": "Migrate the orders table", "deploy": "Deploy build 412",
                  "keys": "Rotate payment API keys", "docs": "Publish the API docs"}  # fmt: skip
        for name, title in titles.items():
            made = alice.send("POST", "/api/v1/projects/demo/tasks", {
                "title": title, "description": f"{title}, then report.",
                "acceptance_criteria": ["no downtime"]}, 201)  # fmt: skip
            tasks[name] = made["id"]
        w = World(served, alice, agent, admin, tasks, {})
        # proceeded by timeout: reversible, opened by a human, 24 h unanswered
        w.decisions["timed"] = w.open_decision(
            alice, question="Rotate the keys with the default schedule?",
            options=["Default schedule", "Wait"], recommendation="Default schedule",
            reversible=True, task_ids=[tasks["keys"]])  # fmt: skip
        served.set_clock(hours=24, minutes=1)
        _wait(lambda: w.decision(w.decisions["timed"])["status"] == "allowed", "the sweep")
        # timing out soon: opened 20 h before the clock's now
        w.decisions["soon"] = w.open_decision(
            alice, question="Publish the docs without a final review?",
            options=["Publish", "Hold"], recommendation="Publish", reversible=True,
            task_ids=[tasks["docs"]])  # fmt: skip
        served.set_clock(hours=44, minutes=1)
        # pending, asked by an agent through REST
        w.decisions["pending"] = w.open_decision(
            agent, question="Run the orders migration on staging now?",
            options=["Proceed", "Wait for the backup"],
            rationale="The migration locks the orders table for about 40 seconds.",
            conditions=["a backup was taken within the last hour", "rollback owner recorded"],
            task_ids=[tasks["orders"]])  # fmt: skip
        # stale: a judged field of its task changes after it was asked
        w.decisions["stale"] = w.open_decision(
            agent, question="Deploy build 412 to staging?", task_ids=[tasks["deploy"]]
        )
        # with a field that stales nothing in the same edit
        edit = {"expected_revision": 1, "title": "Deploy build 413", "priority": 5}
        alice.send("PATCH", f"/api/v1/projects/demo/tasks/{tasks['deploy']}", edit)
        assert w.decision(w.decisions["stale"])["status"] == "stale"
        yield w


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert CHROMIUM is not None
    with launched_chromium(CHROMIUM) as launched:
        yield launched


@dataclass
class Tab:
    page: Any
    origin: str
    requests: list[str]
    errors: list[str]

    def sign_in(self, token: str) -> None:
        self.page.goto(self.origin + "/")
        self.page.get_by_label("API token").fill(token)
        self.page.get_by_role("button", name="Sign in").click()
        self.page.get_by_role("heading", name="Inbox", level=1).wait_for()


@pytest.fixture
def tab(browser: Any, world: World) -> Iterator[Tab]:
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15000)
    t = Tab(page, world.served.url, [], [])
    page.on("request", lambda r: t.requests.append(r.url))
    page.on("pageerror", lambda e: t.errors.append(str(e)))
    # a resource the CSP refused (an inline style, a data: font) shows as a console error
    page.on("console", lambda m: _csp_refusal(t, m.text))
    yield t
    context.close()
    # the network log: nothing left for another origin, and no script failed
    foreign = [u for u in t.requests if not u.startswith((t.origin + "/", "ws://127.0.0.1:"))]
    assert t.requests and not foreign, foreign
    assert not t.errors, t.errors


def _tab_to(page: Any, condition: str) -> None:
    for _ in range(80):
        page.keyboard.press("Tab")
        if page.evaluate(f"() => {condition}"):
            return
    raise AssertionError(f"Tab never reached: {condition}")


def _wait_for_held(page: Any, held: list[Any], failure: str) -> None:
    """Until a route handler has held a request (handlers run while Playwright
    waits, not in time.sleep)."""
    for _ in range(100):
        if held:
            return
        page.wait_for_timeout(100)
    raise AssertionError(failure)


def _move_clock(
    page: Any, ms: int, until: Any = None, what: str = "", step: int = 1000, pause: int = 60
) -> None:
    """Move the page's own clock (`page.clock`, installed before the timers
    to move were set) on by `ms`, a `step` (a second) at a time with a
    moment (`pause` ms) of real time between, as the page's timers run in
    real time: each timer's request goes out and is answered (or refused)
    before the next step, so a chain of timers (a back-off) runs as it would,
    without being waited out. A chain of timers shorter than a step runs a
    step apart: a test of gaps under a second moves in smaller steps. With
    `until`, stops as soon as it holds (and fails if it never did)."""
    for _ in range(0, ms, step):
        if until is not None and until():
            return
        page.clock.run_for(step)
        page.wait_for_timeout(pause)
    if until is not None:
        for _ in range(40):
            if until():
                return
            page.wait_for_timeout(50)
        raise AssertionError(f"not within {ms} ms of the page's clock: {what}")


def _csp_refusal(tab: Tab, text: str) -> None:
    if "Content Security Policy" in text:
        tab.errors.append(text)


def _shot(page: Any, name: str, tmp_path: Path) -> None:
    target = tmp_path / name
    page.screenshot(path=str(target), full_page=True)
    assert target.stat().st_size > 10_000
    if os.environ.get("WAYPOST_UPDATE_SCREENSHOTS") == "1":
        shutil.copyfile(target, ROOT / "docs" / "img" / name)


def test_console_pages_load_without_a_token_and_refuse_framing(world: World) -> None:
    url = world.served.url
    r = httpx.get(url + "/", follow_redirects=False)
    assert r.status_code == 302 and r.headers["location"] == "/console"
    for path in ("/console", "/console/static/js/main.js", "/console/static/console.css"):
        r = httpx.get(url + path)
        assert r.status_code == 200, path
        assert r.headers["content-security-policy"].startswith("default-src 'self';")
        assert r.headers["x-frame-options"] == "DENY"
        assert "set-cookie" not in r.headers
    # the exception stays narrow: the API still needs a token, and so do
    # writes to the console's paths
    assert httpx.post(url + "/graphql", json={"query": "{ me { name } }"}).status_code == 401
    assert httpx.post(url + "/console", json={}).status_code == 401
    assert httpx.get(url + "/api/v1/projects").status_code == 401
    assert httpx.get(url + "/console/static/..%2f..%2fhttp/auth.py").status_code == 404


def test_sign_in_answer_with_a_click_and_the_inbox_empties(
    tab: Tab, world: World, tmp_path: Path
) -> None:
    page = tab.page
    page.goto(tab.origin + "/")
    assert page.url.endswith("/console")
    page.get_by_label("API token").fill("wp_not-a-real-token")
    page.get_by_role("button", name="Sign in").click()
    page.locator("main").get_by_text("That token was not accepted").wait_for()

    tab.sign_in(world.alice.token)
    # demo's groups: a test of this module may have left decisions in another
    # project, whose groups the page shows too
    demo = page.locator("section[aria-labelledby=proj-demo]")
    awaiting = demo.locator("[data-group=awaiting]")
    card = awaiting.locator(f"[data-decision='{world.decisions['pending']}']")
    card.get_by_text("Run the orders migration on staging now?").wait_for()
    assert "builder-7 (agent)" in card.inner_text()
    assert "Migrate the orders table" in card.inner_text()
    assert "Publish the docs" in demo.locator("[data-group=soon]").inner_text()
    proceeded = demo.locator("[data-group=proceeded]").inner_text()
    assert "Rotate the keys" in proceeded
    assert "Affects: " in proceeded and "Blocks: " not in proceeded  # allowed: it blocks nothing
    assert "Deploy build 412" in demo.locator("[data-group=reopen]").inner_text()
    _shot(page, "console-inbox.png", tmp_path)

    card.get_by_role("link", name="Run the orders migration on staging now?").click()
    page.get_by_role("heading", name="Answer", exact=True).wait_for()
    _shot(page, "console-decision.png", tmp_path)
    page.get_by_label("Why (required)").fill("Backup verified by hand; Bo owns the rollback.")
    page.get_by_role("button", name="Allow: Proceed").click()
    page.locator("main").get_by_text(
        "An allow vouches for the conditions"
    ).wait_for()  # boxes not ticked yet
    for box in page.get_by_role("checkbox").all():
        box.check()
    page.get_by_role("button", name="Allow: Proceed").click()
    page.locator("main").get_by_text("Your answer is recorded").wait_for()

    page.get_by_role("link", name="Inbox", exact=True).click()
    page.get_by_role("heading", name="Inbox", level=1).wait_for()
    assert (
        page.locator(
            f"[data-group=awaiting] [data-decision='{world.decisions['pending']}']"
        ).count()
        == 0
    )

    recorded = world.decision(world.decisions["pending"])
    answer = recorded["current"]["answer"]
    assert recorded["status"] == "allowed"
    assert answer["actor_id"] == world.alice.principal_id
    assert answer["answer"] == "Proceed" and answer["conditions_confirmed"] is True
    assert answer["relayed"] is False and answer["actor_session_id"] is None


def _offers_subscriptions(world: World) -> bool:
    r = httpx.post(world.served.url + "/graphql", headers=world.alice.headers(),
                   json={"query": "{ __schema { subscriptionType { name } } }"})  # fmt: skip
    return r.json()["data"]["__schema"]["subscriptionType"] is not None


def test_the_inbox_shows_a_new_decision_by_itself(tab: Tab, world: World) -> None:
    page = tab.page
    page.clock.install()  # the socket's (or the poll's) seconds pass on the page's clock
    tab.sign_in(world.alice.token)
    # the live feed when the service has one (graphql-transport-ws), else the poll
    mode = "socket" if _offers_subscriptions(world) else "poll"
    live = page.locator(f"html[data-live={mode}]")
    _move_clock(page, 10000, lambda: live.count() > 0, f"the {mode}", 500)
    question = "Drop the legacy coupons table?"
    decision_id = world.open_decision(
        world.agent, question=question, task_ids=[world.tasks["keys"]]
    )
    # no navigation: the page refreshes itself
    card = page.locator(f"[data-group=awaiting] [data-decision='{decision_id}']")
    _move_clock(page, 20000, lambda: card.count() > 0, "the new decision")
    # answered elsewhere, it leaves by itself too
    world.admin.send("POST", f"/api/v1/projects/demo/decisions/{decision_id}/answer", {
        "expected_generation": 1, "disposition": "deny", "answer": "Stop",
        "rationale": "Not this quarter."})  # fmt: skip
    gone = page.locator(f"[data-decision='{decision_id}']")
    _move_clock(page, 20000, lambda: gone.count() == 0, "the answered decision gone")


def test_the_inbox_keeps_up_while_its_project_is_busy(tab: Tab, world: World) -> None:
    """Each message put the page's refresh off by 150 ms more: while events
    came closer together than that, it never refreshed (a decision showed
    only once the project went quiet, or at the minute's safety poll). And
    while they keep coming it refreshes once a second, not after every
    150 ms (each refresh queries the whole page)."""
    if not _offers_subscriptions(world):
        pytest.skip("the poll refreshes on its own clock")
    tab.sign_in(world.alice.token)
    tab.page.locator("html[data-live=socket]").wait_for(state="attached")
    quiet = threading.Event()

    def busy() -> None:
        i = 0
        while not quiet.is_set():
            body = {"kind": "fact", "title": f"Busy {i}", "body": "A write every 40 ms."}
            world.alice.send("POST", "/api/v1/projects/demo/knowledge", body, 201)
            i += 1
            time.sleep(0.04)

    writer = threading.Thread(target=busy, daemon=True)
    writer.start()
    try:
        time.sleep(0.5)
        decision_id = world.open_decision(
            world.agent, question="Rotate the signing keys now?", task_ids=[world.tasks["keys"]]
        )
        tab.page.locator(f"[data-group=awaiting] [data-decision='{decision_id}']").wait_for(
            timeout=5000
        )
        queries: list[float] = []
        tab.page.on("request", lambda r: queries.append(time.monotonic())
                    if r.url.endswith("/graphql") and r.method == "POST" else None)  # fmt: skip
        tab.page.wait_for_timeout(3500)
        assert writer.is_alive()  # shown, and refreshed, while the project is still busy
        assert 2 <= len(queries) <= 5, queries
    finally:
        quiet.set()
        writer.join(10)


def test_a_project_created_after_the_inbox_loaded_is_watched_too(tab: Tab, world: World) -> None:
    if not _offers_subscriptions(world):
        pytest.skip("the poll watches every project anyway")
    page = tab.page
    # the socket's seconds pass on the page's clock, moved by hand (never as
    # far as the minute's safety poll)
    page.clock.install()
    tab.sign_in(world.alice.token)
    live = page.locator("html[data-live=socket]")
    _move_clock(page, 10000, lambda: live.count() > 0, "the socket", 500)
    world.alice.send("POST", "/api/v1/projects", {"id": "late", "name": "Late project"}, 201)
    # an event of a watched project refreshes the page, which learns of "late"
    world.alice.send("POST", "/api/v1/projects/demo/knowledge", {
        "kind": "fact", "title": "The inbox refreshes", "body": "On any event."}, 201)  # fmt: skip
    late = page.locator("section[aria-labelledby]", has_text="Late project")
    _move_clock(page, 20000, lambda: late.count() > 0, "the late project")
    # from then on a decision in "late" shows by itself, long before the
    # minute-long safety poll would find it
    task = world.alice.send("POST", "/api/v1/projects/late/tasks", {
        "title": "Ship it", "description": "Ship, then report.",
        "acceptance_criteria": ["shipped"]}, 201)  # fmt: skip
    made = world.alice.send("POST", "/api/v1/projects/late/decisions", {
        "question": "Ship the late project?", "rationale": "Needs a human's judgement.",
        "required_actor": "human", "environment": "staging", "options": ["Ship", "Wait"],
        "task_ids": [task["id"]]}, 201)  # fmt: skip
    card = page.locator(f"[data-decision='{made['id']}']")
    _move_clock(page, 20000, lambda: card.count() > 0, "the late project's decision")


def test_the_socket_returns_soon_after_the_service_ends_it(tab: Tab, world: World) -> None:
    """A restarting service ends each subscription (`complete`) and closes the
    socket. That is no refusal: the page polls and subscribes again once a
    poll works (it counted `complete` as a refusal and waited a minute)."""
    if not _offers_subscriptions(world):
        pytest.skip("no subscriptions to end")
    page = tab.page
    sockets: list[Any] = []

    def relay(ws: Any) -> None:
        ws.connect_to_server()  # messages pass through both ways
        sockets.append(ws)

    page.route_web_socket("**/graphql", relay)
    page.clock.install()  # the poll's seconds pass on the page's clock, moved by hand
    tab.sign_in(world.alice.token)
    live = page.locator("html[data-live=socket]")
    live.wait_for(state="attached")
    assert len(sockets) == 1
    sockets[0].send(json.dumps({"id": "s0", "type": "complete"}))
    sockets[0].close(code=1001, reason="server restart")
    page.locator("html[data-live=poll]").wait_for(state="attached")
    # (a refusal waits a minute before a new socket)
    _move_clock(page, 30000, lambda: live.count() > 0, "a new socket")
    assert len(sockets) == 2


def test_a_refused_subscription_leaves_the_poll_in_charge(tab: Tab, world: World) -> None:
    """A subscription the service refuses (`next` with errors, as for the
    17th stream of a token) is not taken as live: the page polls."""
    if not _offers_subscriptions(world):
        pytest.skip("no subscriptions to refuse")
    page = tab.page
    sockets: list[Any] = []
    refusals: list[str] = []

    def refuse(ws: Any) -> None:
        sockets.append(ws)

        def answer(message: str | bytes) -> None:
            kind = json.loads(message)["type"]
            if kind == "connection_init":
                ws.send(json.dumps({"type": "connection_ack"}))
            elif kind == "subscribe":
                ident = json.loads(message)["id"]
                refusals.append(ident)
                ws.send(
                    json.dumps(
                        {
                            "id": ident,
                            "type": "next",
                            "payload": {
                                "errors": [
                                    {
                                        "message": "too many streams",
                                        "extensions": {"code": "too_many_streams"},
                                    }
                                ]
                            },
                        }
                    )
                )
                # (the service then sends `complete`; the refusal alone must do)

        ws.on_message(answer)

    page.route_web_socket("**/graphql", refuse)
    tab.sign_in(world.alice.token)
    page.wait_for_function("() => document.documentElement.dataset.live === 'poll'")
    # the handler answers only while Playwright waits (never in time.sleep): a
    # sleep here held the refusal past the page's 1.5 s, and the page went live
    _wait_for_held(page, refusals, "the page never subscribed")
    page.wait_for_timeout(2500)  # past the 1.5 s after the ack in which a refusal counts
    assert page.evaluate("document.documentElement.dataset.live") == "poll"
    assert len(sockets) == 1  # one subscription per project, all refused on it


# Each visible box's border contrast against the nearest background behind
# the box (WCAG's relative luminance)
_BORDER_CONTRASTS = """selector => {
  const rgb = text => text.match(/[\\d.]+/g).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map(c => c / 255)
    .map(c => c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4)
    .reduce((sum, c, i) => sum + c * [0.2126, 0.7152, 0.0722][i], 0);
  const behind = el => {
    for (let at = el.parentElement; at; at = at.parentElement) {
      const c = rgb(getComputedStyle(at).backgroundColor);
      if (c.length < 4 || c[3] > 0) return c;
    }
    return [255, 255, 255];
  };
  return [...document.querySelectorAll(selector)]
    .filter(el => el.offsetParent !== null && el.type !== "checkbox")
    .map(el => {
      const [a, b] = [lum(rgb(getComputedStyle(el).borderTopColor)), lum(behind(el))];
      return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    });
}"""


def test_a_stale_decision_offers_reopen_instead_of_answers(tab: Tab, world: World) -> None:
    page = tab.page
    tab.sign_in(world.alice.token)
    card = page.locator(f"[data-group=reopen] [data-decision='{world.decisions['stale']}']")
    # the inbox names no revision (one that moved may stale nothing); the page does
    assert (
        "Stale" in card.inner_text() and "Its page shows exactly what changed" in card.inner_text()
    )
    # each card's link says which decision it reopens (a list of links read out
    # of context was "Reopen…" again and again)
    card.get_by_role("link", name="Reopen… Deploy build 412 to staging?", exact=True).click()
    page.get_by_role("heading", name="Why it is stale").wait_for()
    # a priority changed in the same edit is not named as judged (consolefast)
    assert "changed what was judged (title) between" in page.locator(".reason-box").inner_text()
    page.get_by_text("Also changed, not judged (does not stale): priority.").wait_for()
    assert page.get_by_role("button", name="Allow: Proceed").count() == 0
    diff = page.locator("pre.diff").first.inner_text()
    assert "- Deploy build 412" in diff and "+ Deploy build 413" in diff
    # the reopen form's boxes on the answer panel: each box's border is all
    # that shows where it is, and was 2.85:1 against the panel (WCAG 1.4.11
    # asks 3:1; consolereflowaudit)
    borders = page.evaluate(_BORDER_CONTRASTS, ".answer input, .answer textarea, .answer select")
    assert len(borders) >= 2 and min(borders) >= 3, borders
    page.get_by_label("Why reopen (required)").fill("Build 413 replaces 412.")
    page.get_by_role("button", name="Reopen").click()
    page.locator("main").get_by_text("Reopened: generation 2 awaits an answer.").wait_for()
    page.get_by_role("button", name="Allow: Proceed").wait_for()
    assert world.decision(world.decisions["stale"])["status"] == "pending"


def test_an_answer_given_elsewhere_first_shows_the_conflict(tab: Tab, world: World) -> None:
    page = tab.page
    decision_id = world.open_decision(
        world.agent, question="Enable the new checkout for 5% of users?",
        task_ids=[world.tasks["orders"]])  # fmt: skip
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision_id}")
    page.get_by_role("heading", name="Answer", exact=True).wait_for()
    assert page.locator("#decision-status").inner_text() == "pending"
    world.admin.send("POST", f"/api/v1/projects/demo/decisions/{decision_id}/answer", {
        "expected_generation": 1, "disposition": "defer", "answer": "Stop",
        "rationale": "Wait for the load test."})  # fmt: skip
    # the page notices by itself, and leaves the form alone until asked
    page.locator("main").get_by_text("This decision changed elsewhere").wait_for()
    # but its status is the banner's: it said "pending" beside "it is now
    # deferred" (humanloopjourney)
    assert page.locator("#decision-status").inner_text() == "deferred"
    # keyboard only: Tab to the rationale, type, Tab to the button, Enter
    _tab_to(page, "document.activeElement.tagName === 'TEXTAREA'")
    page.keyboard.type("Looks safe.")
    _tab_to(page, "document.activeElement.getAttribute('aria-label') === 'Deny: Proceed'")
    page.keyboard.press("Enter")
    page.locator("main").get_by_text("Someone answered first").wait_for()
    # the new state: the other answer, and no answer buttons any more
    assert "Wait for the load test." in page.locator("main").inner_text()
    assert page.get_by_role("button", name="Deny: Proceed").count() == 0
    assert world.decision(decision_id)["current"]["answer"]["actor_id"] == world.admin.principal_id
    # what was typed is kept in the notice, to copy from (it went with the form)
    page.get_by_text("What you wrote").click()
    assert "Looks safe." in page.locator(".notice-conflict details").inner_text()


def _accessible_and_narrow(page: Any) -> None:
    """Every control has a label or an accessible name, and nothing scrolls sideways."""
    unlabelled = page.evaluate("""() => [...document.querySelectorAll(
        'input, select, textarea, button')].filter((el) => !(
        (el.labels && el.labels.length) || el.getAttribute('aria-label')
        || (el.tagName === 'BUTTON' && el.textContent.trim()))).map((el) => el.outerHTML)""")
    assert not unlabelled, unlabelled
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow}px"


def test_knowledge_revisions_and_policy_history_on_a_phone(
    tab: Tab, world: World, tmp_path: Path
) -> None:
    alice = world.alice
    alice.send("POST", "/api/v1/projects", {"id": "ops", "name": "Operations"}, 201)
    base = "/api/v1/projects/ops/knowledge"
    made = alice.send("POST", base, {
        "kind": "lesson", "title": "Orders migration needs a lock window",
        "body": "Take the lock at night.\nWarn support first.", "tags": ["db"]}, 201)  # fmt: skip
    alice.send(
        "POST", f"{base}/{made['id']}/feedback", {"expected_revision": 1, "useful": True}, 201
    )
    alice.send("PATCH", f"{base}/{made['id']}", {
        "expected_revision": 1, "title": made["title"], "status": "validated",
        "body": "Take the lock on Sunday at 02:00 UTC.\nWarn support first.", "tags": ["db"],
        "applicability": "", "scope": made["scope"],
        "provenance": {"summary": "seen twice", "source_uri": None, "source_task_id": None,
                       "source_submission_id": None}})  # fmt: skip
    rules = ["Deploy on weekdays.\nAsk before migrations.",
             "Deploy on weekdays.\nAsk a human before migrations."]  # fmt: skip
    for revision, text in enumerate(rules, start=1):
        alice.send("PATCH", "/api/v1/projects/ops/policy",
                   {"expected_revision": revision, "rules": text})  # fmt: skip

    page = tab.page
    page.set_viewport_size({"width": 360, "height": 740})  # a phone, or 200% zoom on a laptop
    tab.sign_in(alice.token)
    _accessible_and_narrow(page)
    page.goto(f"{tab.origin}/console#/p/ops/knowledge")
    page.get_by_label("Kind").select_option("LESSON")
    page.get_by_label("Words").fill("lock")
    # the link is in the unfiltered list too: a click as the filtered one is
    # drawn can land on the old list and be lost (suitespeed2 saw it once),
    # so the links shown so far are marked and the new one is clicked
    page.evaluate("() => document.querySelectorAll('main a').forEach((a) => a.dataset.old = 1)")
    page.get_by_role("button", name="Filter").click()
    title = "Orders migration needs a lock window"
    page.locator("main a:not([data-old])", has_text=title).click()
    page.get_by_role("heading", name="Revision 2 (current)").wait_for()
    _accessible_and_narrow(page)
    _shot(page, "console-phone-knowledge.png", tmp_path)
    history = page.locator("ol.history").inner_text()
    assert "useful 0, not useful 0" in history and "useful 1, not useful 0" in history
    # (the review found "Created by Alice, (,human,)": an array in a template)
    assert "Created by Alice (human), " in history and "Corrected by Alice (human), " in history
    diff = page.locator("pre.diff").first.inner_text()
    assert "- Take the lock at night." in diff
    assert "+ Take the lock on Sunday at 02:00 UTC." in diff and "  Warn support first." in diff

    page.goto(f"{tab.origin}/console#/p/ops/policy")
    page.get_by_role("heading", name="Compare two revisions").wait_for()
    _accessible_and_narrow(page)
    assert "+ Ask a human before migrations." in page.locator("pre.diff").first.inner_text()
    assert "(human)" in page.locator("main").inner_text()  # who wrote each revision
    page.get_by_label("From").select_option("1")
    compared = page.locator("pre.diff").first.inner_text()
    assert "+ Deploy on weekdays." in compared and "+ Ask a human before migrations." in compared

    page.goto(f"{tab.origin}/console#/p/demo/d/{world.decisions['pending']}")
    page.get_by_role("heading", name="Every generation").wait_for()
    _accessible_and_narrow(page)
    page.get_by_role("heading", name="Policy", exact=True).wait_for()
    _shot(page, "console-phone-decision.png", tmp_path)


def test_long_conditions_and_options_wrap_on_a_phone(tab: Tab, world: World) -> None:
    """A condition is read before it is vouched for: a runbook URL once made the
    page scroll sideways and cut the confirm box's label off at 360 px."""
    url = ("https://runbooks.example.internal/database/migrations/"
           "0042-orders-table-lock-window/rollback-procedure-with-verification-steps")  # fmt: skip
    decision_id = world.open_decision(
        world.agent, question="Apply the lock-window migration?", task_ids=[world.tasks["orders"]],
        conditions=[f"rollback steps followed from {url}", "x" * 300],
        options=["Proceed with " + "the-long-option-" * 12, "Stop"],
    )  # fmt: skip
    page = tab.page
    page.set_viewport_size({"width": 360, "height": 740})
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision_id}")
    page.get_by_role("heading", name="Every generation").wait_for()
    _accessible_and_narrow(page)
    label = page.get_by_text(f"rollback steps followed from {url}").first
    box = label.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 360, box


def test_a_token_revoked_while_the_inbox_is_open_signs_out(tab: Tab, world: World) -> None:
    """The inbox refreshes by itself: the refresh that finds the token refused
    signs out with the message, as a page load does (docs/console.md)."""
    bob = admin_principal(world.served, "human", "Bob")
    page = tab.page
    tab.sign_in(bob.token)
    listed = admin_json(world.served, "token", "list", "--principal", bob.principal_id)
    admin_json(world.served, "token", "revoke", "--token-id", listed[0]["token_id"])
    world.open_decision(world.agent, question="Anything new?", task_ids=[world.tasks["docs"]])
    page.get_by_text("Your token is no longer accepted").wait_for(timeout=20000)
    assert page.locator("#nav").is_hidden()
    assert page.evaluate("() => sessionStorage.getItem('waypost.token')") is None


def test_a_token_refused_under_a_half_typed_answer_keeps_the_text(tab: Tab, world: World) -> None:
    """The sign-in page replaced the decision page and the rationale being
    typed was gone; a conflict notice keeps it, and so does this page now:
    only what was typed (a reopen form's Conditions box comes filled in), and
    through a second sign-out for the same refusal."""
    erin = admin_principal(world.served, "human", "Erin")
    decision = world.open_decision(world.agent, question="Rotate the staging keys?",
                                   task_ids=[world.tasks["docs"]])  # fmt: skip
    page = tab.page
    tab.sign_in(erin.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision}")
    page.get_by_label("Why (required)").fill("Half of my reasons, typed slowly.")
    listed = admin_json(world.served, "token", "list", "--principal", erin.principal_id)
    admin_json(world.served, "token", "revoke", "--token-id", listed[0]["token_id"])
    refused = page.get_by_text("Your token is no longer accepted")
    try:  # the request that finds it refused ...
        page.get_by_role("button", name="Deny: Proceed").click(timeout=5000)
    except playwright_api.TimeoutError:
        # ... or the page's own live refresh, which may hear of the revocation
        # first (its 15-second re-check of the token) and sign out the same way
        assert refused.is_visible()
    refused.wait_for()
    kept = page.locator("details.kept")
    assert kept.get_attribute("open") is not None
    assert "What you wrote" in kept.inner_text()
    assert "Half of my reasons, typed slowly." in kept.inner_text()
    page.evaluate("() => { location.hash = '#/'; }")  # the route signs out again: kept still
    page.wait_for_timeout(500)
    assert "Half of my reasons, typed slowly." in page.locator("details.kept").inner_text()

    # an answered decision's page: its reopen form comes with the conditions in
    # a box nobody typed into; nothing of it is "what you wrote"
    frank = admin_principal(world.served, "human", "Frank")
    conditioned = world.open_decision(world.agent, question="Open the firewall for the audit?",
                                      task_ids=[world.tasks["docs"]],
                                      conditions=["Rollback plan in vault path X"])  # fmt: skip
    world.alice.send("POST", f"/api/v1/projects/demo/decisions/{conditioned}/answer",
                     {"expected_generation": 1, "disposition": "deny", "answer": "Stop",
                      "rationale": "Not this week."})  # fmt: skip
    tab.sign_in(frank.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{conditioned}")
    page.get_by_label("Why reopen (required)").wait_for(state="attached")  # in a closed <details>
    listed = admin_json(world.served, "token", "list", "--principal", frank.principal_id)
    admin_json(world.served, "token", "revoke", "--token-id", listed[0]["token_id"])
    page.evaluate("() => { location.hash = '#/'; }")
    page.get_by_text("Your token is no longer accepted").wait_for()
    assert page.locator("details.kept").count() == 0

    # signing out on purpose keeps nothing on the page for the next person
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision}")
    page.get_by_label("Why (required)").fill("Not for the next person.")
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("heading", name="Sign in").wait_for()
    assert page.locator("details.kept").count() == 0


def test_someone_else_signing_in_starts_at_the_inbox(tab: Tab, world: World) -> None:
    """Signing in on a tab returned to the page the previous person left
    open (a decision, with its answer form); the person whose token was
    refused, signing in again, still comes back to their page."""
    gina = admin_principal(world.served, "human", "Gina")
    decision = world.open_decision(world.agent, question="Purge the CDN cache?",
                                   task_ids=[world.tasks["docs"]])  # fmt: skip
    page = tab.page
    heading = page.get_by_role("heading", name="Purge the CDN cache?", level=1)

    def sign_in_here(token: str) -> None:
        page.get_by_label("API token").fill(token)
        page.get_by_role("button", name="Sign in").click()

    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision}")
    heading.wait_for()
    page.get_by_role("button", name="Sign out").click()
    sign_in_here(gina.token)
    page.get_by_role("heading", name="Inbox", level=1).wait_for()
    assert page.evaluate("() => location.hash") == "#/"

    # Gina's token refused on the decision's page: Gina, signing in again
    # with a new token, comes back to it
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision}")
    heading.wait_for()
    # off the page while the token is revoked, then back: an open page may
    # hear of the revocation first (its subscription closed, 4401) and sign
    # out, and a reload after that found no token and so no refusal to show
    page.goto("about:blank")
    listed = admin_json(world.served, "token", "list", "--principal", gina.principal_id)
    admin_json(world.served, "token", "revoke", "--token-id", listed[0]["token_id"])
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision}")
    page.get_by_text("Your token is no longer accepted").wait_for()
    issued = admin_json(world.served, "token", "issue", "--principal", gina.principal_id)
    sign_in_here(issued["token"])
    heading.wait_for()


def test_right_to_left_text_in_a_record_cannot_reorder_the_consoles_words(
    tab: Tab, world: World
) -> None:
    """A task titled "Archive old logs \u202enow" (RIGHT-TO-LEFT OVERRIDE)
    showed the console's "(task_x, open)" after it reversed, on the page where
    a human decides; and an option's "(recommended)" the same way (an option
    now takes no override, but one left open by an isolate, U+2067, turns
    what follows as well). Record text holding such characters is isolated
    in a <bdi>; other text is not wrapped."""
    made = world.alice.send("POST", "/api/v1/projects/demo/tasks",
                            {"title": "Archive old logs \u202enow"}, 201)  # fmt: skip
    decision = world.open_decision(
        world.agent, question="Archive the logs?", task_ids=[made["id"]],
        options=["Proceed \u2067safely", "Stop"], recommendation="Proceed \u2067safely",
    )  # fmt: skip
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision}")
    heading = page.locator("li.task h3").filter(has_text="Archive old logs")
    heading.wait_for()
    title, label = heading.locator("bdi"), heading.locator("span.muted")
    assert title.inner_text() == "Archive old logs \u202enow"
    # within the title the override still turns "now": a note says it is there
    note = heading.locator(".controls-note")
    assert note.inner_text() == " [direction controls]"
    assert "U+202E" in (note.get_attribute("title") or "")
    # the console's words stay whole, to the right of the title
    assert label.inner_text() == f"({made['id']}, open)"
    assert (
        label.bounding_box()["x"] >= title.bounding_box()["x"] + title.bounding_box()["width"] - 1
    )
    option = page.locator("table.answer-grid th[scope=row]").filter(has_text="safely")
    recommended = option.locator("span.muted")
    assert recommended.inner_text() == " (recommended)"
    box = option.locator("bdi").bounding_box()
    assert recommended.bounding_box()["x"] >= box["x"] + box["width"] - 1
    # text with nothing to turn is not wrapped
    assert page.locator("h1 bdi").count() == 0

    # record text inside a sentence of the console's is isolated alone: the
    # review found a whole "Your answer is recorded: allow "Proceed \u202esafely"."
    # in one <bdi>, and "by Alice (human)" after an answer reversed
    page.get_by_label("Why (required)").fill("The logs are archived weekly.")
    for box in page.locator("fieldset input[type=checkbox]").all():
        box.check()
    page.get_by_role("button", name="Allow: Proceed \u2067safely").click()
    page.get_by_text("Your answer is recorded").wait_for()
    isolated = page.locator("main bdi").all_inner_texts()
    assert "Proceed \u2067safely" in isolated
    # every <bdi> holds record text alone, never the console's words beside it
    assert all(text.startswith(("Archive", "Proceed")) for text in isolated), isolated
    assert page.evaluate("() => document.title") == "Archive the logs? · Waypost console"
    # a question that can turn direction is isolated in the tab's title, its
    # own isolate characters dropped (a stray U+2069 closed the isolate early)
    turned = world.open_decision(world.agent, question="Purge \u2069\u202eall logs?",
                                 task_ids=[made["id"]])  # fmt: skip
    page.goto(f"{tab.origin}/console#/p/demo/d/{turned}")
    page.locator("h1 bdi").wait_for()
    assert page.locator("h1 .controls-note").count() == 1
    title = page.evaluate("() => document.title")
    assert title == "\u2068Purge \u202eall logs?\u2069 · Waypost console", ascii(title)


def test_record_text_in_a_list_or_a_diff_line_cannot_reorder_its_neighbours(
    tab: Tab, world: World
) -> None:
    """Lists of record text were joined in one string, so one <bdi> held them
    all: an option ending in U+202E showed "Options: Wait won kcab lloR ·",
    a task's title turned the titles after it, and so did a tag in a
    knowledge diff (an isolate left open in it now: the service refuses an
    override in a tag). A diff's sign shared the line's <bdi>, so a Hebrew line
    took its sign to its far end. And typed text had no `dir="auto"`."""
    alice, agent = world.alice, world.agent
    alice.send("POST", "/api/v1/projects", {"id": "bidi", "name": "Bidi"}, 201)
    tasks = [alice.send("POST", "/api/v1/projects/bidi/tasks", {"title": title}, 201)["id"]
             for title in ("Archive old logs \u202e", "Rotate keys")]  # fmt: skip
    decision = agent.send("POST", "/api/v1/projects/bidi/decisions", {
        "question": "Roll back the logs?", "rationale": "Needs a human.", "required_actor": "human",
        "environment": "staging", "options": ["Wait \u2067", "Roll back now"],
        "task_ids": tasks}, 201)["id"]  # fmt: skip
    base = "/api/v1/projects/bidi/knowledge"
    record = {"kind": "fact", "title": "Retention", "body": "שמירה שבוע\nKeep a week",
              "tags": ["hot \u2067x", "cold"]}  # fmt: skip
    made = alice.send("POST", base, record, 201)
    alice.send("PATCH", f"{base}/{made['id']}", {
        "expected_revision": 1, "title": "Retention", "status": "observed",
        "body": "שמירה חודש\nKeep a week", "tags": ["hot \u2067x", "cold", "new"],
        "applicability": "", "scope": made["scope"],
        "provenance": {"summary": "", "source_uri": None, "source_task_id": None,
                       "source_submission_id": None}})  # fmt: skip
    page = tab.page
    tab.sign_in(alice.token)
    try:
        card = page.locator(f"article[data-decision='{decision}']").first
        card.wait_for(timeout=20000)
        options = card.locator("p").filter(has_text="Options:")
        assert options.locator("bdi").all_inner_texts() == ["Wait \u2067"]
        assert "Roll back now" in options.inner_text()
        blocks = card.locator("p").filter(has_text="Blocks:")
        assert blocks.locator("bdi").all_inner_texts() == ["Archive old logs \u202e"]

        page.goto(f"{tab.origin}/console#/p/bidi/k/{made['id']}")
        page.get_by_role("heading", name="Revision 2 (current)").wait_for()
        added = [t.strip() for t in page.locator("pre.diff ins").all_inner_texts()]
        assert "+ new" in added, added  # a tag a line: the one added, alone
        removed = page.locator("pre.diff del").filter(has_text="שמירה שבוע")
        line = removed.locator("bdi")
        assert line.inner_text() == "שמירה שבוע"  # the sign is not in it
        # right-to-left letters are no direction controls: no note for them
        assert removed.locator(".controls-note").count() == 0
        assert line.bounding_box()["x"] > removed.bounding_box()["x"]  # the sign comes first

        page.goto(f"{tab.origin}/console#/p/bidi/d/{decision}")
        assert page.get_by_label("Why (required)").get_attribute("dir") == "auto"
    finally:  # nothing left pending in the inbox other tests read
        alice.send("POST", f"/api/v1/projects/bidi/decisions/{decision}/answer", {
            "expected_generation": 1, "disposition": "deny", "answer": "Roll back now",
            "rationale": "done", "conditions_confirmed": True})  # fmt: skip


def test_a_background_refresh_keeps_the_focus_where_it_was(tab: Tab, world: World) -> None:
    """docs/console.md: keyboard focus stays where it was across refreshes (it
    fell to <body> from the h1, and jumped to the first link with the same
    address, in another section)."""
    page = tab.page
    tab.sign_in(world.alice.token)
    assert page.evaluate("() => document.activeElement.tagName") == "H1"
    first = world.open_decision(
        world.agent, question="First refresh?", task_ids=[world.tasks["docs"]]
    )
    page.locator(f"[data-decision='{first}']").wait_for(timeout=20000)
    assert page.evaluate("() => document.activeElement.tagName") == "H1"
    # a link inside one card of one section keeps the focus through the next refresh
    card = page.locator(f"[data-decision='{first}']").first
    card.locator("a").first.focus()
    before = page.evaluate("() => document.activeElement.outerHTML")
    second = world.open_decision(
        world.agent, question="Second refresh?", task_ids=[world.tasks["docs"]]
    )
    page.locator(f"[data-decision='{second}']").wait_for(timeout=20000)
    assert page.evaluate("() => document.activeElement.outerHTML") == before
    inside = page.evaluate(
        "() => document.activeElement.closest('[data-decision]')?.dataset.decision"
    )
    assert inside == first


def _half_answered(
    tab: Tab, world: World, question: str, why: str, polling: bool = False
) -> tuple[Any, str]:
    """A new decision an agent asked, open in Alice's tab with its reason
    typed; `polling`: the page's WebSocket held silent (`_polling`)."""
    decision_id = world.open_decision(world.agent, question=question,
                                      task_ids=[world.tasks["docs"]])  # fmt: skip
    page = tab.page
    if polling:
        _polling(page)
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision_id}")
    page.get_by_role("heading", name="Answer", exact=True).wait_for()
    page.get_by_label("Why (required)").fill(why)
    return page, decision_id


def _reply_lost_said(page: Any) -> None:
    """Wait for the form's "cannot be reached", or for the banner that takes
    its place once the page's live updates bring the recorded change: under
    load the two came within one poll of Playwright's, and a wait for the
    first alone timed out (it was gone)."""
    said = re.compile(r"The service cannot be reached|was recorded, though its reply")
    page.locator("main").get_by_text(said).first.wait_for()


def _lose_the_first_reply(page: Any, mutation: str) -> None:
    """The first `mutation` request reaches the service, which records it,
    and its reply never reaches the page."""
    lost: list[str] = []

    def lose(route: Any) -> None:
        if mutation in (route.request.post_data or "") and not lost:
            route.fetch()  # the service records it...
            lost.append(mutation)
            route.abort()  # ...and the browser never hears back
        else:
            route.continue_()

    page.route("**/graphql", lose)


def test_an_answer_whose_reply_was_lost_is_not_sent_twice(tab: Tab, world: World) -> None:
    """The reply to an answer is lost on the way back; the user presses another
    button. The page's key makes that a different request, refused: the page
    says the first may have been recorded and shows the decision as it is."""
    page, decision_id = _half_answered(
        tab, world, "Ship the hotfix tonight?", "Tonight is too late."
    )

    _lose_the_first_reply(page, "decisionAnswer")
    page.get_by_role("button", name="Deny: Proceed").click()
    _reply_lost_said(page)
    page.get_by_role("button", name="Deny: Stop").click()
    page.locator("main").get_by_text("may have been recorded").wait_for()
    page.unroute("**/graphql")
    answer = world.decision(decision_id)["current"]["answer"]
    assert (answer["disposition"], answer["answer"]) == ("deny", "Proceed")


def test_an_answer_whose_reply_was_lost_is_known_when_it_shows_up(tab: Tab, world: World) -> None:
    """The answer is recorded but its reply lost: the change it made came
    back through the page's subscription announced as one made elsewhere."""
    page, decision_id = _half_answered(
        tab, world, "Rotate the signing keys?", "Not before the audit."
    )
    _lose_the_first_reply(page, "decisionAnswer")
    page.get_by_role("button", name="Deny: Proceed").click()
    _reply_lost_said(page)
    page.locator("main").get_by_text("Your answer was recorded, though its reply").wait_for()
    assert "changed elsewhere" not in page.locator("main").inner_text()
    # the form's refusal is answered by the banner, not left under it (consolecrowd)
    assert "cannot be reached" not in page.locator("main").inner_text()
    # nor, a moment later, told to press again (consolereview27)
    page.wait_for_timeout(2000)
    assert "The service answers again" not in page.locator("main").inner_text()
    page.unroute("**/graphql")
    assert world.decision(decision_id)["current"]["answer"]["disposition"] == "deny"


def test_a_reopening_whose_reply_was_lost_is_known_when_it_shows_up(tab: Tab, world: World) -> None:
    """As an answer's: the reopening the page sent, recorded, came back as a
    change made elsewhere."""
    page, decision = _stale_in_alices_tab(tab, world, "Tag release 11", question="Tag it?")
    _lose_the_first_reply(page, "decisionReopen")
    page.get_by_label("Why reopen (required)").fill("Release 12 replaces 11.")
    page.get_by_role("button", name="Reopen", exact=True).click()
    _reply_lost_said(page)
    page.locator("main").get_by_text("Your reopening was recorded, though its reply").wait_for()
    assert "changed elsewhere" not in page.locator("main").inner_text()
    assert "cannot be reached" not in page.locator("main").inner_text()
    page.unroute("**/graphql")
    assert world.decision(decision)["generation"] == 2


def _hold_the_first(page: Any, mutation: str) -> list[Any]:
    """The first `mutation` request waits, not yet sent on, until the test
    continues it (`held[0].continue_()`); the others go through."""
    held: list[Any] = []

    def hold(route: Any) -> None:
        if mutation in (route.request.post_data or "") and not held:
            held.append(route)
        else:
            route.continue_()

    page.route("**/graphql", hold)
    return held


def _away_and_back(page: Any) -> None:
    page.get_by_role("link", name="Inbox", exact=True).click()
    page.get_by_role("heading", name="Inbox", level=1).wait_for()
    page.go_back()
    page.get_by_role("heading", name="Answer", exact=True).wait_for()


def test_an_answer_on_its_way_while_the_page_was_left_is_known_as_ones_own(
    tab: Tab, world: World
) -> None:
    """A slow answer; the person goes to the inbox and back; the answer then
    lands: the page said "This decision changed elsewhere" of it
    (consolenetaudit)."""
    page, decision_id = _half_answered(tab, world, "Purge the cache?", "Not during the sale.")
    held = _hold_the_first(page, "decisionAnswer")
    page.get_by_role("button", name="Deny: Proceed").click()
    _wait_for_held(page, held, "the answer was never sent")
    _away_and_back(page)
    held[0].continue_()
    page.locator("main").get_by_text("Your answer was recorded, though its reply").wait_for()
    assert "changed elsewhere" not in page.locator("main").inner_text()
    page.unroute("**/graphql")
    assert world.decision(decision_id)["current"]["answer"]["answer"] == "Proceed"


def test_a_form_drawn_again_answers_with_the_same_key(tab: Tab, world: World) -> None:
    """The form drawn again (the page left and come back to while an answer
    was on its way) made a new key: a second answer raced the first as if
    another person's, and the first then read "Someone else answered first"
    (consolenetaudit). With one key, one of the two is recorded and the
    other is refused as its repeat."""
    page, decision_id = _half_answered(tab, world, "Drop the index?", "It is unused.")
    keys: list[str] = []

    def note_key(request: Any) -> None:
        sent = request.post_data or ""
        if request.method == "POST" and "decisionAnswer" in sent:
            keys.append(json.loads(sent)["variables"]["input"]["idempotencyKey"])

    page.on("request", note_key)
    # what the page's announcer says, kept (a later message replaces its text)
    page.evaluate("""() => { window.said = []; const region = document.getElementById('announce');
      new MutationObserver(() => { if (region.textContent) window.said.push(region.textContent); })
        .observe(region, { childList: true, characterData: true, subtree: true }); }""")
    held = _hold_the_first(page, "decisionAnswer")
    page.get_by_role("button", name="Deny: Proceed").click()
    _wait_for_held(page, held, "the answer was never sent")
    _away_and_back(page)
    page.get_by_label("Why (required)").fill("It is unused.")
    page.get_by_role("button", name="Deny: Stop").click()
    page.locator("main").get_by_text("Your answer is recorded").wait_for()
    held[0].continue_()
    for _ in range(30):  # the held answer's refusal comes back, for a form left behind
        if len(keys) == 2 and page.evaluate("() => window.said.length") >= 1:
            break
        page.wait_for_timeout(100)
    page.wait_for_timeout(500)
    page.unroute("**/graphql")
    assert len(keys) == 2 and keys[0] == keys[1], keys
    # nothing said of the form left behind: it was not on the page (review40)
    said = page.evaluate("() => window.said")
    assert not [x for x in said if "earlier attempt" in x or "Someone else" in x], said
    answer = world.decision(decision_id)["current"]["answer"]
    assert (answer["disposition"], answer["answer"]) == ("deny", "Stop")
    assert "Someone else answered" not in page.locator("main").inner_text()


def test_a_proxys_504_after_the_answer_was_recorded_is_not_a_change_elsewhere(
    tab: Tab, world: World
) -> None:
    """A proxy in front of the service answered 504 (no JSON) after the
    service had recorded the answer: the form said "The service answered
    504 without JSON" and the banner "This decision changed elsewhere"
    (consolenetaudit). A gateway's 502, 503 or 504 is read as a lost reply."""
    page, decision_id = _half_answered(tab, world, "Renew the cert?", "It expires soon.")
    answered: list[int] = []

    def gateway(route: Any) -> None:
        if "decisionAnswer" in (route.request.post_data or "") and not answered:
            answered.append(route.fetch().status)  # the service records it...
            route.fulfill(status=504, content_type="text/html", body="<h1>Gateway Timeout</h1>")
        else:
            route.continue_()

    page.route("**/graphql", gateway)
    # the form's words, kept as they come: once the page has read the
    # decision again, the banner clears them (consolecrowd), sometimes before
    # a look at the page would find them
    page.evaluate("""() => { window.formSaid = []; const main = document.querySelector('main');
      new MutationObserver(() => main.querySelectorAll('.form-error').forEach(
        (e) => { if (e.textContent) window.formSaid.push(e.textContent); }))
        .observe(main, { childList: true, characterData: true, subtree: true }); }""")
    page.get_by_role("button", name="Deny: Proceed").click()
    page.locator("main").get_by_text("Your answer was recorded, though its reply").wait_for()
    said = page.evaluate("() => window.formSaid")
    assert any("did not answer (504 from the way to it)" in x for x in said), said
    assert not any("without JSON" in x for x in said), said
    assert "changed elsewhere" not in page.locator("main").inner_text()
    page.unroute("**/graphql")
    assert answered == [200]
    assert world.decision(decision_id)["current"]["answer"]["answer"] == "Proceed"


def test_an_answer_the_service_never_replies_to_says_so_after_30_seconds(
    tab: Tab, world: World
) -> None:
    """A service stopped (SIGSTOP), not gone: the request never ended, the
    buttons stayed disabled and nothing said why. Now the form says it is
    sending, and after 30 s that the service did not answer."""
    page, decision_id = _half_answered(
        tab, world, "Restart the queue workers?", "Not during the sale."
    )
    held: list[Any] = []

    def hold_the_answer(route: Any) -> None:
        if "decisionAnswer" in (route.request.post_data or ""):
            held.append(route)  # never answered: the request stays open
        else:
            route.continue_()

    page.route("**/graphql", hold_the_answer)
    # the page's time is Playwright's from here on, moved by hand: the 30 s
    # are counted by the page's own timer, not waited out
    page.clock.install()
    page.get_by_role("button", name="Deny: Proceed").click()
    page.locator("main").get_by_role("status").get_by_text("Sending…").wait_for()
    # said politely: in the assertive error region it cut off what a screen
    # reader was reading
    assert page.locator("main [aria-live=assertive] .sending").count() == 0
    assert page.get_by_role("button", name="Deny: Stop").is_disabled()
    given_up = page.locator("main").get_by_text("did not answer within 30 seconds")
    page.clock.run_for(29_000)
    assert given_up.count() == 0 and page.get_by_role("button", name="Deny: Stop").is_disabled()
    page.clock.run_for(1_500)
    given_up.wait_for()
    assert page.get_by_role("button", name="Deny: Stop").is_enabled()
    # the keyboard is back on the button pressed (it fell to <body>, the
    # button having been disabled), and the refusal is one alert, not an
    # alert inside an assertive region (read twice)
    assert page.evaluate("() => document.activeElement.getAttribute('aria-label')") == (
        "Deny: Proceed"
    )
    assert page.locator("[aria-live] [role=alert]").count() == 0
    assert page.locator("main .sending").count() == 0
    page.unroute("**/graphql")
    assert held and world.decision(decision_id)["current"]["answer"] is None


def test_the_inbox_says_when_its_updates_fail(tab: Tab, world: World) -> None:
    """A refresh that cannot reach the service shows that the page may be out
    of date (it failed silently before), and the notice goes once one works."""
    page = tab.page
    tab.sign_in(world.alice.token)
    mode = "socket" if _offers_subscriptions(world) else "poll"
    page.locator(f"html[data-live={mode}]").wait_for(state="attached")
    status = page.locator("#live-status")
    assert status.is_hidden()
    # what the page's announcer says, kept (a later message replaces its text)
    page.evaluate("""() => { window.said = []; const region = document.getElementById('announce');
      new MutationObserver(() => { if (region.textContent) window.said.push(region.textContent); })
        .observe(region, { childList: true, characterData: true, subtree: true }); }""")
    page.route("**/graphql", lambda route: route.abort())  # the service unreachable
    world.open_decision(world.agent, question="Seen while down?", task_ids=[world.tasks["docs"]])
    status.wait_for(state="visible", timeout=20000)
    assert "may be out of date" in status.inner_text()
    # in a landmark of its own, as all of the page's content is (a11yaudit:
    # axe's `region`, between the header and main)
    assert page.get_by_role("region", name="Live updates").is_visible()
    # said to screen readers too: a region shown with its text already in it
    # is often not read out (a11yaudit); the announcer writes 50 ms later
    # (wait_for_function's polling evaluates a string, which the page's CSP refuses)
    for _ in range(50):
        said = page.evaluate("() => window.said")
        if said:
            break
        page.wait_for_timeout(100)
    assert [s for s in said if "may be out of date" in s] == [status.inner_text()], said
    page.unroute("**/graphql")
    back = world.open_decision(world.agent, question="Seen again?", task_ids=[world.tasks["docs"]])
    page.locator(f"[data-decision='{back}']").wait_for(timeout=70000)
    assert status.is_hidden()


@pytest.mark.parametrize("live", ["as_served", "polling"])
def test_the_inbox_says_at_once_when_the_browser_goes_offline_and_looks_when_back(
    tab: Tab, world: World, live: str
) -> None:
    """Offline, the page showed nothing for up to a minute with a socket;
    back online it waited out the poll's back-off (27 s measured:
    consolenetaudit). The browser's own offline and online events now say
    so at once and look at once, with a socket or polling: the page's clock
    stands still once back online, so only that look can bring what was
    missed (suitespeed, review69: no test failed without the look)."""
    page = tab.page
    page.clock.install()  # the back-off's seconds pass on the page's clock, moved by hand
    if live == "polling":
        _polling(page)
    tab.sign_in(world.alice.token)
    mode = "socket" if live == "as_served" and _offers_subscriptions(world) else "poll"
    page.locator(f"html[data-live={mode}]").wait_for(state="attached")
    status = page.locator("#live-status")
    page.evaluate("""() => { window.said = []; const region = document.getElementById('announce');
      new MutationObserver(() => { if (region.textContent) window.said.push(region.textContent); })
        .observe(region, { childList: true, characterData: true, subtree: true }); }""")
    page.context.set_offline(True)
    status.wait_for(state="visible", timeout=3000)
    missed = world.open_decision(world.agent, question="Asked while offline?",
                                 task_ids=[world.tasks["docs"]])  # fmt: skip
    _move_clock(page, 9000)  # the poll's back-off grows meanwhile (4, 8, 16 s)
    # the page's clock then stands still: only the look the online event asks
    # for at once (a 0 ms timer) can run, not the back-off's next poll, which
    # came within the 5 s below and passed a page that ignored the event
    page.clock.pause_at(page.evaluate("() => Date.now()") + 100)
    # noted after the page's own handler (listeners run in the order added):
    # once this one ran, the page has asked for its look
    page.evaluate("() => addEventListener('online', () => { window.cameOnline = true; })")
    page.context.set_offline(False)
    for _ in range(200):  # the event, not a fixed 200 ms: under load it came later (fcc)
        if page.evaluate("() => window.cameOnline === true"):
            break
        page.wait_for_timeout(50)
    page.clock.run_for(100)
    page.locator(f"[data-decision='{missed}']").wait_for(timeout=5000)
    page.clock.resume()
    status.wait_for(state="hidden", timeout=5000)
    page.wait_for_timeout(300)  # the announcer writes a moment later
    # the pause said once, and its end (a screen reader heard only the pause)
    said = page.evaluate("() => window.said")
    assert [s for s in said if s.startswith("Updates paused")] != [], said
    assert len([s for s in said if s.startswith("Updates paused")]) == 1, said
    assert said.count("Updates resumed: this page is current again.") == 1, said


def test_graphiql_loads_from_the_package(tab: Tab, world: World) -> None:
    page = tab.page
    page.goto(tab.origin + "/graphql")
    page.locator(".graphiql-container").wait_for()
    assert page.title() == "GraphiQL · Waypost"
    # with the console's token in this tab, the headers pane is filled in
    tab.sign_in(world.alice.token)
    page.goto(tab.origin + "/graphql")
    page.locator(".graphiql-container").wait_for()
    # this token, not the placeholder ("Bearer wp_...") of a tab signed out
    page.locator(".graphiql-editor-tool").get_by_text("Bearer " + world.alice.token[:12]).wait_for()
    # GraphiQL wires its Execute button once its editors are in; a click
    # before that does nothing, so try again until it runs (the locator
    # waits out a query still running, whose button says "Stop")
    response = page.locator(".graphiql-response")
    answer = response.get_by_text('"Alice"')
    for _ in range(10):
        page.get_by_role("button", name="Execute query (Ctrl-Enter)").click()
        try:
            answer.wait_for(timeout=3000)
            break
        except playwright_api.TimeoutError:
            continue
    else:
        raise AssertionError(f"no answer; the response pane shows {response.inner_text()!r}")
    assert any(u.endswith("/graphiql/graphiql.min.js") for u in tab.requests)
    # GraphiQL's history holds the headers the query ran with, the token
    # among them: never in localStorage (it outlived the tab and sign-out)
    stored = "JSON.stringify(Object.assign({}, window.%s))"
    assert world.alice.token not in page.evaluate(stored % "localStorage")
    assert world.alice.token in page.evaluate(stored % "sessionStorage")
    page.goto(tab.origin + "/console")
    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("API token").wait_for()
    assert world.alice.token not in page.evaluate(stored % "sessionStorage")


def test_graphiql_state_outlives_a_signed_out_console_but_not_a_sign_out(
    tab: Tab, world: World
) -> None:
    """Opening the console without a token cleared the tab's storage, and with
    it the GraphiQL history of a token pasted in by hand; and what an older
    GraphiQL kept in localStorage stayed there for good."""
    page = tab.page
    # set from a page of the origin that runs no script (GraphiQL itself
    # would save its own query over this one)
    page.goto(tab.origin + "/console/static/console.css")
    page.evaluate("""() => {
        sessionStorage.setItem('graphiql:query', '{ me { name } }');
        localStorage.setItem('graphiql:tabState', 'Bearer wp_old');
        localStorage.setItem('another:key', 'kept');
    }""")  # fmt: skip
    page.goto(tab.origin + "/console")
    page.get_by_label("API token").wait_for()
    assert page.evaluate("() => sessionStorage.getItem('graphiql:query')") == "{ me { name } }"
    page.goto(tab.origin + "/graphql")
    page.locator(".graphiql-container").wait_for()
    assert page.evaluate("() => localStorage.getItem('graphiql:tabState')") is None
    assert page.evaluate("() => localStorage.getItem('another:key')") == "kept"
    tab.sign_in(world.alice.token)
    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("API token").wait_for()
    assert page.evaluate("() => sessionStorage.getItem('graphiql:query')") is None


def test_histories_longer_than_a_page_show_every_revision(tab: Tab, world: World) -> None:
    """The record and policy pages asked for the newest 100 revisions and
    stopped there: revision 6 of 105 read as "The first revision."."""
    alice = world.alice
    alice.send("POST", "/api/v1/projects", {"id": "long", "name": "Long history"}, 201)
    base = "/api/v1/projects/long/knowledge"
    made = alice.send("POST", base, {"kind": "fact", "title": "Edit 1", "body": "b"}, 201)
    correction = {"body": "b", "status": "observed", "tags": [], "applicability": "",
                  "scope": made["scope"], "provenance": {"summary": "", "source_uri": None,
                  "source_task_id": None, "source_submission_id": None}}  # fmt: skip
    for revision in range(1, 105):
        title = f"Edit {revision + 1}"
        alice.send("PATCH", f"{base}/{made['id']}",
                   {**correction, "expected_revision": revision, "title": title})  # fmt: skip
    for revision in range(1, 103):
        alice.send("PATCH", "/api/v1/projects/long/policy",
                   {"expected_revision": revision, "rules": f"Rule {revision}"})  # fmt: skip

    page = tab.page
    tab.sign_in(alice.token)
    page.goto(f"{tab.origin}/console#/p/long/k/{made['id']}")
    page.get_by_role("heading", name="Revision 105 (current)").wait_for()
    page.get_by_role("heading", name="Revision 1", exact=True).wait_for()
    assert page.locator("ol.history > li").count() == 105
    assert page.get_by_text("The first revision.").count() == 1

    page.goto(f"{tab.origin}/console#/p/long/policy")
    page.get_by_role("heading", name="Compare two revisions").wait_for()
    page.get_by_label("From").select_option("1")
    assert "+ Rule 102" in page.locator("pre.diff").first.inner_text()


def _policy_compare(tab: Tab, world: World, project_id: str, rules: list[str]) -> Any:
    """A new project whose policy rules were `rules` in turn (revisions 2,
    3, ...), its policy page open at "Compare two revisions"."""
    alice = world.alice
    alice.send("POST", "/api/v1/projects", {"id": project_id, "name": project_id}, 201)
    for revision, text in enumerate(rules, start=1):
        alice.send("PATCH", f"/api/v1/projects/{project_id}/policy",
                   {"expected_revision": revision, "rules": text})  # fmt: skip
    page = tab.page
    tab.sign_in(alice.token)
    page.goto(f"{tab.origin}/console#/p/{project_id}/policy")
    page.get_by_role("heading", name="Compare two revisions").wait_for()
    return page


def test_a_one_line_edit_of_long_rules_shows_that_line_in_its_context(
    tab: Tab, world: World
) -> None:
    """Past 1,000 lines the texts' table passed its bound and the diff read
    every line removed and every line added (9,001 of each, a page 778,880 px
    tall), on the policy page and on a decision staled by the edit."""
    lines = [f"Rule {i}: keep the change log current." for i in range(1500)]
    edited = [*lines[:700], "Rule 700: ask a human first.", *lines[701:]]
    # and a second edit far from the first: what lies between the two is past
    # one table's bound, so lines found once in each text anchor it
    edited[1400] = "Rule 1400: deploy on weekdays only."
    page = _policy_compare(tab, world, "longrules", ["\n".join(lines), "\n".join(edited)])
    page.get_by_label("From").select_option("2")
    diff = page.locator("pre.diff").first.inner_text()
    assert "- Rule 700: keep the change log current." in diff
    assert "+ Rule 700: ask a human first." in diff
    assert "  Rule 697: keep" in diff and "  Rule 703: keep" in diff  # three lines around it
    assert "+ Rule 1400: deploy on weekdays only." in diff
    assert "… 697 unchanged lines" in diff and "… 693 unchanged lines" in diff
    assert "… 96 unchanged lines" in diff
    assert len([line for line in diff.splitlines() if line.strip()]) == 3 + 2 * (2 + 2 * 3)


def test_rules_whose_line_endings_changed_diff_line_by_line(tab: Tab, world: World) -> None:
    """Rules saved with CRLF, then one line edited with LF endings: every line
    read removed and added, since each old line held its carriage return.
    Lines compare without their endings, and the diff says the endings
    changed; a change of endings alone is that note."""
    lines = [f"Rule {i}: keep the change log current." for i in range(20)]
    edited = [*lines[:10], "Rule 10: ask a human first.", *lines[11:]]
    # and two mixed texts, a CRLF moved from one line to another
    mixed = ["\r\n".join(edited[:10]) + "\n" + "\n".join(edited[10:]),
             "\n".join(edited[:10]) + "\n" + "\r\n".join(edited[10:])]  # fmt: skip
    texts = ["\r\n".join(lines), "\n".join(edited), "\r\n".join(edited), *mixed]
    page = _policy_compare(tab, world, "crlf", texts)
    page.get_by_label("From").select_option("2")
    page.get_by_label("To", exact=True).select_option("3")
    diff = page.locator("pre.diff").first.inner_text()
    assert "(line endings changed: CRLF before, LF after)" in diff
    # a named group; and what a screen reader hears on each change is one
    # sentence, not the whole diff (it was in a live region)
    assert page.get_by_role("group", name="Changes to Rules").count() == 1
    assert page.locator("[aria-live] pre, [role=status] pre").count() == 0
    assert (
        page.get_by_role("status").filter(has_text="Revision 2 to 3: 1 field(s) differ.").count()
        == 1
    )
    assert [line[0] for line in diff.splitlines() if line.startswith(("-", "+"))] == ["-", "+"]
    assert "- Rule 10: keep" in diff and "+ Rule 10: ask a human first." in diff
    page.get_by_label("From").select_option("3")
    page.get_by_label("To", exact=True).select_option("4")
    diff = page.locator("pre.diff").first.inner_text()
    assert "(line endings changed: LF before, CRLF after)" in diff
    assert "… 20 unchanged lines" in diff and "Rule 10" not in diff
    # mixed before and after: the review found no note and every line unmarked
    page.get_by_label("From").select_option("5")
    page.get_by_label("To", exact=True).select_option("6")
    diff = page.locator("pre.diff").first.inner_text()
    assert "(line endings changed)" in diff and "… 20 unchanged lines" in diff


def test_a_records_page_shows_its_tags_scope_and_source(tab: Tab, world: World) -> None:
    """They showed only in a correction's diff, and only where they changed:
    a record's page never said what it applies to (consolefast)."""
    made = world.alice.send("POST", "/api/v1/projects/demo/knowledge", {
        "kind": "lesson", "title": "Warm the cache first", "body": "Cold starts time out.",
        "tags": ["cache", "🚀 deploy"],
        "scope": {"task_ids": [world.tasks["orders"]], "components": ["api"],
                  "environments": [], "versions": ["2.1", "2.2"]},
        "provenance": {"summary": "Seen in the load test", "source_uri": "https://ci.example/run/7",
                       "source_task_id": world.tasks["orders"]}}, 201)  # fmt: skip
    general = world.alice.send("POST", "/api/v1/projects/demo/knowledge",
                               {"kind": "fact", "title": "Plain", "body": "b"}, 201)  # fmt: skip
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/k/{made['id']}")
    page.get_by_role("heading", name="Warm the cache first").wait_for()
    fact = page.locator("main [data-fact]")
    assert fact.nth(0).inner_text() == "Tags: cache, 🚀 deploy"
    task = world.tasks["orders"]
    assert fact.nth(1).inner_text() == f"Scope: tasks {task}; components api; versions 2.1, 2.2"
    assert fact.nth(2).inner_text() == (
        f"Source: Seen in the load test · https://ci.example/run/7 · task {task}"
    )
    page.goto(f"{tab.origin}/console#/p/demo/k/{general['id']}")
    page.get_by_role("heading", name="Plain").wait_for()
    assert [fact.nth(i).inner_text() for i in range(3)] == [
        "Tags: none", "Scope: general (any task, component, environment and version)",
        "Source: not given"]  # fmt: skip


def test_a_kind_in_the_address_is_read_in_any_case(tab: Tab, world: World) -> None:
    """`?kind=fact` (as the select shows kinds, and as the decisions page reads
    `?status=pending`) was no filter: every record listed, the select on "any"
    (consoleux2)."""
    base = "/api/v1/projects/demo/knowledge"
    world.alice.send("POST", base, {"kind": "fact", "title": "Casefold fact", "body": "b"}, 201)
    world.alice.send("POST", base, {"kind": "lesson", "title": "Casefold lesson", "body": "b"}, 201)
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/knowledge?kind=fact&q=casefold")
    page.get_by_text("Casefold fact").wait_for()
    assert page.get_by_label("Kind").input_value() == "FACT"
    assert page.get_by_text("Casefold lesson").count() == 0


def test_a_shared_records_replacement_opens_in_its_own_project(tab: Tab, world: World) -> None:
    """Read through another project, the "Superseded by" link pointed at the
    reader's project, where the (project-only) replacement is not found."""
    alice = world.alice
    alice.send("POST", "/api/v1/projects", {"id": "src", "name": "Source"}, 201)
    base = "/api/v1/projects/src/knowledge"
    new = alice.send("POST", base, {"kind": "fact", "title": "Use the new runner", "body": ""}, 201)
    shared = {"collection": "shared", "share_across_projects": True}
    old_text = {"kind": "fact", "title": "Use the old runner", "body": ""}
    old = alice.send("POST", base, {**old_text, **shared}, 201)
    alice.send("PATCH", f"{base}/{old['id']}", {
        "expected_revision": 1, "title": old["title"], "body": "", "status": "superseded",
        "superseded_by_id": new["id"], "tags": [], "applicability": "", "scope": old["scope"],
        "provenance": {"summary": "", "source_uri": None, "source_task_id": None,
                       "source_submission_id": None}})  # fmt: skip

    page = tab.page
    tab.sign_in(alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/k/{old['id']}")
    page.get_by_role("heading", name="Use the old runner").wait_for()
    page.get_by_role("link", name=new["id"]).click()
    page.get_by_role("heading", name="Use the new runner").wait_for()


def test_the_skip_link_moves_focus_without_leaving_the_page(tab: Tab, world: World) -> None:
    """Its href "#main" was read as a route: "Not found", on every page."""
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/policy")
    page.get_by_role("heading", name="Compare two revisions").wait_for()
    page.locator("a.skip").focus()
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "main"
    assert page.evaluate("() => location.hash") == "#/p/demo/policy"
    assert page.get_by_role("heading", name="Not found").count() == 0


def test_a_decision_opened_from_another_decision_watches_its_own(tab: Tab, world: World) -> None:
    """The page kept the first decision's subscription: an answer to the
    second showed only at the once-a-minute safety poll."""
    page = tab.page
    tab.sign_in(world.alice.token)
    first = world.open_decision(world.agent, question="First?", task_ids=[world.tasks["docs"]])
    second = world.open_decision(world.agent, question="Second?", task_ids=[world.tasks["docs"]])
    page.goto(f"{tab.origin}/console#/p/demo/d/{first}")
    page.get_by_role("heading", name="First?").wait_for()
    page.evaluate(f"() => {{ location.hash = '#/p/demo/d/{second}'; }}")
    page.get_by_role("heading", name="Second?").wait_for()
    time.sleep(1.5)  # the subscription in place
    world.admin.send("POST", f"/api/v1/projects/demo/decisions/{second}/answer", {
        "expected_generation": 1, "disposition": "deny", "answer": "Stop",
        "rationale": "Not now."})  # fmt: skip
    page.locator("#changed-elsewhere").wait_for(timeout=10000)


def test_a_page_that_could_not_load_tries_again_by_itself(tab: Tab, world: World) -> None:
    """It stayed on "cannot be reached" until someone clicked a link."""
    page = tab.page
    tab.sign_in(world.alice.token)
    page.route("**/graphql", lambda route: route.abort())  # the service unreachable
    page.goto(f"{tab.origin}/console#/p/demo/policy")
    page.locator("main").get_by_text("tries again by itself").wait_for()
    page.unroute("**/graphql")
    page.get_by_role("heading", name="Compare two revisions").wait_for(timeout=20000)


def test_a_lost_reply_to_who_am_i_is_asked_again_with_the_page(tab: Tab, world: World) -> None:
    """One lost reply to the `me` query of a page load left the page with no
    Sign out and no navigation, and a revoked token never signed out."""
    page = tab.page
    tab.sign_in(world.alice.token)
    lost: list[str] = []

    def lose_the_first_me(route: Any) -> None:
        if not lost and "query Me" in (route.request.post_data or ""):
            lost.append("me")
            route.abort()
        else:
            route.continue_()

    page.route("**/graphql", lose_the_first_me)
    page.reload()
    page.locator("#nav").wait_for(timeout=20000)  # shown once `me` is answered
    assert lost == ["me"] and page.get_by_role("button", name="Sign out").is_visible()
    page.get_by_role("heading", name="Inbox", level=1).wait_for()


def test_a_page_whose_who_am_i_fails_for_good_still_offers_sign_out(tab: Tab, world: World) -> None:
    """A fault of the service's (no JSON) in answer to `me`, asked again
    with the page, left an error page with no way to sign out (review24)."""
    page = tab.page
    tab.sign_in(world.alice.token)

    def fail_me(route: Any) -> None:
        if "query Me" in (route.request.post_data or ""):
            route.fulfill(status=500, body="oops")
        else:
            route.continue_()

    page.route("**/graphql", fail_me)
    page.reload()
    page.get_by_role("heading", name="Something went wrong").wait_for()
    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("API token").wait_for()
    assert page.evaluate("() => sessionStorage.getItem('waypost.token')") is None
    page.unroute("**/graphql")


def test_a_busy_service_is_asked_again_by_the_page_that_could_not_load(
    tab: Tab, world: World
) -> None:
    """A 503 `unavailable` said "Something went wrong" for good, and on the
    inbox its one link, back to the inbox, changed nothing."""
    page = tab.page
    tab.sign_in(world.alice.token)
    busy = {
        "errors": [{"message": "the database is busy; retry shortly",
                    "extensions": {"code": "unavailable", "retryAfter": 1}}]
    }  # fmt: skip
    page.route("**/graphql", lambda route: route.fulfill(status=503, json=busy))
    page.reload()
    page.locator("main").get_by_text("tries again by itself").wait_for()
    assert page.get_by_role("button", name="Try again").is_visible()
    page.unroute("**/graphql")
    page.get_by_role("heading", name="Inbox", level=1).wait_for(timeout=20000)


def _starting(page: Any) -> None:
    """Every GraphQL request of the page answered as the service answers it
    while it opens its database (http/starting.py: 503, `Retry-After: 1`),
    and the page's WebSocket held open and silent (the page polls), so that
    the page's own retries show (`_asked`)."""
    head, body = public_answer(b"/graphql").split(b"\r\n\r\n", 1)
    status_line, *lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    for name in ("Content-Length", "Connection"):  # the browser's to set
        del headers[name]

    def answer(route: Any) -> None:
        route.fulfill(status=int(status_line.split()[1]), headers=headers, body=body)

    page.route("**/graphql", answer)


# Each GraphQL request the page sends, at the time of the page's own clock
# (`page.clock`, moved by hand: its retries' gaps are what its timers made,
# not the real time the test took to move them), in `window.asked`; and when
# its answer came, in `window.answered` (a request sent while the clock is
# moved on is answered once it has moved, up to a step later on that clock:
# a retry's wait is counted from the answer, as the page counts it).
_COUNT_ASKED = """() => { window.asked = []; window.answered = []; const send = window.fetch;
  window.fetch = function (input, init) {
    if (!String(input).endsWith('/graphql')) return send.call(this, input, init);
    const n = window.asked.push(Date.now()) - 1;
    return send.call(this, input, init).then((response) => {
      window.answered[n] = Date.now(); return response; }); }; }"""


def _asked(page: Any) -> list[int]:
    """The times (ms, the page's clock) of the page's GraphQL requests since
    `_COUNT_ASKED` ran on it."""
    return list(page.evaluate("() => window.asked"))


def _waits(page: Any) -> list[int]:
    """How long (ms, the page's clock) the page waited from each answer to
    its next request."""
    asked, answered = page.evaluate("() => [window.asked, window.answered]")
    return [a - b for a, b in zip(asked[1:], answered, strict=False)]


def _polling(page: Any) -> None:
    """The page's WebSocket opened but never acknowledged: the page polls."""
    page.route_web_socket(re.compile(r".*/graphql$"), lambda ws: None)


def test_a_page_loaded_while_the_service_starts_comes_when_it_is_ready(
    tab: Tab, world: World
) -> None:
    """A page that could not load while the service started backed off
    (2, 4, 8, 16 s) past the end of the start: the service's `Retry-After: 1`
    now sets the next try, and the page comes within about a second. The
    start's seconds pass on the page's clock, moved by hand a quarter of a
    second at a time, and each wait from an answer to the next try is
    measured on it (a try sooner than the service said shows as one under
    a second)."""
    page = tab.page
    page.clock.install()
    _polling(page)
    tab.sign_in(world.alice.token)
    page.add_init_script(script=f"({_COUNT_ASKED})()")  # from the reload on
    _starting(page)
    page.reload()
    page.locator("main").get_by_text("tries again by itself").wait_for()
    # the old back-off's next try: 30 s after the first
    _move_clock(page, 15000, step=250, pause=40)
    starting, waits = _asked(page), _waits(page)
    page.unroute("**/graphql")
    ready = page.evaluate("() => Date.now()")
    inbox = page.get_by_role("heading", name="Inbox", level=1)
    _move_clock(page, 3000, lambda: inbox.count() > 0, "the inbox, the start over", 250, 40)
    assert page.evaluate("() => Date.now()") - ready <= 3000
    # asked again as often as it said, and no sooner
    assert len(starting) >= 10 and min(waits) > 900, waits


def test_an_answer_refused_while_the_service_starts_is_asked_for_again(
    tab: Tab, world: World
) -> None:
    """An answer refused while the service started kept "the service is
    starting" under the form for good, and the page's refreshes backed off
    (8, 16 s) past the start's end: the refresh now tries again when the
    service said, and once it answers the form says to press again. The
    start's seconds pass on the page's clock, moved by hand (as above)."""
    tab.page.clock.install()
    page, decision_id = _half_answered(
        tab, world, "Restart the queue workers?", "After the deploy window.", polling=True
    )
    status = page.locator("#live-status")
    page.evaluate(_COUNT_ASKED)
    _starting(page)
    page.get_by_role("button", name="Deny: Proceed").click()
    page.locator("main").get_by_text("the service is starting").wait_for()
    # the page's refresh fails too
    _move_clock(page, 10000, status.is_visible, "the refresh's failure", 250, 40)
    # the old back-off's next try: 28 s after the answer
    _move_clock(page, 13000, step=250, pause=40)
    starting, waits = _asked(page), _waits(page)
    page.unroute("**/graphql")
    again = page.locator("main").get_by_text("The service answers again.")
    ready = page.evaluate("() => Date.now()")
    _move_clock(page, 4000, lambda: again.count() > 0, "the form's retake", 250, 40)
    # its next refresh within the service's second, and the form's retake a
    # second after that answer
    assert page.evaluate("() => Date.now()") - ready <= 3000
    status.wait_for(state="hidden", timeout=1000)
    assert "Press your choice again" in again.inner_text()
    # the refresh asked about once a second meanwhile, and no sooner
    assert len(starting) >= 12 and min(waits[1:]) > 900, waits  # after the answer itself
    page.get_by_role("button", name="Deny: Proceed").click()
    page.locator("main").get_by_text("Your answer is recorded").wait_for()
    assert world.decision(decision_id)["current"]["answer"]["disposition"] == "deny"


def test_an_answer_refused_for_a_busy_lock_keeps_its_words(tab: Tab, world: World) -> None:
    """While another process holds the write lock, reads are answered and
    writes refused: the form said "The service answers again, press again"
    at the next answered read, and pressing again was refused the same way
    (consolereview27)."""
    page, _ = _half_answered(
        tab, world, "Vacuum the database now?", "Not during business hours.", polling=True
    )
    busy = {"errors": [{"message": "the database is busy; retry shortly",
                        "extensions": {"code": "unavailable", "retryAfter": 1}}]}  # fmt: skip
    reads: list[str] = []

    def refuse_writes(route: Any) -> None:
        if "decisionAnswer" in (route.request.post_data or ""):
            route.fulfill(status=200, headers={"Retry-After": "1"}, json=busy)
        else:
            reads.append(route.request.post_data or "")
            route.continue_()

    page.route("**/graphql", refuse_writes)
    page.get_by_role("button", name="Deny: Proceed").click()
    page.locator("main").get_by_text("the database is busy").wait_for()
    answered = len(reads)
    for _ in range(100):  # the page's next refresh, a read the service answers
        if len(reads) > answered:
            break
        page.wait_for_timeout(100)
    page.wait_for_timeout(1500)  # the form's retake came a second after such an answer
    assert len(reads) > answered
    text = page.locator("main").inner_text()
    assert "the database is busy" in text and "The service answers again" not in text
    page.unroute("**/graphql")


def test_every_generation_of_a_decision_reopened_past_a_page(tab: Tab, world: World) -> None:
    decision = world.open_decision(world.agent, question="Again?", task_ids=[world.tasks["docs"]])
    path = f"/api/v1/projects/demo/decisions/{decision}/reopen"
    for generation in range(1, 106):
        world.alice.send("POST", path, {"expected_generation": generation, "rationale": "Again."})
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision}")
    page.get_by_role("heading", name="Every generation").wait_for()
    page.get_by_role("heading", name="Generation 1", exact=True).wait_for()
    assert page.locator("ol.history > li").count() == 106


def test_the_keyboard_lands_where_the_next_step_is(tab: Tab, world: World) -> None:
    """ "Load more" on the last page hid itself with the focus on it (focus
    fell to <body>), and a refused expiry put the focus in the rationale."""
    world.alice.send("POST", "/api/v1/projects", {"id": "many", "name": "Many"}, 201)
    for n in range(27):
        world.alice.send("POST", "/api/v1/projects/many/knowledge",
                         {"kind": "fact", "title": f"Fact {n:02d}", "body": "b"}, 201)  # fmt: skip
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/many/knowledge")
    page.get_by_role("button", name="Load more").click()
    page.get_by_role("link", name="Fact 00").wait_for()
    assert page.evaluate("() => document.activeElement.textContent") == "Fact 01"

    decision = world.open_decision(world.agent, question="Expire?", task_ids=[world.tasks["docs"]])
    world.admin.send("POST", f"/api/v1/projects/demo/decisions/{decision}/answer", {
        "expected_generation": 1, "disposition": "defer", "answer": "Stop",
        "rationale": "Later."})  # fmt: skip
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision}")
    page.get_by_text("Reopen to ask again").click()
    page.get_by_label("Why reopen (required)").fill("Ask again.")
    page.get_by_label("New expiry (your local time)").fill("2020-01-01T00:00")
    page.get_by_role("button", name="Reopen", exact=True).click()
    page.locator("main").get_by_text("Set an expiry in the future").wait_for()
    assert page.evaluate("() => document.activeElement.type") == "datetime-local"


def test_an_inbox_too_large_for_one_query_loads_project_by_project(
    browser: Any, tmp_path: Path
) -> None:
    """Past the service's object limit (here 50) the whole inbox is refused as
    one query (two projects of one decision count 78); the console then asks
    for it project by project (37 each), and shows all of it. A project too
    large even alone (three decisions) is a notice naming it, with links to
    its lists: its refusal blanked the whole inbox, every project's."""
    with serve(tmp_path, "--graphql-max-objects", "50") as served:
        alice = admin_principal(served, "human", "Alice")
        for name, decisions in (("crowded", 3), ("north", 1), ("south", 1)):
            alice.send("POST", "/api/v1/projects", {"id": name, "name": name.title()}, 201)
            task = alice.send(
                "POST", f"/api/v1/projects/{name}/tasks", {"title": f"Ship {name}"}, 201
            )
            for n in range(decisions):
                alice.send("POST", f"/api/v1/projects/{name}/decisions", {
                    "question": f"Ship the {name} build now? ({n})", "options": ["Ship", "Hold"],
                    "rationale": "r", "required_actor": "human", "task_ids": [task["id"]],
                    "environment": "production"}, 201)  # fmt: skip
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(15000)
        sent: list[str] = []
        page.on("request", lambda r: sent.append(r.post_data or "") if r.method == "POST" else None)
        try:
            page.goto(served.url + "/")
            page.get_by_label("API token").fill(alice.token)
            page.get_by_role("button", name="Sign in").click()
            page.get_by_role("heading", name="Inbox", level=1).wait_for()
            for name in ("north", "south"):
                awaiting = page.locator("[data-group=awaiting]")
                awaiting.get_by_text(f"Ship the {name} build now? (0)").wait_for()
            asked = [s for s in sent if "query InboxProject(" in s]
            assert len(asked) == 3, sent
            crowded = page.get_by_role("region", name="Crowded (crowded)")
            crowded.get_by_text("is not listed here").wait_for()
            assert crowded.locator("[data-group]").count() == 0
            link = crowded.get_by_role("link", name="decisions awaiting an answer")
            assert link.get_attribute("href") == "#/p/crowded/decisions?status=PENDING"
            link.click()
            page.get_by_text("Ship the crowded build now? (2)").wait_for()
            # back in the inbox within the minute: the others are asked for
            # again, the crowded one is not (each refusal cost the service
            # its work up to the limit, on every refresh)
            page.goto(served.url + "/console#/")
            awaiting = page.locator("[data-group=awaiting]")
            awaiting.get_by_text("Ship the south build now? (0)").wait_for()
            page.get_by_role("region", name="Crowded (crowded)").get_by_text(
                "is not listed here"
            ).wait_for()
            asked = [s for s in sent if "query InboxProject(" in s]
            assert [s for s in asked if '"crowded"' in s] == asked[:1], asked
            assert len(asked) == 5, asked
        finally:
            context.close()


def test_an_error_page_shows_its_message_and_no_stray_text(tab: Tab, world: World) -> None:
    """A part left out of the page (the retry hint, for errors other than
    the network's) was rendered as the text "null"."""
    page = tab.page
    tab.sign_in(world.alice.token)
    # a project that is not there reads as on its policy page (the knowledge
    # page said "Something went wrong" and "No project nope.")
    for path in ("knowledge", "policy"):
        page.goto(f"{tab.origin}/console#/")  # another page between: the same heading twice
        page.get_by_role("heading", name="Inbox", exact=True).wait_for()
        page.goto(f"{tab.origin}/console#/p/nope/{path}")
        page.get_by_role("heading", name="No such project").wait_for()
    # a fault of the service's
    failing = {"errors": [{"message": "internal error", "extensions": {"code": "internal"}}]}
    page.route("**/graphql", lambda route: route.fulfill(status=200, json=failing))
    page.goto(tab.origin + "/console#/p/demo/knowledge")
    page.get_by_role("heading", name="Something went wrong").wait_for()
    page.unroute("**/graphql")
    text = page.locator("main").inner_text()
    assert "Back to the inbox" in text
    assert "null" not in text.split()


def test_a_page_that_loads_late_does_not_replace_the_next_one(tab: Tab, world: World) -> None:
    """A slow answer for the page left behind replaced the page followed to
    after it (each page load drew itself when its answer came)."""
    page = tab.page
    tab.sign_in(world.alice.token)
    held: list[Any] = []

    def hold_policy(route: Any) -> None:
        if "policyHistory" in (route.request.post_data or ""):
            held.append(route)  # answered only once the next page is drawn
        else:
            route.continue_()

    page.route("**/graphql", hold_policy)
    page.goto(f"{tab.origin}/console#/p/demo/policy")
    _wait_for_held(page, held, "the policy page asked nothing")
    page.goto(f"{tab.origin}/console#/p/demo/knowledge")
    page.get_by_role("heading", name="Knowledge · Demo shop").wait_for()
    held[0].continue_()
    page.wait_for_timeout(1000)
    assert page.locator("h1").inner_text() == "Knowledge · Demo shop"
    # nor the sign-in form, when one comes late after signing out
    held.clear()
    page.goto(f"{tab.origin}/console#/p/demo/policy")
    for _ in range(100):
        if held:
            break
        page.wait_for_timeout(100)
    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("API token").wait_for()
    held[0].continue_()
    page.wait_for_timeout(1000)
    page.unroute("**/graphql")
    assert page.get_by_label("API token").is_visible()
    assert page.locator("h1", has_text="Policy").count() == 0


def test_an_inbox_of_many_projects_shows_every_one_and_polls(browser: Any, tmp_path: Path) -> None:
    """52 projects: the inbox stopped at the first 50 without a word, and
    subscribed to every project while a token holds 16 streams, so the
    service refused the 17th and the page reconnected every few seconds."""
    with serve(tmp_path, "--sweep-interval", "60") as served:
        alice = admin_principal(served, "human", "Alice")
        agent = admin_principal(served, "agent", "builder")
        for n in range(52):
            alice.send("POST", "/api/v1/projects", {"id": f"p{n:02d}", "name": f"P {n}"}, 201)

        def ask(project: str, question: str) -> str:
            task = alice.send("POST", f"/api/v1/projects/{project}/tasks", {"title": "t"}, 201)
            body = {"question": question, "rationale": "r", "required_actor": "human",
                    "environment": "staging", "options": ["Yes", "No"],
                    "task_ids": [task["id"]]}  # fmt: skip
            return str(agent.send("POST", f"/api/v1/projects/{project}/decisions", body, 201)["id"])

        last = ask("p51", "Asked in the last project?")
        context = browser.new_context(viewport={"width": 1000, "height": 900})
        page = context.new_page()
        page.set_default_timeout(15000)
        sockets: list[str] = []
        page.on("websocket", lambda ws: sockets.append(ws.url))
        try:
            tab = Tab(page, served.url, [], [])
            page.clock.install()  # the poll's seconds pass on the page's clock
            tab.sign_in(alice.token)
            page.locator(f"[data-decision='{last}']").wait_for()
            assert page.locator("section.project").count() == 52
            # a decision opened elsewhere still shows, through the poll
            later = ask("p00", "Seen through the poll?")
            seen = page.locator(f"[data-decision='{later}']")
            _move_clock(page, 20000, lambda: seen.count() > 0, "the poll's look")
            assert page.evaluate("document.documentElement.dataset.live") == "poll"
            assert sockets == []
        finally:
            context.close()


def test_a_link_with_a_broken_escape_is_not_found(tab: Tab, world: World) -> None:
    """decodeURIComponent threw: a fresh tab stayed on "Loading..." for ever,
    one signed in kept the previous page, and the script failed."""
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(tab.origin + "/console#/p/demo/d/%E0%A4%A")
    page.get_by_role("heading", name="Not found", level=1).wait_for()
    # the tab fixture asserts that no script failed


def test_a_token_the_browser_cannot_send_is_not_accepted(tab: Tab, world: World) -> None:
    """A header holds no such characters: fetch refused it and the form said
    "The service cannot be reached"."""
    page = tab.page
    page.goto(tab.origin + "/")
    page.get_by_label("API token").fill("wp_ü日本🚀")
    page.get_by_role("button", name="Sign in").click()
    page.locator("main").get_by_text("That token was not accepted").wait_for()
    assert "cannot be reached" not in page.locator("main").inner_text()


def _stale_in_alices_tab(tab: Tab, world: World, title: str, **asked: Any) -> tuple[Any, str]:
    """A decision on a new task titled `title`, made stale by an edit of the
    title, open in Alice's tab at its reopen form."""
    made = world.alice.send("POST", "/api/v1/projects/demo/tasks", {"title": title}, 201)
    decision_id = world.open_decision(world.agent, task_ids=[made["id"]], **asked)
    world.alice.send("PATCH", f"/api/v1/projects/demo/tasks/{made['id']}",
                     {"expected_revision": 1, "title": f"{title} (edited)"})  # fmt: skip
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision_id}")
    page.get_by_role("heading", name="Why it is stale").wait_for()
    return page, decision_id


def _pending_in_alices_tab(tab: Tab, world: World, question: str) -> tuple[Any, str]:
    """A pending decision asking `question` (on the docs task), open in
    Alice's tab at its answer form."""
    decision_id = world.open_decision(
        world.agent, question=question, task_ids=[world.tasks["docs"]]
    )
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision_id}")
    page.get_by_role("heading", name="Answer", exact=True).wait_for()
    return page, decision_id


def test_a_reopen_refused_for_a_field_names_it_and_focuses_it(tab: Tab, world: World) -> None:
    """The raw validator text came back ("Expected `str` of length <= 1000")
    and the keyboard went to "Why reopen" whatever the field."""
    page, decision = _stale_in_alices_tab(tab, world, "Tag release 9", question="Tag it now?")
    page.get_by_label("Why reopen (required)").fill("Release 10 replaces 9.")
    page.get_by_label("Conditions").fill("fine\n" + "x" * 1001)
    page.get_by_role("button", name="Reopen").click()
    page.locator("main").get_by_text("Conditions: at most 50 lines").wait_for()
    assert "Expected" not in page.locator(".form-error").inner_text()
    assert page.evaluate("() => document.activeElement.tagName") == "TEXTAREA"
    assert page.evaluate("() => document.activeElement.labels[0].textContent") == "Conditions"
    assert world.decision(decision)["status"] == "stale"


def test_text_boxes_count_characters_as_the_service_does(tab: Tab, world: World) -> None:
    """docs/console.md: a box stops at the service's limit, which counts
    characters (code points); `maxlength` counts UTF-16 units, two for an
    emoji. A valid environment of 150 emoji read as too long once edited, and
    its reopen did not send; a tag filter of 40 emoji was cut to 32; and the
    filter trimmed a tag whose spaces the service keeps, finding nothing."""
    rocket = "\U0001f680"
    page, decision_id = _stale_in_alices_tab(
        tab, world, "Launch the probe", question="Launch now?", environment=rocket * 150
    )
    page.get_by_label("Why reopen (required)").fill("One rocket fewer.")
    environment = page.get_by_label("Environment")
    environment.press("End")
    environment.press("Backspace")
    page.get_by_role("button", name="Reopen", exact=True).click()
    page.locator("main").get_by_text("Reopened: generation 2 awaits an answer.").wait_for()
    assert world.decision(decision_id)["current"]["environment"] == rocket * 149

    title = "Probe launch checklist"
    world.alice.send("POST", "/api/v1/projects/demo/knowledge", {
        "kind": "fact", "title": title, "body": "Count down.",
        "tags": [rocket * 40, "spaced  twice"]}, 201)  # fmt: skip
    page.goto(f"{tab.origin}/console#/p/demo/knowledge")
    tag = page.get_by_label("Tag")
    tag.fill(rocket * 70)
    assert tag.input_value() == rocket * 64  # the box stops at 64 characters
    tag.press("Home")
    tag.press_sequentially("XY")  # typed into a full box: dropped, not its end
    assert tag.input_value() == rocket * 64
    tag.press("End")
    tag.press("Backspace")  # room for one character: the first typed goes in
    tag.press_sequentially("XY")
    assert tag.input_value() == rocket * 63 + "X"
    for value in (rocket * 40, "spaced  twice"):  # sent as typed: spaces not collapsed
        # the links shown so far are marked: the filter's answer has new ones
        page.evaluate("() => document.querySelectorAll('main a').forEach((a) => a.dataset.old = 1)")
        page.get_by_label("Tag").fill(value)
        page.get_by_role("button", name="Filter").click()
        page.locator("main a:not([data-old])", has_text=title).wait_for()
        assert "1 record(s) shown" in page.locator("main").inner_text(), value


def test_filters_the_service_refuses_are_said_beside_the_form(tab: Tab, world: World) -> None:
    """The whole page was replaced by "Something went wrong" (the tag's
    refusal in the validator's words), and the filter form was lost."""
    page = tab.page
    tab.sign_in(world.alice.token)
    for query, says in (
        ("tag=" + "t" * 65, "Tag: at most 64 characters."),
        ("q=" + "+".join(["word"] * 33), "Words: at most 1,024 bytes and 32 words"),
    ):
        page.goto(f"{tab.origin}/console#/p/demo/knowledge?{query}")
        page.locator("main").get_by_text(says).wait_for()
        assert page.get_by_role("heading", name="Something went wrong").count() == 0
        assert page.get_by_role("button", name="Filter").is_visible()
    # the form still works: a fixed filter lists again
    page.get_by_label("Words").fill("")
    page.get_by_label("Tag").fill("")
    page.get_by_role("button", name="Filter").click()
    page.locator("main").get_by_text("These filters were refused").wait_for(state="detached")
    counted = re.compile(r"record\(s\) shown|No record matches these filters")
    page.locator("main").get_by_text(counted).wait_for()


def test_a_tag_with_blank_ends_stored_before_the_rules_is_filtered_as_typed(
    tab: Tab, world: World
) -> None:
    """docs/console.md: the tag filter is sent exactly as typed, spaces around
    it included, so a record stored before the service refused a tag's blank
    ends is still found by its tag (one of "  spaced  " was sent as "spaced"
    and matched nothing)."""
    title = "Legacy spaced tag record"
    body = {"kind": "fact", "title": title, "body": "Kept from before.", "tags": ["legacy"]}
    made = world.alice.send("POST", "/api/v1/projects/demo/knowledge", body, 201)
    with sqlite3.connect(world.served.db) as conn:  # as an earlier build left the row
        conn.execute(
            "UPDATE knowledge SET tags = ? WHERE id = ?", (json.dumps(["  spaced  "]), made["id"])
        )
    conn.close()
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/knowledge")
    page.locator("main").get_by_text(re.compile(r"record\(s\) shown")).wait_for()
    # the links shown so far are marked: the filter's answer has new ones
    page.evaluate("() => document.querySelectorAll('main a').forEach((a) => a.dataset.old = 1)")
    page.get_by_label("Tag", exact=True).fill("  spaced  ")
    page.get_by_role("button", name="Filter").click()
    page.locator("main a:not([data-old])", has_text=title).wait_for(timeout=10000)
    assert "1 record(s) shown" in page.locator("main").inner_text()


def test_an_answer_given_just_now_reads_as_past(tab: Tab, world: World) -> None:
    """The service's now is learned from a reply that arrives a moment after
    it was made, so it runs a little behind: an answer recorded just now read
    "in less than a minute". Here the service's clock moves 3 seconds on
    between the inbox (where the console learns it) and the answer (and
    stays there: moving it back would make later records older than this)."""
    made = world.alice.send("POST", "/api/v1/projects/demo/tasks", {"title": "Purge the CDN"}, 201)
    decision = world.open_decision(world.agent, question="Purge it now?", task_ids=[made["id"]])
    page = tab.page
    tab.sign_in(world.alice.token)
    world.served.set_clock(hours=44, minutes=1, seconds=3)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision}")
    page.get_by_role("heading", name="Purge it now?").wait_for()
    page.get_by_label("Why (required)").fill("Nothing depends on the cache.")
    for box in page.get_by_role("checkbox").all():
        box.check()  # the environment, vouched for by an allow
    page.get_by_role("button", name="Allow: Proceed").click()
    page.locator("main").get_by_text("Your answer is recorded").wait_for()
    text = page.locator("main").inner_text()
    assert "less than a minute ago" in text and "in less than a minute" not in text


def test_a_decision_proceeded_by_timeout_is_shown_as_it_is_now(tab: Tab, world: World) -> None:
    """The digest lists what a timeout answered in the last 7 days as it is
    now (docs/decisions.md): one a human reopened and denied since read
    "Allowed with ... by timeout" and "Affects:" though it blocked its task
    (digestaudit). The service's answer for the states a real world reached
    (reopened and denied; reopened and unanswered; gone stale) is played to
    the page over the module's own decision, which stays as it is."""
    page = tab.page
    timed = world.decisions["timed"]
    now: dict[str, Any] = {}

    def as_now(route: Any) -> None:
        response = route.fetch()
        body = response.json()
        if now and "proceededByTimeout" in (route.request.post_data or ""):
            for decision in _decisions_in(body):
                if decision.get("restId") == timed and "current" in decision:
                    decision["status"] = now["status"]
                    decision["current"]["answer"] = now["answer"]
        route.fulfill(response=response, body=json.dumps(body))

    page.route("**/graphql", as_now)
    tab.sign_in(world.alice.token)
    card = page.locator(f"section[aria-labelledby=proj-demo] [data-group=proceeded] "
                        f"[data-decision='{timed}']")  # fmt: skip
    card.get_by_text("Affects: ").wait_for()  # as it is: allowed by the timeout
    assert 'Allowed with "Default schedule" by timeout' in card.inner_text()
    at = world.decision(timed)["current"]["answer"]["at"]
    alice = {"name": "Alice", "kind": "HUMAN"}
    denied = {"disposition": "DENY", "answer": "Wait", "timedOut": False, "at": at, "actor": alice}
    by_timeout = {"disposition": "ALLOW", "answer": "Default schedule", "timedOut": True,
                  "at": at, "actor": alice}  # fmt: skip
    allowed = {"disposition": "ALLOW", "answer": "Now", "timedOut": False, "at": at, "actor": alice}
    reopen_first = "it takes a reopen before an answer."
    for status, answer, said, label in (
        ("DENIED", denied, 'Timed out, then reopened and answered deny: "Wait"', "Blocks: "),
        ("PENDING", None, "Timed out, then reopened: it awaits an answer.", "Blocks: "),
        ("STALE", by_timeout, "(attributed to Alice); it no longer applies.", "Blocks: "),
        # allowed by a person since, it blocks none of its tasks (review67)
        ("ALLOWED", allowed, 'Timed out, then reopened and answered allow: "Now"', "Affects: "),
        # not answerable until reopened again: it does not "await an answer"
        ("EXPIRED", None, f"Timed out, then reopened, and now expired: {reopen_first}", "Blocks: "),
        ("STALE", None, f"Timed out, then reopened, and now stale: {reopen_first}", "Blocks: "),
    ):  # fmt: skip
        now.update(status=status, answer=answer)
        page.reload()
        card.get_by_text(said).wait_for()
        text = card.inner_text()
        assert label in text and ({"Blocks: ", "Affects: "} - {label}).pop() not in text, text
        assert card.locator(f".badge-{status.lower()}").inner_text() == status.lower()
    page.unroute("**/graphql")


def _decisions_in(body: Any) -> Iterator[dict[str, Any]]:
    """Every object of a GraphQL answer that has a `restId` (decisions among them)."""
    stack = [body]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "restId" in item:
                yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def test_the_inbox_says_when_it_lists_only_part_of_a_group(tab: Tab, world: World) -> None:
    """55 answered decisions gone stale showed as "(50)" with no word of the
    rest, and a task blocked by 21 decisions named 20 as if that were all."""
    alice, agent = world.alice, world.agent
    alice.send("POST", "/api/v1/projects", {"id": "crowd", "name": "Crowd"}, 201)
    base = {"rationale": "r", "required_actor": "human", "environment": "e",
            "options": ["Go", "Stop"]}  # fmt: skip
    answer = {"expected_generation": 1, "disposition": "deny", "answer": "Stop",
              "rationale": "Not now."}  # fmt: skip
    for i in range(55):
        task = alice.send("POST", "/api/v1/projects/crowd/tasks", {"title": f"t{i}"}, 201)["id"]
        made = agent.send("POST", "/api/v1/projects/crowd/decisions",
                          {**base, "question": f"Stale {i}?", "task_ids": [task]}, 201)  # fmt: skip
        alice.send("POST", f"/api/v1/projects/crowd/decisions/{made['id']}/answer", answer)
        alice.send("PATCH", f"/api/v1/projects/crowd/tasks/{task}",
                   {"expected_revision": 1, "title": f"t{i} edited"})  # fmt: skip
    crowded = alice.send("POST", "/api/v1/projects/crowd/tasks", {"title": "Crowded"}, 201)["id"]
    for i in range(21):
        agent.send("POST", "/api/v1/projects/crowd/decisions",
                   {**base, "question": f"Block {i}?", "task_ids": [crowded]}, 201)  # fmt: skip
    page = tab.page
    tab.sign_in(alice.token)
    reopen = page.locator("section[aria-labelledby=proj-crowd] [data-group=reopen]")
    reopen.get_by_text("50 of 55 are listed").wait_for()
    # each group a region of its own name: two projects' "Timing out soon"
    # were two regions of one name (axe: landmark-unique)
    names = page.evaluate("""() => [...document.querySelectorAll('section.group')].map((s) =>
        s.getAttribute('aria-labelledby').split(' ').map((id) =>
            document.getElementById(id).textContent).join(' · '))""")
    assert len(names) > 5 and len(set(names)) == len(names), names
    assert "(50+)" in reopen.inner_text()
    card = page.locator(f"[data-task='{crowded}']")
    assert "and more (the project's decisions)" in card.inner_text()

    # the rest are on the project's decisions page, 25 at a time (it named
    # an API route where the console had no such page)
    reopen.get_by_role("link", name="every stale decision").click()
    page.get_by_role("heading", name="Decisions · Crowd", level=1).wait_for()
    page.get_by_text("25 decision(s) shown.").wait_for()
    more = page.get_by_role("button", name="Load more")
    # a page that cannot be fetched says so beside the button, which keeps
    # the keyboard for another try (an uncaught error, focus on <body>)
    page.route("**/graphql", lambda route: route.abort())
    more.focus()
    page.keyboard.press("Enter")
    page.locator("main [role=alert]").get_by_text("cannot be reached").wait_for()
    assert page.evaluate("() => document.activeElement.textContent") == "Load more"
    page.unroute("**/graphql")
    more.click()
    page.get_by_text("50 decision(s) shown.").wait_for()
    assert page.locator("main [role=alert]").count() == 0
    more.click()
    page.get_by_text("55 decision(s) shown.").wait_for()
    assert more.is_hidden()
    cards = page.locator("main article.card")
    assert cards.count() == 55 and "Stale 54?" in cards.last.inner_text()
    # the cards' headings come right under the page's h1 (axe: heading-order)
    assert page.get_by_role("heading", name="Stale 0?", level=2).count() == 1
    # the first of the last page has the keyboard (the button it pressed is gone)
    assert page.evaluate("() => document.activeElement.textContent") == "Stale 50?"
    # every status, the blocked task's card's own link
    page.go_back()
    card.get_by_role("link", name="the project's decisions").click()
    page.get_by_text("25 decision(s) shown.").wait_for()
    assert page.get_by_label("Status").input_value() == ""
    page.get_by_label("Status").select_option("PENDING")
    page.get_by_role("button", name="Filter").click()
    page.get_by_text("21 decision(s) shown.").wait_for()
    assert "status=PENDING" in page.url
    page.set_viewport_size({"width": 360, "height": 740})  # a phone, or 200% zoom
    _accessible_and_narrow(page)


def test_the_inbox_counts_and_lists_what_awaits_an_answer_past_its_first_page(
    tab: Tab, world: World
) -> None:
    """With 230 pending decisions the summary read "200 awaiting an answer"
    beside a group headed "(200+)"; and once 200 older ones had gone stale, a
    fresh question was not listed at all ("Nothing awaits an answer"): the
    group came from the digest's unanswered list, stale ones and all, cut at
    200 (consolefast)."""
    alice, agent = world.alice, world.agent
    alice.send("POST", "/api/v1/projects", {"id": "heaps", "name": "Heaps"}, 201)
    task = alice.send("POST", "/api/v1/projects/heaps/tasks", {"title": "Busy"}, 201)["id"]
    ask = {"options": ["Go", "Stop"], "rationale": "r", "required_actor": "human",
           "environment": "e"}  # fmt: skip
    for i in range(201):
        agent.send("POST", "/api/v1/projects/heaps/decisions",
                   {**ask, "question": f"Heap {i}?", "task_ids": [task]}, 201)  # fmt: skip
    page = tab.page
    tab.sign_in(alice.token)
    section = page.locator("section[aria-labelledby=proj-heaps]")
    summary = section.locator("> p.muted").first
    summary.get_by_text("201 awaiting an answer").wait_for()
    awaiting = section.locator("[data-group=awaiting]")
    assert "(100+)" in awaiting.inner_text()
    assert "Only the first 100 are listed" in awaiting.inner_text()
    assert awaiting.locator("[data-decision]").count() == 100
    # and the page that lists every one
    awaiting.get_by_role("link", name="every one awaiting an answer").click()
    page.get_by_role("heading", name="Decisions · Heaps", level=1).wait_for()
    assert page.get_by_label("Status").input_value() == "PENDING"
    page.get_by_text("25 decision(s) shown.").wait_for()

    # all 201 go stale (what they judged changed), then one fresh question
    alice.send("PATCH", f"/api/v1/projects/heaps/tasks/{task}",
               {"expected_revision": 1, "title": "Busy, renamed"})  # fmt: skip
    other = alice.send("POST", "/api/v1/projects/heaps/tasks", {"title": "Calm"}, 201)["id"]
    fresh = agent.send("POST", "/api/v1/projects/heaps/decisions",
                       {**ask, "question": "Fresh?", "task_ids": [other]}, 201)["id"]  # fmt: skip
    page.goto(f"{tab.origin}/console#/")
    summary.get_by_text("1 awaiting an answer").wait_for()
    awaiting.locator(f"[data-decision='{fresh}']").wait_for()
    assert "Nothing awaits an answer" not in awaiting.inner_text()
    reopen = section.locator("[data-group=reopen]")
    reopen.get_by_text("50 of 201 are listed").wait_for()


def test_how_long_ago_follows_the_services_clock_not_the_browsers(
    browser: Any, world: World
) -> None:
    """The page learned the service's now from the inbox only: a decision
    opened from a link in a browser whose clock ran 3 hours fast said it was
    asked "3 h ago" (and a reversible one's timeout seemed 3 hours nearer).
    Every GraphQL answer now carries the service's now (`Waypost-Now`)."""
    made = world.alice.send("POST", "/api/v1/projects/demo/tasks", {"title": "Skewed"}, 201)
    decision = world.open_decision(world.agent, question="Asked just now?", task_ids=[made["id"]])
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15000)
    try:
        page.clock.set_system_time(datetime.now(UTC) + timedelta(hours=3))
        page.goto(f"{world.served.url}/console#/p/demo/d/{decision}")
        page.get_by_label("API token").fill(world.alice.token)
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("heading", name="Asked just now?").wait_for()
        asked = page.locator("main").inner_text()
        assert "builder-7 (agent), less than a minute ago" in asked, asked
    finally:
        context.close()
    r = httpx.post(world.served.url + "/graphql", headers=world.alice.headers(),
                   json={"query": "{ me { name } }"})  # fmt: skip
    assert r.headers["waypost-now"].endswith("Z")


def test_a_reopen_keeps_pins_nobody_edited_and_says_why_the_rules_stale_it(
    tab: Tab, world: World
) -> None:
    """A condition holding a newline showed as two lines of the box, and an
    environment's newline was dropped by its input: a reopen that touched
    neither sent both, rewritten (an environment is one line since
    2026-12-05; a reopen sending an earlier one back as it was is taken,
    tests/test_decisions_reopen.py). And a decision staled by a rules edit
    that was later undone said "A pin changed" beside "The rules text is the
    same"."""
    alice = world.alice
    alice.send("POST", "/api/v1/projects", {"id": "pins", "name": "Pins"}, 201)
    made = alice.send("POST", "/api/v1/projects/pins/tasks", {"title": "Rotate certificates"}, 201)
    asked = alice.send("POST", "/api/v1/projects/pins/decisions", {
        "question": "Rotate them tonight?", "options": ["Proceed", "Stop"],
        "rationale": "Needs a human.", "required_actor": "human", "task_ids": [made["id"]],
        "environment": "prod  eu-west", "conditions": ["line1\nline2", "  padded  "],
    }, 201)  # fmt: skip
    pinned = asked["current"]["policy_revision"]
    policy = alice.get("/api/v1/projects/pins/policy")
    for revision, rules in (
        (policy["revision"], "temporary"),
        (policy["revision"] + 1, policy["rules"]),
    ):
        alice.send(
            "PATCH", "/api/v1/projects/pins/policy", {"expected_revision": revision, "rules": rules}
        )
    path = f"/api/v1/projects/pins/decisions/{asked['id']}"
    assert alice.get(path)["status"] == "stale"
    page = tab.page
    tab.sign_in(alice.token)
    page.goto(f"{tab.origin}/console#/p/pins/d/{asked['id']}")
    page.get_by_role("heading", name="Why it is stale").wait_for()
    reasons = page.locator(".reason-box").inner_text()
    assert (
        f"rules changed since policy revision {pinned}: at revision {pinned + 1}, {pinned + 2}"
        in reasons
    )
    assert "reads as it did then" in reasons and "A pin changed" not in reasons
    assert "edited since" in page.locator("section[aria-labelledby=policy-h]").inner_text()
    page.get_by_label("Why reopen (required)").fill("Ask again under the same rules.")
    # a space at its end: the refusal says what an environment must be (it
    # said "give 1 to 200 characters" of one the service refused for that)
    environment = page.get_by_label("Environment", exact=True)
    environment.fill("prod  eu-west ")
    page.get_by_role("button", name="Reopen", exact=True).click()
    refusal = page.get_by_role("alert").filter(has_text="Environment:")
    assert "no space at either end" in refusal.inner_text()
    environment.fill("prod  eu-west")
    page.get_by_role("button", name="Reopen", exact=True).click()
    page.locator("main").get_by_text("Reopened: generation 2 awaits an answer.").wait_for()
    current = alice.get(path)["current"]
    assert current["conditions"] == ["line1\nline2", "  padded  "]
    # its two spaces kept (an environment begins and ends with a character
    # that shows since 2026-12-06: its padding is a condition's here)
    assert current["environment"] == "prod  eu-west"


def test_a_second_change_elsewhere_updates_the_notice(tab: Tab, world: World) -> None:
    """docs/console.md: answered or reopened elsewhere, a notice says so. Once
    shown, it kept its first words: a deny and then a reopening still read
    "now denied, generation 1" over a form for the old generation."""
    page, decision_id = _pending_in_alices_tab(tab, world, "Turn on the new search?")
    path = f"/api/v1/projects/demo/decisions/{decision_id}"
    world.admin.send("POST", f"{path}/answer", {
        "expected_generation": 1, "disposition": "deny", "answer": "Stop",
        "rationale": "Not yet."})  # fmt: skip
    notice = page.locator("#changed-elsewhere")
    page.locator("main").get_by_text("it is now denied, generation 1").wait_for()
    world.admin.send("POST", f"{path}/reopen", {"expected_generation": 1, "rationale": "Again."})
    page.locator("main").get_by_text("it is now pending, generation 2").wait_for()
    assert notice.count() == 1 and "denied" not in notice.inner_text()


def test_a_refresh_that_changes_nothing_leaves_the_inbox_as_it_is(tab: Tab, world: World) -> None:
    """The digest's `generatedAt` (the service's now) is new on every load:
    every refresh redrew the inbox, and a selection (a question being copied)
    was lost every 4 s while polling, every minute with the socket."""
    decision_id = world.open_decision(
        world.agent, question="Copy this question?", task_ids=[world.tasks["docs"]]
    )
    page = tab.page
    tab.sign_in(world.alice.token)
    card = page.locator(f"[data-decision='{decision_id}']").first
    card.wait_for()
    page.evaluate("""(id) => {
        const el = document.querySelector(`[data-decision='${id}']`);
        el.dataset.marked = "before";
        const range = document.createRange();
        range.selectNodeContents(el.querySelector('a'));
        getSelection().removeAllRanges();
        getSelection().addRange(range);
    }""", decision_id)  # fmt: skip
    selected = page.evaluate("() => getSelection().toString()")
    assert selected
    # the service's clock moves on (the digest's `generatedAt` with it), and
    # an event the digest does not show makes the inbox load again
    now = parse_time(world.served.clock.read_text().strip())
    write_clock(world.served.clock, format_time(now + timedelta(seconds=1)))
    with page.expect_response(lambda r: r.url.endswith("/graphql")):
        world.alice.send("POST", "/api/v1/projects/demo/knowledge",
                         {"kind": "fact", "title": "Quiet fact", "body": "b"}, 201)  # fmt: skip
    page.wait_for_timeout(500)  # the answer is read and compared
    assert card.get_attribute("data-marked") == "before"
    assert page.evaluate("() => getSelection().toString()") == selected


def test_a_reopen_that_lost_a_race_keeps_every_box_typed_into(tab: Tab, world: World) -> None:
    """docs/console.md: what you had written stays under "What you wrote". A
    reopening kept only its reason, not the conditions or environment edited."""
    page, decision_id = _stale_in_alices_tab(
        tab, world, "Race me", question="Reopen race?", conditions=["old one"]
    )
    page.get_by_label("Why reopen (required)").fill("Tighten the conditions.")
    page.get_by_label("Environment").fill("production")
    page.get_by_label("Conditions").fill("a fresh backup\nan owner on call")
    path = f"/api/v1/projects/demo/decisions/{decision_id}/reopen"
    world.admin.send("POST", path, {"expected_generation": 1, "rationale": "Mine first."})
    page.get_by_role("button", name="Reopen", exact=True).click()
    page.locator("main").get_by_text("Someone reopened this decision").wait_for()
    kept = page.locator(".notice-conflict details.kept")
    kept.locator("summary").click()
    text = kept.inner_text()
    assert "Tighten the conditions." in text and "production" in text, text
    assert "a fresh backup\nan owner on call" in text, text


def test_long_names_wrap_on_a_phone(tab: Tab, world: World) -> None:
    """docs/console.md: no page scrolls sideways on a phone. A long principal
    name ran out of the header, and a project name without spaces made the
    inbox 2,620 px wide."""
    world.alice.send("POST", "/api/v1/projects",
                     {"id": "wide", "name": "Longproject" * 14}, 201)  # fmt: skip
    person = admin_principal(world.served, "human", "alexandra.konstantinopoulou@example.com")
    page = tab.page
    page.set_viewport_size({"width": 360, "height": 740})
    tab.sign_in(person.token)
    page.get_by_role("heading", name="Longproject" * 14).wait_for()
    _accessible_and_narrow(page)
    box = page.locator("#who-name").bounding_box()
    assert box is not None and box["x"] + box["width"] <= 360, box


def test_a_condition_keeps_its_line_breaks_where_it_is_vouched_for(tab: Tab, world: World) -> None:
    """docs/console.md: conditions show with their own line breaks; the allow
    tick-box's label ran "Backup taken AND\\nNOT restored yet" into one line."""
    decision_id = world.open_decision(
        world.agent, question="Vouch for two lines?", task_ids=[world.tasks["docs"]],
        conditions=["Backup taken AND\nNOT restored yet"],
    )  # fmt: skip
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision_id}")
    label = page.locator("div.check label", has_text="Backup taken AND").first
    label.wait_for()
    assert label.inner_text() == "Condition: Backup taken AND\nNOT restored yet"


def test_the_tabs_title_is_the_pages_heading_whatever_drew_it(tab: Tab, world: World) -> None:
    """WCAG 2.4.2: each route set the title before its page loaded, and a
    picker, "Not found", "No such decision" or a failed load kept the title
    of the page before (the inbox's, a decision's question)."""
    page = tab.page
    tab.sign_in(world.alice.token)
    assert page.title() == "Inbox · Waypost console"
    for route, heading in (
        ("#/nowhere", "Not found"),
        ("#/p/demo/d/dec_none", "No such decision"),
        ("#/p/nope/knowledge", "No such project"),
    ):
        page.goto(f"{tab.origin}/console{route}")
        page.get_by_role("heading", name=heading, level=1).wait_for()
        assert page.title() == f"{heading} · Waypost console"
    page.goto(f"{tab.origin}/console#/p/demo/knowledge")
    page.get_by_role("heading", name=re.compile("^Knowledge · "), level=1).wait_for()
    heading = page.get_by_role("heading", level=1).inner_text()
    assert page.title() == f"{heading} · Waypost console"


def test_a_refusal_is_tied_to_the_field_it_is_about(tab: Tab, world: World) -> None:
    """WCAG 3.3.1: a refusal was one role=alert far below the form, and the
    field the focus went to said nothing of it (no `aria-invalid`, described
    by its hint alone); now it is invalid and described by the refusal, until
    the next try."""
    page, _ = _pending_in_alices_tab(tab, world, "Ship the search index now?")
    page.get_by_role("button", name="Deny: Proceed").click()
    alert = page.locator(".form-error [role=alert]")
    alert.get_by_text("Say why (the rationale is required).").wait_for()
    why = page.get_by_label("Why (required)")
    assert why.evaluate("(el) => el === document.activeElement")
    assert why.get_attribute("aria-invalid") == "true"
    described = why.evaluate(
        "(el) => el.getAttribute('aria-describedby').split(' ')"
        ".map((id) => document.getElementById(id).textContent).join(' | ')"
    )
    assert "Say why (the rationale is required)." in described
    why.fill("Not before the freeze ends.")
    page.get_by_role("button", name="Allow: Proceed").click()
    alert.get_by_text("tick each box first").wait_for()
    assert why.get_attribute("aria-invalid") is None  # the next try cleared it
    assert "Say why" not in (why.get_attribute("aria-describedby") or "")
    box = page.locator("input[type=checkbox]:focus")
    assert box.get_attribute("aria-invalid") == "true"
    # the knowledge filters: the box the refusal names
    page.goto(f"{tab.origin}/console#/p/demo/knowledge?tag=" + "t" * 65)
    page.locator("main").get_by_text("Tag: at most 64 characters.").wait_for()
    tag = page.get_by_label("Tag")
    assert tag.get_attribute("aria-invalid") == "true"
    assert page.get_by_label("Words").get_attribute("aria-invalid") is None


def test_the_pages_own_answer_is_not_announced_as_a_change_elsewhere(
    tab: Tab, world: World
) -> None:
    """The decision's change event came before the page's own redraw (a slow
    reload of the decision), and the watcher announced "This decision
    changed elsewhere" after "Answer recorded", with its banner."""
    if not _offers_subscriptions(world):
        pytest.skip("needs the decision's subscription")
    page, decision_id = _pending_in_alices_tab(tab, world, "Rotate the staging keys today?")
    page.locator("html[data-live=socket]").wait_for(state="attached")
    page.evaluate("""() => { window.said = []; const region = document.getElementById('announce');
      new MutationObserver(() => { if (region.textContent) window.said.push(region.textContent); })
        .observe(region, { childList: true, characterData: true, subtree: true }); }""")

    def slow_reload(route: Any) -> None:
        if "query Decision(" in (route.request.post_data or ""):
            time.sleep(0.8)  # only the page's redraw of the decision is slow
        route.continue_()

    page.route("**/graphql", slow_reload)
    page.get_by_label("Why (required)").fill("Not this week.")
    page.get_by_role("button", name="Deny: Proceed").click()
    page.locator("main").get_by_text("Your answer is recorded").wait_for()
    page.wait_for_timeout(1500)  # the change's event has come and gone
    said = page.evaluate("() => window.said")
    assert "Answer recorded." in said
    assert not [s for s in said if "elsewhere" in s], said
    assert page.locator("#changed-elsewhere").count() == 0
    assert world.decision(decision_id)["status"] == "denied"


def test_each_change_elsewhere_is_said_once(tab: Tab, world: World) -> None:
    """A second change (a reopening after an answer) rewrote the words of the
    banner, a role=status live region, and the announcer said "changed
    elsewhere again" too: a screen reader heard both (consoleux2)."""
    page, decision_id = _pending_in_alices_tab(tab, world, "Shard the events table?")
    page.evaluate("""() => { window.said = []; const region = document.getElementById('announce');
      new MutationObserver(() => { if (region.textContent) window.said.push(region.textContent); })
        .observe(region, { childList: true, characterData: true, subtree: true }); }""")
    path = f"/api/v1/projects/demo/decisions/{decision_id}"
    world.admin.send("POST", f"{path}/answer", {"expected_generation": 1, "disposition": "defer",
                     "answer": "Stop", "rationale": "Later."})  # fmt: skip
    banner = page.locator("#changed-elsewhere")
    banner.wait_for(timeout=70000)
    world.admin.send("POST", f"{path}/reopen", {"expected_generation": 1, "rationale": "Now."})
    banner.get_by_text("generation 2").wait_for(timeout=70000)
    page.wait_for_timeout(300)  # the announcer writes a moment later
    said = page.evaluate("() => window.said")
    assert said == [
        "This decision changed elsewhere: it is now deferred.",
        "This decision changed elsewhere again: it is now pending.",
    ]
    # the banner is seen, not a second voice: no live region holds it
    live = page.evaluate("""() => { let el = document.getElementById('changed-elsewhere');
      for (; el; el = el.parentElement) {
        if (el.role || el.getAttribute('aria-live')) return el.outerHTML.slice(0, 80);
      } return null; }""")
    assert live is None, live


def test_a_reopen_links_name_cuts_the_question_at_a_character(tab: Tab, world: World) -> None:
    """docs/console.md: "Reopen… " and the question's first 120 characters.
    They were 120 UTF-16 units: an emoji across the cut left half a
    surrogate pair in the link's accessible name."""
    question = "a" * 119 + "\U0001f680 launch"
    _stale_in_alices_tab(tab, world, "Launch the rocket", question=question)
    page = tab.page
    page.goto(f"{tab.origin}/console#/")
    # demo's group: a test of this module may have left stale decisions in
    # another project, whose group the page shows too
    page.locator("section[aria-labelledby=proj-demo] [data-group=reopen]").wait_for()
    names = page.evaluate(
        "() => [...document.querySelectorAll('[data-group=reopen] [aria-label^=\"Reopen…\"]')]"
        ".map((el) => el.getAttribute('aria-label'))"
    )
    ours = [n for n in names if n.startswith("Reopen… aaaa")]
    assert ours == ["Reopen… " + "a" * 119 + "\U0001f680…"], ours


def test_an_answer_on_its_way_does_not_hide_changes_to_another_decision(
    tab: Tab, world: World
) -> None:
    """The tab's own answer on its way silenced the watcher for every
    decision: opened meanwhile, another decision answered elsewhere said
    nothing until the minute's safety poll."""
    if not _offers_subscriptions(world):
        pytest.skip("needs the decision's subscription")
    second = world.open_decision(
        world.agent, question="Open the next sprint today?", task_ids=[world.tasks["docs"]]
    )
    page, _ = _pending_in_alices_tab(tab, world, "Close the sprint today?")
    held: list[Any] = []

    def hold_answers(route: Any) -> None:
        if "decisionAnswer" in (route.request.post_data or ""):
            held.append(route)  # on its way until released below
        else:
            route.continue_()

    page.route("**/graphql", hold_answers)
    try:
        page.get_by_label("Why (required)").fill("Not yet.")
        page.get_by_role("button", name="Deny: Proceed").click()
        _wait_for_held(page, held, "the answer never left")
        page.evaluate(f"() => {{ location.hash = '#/p/demo/d/{second}'; }}")
        page.get_by_role("heading", name="Open the next sprint today?").wait_for()
        page.locator("html[data-live=socket]").wait_for(state="attached")
        path = f"/api/v1/projects/demo/decisions/{second}"
        world.admin.send("POST", f"{path}/answer", {
            "expected_generation": 1, "disposition": "deny", "answer": "Stop",
            "rationale": "Not this week."})  # fmt: skip
        page.locator("#changed-elsewhere").wait_for(timeout=10000)
    finally:
        for route in held:
            route.continue_()


def test_a_box_under_its_limit_in_characters_takes_more_emoji(tab: Tab, world: World) -> None:
    """docs/console.md: every box counts code points. A box counted UTF-16
    units while it held at most its limit of them: 32 emoji (64 units) in the
    tag box of 64 characters read as full, and a 33rd was refused."""
    rocket = "\U0001f680"
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/knowledge")
    page.get_by_role("heading", name="Knowledge · Demo shop").wait_for()
    tag = page.get_by_label("Tag")
    tag.fill(rocket * 32)
    tag.press("End")
    tag.press_sequentially(rocket + "X")
    assert tag.input_value() == rocket * 33 + "X"
    tag.fill(rocket * 63)
    tag.press("End")
    tag.press_sequentially("XY")  # room for one: the first typed goes in
    assert tag.input_value() == rocket * 63 + "X"


def test_combining_marks_in_record_text_stay_in_their_own_box(tab: Tab, world: World) -> None:
    """Stacks of combining marks (a question of "Q" and 4,000 of them,
    conditions ending in 900) were drawn across the header's links and over
    the Allow/Deny/Defer buttons. The header and each button must look the same
    with the page's record text shown and hidden."""
    decision_id = world.open_decision(
        world.agent,
        question="Q" + "\u0301\u0489" * 1999 + "?",
        options=["A" + "\u0301" * 499, "B" + "\u0489" * 499],
        # in the history below the buttons, stacks rising from under each
        # of them (a run of "M"s puts its last one at 506 to 736 pixels)
        conditions=["c" + "\u0301" * 999] + ["M" * k + "\u0301" * 900 for k in range(36, 58, 4)],
        task_ids=[world.tasks["docs"]],
    )
    page = tab.page
    tab.sign_in(world.alice.token)
    page.set_viewport_size({"width": 1000, "height": 1600})
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision_id}")
    buttons = page.locator(".answer-grid button")
    buttons.first.wait_for()
    page.wait_for_timeout(300)  # fonts and layout settled
    boxes = [page.locator("header.top").bounding_box()]
    for i in range(buttons.count()):
        # its full width, between its rounded corners (where what is under
        # the button shows, hidden or not)
        box = buttons.nth(i).bounding_box()
        boxes.append({"x": box["x"], "y": box["y"] + 6,
                      "width": box["width"], "height": box["height"] - 12})  # fmt: skip
    assert len(boxes) == 7

    def shots() -> list[bytes]:
        return [page.screenshot(clip=box) for box in boxes]

    shown = shots()
    # the page's text hidden, the buttons alone shown (the header is not in main)
    page.evaluate("""() => {
        document.querySelector('main').style.visibility = 'hidden';
        const buttons = document.querySelectorAll('.answer-grid button');
        for (const b of buttons) b.style.visibility = 'visible';
    }""")  # fmt: skip
    page.wait_for_timeout(100)
    hidden = shots()
    differ = [i for i, (a, b) in enumerate(zip(shown, hidden, strict=True)) if a != b]
    assert not differ, f"record text painted over: {differ} (0 is the header)"


def test_a_relayed_answers_prompt_and_response_keep_their_line_breaks(
    tab: Tab, world: World
) -> None:
    """docs/console.md: the page shows the prompt shown to the human and the
    human's response. Their line breaks were lost: a prompt of two lines read
    as one run-on line."""
    world.alice.send("POST", "/api/v1/projects", {"id": "relayed", "name": "Relayed"}, 201)
    world.alice.send("PATCH", "/api/v1/projects/relayed/policy",
                     {"expected_revision": 1, "allow_relayed_human_answers": True})  # fmt: skip
    task = world.alice.send("POST", "/api/v1/projects/relayed/tasks", {"title": "Relay me"}, 201)
    made = world.agent.send("POST", "/api/v1/projects/relayed/decisions", {
        "question": "Relay a yes?", "options": ["Yes", "No"], "rationale": "r",
        "required_actor": "human", "environment": "staging",
        "task_ids": [task["id"]]}, 201)  # fmt: skip
    session = httpx.post(world.served.url + "/api/v1/sessions", json={},
                         headers=world.agent.headers(True), timeout=10)  # fmt: skip
    assert session.status_code in (200, 201), session.text
    answered = httpx.post(
        f"{world.served.url}/api/v1/projects/relayed/decisions/{made['id']}/answer",
        json={"expected_generation": 1, "disposition": "allow", "answer": "Yes",
              "rationale": "Asked in chat.", "conditions_confirmed": True,
              "relay": {"prompt": "Ship it?\nReply yes or no.",
                        "response": "yes\nbut after lunch"}},
        headers={**world.agent.headers(True), "Waypost-Session": session.json()["id"]},
        timeout=10,
    )  # fmt: skip
    assert answered.status_code == 200, answered.text
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/relayed/d/{made['id']}")
    relay = page.locator(".relay")
    relay.wait_for()
    text = relay.inner_text()
    assert "Ship it?\nReply yes or no." in text, text
    assert "yes\nbut after lunch" in text, text
    # who authorized relaying: the one whose policy edit allowed it (consoledocaudit)
    assert "Relayed by the agent, authorized by Alice (policy revision 2)." in text, text


def test_an_answer_the_sweep_applied_says_so_in_its_generation(tab: Tab, world: World) -> None:
    """docs/console.md: every generation shows its answer "or applied by
    timeout" (consoledocaudit: no test read a timeout's answer on the
    decision's page)."""
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{world.decisions['timed']}")
    first = page.locator("ol.history > li", has=page.get_by_role("heading", name="Generation 1"))
    text = first.inner_text()
    assert '"Default schedule" by Alice (human)' in text, text
    assert "(applied by timeout)" in text, text
    assert "Applied by the sweep: the recommendation after 24 hours unanswered." in text, text


def test_a_token_refused_under_a_reopen_keeps_its_edited_environment(
    tab: Tab, world: World
) -> None:
    """docs/console.md: what you typed is kept below the sign-in form, as a
    conflict notice keeps it. The sign-in page kept textareas only: the
    reopen's edited Environment was lost, and the lines kept had no labels."""
    hana = admin_principal(world.served, "human", "Hana")
    made = world.alice.send("POST", "/api/v1/projects/demo/tasks", {"title": "Revoke me"}, 201)
    decision_id = world.open_decision(world.agent, question="Reopen me?", task_ids=[made["id"]])
    world.alice.send("PATCH", f"/api/v1/projects/demo/tasks/{made['id']}",
                     {"expected_revision": 1, "title": "Revoke me (edited)"})  # fmt: skip
    page = tab.page
    tab.sign_in(hana.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision_id}")
    page.get_by_role("heading", name="Why it is stale").wait_for()
    page.get_by_label("Why reopen (required)").fill("The title moved on.")
    page.get_by_label("Environment").fill("production")
    listed = admin_json(world.served, "token", "list", "--principal", hana.principal_id)
    admin_json(world.served, "token", "revoke", "--token-id", listed[0]["token_id"])
    refused = page.get_by_text("Your token is no longer accepted")
    try:  # the request that finds it refused, or the page's own live refresh first
        page.get_by_role("button", name="Reopen", exact=True).click(timeout=5000)
    except playwright_api.TimeoutError:
        assert refused.is_visible()
    refused.wait_for()
    text = page.locator("details.kept").inner_text()
    assert "Why reopen: The title moved on." in text, text
    assert "Environment: production" in text, text
    assert "Conditions" not in text, text  # filled in by the page, not edited


def test_a_refused_filter_takes_the_focus_and_keeps_the_projects_name(
    tab: Tab, world: World
) -> None:
    """docs/console.md: a refusal's box takes the focus. A refused knowledge
    filter left it on the heading, and the heading and the tab's title read
    the project's id ("Knowledge · demo") for its name."""
    page = tab.page
    tab.sign_in(world.alice.token)
    for query, label in (("tag=%20" + "g" * 64, "Tag"), ("q=" + "x" * 2000, "Words")):
        page.goto(f"{tab.origin}/console#/p/demo/knowledge?{query}")
        page.locator("main").get_by_text(f"These filters were refused. {label}: at most").wait_for()
        box = page.get_by_label(label)
        assert box.evaluate("(el) => el === document.activeElement"), label
        assert box.get_attribute("aria-invalid") == "true"
        assert page.locator("main h1").inner_text() == "Knowledge · Demo shop"
        assert page.title() == "Knowledge · Demo shop · Waypost console"


def test_showing_the_new_state_keeps_what_was_typed(tab: Tab, world: World) -> None:
    """docs/console.md: what you had written stays under "What you wrote".
    Pressing "Show the new state" after a change elsewhere redrew the form
    empty, and the reason typed was lost."""
    page, decision_id = _pending_in_alices_tab(tab, world, "Show me the new state?")
    page.get_by_label("Why (required)").fill("Half an argument,\nstill typing.")
    world.admin.send("POST", f"/api/v1/projects/demo/decisions/{decision_id}/answer", {
        "expected_generation": 1, "disposition": "deny", "answer": "Stop",
        "rationale": "Not yet."})  # fmt: skip
    page.locator("main").get_by_text("it is now denied, generation 1").wait_for()
    page.get_by_role("button", name="Show the new state").click()
    page.locator("#changed-elsewhere").wait_for(state="detached")
    kept = page.locator("main .notice details.kept")
    kept.locator("summary").click()
    assert "Half an argument,\nstill typing." in kept.inner_text()
    assert "it is now denied" in page.locator("main .notice").first.inner_text()


def test_an_expiry_in_local_time_says_the_instant_and_refuses_what_cannot_be(
    browser: Any, world: World
) -> None:
    """`new Date(box)` resolved the zone without a word: 02:30 on the night
    New York's clocks skip it was sent as 03:30, 01:30 on the night they pass
    it twice as the first, and the page showed UTC only; a year past 9999
    (Chromium's box takes up to 275760) threw before the form said anything."""
    decision = world.open_decision(world.agent, question="Expire in New York?",
                                   task_ids=[world.tasks["docs"]])  # fmt: skip
    world.admin.send("POST", f"/api/v1/projects/demo/decisions/{decision}/answer", {
        "expected_generation": 1, "disposition": "defer", "answer": "Stop",
        "rationale": "Later."})  # fmt: skip
    context = browser.new_context(timezone_id="America/New_York")
    page = context.new_page()
    page.set_default_timeout(15000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        tab = Tab(page, world.served.url, [], [])
        tab.sign_in(world.alice.token)
        page.goto(f"{tab.origin}/console#/p/demo/d/{decision}")
        page.get_by_text("Reopen to ask again").click()
        page.get_by_label("Why reopen (required)").fill("Ask again.")
        expiry = page.get_by_label("New expiry (your local time)")
        reopen = page.get_by_role("button", name="Reopen", exact=True)
        main = page.locator("main")
        for typed, said in (
            ("10000-01-01T00:00", "Set an expiry before the year 10000 (UTC)."),
            ("9999-12-31T19:30", "Set an expiry before the year 10000 (UTC)."),
            ("2027-03-14T02:30", "2027-03-14 02:30 does not exist in your time zone"),
        ):
            expiry.fill(typed)
            main.get_by_text(said).first.wait_for()  # said as it is typed
            reopen.click()
            main.locator(".form-error").get_by_text(said).wait_for()
            assert page.evaluate("() => document.activeElement.type") == "datetime-local"
        assert world.decision(decision)["generation"] == 1  # nothing was sent
        expiry.fill("2027-11-07T01:30")
        # the zone by name: a machine in the wrong one is seen before sending
        twice = ("That is 2027-11-07 05:30:00 UTC (read in your time zone, America/New_York)."
                 " It happens twice in your time zone that day: this is the first"
                 " (the second is 2027-11-07 06:30:00 UTC).")  # fmt: skip
        main.get_by_text(twice).wait_for()
        reopen.click()
        main.get_by_text("Reopened: generation 2 awaits an answer.").wait_for()
        assert world.decision(decision)["current"]["expires_at"] == "2027-11-07T05:30:00.000Z"
        assert not errors, errors
    finally:
        context.close()


def test_a_half_typed_expiry_is_refused_not_dropped(tab: Tab, world: World) -> None:
    """With the forms `novalidate`, a date typed in part (no value to read)
    went out as no expiry at all, and the reopening kept the old one
    (review41): the page refuses it, tied to the box."""
    page, decision_id = _stale_in_alices_tab(
        tab, world, "Rotate the signing key", question="Rotate the signing key now?"
    )
    page.get_by_label("Why reopen (required)").fill("Ask again.")
    page.get_by_label("New expiry (your local time)").focus()
    page.keyboard.type("12")  # the month alone
    assert page.evaluate("() => document.activeElement.validity.badInput")
    page.get_by_role("button", name="Reopen", exact=True).click()
    refusal = page.locator("main .form-error").get_by_text("Finish the new expiry's date")
    refusal.wait_for()
    assert page.evaluate("() => document.activeElement.type") == "datetime-local"
    assert world.decision(decision_id)["generation"] == 1  # nothing was sent


def test_an_answer_sent_offline_says_the_browser_is_offline(tab: Tab, world: World) -> None:
    """It said "The service cannot be reached. Is it running?", sending the
    person to look at a service that was fine (consolekbaudit)."""
    page, decision_id = _pending_in_alices_tab(tab, world, "Turn the cache off tonight?")
    page.get_by_label("Why (required)").fill("Not tonight.")
    page.context.set_offline(True)
    try:
        page.get_by_role("button", name="Deny: Proceed").click()
        page.get_by_role("alert").get_by_text("This browser is offline").wait_for()
        assert "cannot be reached" not in page.locator("main").inner_text()
    finally:
        page.context.set_offline(False)
    assert world.decision(decision_id)["status"] == "pending"


def test_a_page_retrying_by_itself_keeps_the_focus_and_says_its_alert_once(
    tab: Tab, world: World
) -> None:
    """Each retry of a page that could not load drew it again: the focus went
    back to its heading from the link a keyboard had reached, and its alert
    was said again, four times a minute (consolekbaudit)."""
    page = tab.page
    # the back-off's retries (2, 4, then 8 s) come on the page's own clock,
    # moved by hand: counted by the page's timers, not waited out
    page.clock.install()
    tab.sign_in(world.alice.token)
    attempts: list[str] = []

    def unreachable(route: Any) -> None:
        attempts.append(route.request.url)
        route.abort()

    page.route("**/graphql", unreachable)
    page.goto(f"{tab.origin}/console#/p/demo/policy")
    page.locator("main").get_by_text("tries again by itself").wait_for()
    page.get_by_role("link", name="Back to the inbox").focus()
    page.evaluate("""() => { window.alerts = 0; new MutationObserver((records) => {
        for (const r of records) for (const n of r.addedNodes) {
          if (n.nodeType === 1 && (n.matches('[role=alert]') || n.querySelector('[role=alert]'))) {
            window.alerts += 1; } } })
      .observe(document.querySelector('main'), { childList: true, subtree: true }); }""")
    tried = len(attempts)
    _move_clock(page, 7000)  # the retries at 2 s and 4 s
    assert len(attempts) >= tried + 2, attempts
    assert page.evaluate("() => window.alerts") == 0
    assert page.evaluate("() => document.activeElement.textContent") == "Back to the inbox"
    page.unroute("**/graphql")
    heading = page.get_by_role("heading", name="Compare two revisions")
    _move_clock(page, 20000, lambda: heading.count() > 0, "the retry after 8 s")


def test_empty_boxes_get_the_consoles_refusal_not_the_browsers(tab: Tab, world: World) -> None:
    """`required` let Chromium refuse an empty token or reason with its own
    bubble, so the page's refusal (tied to the box) was never said."""
    page = tab.page
    page.goto(tab.origin + "/")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("alert").get_by_text("Paste your token first.").wait_for()
    assert page.get_by_label("API token").get_attribute("aria-invalid") == "true"


def test_record_text_is_never_markup(tab: Tab, world: World) -> None:
    """dom.js: every text goes in as a text node, never as HTML, also in the
    <bdi> that isolates a right-to-left option (no test held markup in record
    text: mutantaudit6)."""
    plain, rtl = '<b id="markup-plain">bold</b>', '<b id="markup-rtl">bold</b>'
    decision_id = world.open_decision(world.agent, question=f"Ship it? {plain}",
                                      options=[f"שלום {rtl}", "Stop"],
                                      task_ids=[world.tasks["docs"]])  # fmt: skip
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision_id}")
    page.get_by_role("heading", name="Answer", exact=True).wait_for()
    shown = page.locator("main").inner_text()
    assert page.locator("#markup-plain, #markup-rtl").count() == 0
    assert plain in shown and rtl in shown


def test_a_reopened_decision_is_answered_in_its_own_generation(tab: Tab, world: World) -> None:
    """The form sends the generation it shows (docs/console.md): no browser
    test answered a reopened decision, so a form pinned to generation 1
    would have gone unseen (mutantaudit6)."""
    decision_id = world.open_decision(world.agent, question="Reopened, then answered?",
                                      task_ids=[world.tasks["docs"]])  # fmt: skip
    world.alice.send("POST", f"/api/v1/projects/demo/decisions/{decision_id}/reopen",
                     {"expected_generation": 1, "rationale": "Again."})  # fmt: skip
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision_id}")
    page.get_by_role("heading", name="Answer", exact=True).wait_for()
    page.get_by_label("Why (required)").fill("Not now.")
    page.get_by_role("button", name="Deny: Stop").click()
    page.locator("main").get_by_text("Your answer is recorded").wait_for()
    recorded = world.decision(decision_id)
    answer = recorded["current"]["answer"]
    assert recorded["generation"] == 2 and (answer["disposition"], answer["answer"]) == (
        "deny", "Stop")  # fmt: skip


def test_a_deny_with_the_boxes_ticked_vouches_for_nothing(tab: Tab, world: World) -> None:
    """docs/console.md: an allow vouches for the conditions, so it needs a
    tick on each; the ticks are an allow's, and a deny pressed with them
    ticked is not recorded as confirming them (mutantaudit6)."""
    decision_id = world.open_decision(world.agent, question="Deny with the boxes ticked?",
                                      conditions=["a backup exists"],
                                      task_ids=[world.tasks["docs"]])  # fmt: skip
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision_id}")
    page.get_by_role("heading", name="Answer", exact=True).wait_for()
    page.get_by_label("Why (required)").fill("No.")
    for box in page.get_by_role("checkbox").all():
        box.check()
    page.get_by_role("button", name="Deny: Stop").click()
    page.locator("main").get_by_text("Your answer is recorded").wait_for()
    answer = world.decision(decision_id)["current"]["answer"]
    assert answer["disposition"] == "deny" and answer["conditions_confirmed"] is False


def test_a_retry_after_of_several_seconds_is_waited_out(tab: Tab, world: World) -> None:
    """docs/console.md: a refusal's `Retry-After` sets the page's next try to
    that many seconds. The service sends 30 for a store an operator must
    mend; the other tests send 1, where seconds read as milliseconds come to
    the same (mutantaudit6). 3 here: no try between the first and 3 s on
    (the page's clock, moved by hand a quarter of a second at a time)."""
    page = tab.page
    page.clock.install()
    tab.sign_in(world.alice.token)
    busy = {"errors": [{"message": "busy", "extensions": {"code": "unavailable",
                                                          "retryAfter": 3}}]}  # fmt: skip

    def refuse(route: Any) -> None:
        route.fulfill(status=503, headers={"Retry-After": "3"}, json=busy)

    page.add_init_script(script=f"({_COUNT_ASKED})()")  # from the reload on
    page.route("**/graphql", refuse)
    page.reload()
    page.locator("main").get_by_text("tries again by itself").wait_for()
    _move_clock(page, 4500, step=250, pause=40)
    asked = _asked(page)
    page.unroute("**/graphql")
    after = [t - asked[0] for t in asked]
    assert all(t < 500 or t >= 2500 for t in after) and any(t >= 2500 for t in after), after
    inbox = page.get_by_role("heading", name="Inbox", level=1)
    _move_clock(page, 20000, lambda: inbox.count() > 0, "the inbox, once answered")


def test_what_was_said_of_one_page_is_not_left_on_the_next(tab: Tab, world: World) -> None:
    """The announcer is visually hidden, not empty: "Answer recorded." stayed
    in it on the inbox and every page after, where a screen reader reading
    on came upon it (a11yaudit)."""
    page, _ = _pending_in_alices_tab(tab, world, "Said once, then gone?")
    page.get_by_label("Why (required)").fill("Yes.")
    page.get_by_role("button", name="Deny: Stop").click()
    page.locator("main").get_by_text("Your answer is recorded").wait_for()
    announcer = page.locator("#announce")
    for _ in range(50):  # the announcer writes 50 ms after it is told
        if announcer.text_content() == "Answer recorded.":
            break
        page.wait_for_timeout(50)
    assert announcer.text_content() == "Answer recorded."
    page.locator("main").get_by_role("link", name="Back to the inbox").click()
    page.get_by_role("heading", name="Inbox", level=1).wait_for()
    assert announcer.text_content() == ""


def test_a_change_elsewhere_keeps_the_focused_button_where_it_was(tab: Tab, world: World) -> None:
    """The notice of a change elsewhere is drawn above the form: an answer
    button focused at the foot of the window was pushed out of sight, the
    focus still on it (a11yaudit). The page keeps it in place."""
    page, decision_id = _pending_in_alices_tab(tab, world, "Keep my place?")
    button = page.get_by_role("button", name="Defer: Stop")
    box = button.bounding_box()
    assert box is not None
    # the window's foot just below the button, the page at its top
    page.set_viewport_size({"width": 1000, "height": int(box["y"] + box["height"]) + 4})
    page.evaluate("() => window.scrollTo(0, 0)")
    button.focus()
    before = button.bounding_box()
    world.admin.send("POST", f"/api/v1/projects/demo/decisions/{decision_id}/answer", {
        "expected_generation": 1, "disposition": "deny", "answer": "Stop",
        "rationale": "Not now."})  # fmt: skip
    page.locator("#changed-elsewhere").wait_for()
    after = button.bounding_box()
    assert before is not None and after is not None
    assert abs(after["y"] - before["y"]) < 2, (before, after)
    assert page.evaluate("() => document.activeElement.getAttribute('aria-label')") == (
        "Defer: Stop")  # fmt: skip


@pytest.mark.parametrize("width", [320, 600, 1200])
def test_the_options_words_get_the_width_the_buttons_leave(
    tab: Tab, world: World, width: int
) -> None:
    """At 320 px the answer grid gave half of each row to three buttons a
    third as wide, and the option (what is decided) broke mid-word, and just
    past a phone's width the buttons wrapped again; the buttons' cell, a
    flex box and no table cell, had its border apart from its row's
    (a11yaudit, review63). Narrow, they stack; wide, they sit in a row."""
    page = tab.page
    page.set_viewport_size({"width": width, "height": 740})
    _pending_in_alices_tab(tab, world, "Restart the workers automatically?")
    sizes = page.evaluate("""() => {
      const row = document.querySelector('.answer-grid tbody tr');
      const [th, td] = [row.querySelector('th'), row.querySelector('td')]
        .map((cell) => cell.getBoundingClientRect());
      const buttons = [...row.querySelectorAll('button')].map((b) => b.getBoundingClientRect());
      return { th: th.width, td: td.width, widest: Math.max(...buttons.map((b) => b.width)),
               rows: new Set(buttons.map((b) => Math.round(b.top))).size,
               bottoms: [th.bottom, td.bottom] }; }""")
    assert sizes["th"] > 1.4 * sizes["td"] and sizes["td"] >= sizes["widest"], sizes
    assert sizes["rows"] == (1 if width > 720 else 3), sizes
    assert abs(sizes["bottoms"][0] - sizes["bottoms"][1]) < 1, sizes
    _accessible_and_narrow(page)


def test_the_navigation_says_which_section_is_shown(tab: Tab, world: World) -> None:
    """`aria-current` on the section's link, a decision's page under
    Decisions and a record's under Knowledge (it said nothing: a11yaudit)."""
    page, _ = _pending_in_alices_tab(tab, world, "Which section is this?")
    nav = page.get_by_role("navigation", name="Sections")

    def current() -> list[str]:
        return [link.inner_text() for link in nav.locator("a[aria-current=page]").all()]

    assert current() == ["Decisions"]
    nav.get_by_role("link", name="Inbox").click()
    page.get_by_role("heading", name="Inbox", level=1).wait_for()
    assert current() == ["Inbox"]
    page.goto(f"{tab.origin}/console#/p/demo/policy")
    page.get_by_role("heading", name="Policy", level=1).first.wait_for()
    assert current() == ["Policy"]
    page.goto(f"{tab.origin}/console#/nowhere")
    page.get_by_role("heading", name="Not found").wait_for()
    assert current() == []


def _expiring_in_alices_tab(tab: Tab, world: World, question: str) -> tuple[Any, str, datetime]:
    """A pending decision asking `question` that expires 30 s after the
    service's now, open in Alice's tab at its answer form; and that now."""
    now = parse_time(world.served.clock.read_text().strip())
    made = world.alice.send("POST", "/api/v1/projects/demo/tasks", {"title": question}, 201)
    decision = world.open_decision(
        world.agent, question=question, task_ids=[made["id"]],
        expires_at=format_time(now + timedelta(seconds=30)),
    )  # fmt: skip
    page = tab.page
    tab.sign_in(world.alice.token)
    page.goto(f"{tab.origin}/console#/p/demo/d/{decision}")
    page.get_by_role("heading", name="Answer", exact=True).wait_for()
    return page, decision, now


def test_a_decision_expiring_while_it_is_read_says_it_expired(tab: Tab, world: World) -> None:
    """Its expiry passing was said as "This decision changed elsewhere",
    though no one changed anything (consolekbaudit). Last in the module but
    one: the clock moves on and stays there."""
    page, _, now = _expiring_in_alices_tab(tab, world, "Ship 9 before the window closes?")
    page.evaluate("""() => { window.said = []; const region = document.getElementById('announce');
      new MutationObserver(() => { if (region.textContent) window.said.push(region.textContent); })
        .observe(region, { childList: true, characterData: true, subtree: true }); }""")
    page.get_by_label("Why (required)").fill("Half typed")
    write_clock(world.served.clock, format_time(now + timedelta(minutes=1)))
    banner = page.locator("#changed-elsewhere")
    banner.get_by_text("This decision expired while you were reading it").wait_for(timeout=30000)
    assert "elsewhere" not in banner.inner_text()
    page.wait_for_timeout(300)  # the announcer writes a moment later
    said = page.evaluate("() => window.said")
    assert "This decision expired." in said and not [s for s in said if "elsewhere" in s], said
    assert page.evaluate("() => document.activeElement.id") == page.get_by_label(
        "Why (required)"
    ).get_attribute("id")


def test_an_answer_given_elsewhere_before_the_expiry_is_a_change_elsewhere(
    tab: Tab, world: World
) -> None:
    """An expired status hides the answer given before it: read as the same
    generation, the page said the decision had expired, not that someone
    had answered it (review41). Last in the module: the clock moves on."""
    page, decision, now = _expiring_in_alices_tab(tab, world, "Ship 10 tonight?")
    page.route("**/graphql", lambda route: route.abort())  # its reads fail meanwhile
    world.admin.send("POST", f"/api/v1/projects/demo/decisions/{decision}/answer", {
        "expected_generation": 1, "disposition": "deny", "answer": "Proceed",
        "rationale": "Not tonight."})  # fmt: skip
    write_clock(world.served.clock, format_time(now + timedelta(minutes=1)))
    page.wait_for_timeout(1000)
    page.unroute("**/graphql")
    banner = page.locator("#changed-elsewhere")
    banner.get_by_text("This decision changed elsewhere").wait_for(timeout=60000)
    assert "expired while you were reading" not in banner.inner_text()


def _record_announcements(page: Any) -> None:
    """Every text the page's announcer (#announce) says from now on, in `window.said`."""
    page.evaluate("""() => { window.said = []; const region = document.getElementById('announce');
      new MutationObserver(() => { if (region.textContent) window.said.push(region.textContent); })
        .observe(region, { childList: true, characterData: true, subtree: true }); }""")


def _said(page: Any, text: str) -> None:
    page.wait_for_function("(text) => window.said.some((s) => s.includes(text))", arg=text)


def _has_said(page: Any, text: str) -> bool:
    """Whether the announcer has said `text` yet (`_record_announcements`)."""
    return bool(page.evaluate("(text) => window.said.some((s) => s.includes(text))", text))


def test_a_decision_arriving_in_the_inbox_is_said_not_only_shown(tab: Tab, world: World) -> None:
    """A new decision drew a card and said nothing: a screen reader's user
    on the inbox never learnt that one awaited them (a11yaudit2, WCAG 4.1.3)."""
    page = tab.page
    page.clock.install()  # the poll's (or the socket's) seconds pass on the page's clock
    tab.sign_in(world.alice.token)
    _record_announcements(page)
    decision_id = world.open_decision(
        world.agent, question="Said when it arrives?", task_ids=[world.tasks["docs"]]
    )
    card = page.locator(f"[data-group=awaiting] [data-decision='{decision_id}']")
    arrived = "1 new decision awaits an answer."
    _move_clock(page, 20000, lambda: card.count() > 0 and _has_said(page, arrived), "the arrival")
    card.wait_for()
    _said(page, arrived)
    # the focus stayed where it was: on the heading
    assert page.evaluate("() => document.activeElement.tagName") == "H1"


def test_the_focused_card_leaving_the_inbox_says_so(tab: Tab, world: World) -> None:
    """The card holding the focus left (answered elsewhere) and the focus went
    to another decision's link without a word: Enter then opened a question
    other than the one the keyboard had been on (a11yaudit2)."""
    page = tab.page
    gone = world.open_decision(world.agent, question="Leaves under the focus?",
                               task_ids=[world.tasks["docs"]])  # fmt: skip
    world.open_decision(world.agent, question="Stays after it?", task_ids=[world.tasks["docs"]])
    page.clock.install()  # the poll's (or the socket's) seconds pass on the page's clock
    tab.sign_in(world.alice.token)
    page.locator(f"[data-group=awaiting] [data-decision='{gone}'] a").first.focus()
    _record_announcements(page)
    world.admin.send("POST", f"/api/v1/projects/demo/decisions/{gone}/answer", {
        "expected_generation": 1, "disposition": "deny", "answer": "Stop",
        "rationale": "Not now."})  # fmt: skip
    card = page.locator(f"[data-decision='{gone}']")
    left = "The decision you were on left this list (answered or changed elsewhere)."
    _move_clock(page, 20000, lambda: card.count() == 0 and _has_said(page, left), "the leaving")
    card.wait_for(state="detached")
    _said(page, left)
    assert page.evaluate("() => document.activeElement.tagName") != "BODY"


def test_a_decision_in_a_project_new_since_the_last_drawing_is_said_to_arrive(
    tab: Tab, world: World
) -> None:
    """inbox.js, arrivals: "A project new since the drawing before brings all
    it lists." A project created while the inbox is open, a decision already
    awaiting in it when the page first lists it, is an arrival like any
    other (a screen reader's user heard nothing of it)."""
    page = tab.page
    page.clock.install()  # the poll's (or the socket's) seconds pass on the page's clock
    tab.sign_in(world.alice.token)
    page.locator("[data-group=awaiting]").first.wait_for()
    _record_announcements(page)
    world.alice.send("POST", "/api/v1/projects", {"id": "arrives", "name": "Arriving project"}, 201)
    task = world.alice.send("POST", "/api/v1/projects/arrives/tasks", {"title": "Wait"}, 201)
    made = world.alice.send("POST", "/api/v1/projects/arrives/decisions", {
        "question": "Arrive with the project?", "rationale": "r", "required_actor": "human",
        "environment": "staging", "options": ["Go", "Wait"], "task_ids": [task["id"]]},
        201)  # fmt: skip
    # an event of a watched project refreshes the page, which learns of "arrives"
    world.alice.send("POST", "/api/v1/projects/demo/knowledge", {
        "kind": "fact", "title": "A project arrives", "body": "On any event."}, 201)  # fmt: skip
    _move_clock(
        page,
        20000,
        lambda: page.locator(f"[data-decision='{made['id']}']").count() > 0,
        "the redraw",
    )
    _said(page, "1 new decision awaits an answer.")


def test_a_card_that_stays_under_the_focus_is_not_said_to_have_left(tab: Tab, world: World) -> None:
    """The page says the card the focus was in left the list only when it
    left (main.js, refocus: "what the card the focus was in held, when it
    left"): a redraw for a decision arriving elsewhere, the focused card
    still listed, says the arrival and nothing of the focus leaving."""
    page = tab.page
    stays = world.open_decision(world.agent, question="Stays under the focus?",
                                task_ids=[world.tasks["docs"]])  # fmt: skip
    page.clock.install()  # the poll's (or the socket's) seconds pass on the page's clock
    tab.sign_in(world.alice.token)
    link = page.locator(f"[data-group=awaiting] [data-decision='{stays}'] a").first
    link.focus()
    text = page.evaluate("() => document.activeElement.textContent")
    _record_announcements(page)
    arrived = world.open_decision(world.agent, question="Arrives beside the focus?",
                                  task_ids=[world.tasks["docs"]])  # fmt: skip
    _move_clock(
        page,
        20000,
        lambda: page.locator(f"[data-group=awaiting] [data-decision='{arrived}']").count() > 0,
        "the redraw",
    )
    _said(page, "1 new decision awaits an answer.")
    said = page.evaluate("() => window.said")
    assert not any("left this list" in s for s in said), said
    assert page.evaluate("() => document.activeElement.textContent") == text


def test_a_background_refresh_keeps_the_focused_link_in_view(tab: Tab, world: World) -> None:
    """A card drawn above the focused link pushed it out of the window: the
    page kept its scroll position, the focus on a link out of sight (as the
    notice of a change elsewhere once did on a decision's page, a11yaudit).
    The focused control stays where it was on the screen (a11yaudit2)."""
    page = tab.page
    page.clock.install()  # the poll's (or the socket's) seconds pass on the page's clock
    tab.sign_in(world.alice.token)
    link = page.locator("[data-group=blocked] a").last
    link.scroll_into_view_if_needed()
    box = link.bounding_box()
    assert box is not None
    # the window's foot just below the link
    page.set_viewport_size({"width": 1000, "height": int(box["y"] + box["height"]) + 4})
    link.scroll_into_view_if_needed()
    link.focus()
    before = page.evaluate("() => document.activeElement.getBoundingClientRect().top")
    text = page.evaluate("() => document.activeElement.textContent")
    decision_id = world.open_decision(
        world.agent, question="Drawn above the focus?", task_ids=[world.tasks["keys"]]
    )
    card = page.locator(f"[data-group=awaiting] [data-decision='{decision_id}']")
    _move_clock(page, 20000, lambda: card.count() > 0, "the card drawn above")
    assert page.evaluate("() => document.activeElement.textContent") == text
    after = page.evaluate("() => document.activeElement.getBoundingClientRect().top")
    assert abs(after - before) < 2, (before, after)


def test_a_background_refresh_keeps_the_scroll_when_the_focus_is_out_of_view(
    tab: Tab, world: World
) -> None:
    """docs/console.md: the page keeps its scroll position, or, when the
    focused control was in view, keeps that control where it was on the
    screen. Scrolled away from the focused link (below the window's foot),
    a card drawn above it leaves the page where the reader has it."""
    page = tab.page
    page.clock.install()  # the poll's (or the socket's) seconds pass on the page's clock
    tab.sign_in(world.alice.token)
    page.set_viewport_size({"width": 1000, "height": 300})
    page.locator("[data-group=blocked] a").last.wait_for()
    page.evaluate("""() => {
        const links = document.querySelectorAll("[data-group=blocked] a");
        links[links.length - 1].focus({ preventScroll: true });
        window.scrollTo(0, 0); }""")
    top = page.evaluate("() => document.activeElement.getBoundingClientRect().top")
    assert top > 300, top  # out of view, below the window's foot
    assert page.evaluate("() => window.scrollY") == 0
    decision_id = world.open_decision(
        world.agent, question="Drawn above an unseen focus?", task_ids=[world.tasks["keys"]]
    )
    _move_clock(
        page,
        20000,
        lambda: page.locator(f"[data-group=awaiting] [data-decision='{decision_id}']").count() > 0,
        "the redraw",
    )
    assert page.evaluate("() => window.scrollY") == 0
    assert page.evaluate("() => document.activeElement.getBoundingClientRect().top") > top


def test_a_background_refresh_keeps_the_scroll_when_the_focus_is_above_the_window(
    tab: Tab, world: World
) -> None:
    """docs/console.md: the page keeps its scroll position, or, when the
    focused control was in view, keeps that control where it was. Scrolled
    past the focused link (above the window's top), a card drawn above it
    leaves the page where the reader has it."""
    page = tab.page
    page.clock.install()  # the poll's (or the socket's) seconds pass on the page's clock
    tab.sign_in(world.alice.token)
    page.set_viewport_size({"width": 1000, "height": 200})
    page.locator("[data-group=blocked] a").first.wait_for()
    page.evaluate("""() => {
        document.querySelector("[data-group=blocked] a").focus({ preventScroll: true });
        window.scrollTo(0, document.documentElement.scrollHeight); }""")
    top = page.evaluate("() => document.activeElement.getBoundingClientRect().top")
    assert top < 0, top  # out of view, above the window's top
    scrolled = page.evaluate("() => window.scrollY")
    decision_id = world.open_decision(
        world.agent, question="Drawn above a focus scrolled past?", task_ids=[world.tasks["keys"]]
    )
    _move_clock(
        page,
        20000,
        lambda: page.locator(f"[data-group=awaiting] [data-decision='{decision_id}']").count() > 0,
        "the redraw",
    )
    assert page.evaluate("() => window.scrollY") == scrolled


def _zoned_page(browser: Any, world: World, zone: str, locale: str) -> tuple[Any, Any]:
    """A context whose browser reads its clock in `zone` and speaks `locale`,
    signed in as Alice."""
    context = browser.new_context(timezone_id=zone, locale=locale)
    page = context.new_page()
    page.set_default_timeout(15000)
    Tab(page, world.served.url, [], []).sign_in(world.alice.token)
    return context, page


def test_a_repeated_or_skipped_half_hour_is_said_and_the_first_is_sent(
    browser: Any, world: World
) -> None:
    """docs/console.md: a time the zone's clocks skip is refused with the time
    they show instead, and one they pass twice is the first of the two, which
    the line under the box says. Lord Howe Island moves its clocks by 30
    minutes: only New York's hour was checked, and a search for the repeat
    from an hour on (not 30 minutes) let 01:45 on the night they move back
    go out as the first without a word (tzaudit)."""
    decision = world.open_decision(world.agent, question="Expire on Lord Howe?",
                                   task_ids=[world.tasks["docs"]])  # fmt: skip
    world.admin.send("POST", f"/api/v1/projects/demo/decisions/{decision}/answer", {
        "expected_generation": 1, "disposition": "defer", "answer": "Stop",
        "rationale": "Later."})  # fmt: skip
    context, page = _zoned_page(browser, world, "Australia/Lord_Howe", "en-AU")
    sent: list[Any] = []

    def reopening(request: Any) -> None:
        if request.url.endswith("/graphql") and "decisionReopen" in (request.post_data or ""):
            sent.append(json.loads(request.post_data)["variables"]["input"])

    page.on("request", reopening)
    try:
        page.goto(f"{world.served.url}/console#/p/demo/d/{decision}")
        page.get_by_text("Reopen to ask again").click()
        page.get_by_label("Why reopen (required)").fill("Ask again.")
        expiry = page.get_by_label("New expiry (your local time)")
        main = page.locator("main")
        expiry.fill("2027-10-03T02:15")  # 02:00 becomes 02:30 that night
        skipped = ("2027-10-03 02:15 does not exist in your time zone (the clocks skip it"
                   " that day): choose another time, such as 2027-10-03 02:45.")  # fmt: skip
        main.get_by_text(skipped).wait_for()
        expiry.fill("2027-04-04T01:45")  # 02:00 becomes 01:30 that night
        twice = ("That is 2027-04-03 14:45:00 UTC (read in your time zone,"
                 " Australia/Lord_Howe). It happens twice in your time zone that day:"
                 " this is the first (the second is 2027-04-03 15:15:00 UTC).")  # fmt: skip
        main.get_by_text(twice).wait_for()
        page.get_by_role("button", name="Reopen", exact=True).click()
        main.get_by_text("Reopened: generation 2 awaits an answer.").wait_for()
        assert [s["expiresAt"] for s in sent] == ["2027-04-03T14:45:00.000Z"]
        assert world.decision(decision)["current"]["expires_at"] == "2027-04-03T14:45:00.000Z"
    finally:
        context.close()


@pytest.mark.parametrize(("zone", "locale"), [("Asia/Kolkata", "de-DE"),
                                              ("Pacific/Kiritimati", "ar-EG")])  # fmt: skip
def test_instants_read_in_utc_whatever_the_browsers_zone_and_language(
    browser: Any, world: World, zone: str, locale: str
) -> None:
    """docs/console.md: the page shows times in UTC. Every other test's browser
    was in UTC already, where a time drawn in the browser's own wall time and
    called "UTC" read the same (tzaudit). An expiry sent with an offset of
    +05:30 reads as the instant the service holds, in UTC, with Western
    digits, in a browser half a day or more away from it."""
    made = world.alice.send("POST", "/api/v1/projects/demo/tasks", {"title": f"Zone {zone}"}, 201)
    decision = world.open_decision(
        world.alice, question=f"Expire at dawn in {zone}?", expires_at="2027-03-28T06:30:00+05:30",
        recommendation="Proceed", reversible=True, task_ids=[made["id"]])  # fmt: skip
    held = world.decision(decision)["current"]
    assert held["expires_at"] == "2027-03-28T01:00:00.000Z"
    context, page = _zoned_page(browser, world, zone, locale)
    try:
        page.goto(f"{world.served.url}/console#/p/demo/d/{decision}")
        page.get_by_role("heading", name=f"Expire at dawn in {zone}?").wait_for()
        facts = page.locator("dl.facts")
        expires = facts.locator("dt:text-is('Expires') + dd").inner_text()
        assert expires.startswith("2027-03-28 01:00:00 UTC (in "), expires
        due = format_time(parse_time(held["at"]) + timedelta(hours=24))
        shown = due.replace("T", " ").split(".")[0] + " UTC"
        reversible = facts.locator("dt:text-is('Reversible') + dd").inner_text()
        assert f"the sweep may apply the recommendation from {shown} (in 24 h)" in reversible
    finally:
        context.close()


def test_a_decisions_times_move_on_while_its_page_stays_open(browser: Any, tmp_path: Path) -> None:
    """docs/console.md: an expiry reads "in ..." until it has passed, and its
    passing is said ("This decision expired while you were reading it").
    The decision's page never brought its relative times up to the
    service's clock: beside that notice its expiry still read "(in 1 min)"
    (tzaudit). Its own service here, whose clock this test moves."""
    with serve(tmp_path) as served:
        expires, decision = _expiring(served, "Expire while read?", 80)
        with _signed_in(
            browser, served, served.admin_token, timezone_id="Pacific/Kiritimati", locale="en-GB"
        ) as page:
            page.goto(f"{served.url}/console#/p/clock/d/{decision}")
            page.get_by_role("heading", name="Expire while read?").wait_for()
            row = page.locator("dl.facts dt:text-is('Expires') + dd")
            assert row.inner_text().endswith("(in 1 min)"), row.inner_text()
            write_clock(served.clock, format_time(parse_time(expires) + timedelta(seconds=60)))
            banner = page.locator("#changed-elsewhere")
            _move_clock(page, 65000, lambda: banner.count() > 0, "the expiry said")
            assert "This decision expired while you were reading it" in banner.inner_text()
            assert row.inner_text().endswith("(1 min ago)"), row.inner_text()


def test_an_inbox_on_the_socket_looks_again_when_an_expiry_passes(
    browser: Any, tmp_path: Path
) -> None:
    """docs/console.md: an expiry reads "in ..." until it has passed. With
    the socket the inbox looked again once a minute only (an expiry is no
    event): a card read "expires in 1 min" for 53 s after the service's
    clock passed it, while the decision's page had said it expired within a
    second (tzaudit). The page looks again a second after a deadline it
    shows. Its own service here, whose clock this test moves."""
    with serve(tmp_path) as served:
        expires, decision = _expiring(served, "Expire on the inbox?", 30)
        with _signed_in(
            browser, served, served.admin_token, timezone_id="America/St_Johns", locale="de-DE"
        ) as page:
            _on_the_socket(page)
            card = page.locator(f"[data-group=awaiting] [data-decision='{decision}']")
            assert "expires in" in card.inner_text(), card.inner_text()
            write_clock(served.clock, format_time(parse_time(expires) + timedelta(seconds=1)))
            expired = page.locator(f"[data-group=reopen] [data-decision='{decision}']")
            # well within the minute of the safety poll
            _move_clock(page, 45000, lambda: expired.count() > 0, "the expiry seen", 1000)
            assert "Expired less than a minute ago" in expired.inner_text(), expired.inner_text()


def test_an_inbox_on_the_socket_looks_again_at_the_soonest_of_its_deadlines(
    browser: Any, tmp_path: Path
) -> None:
    """main.js: "an expiry or a timeout on the page that passes sooner [than
    the minute's safety poll] gets a refresh of its own": with two expiries
    on the page, the one 30 s ahead is seen passing though the other is
    more than a minute ahead (dom.js, msToNextDeadline: the soonest)."""
    with serve(tmp_path) as served:
        admin = Rest(served.url, served.admin_token)
        now = parse_time(served_now(served))
        _, ids = _project_of_decisions(admin, "clock", {
            "Expire later?": {"expires_at": format_time(now + timedelta(seconds=600))},
            "Expire soon?": {"expires_at": format_time(now + timedelta(seconds=30))}})  # fmt: skip
        made = {600: ids[0], 30: ids[1]}
        with _signed_in(browser, served, served.admin_token) as page:
            _on_the_socket(page)
            card = page.locator(f"[data-group=awaiting] [data-decision='{made[30]}']")
            assert "expires in" in card.inner_text(), card.inner_text()
            write_clock(served.clock, format_time(now + timedelta(seconds=31)))
            expired = page.locator(f"[data-group=reopen] [data-decision='{made[30]}']")
            # well within the minute of the safety poll
            _move_clock(page, 45000, lambda: expired.count() > 0, "the expiry seen", 1000)
            later = page.locator(f"[data-group=awaiting] [data-decision='{made[600]}']")
            assert "expires in" in later.inner_text(), later.inner_text()


def test_one_answered_and_one_opened_between_two_drawings_is_an_arrival(
    browser: Any, tmp_path: Path
) -> None:
    """inbox.js, arrivals: a project listed both times counts what it newly
    lists; only a list cut short (100 of more) counts no more than the rise
    in the number awaiting. One decision answered and another opened before
    the page looks again leave the number awaiting as it was, and the new
    one is still news. Its own service, on the page's clock: both changes
    land in one drawing."""
    with serve(tmp_path) as served:
        admin = Rest(served.url, served.admin_token)
        task, (first,) = _project_of_decisions(admin, "swap", {"Answered meanwhile?": {}})
        with _signed_in(browser, served, served.admin_token) as page:
            page.locator(f"[data-decision='{first}']").wait_for()
            _on_the_socket(page)
            _record_announcements(page)
            admin.send("POST", f"/api/v1/projects/swap/decisions/{first}/answer", {
                "expected_generation": 1, "disposition": "deny", "answer": "Stop",
                "rationale": "Not now."})  # fmt: skip
            second = _pending(admin, "swap", task, "Opened meanwhile?")
            shown = page.locator(f"[data-group=awaiting] [data-decision='{second}']")
            _move_clock(page, 65000, lambda: shown.count() > 0, "the new decision", 500)
            _said(page, "1 new decision awaits an answer.")


def _pending(rest: Rest, project: str, task: str, question: str, **fields: Any) -> str:
    """A pending human-required decision on `task` (`fields` added to the body): its id."""
    return str(rest.send("POST", f"/api/v1/projects/{project}/decisions", {
        "question": question, "rationale": "r", "required_actor": "human",
        "environment": "staging", "options": ["Proceed", "Stop"], "task_ids": [task],
        **fields}, 201)["id"])  # fmt: skip


def _project_of_decisions(
    rest: Rest, project: str, decisions: dict[str, dict[str, Any]]
) -> tuple[str, list[str]]:
    """A project with one task and a pending decision on it for each question
    of `decisions` (with its extra fields): (the task's id, the decisions' ids
    in order)."""
    rest.send("POST", "/api/v1/projects", {"id": project, "name": project.title()}, 201)
    task = str(rest.send("POST", f"/api/v1/projects/{project}/tasks", {"title": "Wait"}, 201)["id"])
    return task, [_pending(rest, project, task, q, **f) for q, f in decisions.items()]


def _expiring(served: Server, question: str, seconds: int) -> tuple[str, str]:
    """Project `clock` with one decision, `question`, expiring `seconds`
    after the service's now: (its expiry, its id)."""
    expires = format_time(parse_time(served_now(served)) + timedelta(seconds=seconds))
    admin = Rest(served.url, served.admin_token)
    _, (decision,) = _project_of_decisions(admin, "clock", {question: {"expires_at": expires}})
    return expires, decision


def _on_the_socket(page: Any) -> None:
    """Move the page's clock until the inbox runs on its socket, and past the
    look the socket's start asks for."""
    live = "() => document.documentElement.dataset.live"
    _move_clock(page, 10000, lambda: page.evaluate(live) == "socket", "the socket", 500)
    _move_clock(page, 3000)


@contextmanager
def _signed_in(browser: Any, served: Server, token: str, **options: Any) -> Iterator[Any]:
    """A page of a new browser context (`options`: its time zone, its
    locale) on `served`, its clock installed (the page's timers move only
    when the test moves them), signed in with `token`."""
    context = browser.new_context(**options)
    page = context.new_page()
    page.set_default_timeout(15000)
    try:
        page.clock.install()
        Tab(page, served.url, [], []).sign_in(token)
        yield page
    finally:
        context.close()


def served_now(served: Server) -> str:
    """The service's now, as its answers say it (`Waypost-Now`)."""
    r = httpx.post(served.url + "/graphql", json={"query": "{ __typename }"},
                   headers={"Authorization": f"Bearer {served.admin_token}"})  # fmt: skip
    return str(r.headers["waypost-now"])


def test_a_decision_sliding_into_a_full_inbox_list_is_no_arrival(
    browser: Any, tmp_path: Path
) -> None:
    """The inbox lists 100 of a project's pending decisions. Answering one
    let the 101st slide into view, and the page said "1 new decision awaits
    an answer." though none had come (review70): it counts no more arrivals
    than the rise in the number awaiting. Its own service: 101 pending
    decisions would crowd the shared world's inbox."""
    with serve(tmp_path) as served:
        admin = Rest(served.url, served.admin_token)
        _, ids = _project_of_decisions(admin, "full", {f"Question {n}?": {} for n in range(101)})
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(15000)
        try:
            Tab(page, served.url, [], []).sign_in(served.admin_token)
            listed = page.locator("[data-group=awaiting] [data-decision]")
            listed.first.wait_for()
            assert listed.count() == 100
            assert page.locator(f"[data-decision='{ids[100]}']").count() == 0
            page.locator(f"[data-decision='{ids[0]}'] a").first.focus()
            _record_announcements(page)
            admin.send("POST", f"/api/v1/projects/full/decisions/{ids[0]}/answer", {
                "expected_generation": 1, "disposition": "deny", "answer": "Stop",
                "rationale": "Not now."})  # fmt: skip
            page.locator(f"[data-decision='{ids[100]}']").wait_for(timeout=20000)
            # the same refresh says the focused card left, and nothing else
            _said(page, "The decision you were on left this list")
            said = page.evaluate("() => window.said")
            assert not any("new decision" in s for s in said), said
        finally:
            context.close()


def test_a_project_listed_again_after_being_too_large_brings_no_arrival(
    browser: Any, tmp_path: Path
) -> None:
    """inbox.js, arrivals: a project listed again after being too large to
    list is no news: its decisions awaited all along, unseen in the list,
    and a count of all it lists said "N new decisions" of none that came
    (review70; no test held it, mutantaudit13). Past the object limit (50)
    a project of three decisions is a notice; two answered, it fits, and
    after the minute the page leaves it unasked it is listed again."""
    with serve(tmp_path, "--graphql-max-objects", "50") as served:
        alice = admin_principal(served, "human", "Alice")
        questions = {f"Ship the crowded build now? ({n})": {} for n in range(3)}
        _, ids = _project_of_decisions(alice, "crowded", questions)
        with _signed_in(browser, served, alice.token) as page:
            crowded = page.get_by_role("region", name="Crowded (crowded)")
            crowded.get_by_text("is not listed here").wait_for()
            _record_announcements(page)
            for decision in ids[:2]:
                alice.send("POST", f"/api/v1/projects/crowded/decisions/{decision}/answer", {
                    "expected_generation": 1, "disposition": "deny", "answer": "Stop",
                    "rationale": "Not now."})  # fmt: skip
            card = page.locator(f"[data-group=awaiting] [data-decision='{ids[2]}']")
            _move_clock(page, 130000, lambda: card.count() > 0, "listed again", 5000, 150)
            _move_clock(page, 2000)  # an announcement is made 50 ms after the drawing
            said = page.evaluate("() => window.said")
            assert not any("new decision" in s for s in said), said


def test_an_unanswered_decision_staled_by_an_undone_rules_edit_claims_no_answer(
    tab: Tab, world: World
) -> None:
    """A decision never answered, staled by a rules edit a later edit undid,
    said "The text reads as it did then, but the answer was given before
    those edits": no answer was ever given (consolecrowd). An answered one
    still says its answer came before them."""
    alice = world.alice
    alice.send("POST", "/api/v1/projects", {"id": "undone", "name": "Undone"}, 201)
    made = alice.send("POST", "/api/v1/projects/undone/tasks", {"title": "Rotate keys"}, 201)
    base = {"options": ["Proceed", "Stop"], "rationale": "Needs a human.",
            "required_actor": "human", "environment": "prod", "task_ids": [made["id"]]}  # fmt: skip
    unanswered = alice.send("POST", "/api/v1/projects/undone/decisions",
                            {**base, "question": "Rotate them tonight?"}, 201)  # fmt: skip
    answered = alice.send("POST", "/api/v1/projects/undone/decisions",
                          {**base, "question": "Rotate them tomorrow?"}, 201)  # fmt: skip
    alice.send("POST", f"/api/v1/projects/undone/decisions/{answered['id']}/answer", {
        "expected_generation": 1, "disposition": "deny", "answer": "Stop",
        "rationale": "Not yet.", "conditions_confirmed": False})  # fmt: skip
    policy = alice.get("/api/v1/projects/undone/policy")
    for revision, rules in ((policy["revision"], "temporary"),
                            (policy["revision"] + 1, policy["rules"])):  # fmt: skip
        alice.send("PATCH", "/api/v1/projects/undone/policy",
                   {"expected_revision": revision, "rules": rules})  # fmt: skip
    for asked in (unanswered, answered):
        path = f"/api/v1/projects/undone/decisions/{asked['id']}"
        assert alice.get(path)["status"] == "stale"
    page = tab.page
    tab.sign_in(alice.token)
    page.goto(f"{tab.origin}/console#/p/undone/d/{unanswered['id']}")
    page.get_by_role("heading", name="Why it is stale").wait_for()
    reasons = page.locator(".reason-box").inner_text()
    assert "reads as it did then" in reasons
    assert "answer was given" not in reasons, reasons
    page.goto(f"{tab.origin}/console#/p/undone/d/{answered['id']}")
    page.get_by_role("heading", name="Rotate them tomorrow?").wait_for()
    page.get_by_role("heading", name="Why it is stale").wait_for()
    assert "the answer was given before those edits" in page.locator(".reason-box").inner_text()


def test_the_keyboard_stays_on_the_form_while_an_answer_is_on_its_way(
    tab: Tab, world: World
) -> None:
    """The answer button pressed was disabled while its answer is on its way
    (seconds on a slow network, up to 30), and the focus on it fell to
    <body>: no focus shown, and a screen reader's place lost until the reply
    (a11yjourney: with 1.5 s of latency, 3 s on <body>). The audit mended the
    return of a failed request only; docs/console.md: visible focus, "focus
    moved to the page heading on navigation", nowhere to <body>."""
    page, decision_id = _half_answered(
        tab, world, "Send the invoices today?", "They were checked twice."
    )
    held: list[Any] = []

    def hold_the_answer(route: Any) -> None:
        if "decisionAnswer" in (route.request.post_data or ""):
            held.append(route)
        else:
            route.continue_()

    page.route("**/graphql", hold_the_answer)
    page.get_by_role("button", name="Deny: Proceed").focus()
    page.keyboard.press("Enter")
    page.locator("main").get_by_role("status").get_by_text("Sending…").wait_for()
    _wait_for_held(page, held, "the answer was never sent")
    while_sending = page.evaluate(
        "() => document.activeElement === document.body ? 'BODY'"
        " : (document.activeElement.closest('form') ? 'form' : document.activeElement.tagName)"
    )
    held[0].continue_()
    page.unroute("**/graphql")
    page.locator("main").get_by_text("Your answer is recorded").wait_for()
    assert world.decision(decision_id)["current"]["answer"]["answer"] == "Proceed"
    assert while_sending != "BODY", "the focus fell to <body> while the answer was on its way"


def test_a_focused_card_gone_stale_keeps_the_keyboard_on_it(tab: Tab, world: World) -> None:
    """docs/console.md: "Keyboard focus stays where it was across refreshes:
    ... on the same control of the same card in the same project's section
    (its section's first control if the card left)". A rules edit moved the
    focused card from "Awaiting an answer" to "Stale or expired" in the
    same project's section, and the focus went to the inbox's h1 at the top
    of every project, the page saying the decision left the list
    (a11yjourney): main.js refocus looks in the card's group only, and an
    emptied group falls back to the h1."""
    page = tab.page
    world.alice.send("POST", "/api/v1/projects", {"id": "keeps", "name": "Keeps its place"}, 201)
    task = world.alice.send("POST", "/api/v1/projects/keeps/tasks", {"title": "Wait"}, 201)
    made = world.alice.send("POST", "/api/v1/projects/keeps/decisions", {
        "question": "Goes stale under the focus?", "rationale": "r", "required_actor": "human",
        "environment": "staging", "options": ["Go", "Wait"], "task_ids": [task["id"]]},
        201)  # fmt: skip
    page.clock.install()  # the poll's (or the socket's) seconds pass on the page's clock
    tab.sign_in(world.alice.token)
    page.locator(f"[data-group=awaiting] [data-decision='{made['id']}'] a").first.focus()
    _record_announcements(page)
    policy = world.alice.get("/api/v1/projects/keeps/policy")
    world.alice.send("PATCH", "/api/v1/projects/keeps/policy",
                     {"expected_revision": policy["revision"], "rules": "Ask first."})  # fmt: skip
    stale = page.locator(f"[data-group=reopen] [data-decision='{made['id']}']")
    _move_clock(page, 20000, lambda: stale.count() > 0, "the card's move to the stale group")
    focused = page.evaluate("""() => document.activeElement.closest('[data-decision]')
        ?.dataset.decision ?? document.activeElement.tagName""")
    assert focused == made["id"], f"the focus went to {focused}, not the card it was on"


def test_a_reopening_pressed_again_while_on_its_way_is_sent_once(tab: Tab, world: World) -> None:
    """docs/console.md: while a request is on its way the button pressed is
    busy (`aria-disabled`), "taking no second press". A disabled submit
    button also stopped Enter in the form's text boxes (implicit submission);
    an aria-disabled one does not, so the form's own busy check is all that
    keeps a second Enter, or a second press, from sending it again."""
    page, decision_id = _stale_in_alices_tab(tab, world, "Tag release 13", question="Tag 13?")
    held: list[Any] = []

    def hold_reopenings(route: Any) -> None:
        if "decisionReopen" in (route.request.post_data or ""):
            held.append(route)
        else:
            route.continue_()

    page.route("**/graphql", hold_reopenings)
    page.get_by_label("Why reopen (required)").fill("Release 14 replaces 13.")
    environment = page.get_by_label("Environment")
    environment.press("Enter")
    _wait_for_held(page, held, "the reopening was never sent")
    environment.press("Enter")  # again, while the first is on its way
    # and the button itself, from the keyboard (Playwright's click waits for
    # an aria-disabled button to be enabled)
    page.get_by_role("button", name="Reopen", exact=True).focus()
    page.keyboard.press("Enter")
    held[0].continue_()
    page.locator("main").get_by_text("Reopened: generation 2 awaits an answer.").wait_for()
    for extra in held[1:]:
        extra.continue_()
    page.unroute("**/graphql")
    assert len(held) == 1, f"{len(held)} reopenings were sent"
    assert world.decision(decision_id)["generation"] == 2


def test_a_focused_card_leaving_an_emptied_group_keeps_the_keyboard_in_its_project(
    tab: Tab, world: World
) -> None:
    """docs/console.md: focus stays "on the same control of the same card ...,
    or its group's first control if the card left, else its project's". The
    only decision awaiting in a project (listed after another) is answered
    elsewhere: its group keeps no control, and the focus goes to that
    project's first control, not to the page's heading nor another project."""
    page = tab.page
    world.alice.send("POST", "/api/v1/projects", {"id": "zz-lone", "name": "Lone"}, 201)
    task = world.alice.send("POST", "/api/v1/projects/zz-lone/tasks", {"title": "Wait"}, 201)
    made = world.alice.send("POST", "/api/v1/projects/zz-lone/decisions", {
        "question": "The only one here?", "rationale": "r", "required_actor": "human",
        "environment": "staging", "options": ["Go", "Wait"], "task_ids": [task["id"]]},
        201)  # fmt: skip
    page.clock.install()  # the poll's (or the socket's) seconds pass on the page's clock
    tab.sign_in(world.alice.token)
    page.locator(f"[data-group=awaiting] [data-decision='{made['id']}'] a").first.focus()
    world.alice.send("POST", f"/api/v1/projects/zz-lone/decisions/{made['id']}/answer", {
        "expected_generation": 1, "disposition": "deny", "answer": "Wait",
        "rationale": "Not now."})  # fmt: skip
    card = page.locator(f"[data-decision='{made['id']}']")
    _move_clock(page, 20000, lambda: card.count() == 0, "the card's leaving")
    where = page.evaluate("""() => { const el = document.activeElement;
        const p = el.closest('section.project');
        return [el.tagName, p ? p.getAttribute('aria-labelledby') : null,
          el.getAttribute('href')]; }""")
    assert where == ["A", "proj-zz-lone", "#/p/zz-lone/decisions"], where


def _a_pending_decision_open(
    tab: Tab, world: World, project: str, question: str
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """A new project with one task and a human-required decision on it, its
    page open in `tab` for alice: (page, task, decision)."""
    world.alice.send("POST", "/api/v1/projects", {"id": project, "name": project}, 201)
    task = world.alice.send("POST", f"/api/v1/projects/{project}/tasks", {"title": "T"}, 201)
    made = world.agent.send("POST", f"/api/v1/projects/{project}/decisions", {
        "question": question, "options": ["Yes", "No"], "rationale": "r",
        "required_actor": "human", "environment": "staging",
        "task_ids": [task["id"]]}, 201)  # fmt: skip
    tab.sign_in(world.alice.token)
    tab.page.goto(f"{tab.origin}/console#/p/{project}/d/{made['id']}")
    tab.page.get_by_text("the policy is now at revision 1.").wait_for()
    return tab.page, task, made


def test_an_edit_that_stales_nothing_shows_on_an_open_decision_page(tab: Tab, world: World) -> None:
    """The page watched its decision only: a policy edit that stales nothing
    (the relay switch turned on) left it saying "the policy is now at
    revision 1", and a task's priority edit "now at revision 1" for 70 s,
    past the minute's safety poll; only a reload showed revision 2
    (humanloopjourney). Both sections are drawn again in place, and what
    the human is typing stays."""
    page, task, made = _a_pending_decision_open(tab, world, "quietedit", "Go ahead quietly?")
    page.get_by_label("Why (required)").fill("Half a thought")
    world.alice.send("PATCH", "/api/v1/projects/quietedit/policy",
                     {"expected_revision": 1, "allow_relayed_human_answers": True})  # fmt: skip
    page.get_by_text("the policy is now at revision 2.").wait_for(timeout=10000)
    world.alice.send("PATCH", f"/api/v1/projects/quietedit/tasks/{task['id']}",
                     {"expected_revision": 1, "priority": 9})  # fmt: skip
    page.get_by_text("Pinned to revision 1; now at revision 2.").wait_for(timeout=10000)
    page.get_by_text("Also changed, not judged (does not stale): priority.").wait_for()
    # it stales nothing: the same form, with what was typed
    assert world.alice.get(f"/api/v1/projects/quietedit/decisions/{made['id']}")["status"] == (
        "pending"
    )
    assert page.get_by_label("Why (required)").input_value() == "Half a thought"
    assert "changed elsewhere" not in page.locator("main").inner_text()


def test_an_edit_that_stales_nothing_keeps_the_focus_in_the_redrawn_sections(
    tab: Tab, world: World
) -> None:
    """The sections "Affected tasks" and "Policy" are drawn again in place when an edit
    stales nothing, and the keyboard on the "Policy history" link inside them
    fell to <body> with its section: a screen reader's user lost their place
    on the page where they decide (a11yjourney, WCAG 2.4.3). It stays on the
    same link, at the same place on the screen."""
    page, task, _ = _a_pending_decision_open(tab, world, "pinfocus", "Keep the focus?")
    history = page.get_by_role("link", name="Policy history")
    history.focus()
    top = history.bounding_box()["y"]
    focused = "() => [document.activeElement.tagName, document.activeElement.getAttribute('href')]"
    # the Policy section itself drawn again
    world.alice.send("PATCH", "/api/v1/projects/pinfocus/policy",
                     {"expected_revision": 1, "allow_relayed_human_answers": True})  # fmt: skip
    page.get_by_text("the policy is now at revision 2.").wait_for(timeout=10000)
    assert page.evaluate(focused) == ["A", "#/p/pinfocus/policy"]
    # "Affected tasks", above it, drawn again a line longer
    world.alice.send("PATCH", f"/api/v1/projects/pinfocus/tasks/{task['id']}",
                     {"expected_revision": 1, "priority": 9})  # fmt: skip
    page.get_by_text("Also changed, not judged (does not stale): priority.").wait_for(timeout=10000)
    assert page.evaluate(focused) == ["A", "#/p/pinfocus/policy"]
    assert abs(history.bounding_box()["y"] - top) < 2
