// A decision's page: what is asked, why it blocks, every generation, and the
// answer (or reopen) form. The page fills in the idempotency key and the
// expected generation itself.

import { allNodes, gql, mutate, onceAnswered } from "./api.js";
import { renderFieldDiffs, renderDiff } from "./diff.js";
import {
  ago, announce, badge, clearError, enc, h, isBusy, link, lower, newKey, nextId, notice, sayError,
  setBusy, timeoutDue, until, whatYouWrote, when, words,
} from "./dom.js";
import { ANSWER_DECISION, DECISION, DECISION_GENERATIONS, POLICY, REOPEN_DECISION } from "./queries.js";
import { instantEcho, localInstant } from "./localtime.js";

// The service's limit on an answer's or a reopen's rationale (characters):
// the form stops there instead of sending what would be refused.
const RATIONALE_MAX = 16384;
// the API's bounds (resolvers/decisions/models.py), said in the form's words
const ENVIRONMENT_MAX = 200;
const CONDITIONS_MAX = 50;
const CONDITION_MAX = 1000;

// the task fields an answer judges (resolvers/tasks/models.py JUDGED_FIELDS):
// one edit may change these and others (a title and a priority at once)
const JUDGED_FIELDS = new Set(["title", "description", "acceptance_criteria", "kind"]);

// The fields changed between a pin and now, split into what stales an
// answer and what does not.
function changedSince(revs, a) {
  const fields = new Set();
  for (const r of revs) {
    if (r.revision > a.pinnedRevision && r.revision <= a.currentRevision) {
      for (const f of r.changedFields) fields.add(f);
    }
  }
  return {
    judged: [...fields].filter((f) => JUDGED_FIELDS.has(f)),
    other: [...fields].filter((f) => !JUDGED_FIELDS.has(f)),
  };
}

const JUDGED = [
  ["Title", (r) => r.title],
  ["Description", (r) => r.description],
  ["Acceptance criteria", (r) => r.acceptanceCriteria.map((c) => `- ${c}`).join("\n")],
  ["Kind", (r) => r.kind],
];

// This tab's own answers and reopenings on their way, by decision (until the
// page has been drawn again): the change they make is not "elsewhere"
// (main.js), and a screen reader heard "This decision changed elsewhere"
// after its own "Answer recorded" whenever the redraw came after the
// change's event. `settled(id)`: main.js checks again what it let pass.
export const ownChange = {
  pending: new Map(),
  // answers and reopenings whose reply never came (the service unreachable,
  // or silent for 30 s), by decision: what was sent, so that the page knows
  // its own change when it shows up recorded (it was announced as a change
  // made elsewhere)
  lost: new Map(),
  settled: null,
  isPending(id) {
    return this.pending.has(id);
  },
};

// One key per form of a decision's generation for the tab's life, not per
// drawing of the form: a person who left the page while an answer was on
// its way, came back and answered again sent a second key, and the two
// answers raced as if two people had (the first then read "Someone else
// answered first", of their own). The same key makes the second a replay
// or a refusal that says the first may have been recorded. A refused
// request keeps no receipt, so its key serves the corrected one.
const formKeys = new Map();

function formKey(form) {
  if (!formKeys.has(form)) formKeys.set(form, newKey(form));
  return formKeys.get(form);
}

async function asOwnChange(id, send) {
  ownChange.pending.set(id, (ownChange.pending.get(id) || 0) + 1);
  try {
    return await send();
  } finally {
    const left = ownChange.pending.get(id) - 1;
    if (left) {
      ownChange.pending.set(id, left);
    } else {
      ownChange.pending.delete(id);
      if (ownChange.settled) ownChange.settled(id);
    }
  }
}

// The project with its decision, or what is not there ("project" or
// "decision": a missing project read "No such decision", consoledocaudit).
export async function loadDecision(projectId, decisionId) {
  const data = await gql(DECISION, { project: projectId, id: decisionId });
  if (!data.project) return "project";
  if (!data.project.decision) return "decision";
  // the pinned policy revision may be older than the newest page of history
  const pinned = data.project.decision.current.policyRevision;
  const history = await allNodes(data.project.policyHistory, async (after) => {
    const more = await gql(POLICY, { project: projectId, after });
    return more.project && more.project.policyHistory;
  }, (nodes) => nodes.some((r) => r.revision <= pinned));
  data.project.policyHistory = { edges: history.map((node) => ({ node })) };
  // every generation, as the page promises, a page of 100 at a time
  const generations = await allNodes(data.project.decision.generations, async (after) => {
    const more = await gql(DECISION_GENERATIONS, { project: projectId, id: decisionId, after });
    return more.project && more.project.decision && more.project.decision.generations;
  });
  data.project.decision.generations = { edges: generations.map((node) => ({ node })) };
  return data.project;
}

