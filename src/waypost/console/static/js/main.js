// The console's shell: sign in and out, hash routes, and the live inbox.

import { forgetToken, gql, retryDelay, saveToken, token, Unauthenticated, whenRefused } from "./api.js";
import { loadDecision, ownChange, pinsOf, redrawPins, renderDecision, statusBadge } from "./decision.js";
import { renderDecisionList } from "./decision-list.js";
import {
  announce, clearAnnouncement, clearError, enc, fill, h, isBusy, isolatedText, msToNextDeadline, noSuch, notice, refreshAgo, sayError,
  setBusy, typedInto, whatYouWrote, words,
} from "./dom.js";
import { arrivals, awaitingByProject, everyProject, loadInbox, renderInbox } from "./inbox.js";
import { renderKnowledgeItem, renderKnowledgeList } from "./knowledge.js";
import { decisionSubscription, Live, projectSubscriptions } from "./live.js";
import { renderPolicy } from "./policy.js";
import { DECISION_VERSION, ME, PROJECTS } from "./queries.js";

const main = document.getElementById("main");
let me = null;
// The sign-in view is on the page (a hash change then leaves it as it is).
let signInShown = false;
// What was typed into the page a refused token took away, kept below the
// sign-in form until someone signs in: a second sign-out for the same refusal
// (the page's own catch after the request's) must not lose it. [label, text]
// of each box (dom.js typedInto).
let keptText = [];
// Who was signed in before the sign-in view: someone else signing in on this
// tab starts at the inbox, not on the page the previous person left open.
let previousPrincipal = null;
let inboxSignature = "";
// per project, the decisions the inbox last listed as awaiting an answer and
// how many awaited (null: none drawn yet)
let inboxAwaiting = null;
const live = new Live(async () => {
  if (currentRoute().name !== "inbox") return;
  const projects = await refreshInbox(false);
  // a project created since the page loaded is watched from now on
  if (projects) live.follow(projectSubscriptions(projects.map((p) => p.restId)));
  refreshAtNextDeadline();
});
// With the socket, the safety poll comes once a minute: an expiry or a
// timeout on the page that passes sooner gets a refresh of its own a second
// after it (a card read "expires in 1 min" for 53 s after its expiry, while
// the decision's page had said it expired: tzaudit).
function refreshAtNextDeadline() {
  if (live.stopped || live.mode !== "socket" || currentRoute().name !== "inbox") return;
  const ahead = msToNextDeadline(main);
  if (ahead !== null && ahead < 60000) live.schedule(ahead + 1000);
}
// On a decision's page: when it changes elsewhere, say so and offer the new
// state (never re-render under someone who is typing an answer).
let watched = null; // {project, id, version}
// a change let pass while this tab's own answer was on its way: looked at
// again once it has settled (someone else's may have come meanwhile)
let passedOver = false;
const decisionLive = new Live(async () => {
  if (!watched) return;
  if (ownChange.isPending(watched.id)) {
    passedOver = true;
    return;
  }
  const number = pageNumber;
  const data = await gql(DECISION_VERSION, { project: watched.project, id: watched.id });
  if (number !== pageNumber || !watched) return; // another page since: not this banner
  // this tab's own answer or reopening (its redraw brings the new version)
  if (ownChange.isPending(watched.id)) {
    passedOver = true;
    return;
  }
  // its "in ..." and "... ago" move on to the service's clock, as the inbox's
  // do: beside "This decision expired while you were reading it" its expiry
  // still read "(in 1 min)" (tzaudit)
  refreshAgo(main);
  const d = data.project && data.project.decision;
  if (d && versionOf(d) === watched.version) {
    // the same decision; its tasks or the policy may have moved on
    if (pinsOf(data.project) !== watched.pins) await redrawMovedPins(number);
    return;
  }
  if (!d) return;
  const version = versionOf(d);
  const status = d.status.toLowerCase();
  const now = `it is now ${status}, generation ${d.generation}. `;
  const ours = recordedOwnChange(watched.id, d);
  // its expiry passed while it was read: the same generation, and no answer
  // since (an expired status hides one given elsewhere meanwhile, which is a
  // change elsewhere); an edit that made it stale first cannot be told from
  // the version, and reads as the expiry it also is
  const [generation, , answeredAt] = watched.version.split("/");
  const expired = !ours && d.status === "EXPIRED" && generation === String(d.generation)
    && answeredAt === (d.current.answer ? d.current.answer.at : "");
  const text = ours
    ? `Your ${ours} was recorded, though its reply did not reach this page: ${now}`
    : expired ? `This decision expired while you were reading it: ${now}`
      : `This decision changed elsewhere: ${now}`;
  const said = ours ? `Your ${ours} was recorded.` : expired ? "This decision expired." : null;
  // the form's "cannot be reached" stayed under a banner saying the answer
  // was recorded (consolecrowd): what it said is answered now
  if (ours) main.querySelectorAll(".form-error").forEach(clearError);
  const statusShown = main.querySelector("#decision-status");
  if (statusShown) statusShown.replaceWith(statusBadge(d));
  const shown = document.getElementById("changed-elsewhere");
  if (shown) {
    // a later change (a reopening after an answer) is said too, in place:
    // the notice kept the first one's words while the form went on offering
    // an answer to the old generation
    if (shown.dataset.version === version) return;
    shown.dataset.version = version;
    shown.querySelector(".changed-text").textContent = text;
    announce(said || `This decision changed elsewhere again: it is now ${status}.`);
    return;
  }
  const { project, id } = watched;
  const kind = ours ? "ok" : "conflict";
  const banner = notice(kind, h("span", { class: "changed-text" }, text),
    h("button", { type: "button", class: "btn", onclick: () => showDecision(project, id, keptBanner(kind)) },
      "Show the new state"));
  banner.id = "changed-elsewhere";
  banner.dataset.version = version;
  const heading = main.querySelector("h1");
  if (heading) inPlaceOfFocus(() => (heading.nextElementSibling || heading).after(banner));
  // its new status said, as the banner shows it: "changed elsewhere" alone
  // left a screen reader to find the banner to learn it went stale (a11yjourney)
  announce(said || `This decision changed elsewhere: it is now ${status}.`);
});