// What the page's "Affected tasks" and "Policy" sections show moving on
// without the decision changing: an edit that stales nothing (a priority, a
// policy flag) moves a task's or the policy's revision, and the open page
// kept "now at revision 1" until a reload (humanloopjourney).
export function pinsOf(project) {
  const affected = project.decision.current.affected.map((a) => `${a.taskId}:${a.currentRevision}`);
  return `${project.policy.revision}/${affected.join(",")}`;
}

// Those two sections drawn again from `project` in place, the rest of the
// page (an answer being typed) untouched.
// The keyboard on a control inside them (the "Policy history" link) stays on
// the same control of the section drawn again, where it was on the screen: it
// fell to <body> with the old section (a11yjourney).
export function redrawPins(root, project) {
  const focused = document.activeElement;
  const top = focused ? focused.getBoundingClientRect().top : 0;
  let refocus = null;
  for (const [heading, draw] of [["affected-h", renderAffected], ["policy-h", renderPolicyPin]]) {
    const old = root.querySelector(`section[aria-labelledby="${heading}"]`);
    if (!old) continue;
    const fresh = draw(project);
    if (old.contains(focused)) refocus = { fresh, at: controlsIn(old).indexOf(focused) };
    old.replaceWith(fresh);
  }
  if (!refocus) return;
  let target = controlsIn(refocus.fresh)[refocus.at];
  if (!target) {
    target = refocus.fresh.querySelector("h2");
    target.tabIndex = -1;
  }
  target.focus({ preventScroll: true });
  if (top >= 0 && top < window.innerHeight) window.scrollBy(0, target.getBoundingClientRect().top - top);
}

function controlsIn(section) {
  return [...section.querySelectorAll("a[href], button, input, select, textarea, [tabindex]")];
}

// Why a decision stopped counting, from its pins and the records now.
export function staleReasons(project) {
  const d = project.decision;
  const reasons = [];
  if (d.status === "EXPIRED") {
    reasons.push(h("li", {}, "Its expiry passed ", ago(d.current.expiresAt), " (", when(d.current.expiresAt), ")."));
  }
  for (const a of d.current.affected) {
    if (!a.task || a.currentRevision === a.pinnedRevision) continue;
    const revs = a.task.revisions.edges.map((e) => e.node);
    const { judged } = changedSince(revs, a);
    if (judged.length) {
      reasons.push(h("li", {}, words`Task "${a.task.title}" changed what was judged (${judged.join(", ")}) `,
        `between revision ${a.pinnedRevision} and ${a.currentRevision}.`));
    }
  }
  const edits = rulesEditsSince(project, d.current.policyRevision);
  if (edits.length) {
    // an unanswered decision goes stale too: it was asked, not answered, before them
    const before = d.current.answer ? "the answer was given" : "the question was asked";
    const back = rulesAt(project, d.current.policyRevision) === project.policy.rules
      ? ` The text reads as it did then, but ${before} before those edits.` : "";
    reasons.push(h("li", {}, `The project's rules changed since policy revision ${d.current.policyRevision}: `,
      `at revision ${edits.join(", ")} (now ${project.policy.revision}).${back}`));
  }
  return reasons;
}

function rulesAt(project, revision) {
  const found = project.policyHistory.edges.find((e) => e.node.revision === revision);
  return found ? found.node.rules : null;
}

// The policy revisions after `pinned` that changed the rules text (what makes
// an answer stale, even when a later edit puts the old text back).
function rulesEditsSince(project, pinned) {
  const revisions = project.policyHistory.edges.map((e) => e.node).filter((r) => r.revision >= pinned);
  const byNumber = new Map(revisions.map((r) => [r.revision, r.rules]));
  return revisions.filter((r) => r.revision > pinned && byNumber.has(r.revision - 1)
    && byNumber.get(r.revision - 1) !== r.rules).map((r) => r.revision).sort((a, b) => a - b);
}

// Whether this cycle can time out, as the service decides it (docs/decisions.md,
// migration 0029): "yes: unanswered for 24 hours, the recommendation applies"
// was said of one that expires first, or that an agent asked of a human, which
// the sweep never answers (consoletruth).
function reversibleRow(d) {
  if (!d.reversible) return "no";
  const c = d.current;
  const due = timeoutDue(c.at);
  if (c.answer) return "yes: a cycle left unanswered for 24 hours gets its recommendation";
  if (d.status !== "PENDING") return `yes, but not this cycle: the sweep answers no ${lower(d.status)} decision`;
  if (c.expiresAt && Date.parse(c.expiresAt) <= Date.parse(due)) {
    return "yes, but not this cycle: it expires before its 24 hours";
  }
  if (d.requiredActor === "HUMAN" && c.actor && c.actor.kind === "AGENT") {
    return "yes, but not this cycle: an agent asked it of a human, who answers it";
  }
  return ["yes: the sweep may apply the recommendation from ", when(due), " (", until(due),
    ") unless someone answers first"];
}

// The decision's status under its heading; a change noticed while the page is
// read redraws it (main.js): it said "pending" beside the banner's "it is now
// stale" until "Show the new state" was pressed (humanloopjourney).
export function statusBadge(d) {
  const shown = badge(lower(d.status), d.status);
  shown.id = "decision-status";
  return shown;
}

export function renderDecision(project, banner, onChanged) {
  const d = project.decision;
  const parts = [
    h("p", {}, link("#/", "← Inbox")),
    h("h1", { tabindex: "-1" }, d.question),
    h("p", { class: "meta" }, statusBadge(d), " ",
      // workAllowed is this decision's alone: "Work may go on" was said of a
      // task another decision still blocked (consoletruth)
      d.workAllowed ? "This decision blocks none of its tasks (another may)."
        : "Work on the affected tasks is blocked.",
      words` Generation ${d.generation} · project ${project.name}`),
  ];
  if (banner) parts.push(banner);
  parts.push(renderAsked(project));
  const open = d.status === "PENDING" && !d.current.answer;
  if (d.status === "STALE" || d.status === "EXPIRED") {
    const reasons = staleReasons(project);
    parts.push(h("section", { class: "reason-box", "aria-labelledby": "why-stale" },
      h("h2", { id: "why-stale" }, d.status === "STALE" ? "Why it is stale" : "Why it expired"),
      reasons.length ? h("ul", {}, reasons) : h("p", {}, "A pin changed since it was judged."),
      h("p", {}, "It cannot be answered until it is reopened, so that the answer is pinned to what the tasks and rules say now.")));
    parts.push(renderReopen(project, onChanged, true));
  } else if (open) {
    parts.push(renderAnswerForm(project, onChanged));
  } else {
    parts.push(renderReopen(project, onChanged, false));
  }
  parts.push(renderAffected(project));
  parts.push(renderPolicyPin(project));
  parts.push(renderHistory(project));
  return parts;
}

function row(label, ...value) {
  return [h("dt", {}, label), h("dd", {}, ...value)];
}

function renderAsked(project) {
  const d = project.decision;
  const c = d.current;
  const who = c.actor || d.createdBy;
  return h("section", { "aria-labelledby": "asked" },
    h("h2", { id: "asked" }, "What is asked"),
    h("dl", { class: "facts" },
      row("Rationale", h("span", { class: "prose" }, d.rationale)),
      row("Options", h("ul", { class: "inline-list" }, d.options.map((o) =>
        h("li", {}, o, o === d.recommendation ? h("span", { class: "muted" }, " (recommended)") : null)))),
      row("Conditions", conditionList(c.conditions)),
      row("Environment", h("span", { class: "prose" }, c.environment)),
      row("Expires", c.expiresAt ? [when(c.expiresAt), " (", until(c.expiresAt), ")"] : "never"),
      row("Who answers", lower(d.requiredActor)),
      row("Reversible", reversibleRow(d)),
      row("Asked", who ? words`${who.name} (${lower(who.kind)}), ` : "", ago(c.at)),
      row("Pinned policy", `revision ${c.policyRevision}`),
      c.reopenRationale ? row("Reopened because", h("span", { class: "prose" }, c.reopenRationale)) : null,
      c.answer ? row("Answer", describeAnswer(c.answer)) : null,
    ));
}