// Run `change` (something drawn above the keyboard's place) and keep the
// focused control where it was on the screen: the banner pushed an answer
// button at the foot of the window out of sight, the focus still on it
// (a11yaudit). Nothing moves when the focus is above the change or out of view.
function inPlaceOfFocus(change) {
  const focused = main.contains(document.activeElement) ? document.activeElement : null;
  const before = focused ? focused.getBoundingClientRect().top : null;
  change();
  if (focused === null || before < 0 || before >= window.innerHeight) return;
  const shift = focused.getBoundingClientRect().top - before;
  if (shift > 0) window.scrollBy(0, shift);
}

// Pressing "Show the new state" redraws the form empty: what was typed into it
// stays under "What you wrote", with what changed, as a conflict's notice
// keeps it (it was lost). Nothing typed: no notice.
function keptBanner(kind) {
  const kept = whatYouWrote(typedInto(main));
  if (!kept) return null;
  const said = document.querySelector("#changed-elsewhere .changed-text");
  return notice(kind, said ? said.textContent : "", kept);
}

// "answer" or "reopening" when `d` holds the one this tab sent and never
// heard back about (the same principal and the same words, on the generation
// it was sent for), else null.
function recordedOwnChange(id, d) {
  const lost = ownChange.lost.get(id);
  if (!lost || !me) return null;
  const a = d.current.answer;
  let ours = null;
  if (lost.reopen !== undefined) {
    if (d.generation === lost.generation + 1 && d.current.actorId === me.restId
      && d.current.reopenRationale === lost.reopen) ours = "reopening";
  } else if (a && d.generation === lost.generation && a.actorId === me.restId
    && a.disposition === lost.answer.disposition && a.answer === lost.answer.answer
    && a.rationale === lost.answer.rationale) {
    ours = "answer";
  }
  if (ours) ownChange.lost.delete(id);
  return ours;
}

ownChange.settled = (id) => {
  if (passedOver && watched && watched.id === id && !decisionLive.stopped) {
    passedOver = false;
    decisionLive.run();
  }
};

function versionOf(d) {
  return `${d.generation}/${d.status}/${d.current.answer ? d.current.answer.at : ""}`;
}

// Each route() is a page of its own: a load that ends after the next page
// began (a slow answer, a link followed meanwhile) must not replace that page.
let pageNumber = 0;
let routedTo = null; // the address of the page last routed to

function showFor(number, parts, focus = true) {
  if (number === pageNumber) show(parts, focus);
}

// The heading's text less the console's notes on it (inside the title's
// isolate, after an override, the note itself would read backwards).
function headingText(heading) {
  const copy = heading.cloneNode(true);
  for (const note of copy.querySelectorAll(".controls-note")) note.remove();
  return copy.textContent;
}