function describeAnswer(a) {
  const who = a.actor ? words`${a.actor.name} (${lower(a.actor.kind)})` : "unknown";
  return h("span", {}, badge(lower(a.disposition), a.disposition), words` "${a.answer}" by ${who}, `, ago(a.at),
    a.timedOut ? " (applied by timeout)" : "", a.relayed ? " (relayed)" : "");
}

function renderAnswerForm(project, onChanged) {
  const d = project.decision;
  const key = formKey(`answer-${d.restId}-g${d.generation}`);
  const rationaleId = nextId("rationale");
  // no live region of its own: each refusal in it is a role=alert notice,
  // and both together had it read twice
  const errorBox = h("div", { class: "form-error" });
  const status = sendingStatus();
  const rationale = h("textarea", { id: rationaleId, name: "rationale", rows: "3", required: true,
    maxchars: RATIONALE_MAX, dataset: { kept: "Rationale" },
    "aria-describedby": `${rationaleId}-hint` });
  const confirms = [
    ...d.current.conditions.map((c) => [words`Condition: ${c}`, c]),
    [words`Environment: ${d.current.environment}`, null],
  ].map(([text]) => {
    const id = nextId("confirm");
    const box = h("input", { type: "checkbox", id, name: "confirm" });
    // `prose`: a condition's own line breaks, here where the person vouches for it
    return { box, node: h("div", { class: "check" }, box, h("label", { for: id, class: "prose" }, text)) };
  });
  const buttons = [];
  const table = h("table", { class: "answer-grid" },
    h("caption", { class: "visually-hidden" }, "Answer with an option"),
    // the columns' widths (a fixed table takes them from here: its header row is hidden)
    h("colgroup", {}, h("col", {}), h("col", { class: "answers-col" })),
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Option"),
      h("th", { scope: "col" }, h("span", { class: "visually-hidden" }, "Answers")))),
    h("tbody", {}, d.options.map((option) => h("tr", {},
      h("th", { scope: "row" }, option,
        option === d.recommendation ? h("span", { class: "muted" }, " (recommended)") : null),
      // the buttons wrap inside a box of their own: a cell that is itself a
      // flex box is no table cell (its border sat apart from its row's)
      h("td", {}, h("div", { class: "answers" }, ["ALLOW", "DENY", "DEFER"].map((disposition) => {
        const button = h("button", {
          type: "button", class: `btn btn-${disposition.toLowerCase()}`,
          "aria-label": `${cap(disposition)}: ${option}`,
          dataset: { disposition, option },
          onclick: () => submit(disposition, option),
        }, cap(disposition));
        buttons.push(button);
        return button;
      })))))));

  async function submit(disposition, option) {
    if (buttons.some(isBusy)) return;
    // the button pressed: given the focus back should it have lost it
    // (a disabled button lost it to <body> when the request failed)
    const pressed = document.activeElement;
    clearError(errorBox);
    if (!rationale.value.trim()) {
      sayError(errorBox, rationale, "Say why (the rationale is required).");
      return;
    }
    const confirmed = confirms.every((c) => c.box.checked);
    if (disposition === "ALLOW" && !confirmed) {
      sayError(errorBox, (confirms.find((c) => !c.box.checked) || confirms[0]).box,
        "An allow vouches for the conditions and the environment: tick each box first.");
      return;
    }
    for (const b of buttons) setBusy(b, true);
    status.start();
    try {
      await asOwnChange(d.restId, async () => {
        const payload = await mutate(ANSWER_DECISION, {
          idempotencyKey: key,
          projectId: project.restId,
          decisionId: d.restId,
          expectedGeneration: d.generation,
          disposition,
          answer: option,
          rationale: rationale.value,
          conditionsConfirmed: disposition === "ALLOW" ? confirmed : false,
        }, "decisionAnswer");
        ownChange.lost.delete(d.restId);
        if (payload.userErrors.length) {
          await refused(payload.userErrors[0], onChanged, errorBox, rationale, "answer",
            [["Rationale", rationale.value]]);
        } else {
          const drawn = await onChanged(notice("ok",
            words`Your answer is recorded: ${lower(disposition)} "${option}". `,
            link("#/", "Back to the inbox")));
          // said only when drawn: over another page it was said of a
          // decision not shown (consoleslownet). The page was left
          // meanwhile: the one showing now learns of the change from its
          // subscription, and must know it for this tab's
          if (drawn) announce("Answer recorded.");
          if (!drawn) {
            ownChange.lost.set(d.restId, {
              generation: d.generation, answer: { disposition, answer: option, rationale: rationale.value },
            });
          }
        }
      });
    } catch (error) {
      if (error.code === "network") {
        ownChange.lost.set(d.restId, {
          generation: d.generation, answer: { disposition, answer: option, rationale: rationale.value },
        });
      }
      sayNotTaken(errorBox, error, "Press your choice again to send your answer");
    } finally {
      status.stop();
      for (const b of buttons) setBusy(b, false);
      if (document.activeElement === document.body && buttons.includes(pressed)) pressed.focus();
    }
  }

  return h("section", { class: "answer", "aria-labelledby": "answer-h" },
    h("h2", { id: "answer-h" }, "Answer"),
    h("div", { class: "field" },
      h("label", { for: rationaleId }, "Why (required)"),
      h("p", { id: `${rationaleId}-hint`, class: "hint" }, "Recorded with your answer, for whoever reads it later."),
      rationale),
    h("fieldset", {}, h("legend", {}, "To allow, confirm what you vouch for"),
      confirms.map((c) => c.node)),
    table,
    status.box,
    errorBox);
}