function show(parts, focus = true) {
  // a part left out by a condition is null: replaceChildren would show "null"
  main.replaceChildren(...parts.filter((part) => part !== null));
  const heading = main.querySelector("h1");
  // the tab's title is the page's heading, whatever drew it: set by each
  // route before its page loaded, a picker, "Not found" or a failed load
  // kept the title of the page before
  document.title = `${isolatedText(heading ? headingText(heading) : "Waypost")} · Waypost console`;
  if (!focus) return;
  // a page may say where the keyboard goes first: a refused filter's box
  // (docs/console.md: "the focus goes there"; it stayed on the heading)
  const first = main.querySelector("[data-focus-first]");
  if (first) {
    delete first.dataset.focusFirst;
    first.focus();
  } else {
    (heading || main).focus();
  }
}

// The sections a project is picked for (one project: straight to its page).
const PICKED = ["decisions", "knowledge", "policy"];
const SECTION_TITLES = { decisions: "Decisions", knowledge: "Knowledge", policy: "Policy" };

// The section each page belongs to, by its link in the navigation.
const SECTION_OF = {
  inbox: "#/", decision: "#/decisions", decisions: "#/decisions", "decisions-pick": "#/decisions",
  knowledge: "#/knowledge", "knowledge-item": "#/knowledge", "knowledge-pick": "#/knowledge",
  policy: "#/policy", "policy-pick": "#/policy",
};

// The navigation says which section is shown, to the eye and to a screen
// reader (`aria-current`); it said nothing (a11yaudit).
function markSection(name) {
  for (const link of document.querySelectorAll("#nav a")) {
    if (link.getAttribute("href") === SECTION_OF[name]) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

function currentRoute() {
  const [path, search] = (location.hash.replace(/^#/, "") || "/").split("?");
  // a link with a broken percent-escape is a page that does not exist
  // (decodeURIComponent threw, and the page stayed on "Loading..." for ever)
  const parts = path.split("/").filter(Boolean).map((part) => {
    try {
      return decodeURIComponent(part);
    } catch {
      return null;
    }
  });
  if (parts.includes(null)) return { name: "unknown" };
  if (!parts.length) return { name: "inbox" };
  if (PICKED.includes(parts[0]) && parts.length === 1) return { name: `${parts[0]}-pick` };
  if (parts[0] === "p" && parts.length >= 3) {
    const project = parts[1];
    if (parts[2] === "d" && parts[3]) return { name: "decision", project, id: parts[3] };
    if (parts[2] === "knowledge") return { name: "knowledge", project, query: new URLSearchParams(search || "") };
    if (parts[2] === "decisions") return { name: "decisions", project, query: new URLSearchParams(search || "") };
    if (parts[2] === "k" && parts[3]) return { name: "knowledge-item", project, id: parts[3] };
    if (parts[2] === "policy") return { name: "policy", project };
  }
  return { name: "unknown" };
}

// `kept`: what was typed on the page a refused token took away (an answer's
// rationale), shown to copy from, as a conflict notice keeps it.
function signInView(message, kept = []) {
  const input = h("input", { id: "token", name: "token", type: "password", autocomplete: "off",
    spellcheck: "false", required: true, "aria-describedby": "token-hint" });
  // no live region around it: the notice is a role=alert (both, it was read twice)
  const error = h("div", {}, message ? notice("error", message) : null);
  const button = h("button", { type: "submit", class: "btn btn-primary" }, "Sign in");
  // novalidate: the page's own refusal, tied to the box, not the browser's bubble
  const form = h("form", { class: "sign-in", novalidate: true, onsubmit: async (event) => {
    event.preventDefault();
    if (isBusy(button)) return;
    const value = input.value.trim();
    if (!value) {
      sayError(error, input, "Paste your token first.");
      return;
    }
    setBusy(button, true);
    try {
      const data = await gql(ME, {}, value);
      saveToken(value);
      if (previousPrincipal !== null && previousPrincipal !== data.me.restId) {
        history.replaceState(null, "", `${location.pathname}${location.search}#/`);
      }
      signedIn(data.me);
      await route();
    } catch (failure) {
      const text = failure instanceof Unauthenticated
        ? "That token was not accepted: it may be mistyped, revoked, or not an API token."
        : failure.message;
      sayError(error, input, text);
      input.select();
    } finally {
      setBusy(button, false);
    }
  } },
  h("div", { class: "field" },
    h("label", { for: "token" }, "API token"),
    h("p", { id: "token-hint", class: "hint" },
      "A human principal's token (wp_…). It stays in this browser tab only and is sent to this Waypost's /graphql."),
    input),
  button, error);
  return [h("h1", { tabindex: "-1" }, "Sign in"), form, whatYouWrote(kept, true)];
}

function signedIn(principal) {
  me = principal;
  signInShown = false;
  keptText = [];
  fill(document.getElementById("who-name"), words`${principal.name} (${principal.kind.toLowerCase()})`);
  document.getElementById("who").hidden = false;
  document.getElementById("nav").hidden = false;
}

// `forget`: the tab's storage goes too (a sign-out, a refused token). A page
// opened without a token has nothing of the console's to forget, and keeps
// what GraphiQL holds there for a token pasted in by hand.
function signOut(message, forget = true) {
  // a refused token (not a sign-out asked for) keeps what was being typed:
  // the page under it goes, and someone may be halfway through an answer.
  // Only boxes typed into (a reopen form's Conditions box comes filled in),
  // inputs too (its edited Environment was lost), each with its label.
  if (message) {
    const typed = typedInto(main);
    if (typed.length) keptText = typed;
  } else if (forget) {
    keptText = [];
  }
  pageNumber += 1; // a load still on its way is no longer anyone's page
  live.stop();
  decisionLive.stop();
  watched = null;
  if (forget) forgetToken();
  if (me !== null) previousPrincipal = me.restId;
  me = null;
  inboxSignature = "";
  inboxAwaiting = null;
  document.getElementById("who").hidden = true;
  document.getElementById("nav").hidden = true;
  show(signInView(message, keptText));
  signInShown = true;
}

async function refreshInbox(focus, number = pageNumber) {
  const projects = await loadInbox();
  if (number !== pageNumber) return null;
  // (the inbox asks for nothing that changes on every load, such as the
  // digest's `generatedAt`: with it, every refresh redrew the page and a
  // selection was lost every 4 s)
  const signature = JSON.stringify(projects);
  if (!focus && signature === inboxSignature) {
    refreshAgo(main);
    return null;
  }
  inboxSignature = signature;
  // what arrived is said, not only drawn (a11yaudit2): a page load's drawing
  // is the baseline, said nothing of
  const awaiting = awaitingByProject(projects);
  const arrived = focus || inboxAwaiting === null ? 0 : arrivals(inboxAwaiting, awaiting);
  inboxAwaiting = awaiting;
  // a background refresh keeps the keyboard focus, and the page, where they were
  const place = focus ? null : focusPlace(document.activeElement);
  const scrolled = window.scrollY;
  const focused = place && !place.heading ? document.activeElement.getBoundingClientRect().top : null;
  showFor(number, renderInbox(projects), focus);
  if (!focus) {
    window.scrollTo(0, scrolled);
    const left = refocus(place);
    // the focused control stays where it was on the screen: a card drawn above
    // it pushed it out of sight, the page at the same scroll position (a11yaudit2)
    if (focused !== null && focused >= 0 && focused < window.innerHeight && main.contains(document.activeElement)) {
      window.scrollBy(0, document.activeElement.getBoundingClientRect().top - focused);
    }
    const said = [
      arrived ? `${arrived} new decision${arrived > 1 ? "s await" : " awaits"} an answer.` : "",
      // the focus moved to another card's control without a word, and Enter
      // then opened a question other than the one the keyboard was on
      left === "decision" ? "The decision you were on left this list (answered or changed elsewhere)." : "",
      left === "task" ? "The task you were on left this list." : "",
    ].filter(Boolean).join(" ");
    if (said) announce(said);
  }
  return projects;
}

// Where the keyboard focus is, in terms that survive a re-render: the h1, or
// a control by its section (one project's group), its card and its text.
function focusPlace(el) {
  if (!el || !main.contains(el) || el === main) return null;
  if (el.matches("h1")) return { heading: true };
  const section = el.closest("section[aria-labelledby]");
  const card = el.closest("[data-decision], [data-task]");
  const project = el.closest("section.project");
  return {
    section: section ? section.getAttribute("aria-labelledby") : null,
    project: project ? project.getAttribute("aria-labelledby") : null,
    card: card ? card.dataset.decision || card.dataset.task : null,
    kind: card ? (card.dataset.decision ? "decision" : "task") : null,
    href: el.getAttribute("href"),
    text: el.textContent,
  };
}

function refocus(place) {
  if (!place) return null;
  const heading = main.querySelector("h1");
  if (place.heading) {
    if (heading) heading.focus({ preventScroll: true });
    return null;
  }
  const section = place.section
    && main.querySelector(`section[aria-labelledby="${CSS.escape(place.section)}"]`);
  const project = place.project
    && main.querySelector(`section.project[aria-labelledby="${CSS.escape(place.project)}"]`);
  const key = place.card && CSS.escape(place.card);
  const within = (root) => root && root.querySelector(`[data-decision="${key}"], [data-task="${key}"]`);
  // the same card in its group, else in another group of its project (a
  // decision gone stale moves from "Awaiting" to "Stale or expired")
  const card = key && (within(section || main) || within(project));
  const scope = card || section || main;
  const same = [...scope.querySelectorAll("a[href], button")].find((e) =>
    e.getAttribute("href") === place.href && e.textContent === place.text);
  // the card left (answered elsewhere): its section's first control, else
  // its project's, else the h1
  const target = same || (scope !== main ? scope.querySelector("a[href], button") : null)
    || (project ? project.querySelector("a[href], button") : null) || heading;
  if (target) target.focus({ preventScroll: true });
  // what the card the focus was in held, when it left: "decision" or "task"
  return place.card && !card ? place.kind : null;
}

async function pickProject(kind, number = pageNumber) {
  const projects = await everyProject(PROJECTS);
  if (number !== pageNumber) return;
  if (projects.length === 1) {
    location.replace(`#/p/${enc(projects[0].restId)}/${kind}`);
    return;
  }
  show([h("h1", { tabindex: "-1" }, SECTION_TITLES[kind]),
    projects.length ? h("ul", {}, projects.map((p) => h("li", {},
      h("a", { href: `#/p/${enc(p.restId)}/${kind}` }, p.name, ` (${p.restId})`))))
      : h("p", {}, "No projects yet.")]);
}

// A page that could not reach the service loads again by itself, backing off
// to once a minute (as the live refreshes do), until it can.
// `automatic`: the route now running is the back-off's retry, not a person's
const reload = { timer: null, delay: 2000, automatic: false };

async function route() {
  const mine = ++pageNumber;
  if (location.hash !== routedTo) {
    // what was said of the last page ("Answer recorded.") is no longer
    // true of this one, and a screen reader reading on still came upon it
    routedTo = location.hash;
    clearAnnouncement();
  }
  clearTimeout(reload.timer);
  const automatic = reload.automatic;
  reload.automatic = false;
  if (!token()) {
    if (!signInShown) signOut(null, false);
    return;
  }
  const r = currentRoute();
  markSection(r.name);
  if (r.name !== "inbox") live.stop();
  if (r.name !== "decision") {
    decisionLive.stop();
    watched = null;
  }
  try {
    if (me === null) {
      // who the stored token names is part of loading any page: one lost
      // reply to it left a page with no Sign out and a revoked token that
      // never signed out (whenRefused waits for `me`)
      const data = await gql(ME);
      if (mine !== pageNumber) return;
      signedIn(data.me);
    }
    if (r.name === "inbox") {
      inboxSignature = "";
      const projects = await refreshInbox(true);
      if (live.stopped && projects) live.start(projectSubscriptions(projects.map((p) => p.restId)), token());
    } else if (r.name === "decision") {
      await showDecision(r.project, r.id, null);
    } else if (r.name.endsWith("-pick")) {
      await pickProject(r.name.replace("-pick", ""));
    } else if (r.name === "knowledge") {
      showFor(mine, await renderKnowledgeList(r.project, r.query));
    } else if (r.name === "decisions") {
      showFor(mine, await renderDecisionList(r.project, r.query));
    } else if (r.name === "knowledge-item") {
      showFor(mine, await renderKnowledgeItem(r.project, r.id));
    } else if (r.name === "policy") {
      showFor(mine, await renderPolicy(r.project));
    } else {
      show([h("h1", { tabindex: "-1" }, "Not found"), h("p", {}, h("a", { href: "#/" }, "Back to the inbox"))]);
    }
  } catch (error) {
    if (error instanceof Unauthenticated) {
      signOut("Your token is no longer accepted (revoked?). Sign in again.");
      return;
    }
    if (mine !== pageNumber) return; // a later page is showing: this one's fault is moot
    if (me === null) {
      // who the token names is not known yet (the fault was its question's):
      // Sign out all the same, a way off a page that may not load
      fill(document.getElementById("who-name"));
      document.getElementById("who").hidden = false;
    }
    // unreachable, or busy for now (503 `unavailable`: it said "retry")
    const passing = error.code === "network" || error.code === "unavailable";
    const failure = `${location.hash}\n${error.message}`;
    const shown = main.querySelector("h1[data-failed]");
    if (automatic && passing && shown && shown.dataset.failed === failure) {
      // the back-off's retry failed as the last attempt did: the page stays
      // as it is (each redraw took the focus back to the heading and said
      // the alert again, four times a minute, from a link being reached)
      retryLater(error);
      return;
    }
    show([h("h1", { tabindex: "-1", "data-failed": failure }, "Something went wrong"), notice("error", error.message),
      passing ? h("p", { class: "muted" }, "This page tries again by itself.") : null,
      // on the inbox its own link changes no route: a button loads it again
      r.name === "inbox"
        ? h("p", {}, h("button", { type: "button", class: "btn", onclick: () => route() }, "Try again"))
        : h("p", {}, h("a", { href: "#/" }, "Back to the inbox"))]);
    if (passing) retryLater(error);
    return;
  }
  reload.delay = 2000;
}

// The page loads again by itself, backing off to once a minute, or when the
// service's Retry-After said (it is starting: the back-off restarts).
function retryLater(error) {
  const asked = retryDelay(error, null, 60000);
  reload.timer = setTimeout(() => {
    reload.automatic = true;
    route();
  }, asked !== null ? asked : reload.delay);
  reload.delay = asked !== null ? 2000 : Math.min(reload.delay * 2, 60000);
}

// Whether it drew the page: false when another page is showing by then.
async function showDecision(project, id, banner, number = pageNumber) {
  const data = await loadDecision(project, id);
  if (number !== pageNumber) return false;
  if (typeof data === "string") {
    show(noSuch(data));
    return true;
  }
  const onChanged = async (newBanner) => {
    try {
      // this page's number: an answer that returns after a link was followed
      // must not draw this decision over the page followed to
      return await showDecision(project, id, newBanner, number);
    } catch (error) {
      if (error instanceof Unauthenticated) signOut("Your token is no longer accepted (revoked?). Sign in again.");
      else throw error;
      return false;
    }
  };
  show(renderDecision(data, banner, onChanged));
  const previous = watched;
  watched = { project, id, version: versionOf(data.decision), pins: pinsOf(data) };
  // another decision's page (a pasted link, Back): its own subscription
  if (previous && previous.id !== id) decisionLive.stop();
  // and the project's events: an edit that stales nothing changes no
  // decision, yet the page shows the revisions it moves
  const follows = [...decisionSubscription(id), ...projectSubscriptions([project])];
  if (decisionLive.stopped) decisionLive.start(follows, token());
  return true;
}

// The decision's tasks or the policy moved on without the decision changing:
// its "Affected tasks" and "Policy" drawn again, nothing else.
async function redrawMovedPins(number) {
  const { project, id } = watched;
  const data = await loadDecision(project, id);
  if (number !== pageNumber || !watched || watched.id !== id || typeof data === "string") return;
  if (versionOf(data.decision) !== watched.version) return; // changed: the banner's turn
  redrawPins(main, data);
  watched.pins = pinsOf(data);
}

const REFUSED = "Your token is no longer accepted (revoked?). Sign in again.";

async function start() {
  // a text box typed into: what a refused token's sign-out keeps (signOut),
  // a one-line box as much as a textarea (not the token's password box)
  main.addEventListener("input", (event) => {
    const el = event.target;
    const oneLine = el instanceof HTMLInputElement && ["text", "search"].includes(el.type);
    if (el instanceof HTMLTextAreaElement || oneLine) el.dataset.typed = "true";
  });
  document.getElementById("sign-out").addEventListener("click", () => signOut(null));
  // "#main" would be read as a route ("Not found"): move the focus instead
  document.querySelector("a.skip").addEventListener("click", (event) => {
    event.preventDefault();
    main.focus();
  });
  // any request that finds the stored token refused signs out, a background
  // refresh or a form as much as a page load (docs/console.md)
  whenRefused(() => {
    if (me !== null) signOut(REFUSED);
  });
  window.addEventListener("hashchange", route);
  await route(); // it asks who the stored token names first (a page load's part)
}

start();