function cap(word) {
  return word.charAt(0) + word.slice(1).toLowerCase();
}

// Says "Sending…" while a form's request is on its way (its buttons are
// disabled meanwhile), in a polite region of its own: in the form's assertive
// error region, a screen reader broke off whatever it was reading to say it.
function sendingStatus() {
  const box = h("div", { class: "form-status", role: "status" });
  return {
    box,
    start: () => box.replaceChildren(h("p", { class: "muted sending" }, "Sending…")),
    stop: () => box.replaceChildren(),
  };
}

// A form's request the service did not take: unreachable, or not yet
// serving (503 `unavailable`, reason `starting`). Said under the form, and
// said again once the service answers a later request of this tab, since
// the refusal no longer holds then (an answer refused while the service
// started kept "the service is starting" under the form until the next
// press). Not for a busy lock or an operator's fault: reads go on being
// answered while writes are refused, so an answered read says nothing of
// them. A second later, and only if the page said nothing of the decision
// meanwhile: the refresh that answered may find the lost reply's answer
// recorded, or someone else's, and says so in its banner (main.js); "press
// again" then contradicted it.
const RETAKE_DELAY_MS = 1000;
function sayNotTaken(errorBox, error, again) {
  sayError(errorBox, null, error.message);
  if (error.code !== "network" && error.reason !== "starting") return;
  const shown = errorBox.firstChild;
  const banner = () => document.getElementById("changed-elsewhere")?.dataset.version ?? null;
  const bannerBefore = banner();
  onceAnswered(() => setTimeout(() => {
    if (!errorBox.isConnected || errorBox.firstChild !== shown) return; // pressed again, or redrawn
    if (banner() !== bannerBefore) return; // the page said what became of the decision
    // the form's key is the same: a request that did reach the service is
    // answered again as it was, not recorded twice
    const text = `The service answers again. ${again} (if the first attempt was recorded, this only shows it).`;
    errorBox.replaceChildren(notice("conflict", text));
    announce(text);
  }, RETAKE_DELAY_MS));
}

// A refusal: conflicts reload the page and say what happened; anything else
// is shown by the form. `what` is the user's action ("answer" or "reopening").
// `written`: [label, text] of each box the person typed into, kept in a
// conflict's notice (a reopening's edited conditions and environment too).
async function refused(error, onChanged, errorBox, focusTarget, what = "answer", written = []) {
  const yours = `Your ${what} was not recorded`;
  const conflicts = {
    generation_conflict: `Someone reopened this decision while you were reading it. ${yours}; the new question is below.`,
    // whoever it was: the same person's other tab read "Someone else" of
    // their own answer (consoleslownet)
    already_answered: `Someone answered first (another person, or you in another tab or window). ${yours}; that answer is below.`,
    stale: `What this decision judged changed while you were reading it. ${yours}.`,
    expired: `This decision expired while you were reading it. ${yours}.`,
    // this page's key, sent again with another button after a reply was lost:
    // the first request may well have been recorded, so show what is there now
    idempotency_key_reused: "An earlier attempt from this page may have been recorded (its reply was lost). The decision is shown as it is now; check it before trying again.",
  };
  const text = conflicts[error.code] || conflicts[error.reason];
  if (text) {
    // the page redraws for the new state: what was typed is kept in the
    // notice, to copy from, not lost with the form. Said only when drawn: a
    // refusal of a form left behind (its page left and come back to) was
    // read out over the page showing, of which it was not true.
    const drawn = await onChanged(
      notice("conflict", h("strong", {}, "Conflict. "), text, whatYouWrote(written)));
    if (drawn) announce(text);
    return;
  }
  // the form's own words for a field the API names in its own (`conditions[3]`
  // is the fourth line of Conditions)
  const field = String(error.field || "").replace(/\[\d+\]$/, "");
  const fieldWords = {
    expiresAt: "Set an expiry in the future, or tick \"No expiry\".",
    // what the service refuses in one: its length, a line break, a bidi
    // override, a space or an invisible character at either end (it said
    // "give 1 to 200 characters" of a refused " prod")
    environment: `Environment: one line of 1 to ${ENVIRONMENT_MAX} characters, beginning and`
      + " ending with one that shows (no space at either end), without bidi embedding or override characters.",
    conditions: `Conditions: at most ${CONDITIONS_MAX} lines of at most ${CONDITION_MAX} characters each.`,
  };
  const said = (error.code === "invalid_request" && fieldWords[field]) || error.message;
  sayError(errorBox, focusTarget, `${said}${error.reason ? ` (${error.reason})` : ""}`);
}

function renderReopen(project, onChanged, prominent) {
  const d = project.decision;
  const key = formKey(`reopen-${d.restId}-g${d.generation}`);
  const ids = { r: nextId("reopen"), e: nextId("env"), c: nextId("cond"), x: nextId("exp"), n: nextId("noexp") };
  // no live region of its own: each refusal in it is a role=alert notice,
  // and both together had it read twice
  const errorBox = h("div", { class: "form-error" });
  const status = sendingStatus();
  // `data-kept`: each box's name under "What you wrote" (dom.js typedInto)
  const rationale = h("textarea", { id: ids.r, rows: "3", required: true, maxchars: RATIONALE_MAX,
    dataset: { kept: "Why reopen" } });
  const env = h("input", { id: ids.e, type: "text", value: d.current.environment,
    maxchars: ENVIRONMENT_MAX, dataset: { kept: "Environment" } });
  const conds = h("textarea", { id: ids.c, rows: "3", "aria-describedby": `${ids.c}-hint`,
    dataset: { kept: "Conditions" } });
  // as its default: what it came with is not what was written (typedInto)
  conds.defaultValue = d.current.conditions.join("\n");
  // What the boxes showed, not the stored values: an input drops a newline of
  // the environment, and a condition holding one shows as two lines, so a
  // comparison with the stored pins sent a change nobody typed.
  const shown = { environment: env.value, conditions: conds.value };
  const expires = h("input", { id: ids.x, type: "datetime-local",
    "aria-describedby": `${ids.x}-hint ${ids.x}-echo` });
  // the instant the typed time names, in UTC as the page shows times, and
  // how the zone resolved a time the clocks skip or pass twice
  const echo = h("p", { id: `${ids.x}-echo`, class: "hint", "aria-live": "polite" });
  expires.addEventListener("input", () => { echo.textContent = instantEcho(expires.value); });
  const noExpiry = h("input", { id: ids.n, type: "checkbox" });
  const button = h("button", { type: "submit", class: "btn btn-primary" }, "Reopen");

  async function submit(event) {
    event.preventDefault();
    if (isBusy(button)) return;
    clearError(errorBox);
    if (!rationale.value.trim()) {
      sayError(errorBox, rationale, "Say why you reopen it (the rationale is required).");
      return;
    }
    const input = {
      idempotencyKey: key, projectId: project.restId, decisionId: d.restId,
      expectedGeneration: d.generation, rationale: rationale.value,
    };
    if (env.value !== shown.environment) input.environment = env.value;
    if (conds.value !== shown.conditions) {
      input.conditions = conds.value.split("\n").map((x) => x.trim()).filter(Boolean);
    }
    if (!noExpiry.checked && expires.validity.badInput) {
      // a date or time half typed reads as no value at all: the form is
      // novalidate, so the browser no longer stops it, and the reopening
      // went out with the old expiry, not the one being typed
      sayError(errorBox, expires, "Finish the new expiry's date and time, or clear it.");
      return;
    }
    if (noExpiry.checked) input.expiresAt = null;
    else if (expires.value) {
      const instant = localInstant(expires.value);
      if (instant.refusal) {
        sayError(errorBox, expires, instant.refusal);
        return;
      }
      input.expiresAt = instant.iso;
    }
    setBusy(button, true);
    status.start();
    try {
      await asOwnChange(d.restId, async () => {
        const payload = await mutate(REOPEN_DECISION, input, "decisionReopen");
        ownChange.lost.delete(d.restId);
        if (payload.userErrors.length) {
          const refusal = payload.userErrors[0];
          // the field the refusal names, so the keyboard lands where the fix goes
          const named = String(refusal.field || "").replace(/\[\d+\]$/, "");
          const at = { expiresAt: expires, environment: env, conditions: conds }[named] || rationale;
          await refused(refusal, onChanged, errorBox, at, "reopening", [
            ["Why reopen", rationale.value],
            ["Environment", env.value !== shown.environment ? env.value : ""],
            ["Conditions", conds.value !== shown.conditions ? conds.value : ""],
          ]);
        } else {
          const drawn = await onChanged(
            notice("ok", `Reopened: generation ${payload.decision.generation} awaits an answer.`));
          if (drawn) announce("Reopened.");
          if (!drawn) ownChange.lost.set(d.restId, { generation: d.generation, reopen: rationale.value });
        }
      });
    } catch (error) {
      if (error.code === "network") {
        ownChange.lost.set(d.restId, { generation: d.generation, reopen: rationale.value });
      }
      sayNotTaken(errorBox, error, "Press Reopen again to send your reopening");
    } finally {
      status.stop();
      setBusy(button, false);
      if (document.activeElement === document.body) button.focus();
    }
  }

  // novalidate: an empty reason gets the page's refusal, tied to its box
  const form = h("form", { class: "reopen", novalidate: true, onsubmit: submit, "aria-labelledby": "reopen-h" },
    h("div", { class: "field" }, h("label", { for: ids.r }, "Why reopen (required)"), rationale),
    h("div", { class: "field" }, h("label", { for: ids.e }, "Environment"), env),
    h("div", { class: "field" }, h("label", { for: ids.c }, "Conditions"),
      h("p", { id: `${ids.c}-hint`, class: "hint" }, "One per line."), conds),
    h("div", { class: "field" }, h("label", { for: ids.x }, "New expiry (your local time)"),
      h("p", { id: `${ids.x}-hint`, class: "hint" },
        d.status === "EXPIRED" ? "The old expiry has passed: give a new one, or none."
          : "Leave empty to keep the current expiry."), expires, echo),
    h("div", { class: "check" }, noExpiry, h("label", { for: ids.n }, "No expiry")),
    button, status.box, errorBox);
  const heading = h("h2", { id: "reopen-h" }, "Reopen");
  if (prominent) return h("section", { class: "answer", id: "reopen" }, heading, form);
  return h("details", { class: "answer", id: "reopen" },
    h("summary", {}, "Reopen to ask again (a new generation, pinned to the records as they are now)"),
    heading, form);
}

function renderAffected(project) {
  const d = project.decision;
  const items = d.current.affected.map((a) => {
    const t = a.task;
    if (!t) return h("li", {}, a.taskId);
    const revs = t.revisions.edges.map((e) => e.node);
    const pinned = revs.find((r) => r.revision === a.pinnedRevision);
    const current = revs.find((r) => r.revision === a.currentRevision);
    const same = a.pinnedRevision === a.currentRevision;
    return h("li", { class: "task" },
      h("h3", {}, t.title, " ", h("span", { class: "muted" }, `(${t.restId}, ${lower(t.status)})`)),
      h("p", {}, `Pinned to revision ${a.pinnedRevision}; now at revision ${a.currentRevision}.`),
      same ? h("p", { class: "muted" }, "Unchanged since it was judged.")
        : pinned && current
          ? h("div", {}, h("p", {}, "Judged fields, pinned → now:"), renderFieldDiffs(pinned, current, JUDGED),
            otherChanges(revs, a))
          : h("p", { class: "muted" }, "The pinned revision is beyond the 100 latest."));
  });
  return h("section", { "aria-labelledby": "affected-h" },
    h("h2", { id: "affected-h" }, "Affected tasks"), h("ul", { class: "plain" }, items));
}

function otherChanges(revs, a) {
  const { other } = changedSince(revs, a);
  if (!other.length) return null;
  return h("p", { class: "muted" }, `Also changed, not judged (does not stale): ${other.join(", ")}.`);
}

function renderPolicyPin(project) {
  const d = project.decision;
  const pinned = rulesAt(project, d.current.policyRevision);
  const body = [h("p", {}, `Pinned to policy revision ${d.current.policyRevision}; the policy is now at revision ${project.policy.revision}. `,
    link(`#/p/${enc(project.restId)}/policy`, "Policy history"))];
  const edits = rulesEditsSince(project, d.current.policyRevision);
  if (pinned !== null && pinned !== project.policy.rules) {
    body.push(h("p", {}, "The rules text changed since:"), renderDiff("rules", pinned, project.policy.rules));
  } else if (edits.length) {
    body.push(h("p", {}, `The rules text reads the same, but it was edited since (at revision ${edits.join(", ")}).`));
  } else if (pinned !== null) {
    body.push(h("p", { class: "muted" }, "The rules text is the same."));
  }
  return h("section", { "aria-labelledby": "policy-h" }, h("h2", { id: "policy-h" }, "Policy"), ...body);
}

function renderHistory(project) {
  const d = project.decision;
  const gens = d.generations.edges.map((e) => e.node);
  return h("section", { "aria-labelledby": "history-h" },
    h("h2", { id: "history-h" }, "Every generation"),
    h("ol", { class: "plain history", reversed: true }, gens.map((g) => h("li", {},
      h("h3", {}, `Generation ${g.generation}`, g.generation === d.generation ? " (current)" : ""),
      h("p", { class: "muted" }, g.generation === 1 ? "Opened by " : "Reopened by ",
        g.actor ? words`${g.actor.name} (${lower(g.actor.kind)})` : "unknown", ", ", ago(g.at)),
      g.reopenRationale ? h("p", { class: "prose" }, h("span", { class: "label" }, "Why: "), g.reopenRationale) : null,
      h("p", { class: "prose" }, words`Environment: ${g.environment}`),
      h("div", {}, h("span", { class: "label" }, "Conditions: "), conditionList(g.conditions)),
      h("p", {}, `Policy revision ${g.policyRevision}; tasks: `,
        g.affected.map((a) => `${a.taskId} r${a.pinnedRevision}`).join(", "),
        g.expiresAt ? ["; expires ", when(g.expiresAt)] : ""),
      g.answer ? renderAnswer(g.answer) : h("p", {}, badge("no answer", "none"))))));
}

// One item per condition, its own line breaks kept: a condition holding a
// newline (or a "; ") reads as one condition, not two.
function conditionList(conditions) {
  return conditions.length ? h("ul", {}, conditions.map((x) => h("li", { class: "prose" }, x))) : "none";
}

function renderAnswer(a) {
  return h("div", { class: "answer-record" },
    h("p", {}, describeAnswer(a)),
    h("p", { class: "prose" }, h("span", { class: "label" }, "Rationale: "), a.rationale),
    h("p", { class: "muted" }, a.conditionsConfirmed ? "Conditions and environment confirmed." : "Conditions not confirmed.",
      a.actorSessionId ? ` Session ${a.actorSessionId}.` : ""),
    a.timedOut ? h("p", {}, "Applied by the sweep: the recommendation after 24 hours unanswered.") : null,
    a.relayed && a.relay ? h("div", { class: "relay" },
      h("p", {}, words`Relayed by the agent, authorized by ${a.authorizedBy ? a.authorizedBy.name : "?"} `,
        `(policy revision ${a.relayPolicyRevision}).`),
      // `prose`: their line breaks, as a rationale's (a prompt of several
      // lines read as one run-on line)
      h("p", { class: "prose" }, h("span", { class: "label" }, "Prompt shown: "), h("q", {}, a.relay.prompt)),
      h("p", { class: "prose" }, h("span", { class: "label" }, "Human's response: "),
        h("q", {}, a.relay.response))) : null);
}
