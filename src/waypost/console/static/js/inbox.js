// The inbox: per project, what awaits a human first, then what will time
// out soon, what proceeded by timeout, and the blocked tasks.

import { allNodes, gql, RequestFailed } from "./api.js";
import { ago, badge, enc, h, joined, link, lower, timeoutDue, until, when, words } from "./dom.js";
import { INBOX, INBOX_ONE_PROJECT, INBOX_PROJECT_IDS } from "./queries.js";

// Set once the whole inbox was too large for one query: from then on this tab
// asks project by project (asking again would cost the service the refusal).
let byProject = false;

// A project refused as too large alone is asked for again only after this
// long: each refusal costs the service its work up to the limit (a tenth of a
// second at 50,000 objects), and the inbox refreshes as often as once a
// second while events come. Its notice stays meanwhile.
const TOO_LARGE_RECHECK_MS = 60 * 1000;
// project id -> when it was last refused, by the page's monotonic clock (a
// wall clock set back an hour kept the notice for that hour)
const refusedAt = new Map();

export async function loadInbox() {
  let projects = null;
  if (!byProject) {
    try {
      projects = await everyProject(INBOX);
    } catch (error) {
      if (!tooLarge(error)) throw error;
      byProject = true;
    }
  }
  if (projects === null) projects = await loadProjectByProject();
  return projects;
}

// Every project, page after page: an inbox that stopped at the first page
// left the rest out without a word.
export async function everyProject(document) {
  const first = (await gql(document)).projects;
  return allNodes(first, async (after) => (await gql(document, { after })).projects);
}

function tooLarge(error) {
  return error instanceof RequestFailed && error.code === "invalid_request" &&
    error.message.includes("execution limits");
}

// One request per project, in turn: each within the limit on its own. A
// project too large even alone is shown as a notice that names it and links
// to its lists; the others still render (its refusal blanked the whole inbox).
async function loadProjectByProject() {
  const projects = [];
  for (const { restId, name } of await everyProject(INBOX_PROJECT_IDS)) {
    if (performance.now() - (refusedAt.get(restId) ?? -Infinity) < TOO_LARGE_RECHECK_MS) {
      projects.push({ restId, name, tooLarge: true });
      continue;
    }
    try {
      const data = await gql(INBOX_ONE_PROJECT, { id: restId });
      refusedAt.delete(restId);
      if (data.project) projects.push(data.project);
    } catch (error) {
      if (!tooLarge(error)) throw error;
      refusedAt.set(restId, performance.now());
      projects.push({ restId, name, tooLarge: true });
    }
  }
  return projects;
}

// Per project shown: the ids of the decisions it lists as awaiting an answer
// and how many await in all (null for a project too large to list).
export function awaitingByProject(projects) {
  return new Map(projects.map((p) => [p.restId, p.awaiting
    ? { ids: new Set(p.awaiting.nodes.map((d) => d.restId)), total: p.awaiting.totalCount }
    : null]));
}

// How many decisions came to await an answer between two drawings. Only a
// project listed both times counts what it newly lists: one listed again
// after being too large is no news, and where the list before was cut short
// (100 of more), an answered one lets the next slide into view, so no more
// count than the rise in the number awaiting (review70). A project new since
// the drawing before brings all it lists.
export function arrivals(before, now) {
  let count = 0;
  for (const [project, listed] of now) {
    if (!listed) continue;
    if (!before.has(project)) {
      count += listed.ids.size;
      continue;
    }
    const was = before.get(project);
    if (!was) continue;
    const fresh = [...listed.ids].filter((id) => !was.ids.has(id)).length;
    count += was.ids.size < was.total ? Math.min(fresh, Math.max(0, listed.total - was.total)) : fresh;
  }
  return count;
}

export function renderInbox(projects) {
  const parts = [h("h1", { tabindex: "-1" }, "Inbox")];
  if (!projects.length) {
    parts.push(h("p", {}, "No projects yet. Create one with ",
      h("code", {}, "waypost admin project create"), " or the API."));
  }
  for (const project of projects) {
    parts.push(project.tooLarge ? renderTooLarge(project) : renderProject(project));
  }
  return parts;
}

function projectHeading(project) {
  return h("h2", { id: `proj-${project.restId}` }, project.name, " ",
    h("span", { class: "muted" }, `(${project.restId})`));
}

function renderTooLarge(project) {
  return h("section", { class: "project", "aria-labelledby": `proj-${project.restId}`,
    dataset: { tooLarge: project.restId } },
  projectHeading(project),
  h("p", { class: "notice" }, "This project's inbox is more than the service returns in one",
    " answer (its execution limit), so it is not listed here. Its lists page through it: ",
    allDecisions(project, "PENDING", "decisions awaiting an answer"), ", ",
    allDecisions(project, "STALE", "stale decisions"), ", ",
    allDecisions(project, "EXPIRED", "expired decisions"), ", ",
    allDecisions(project, null, "every decision"), "."));
}

function renderProject(project) {
  const digest = project.digest;
  // those timing out soon are listed once, in their own group, below
  const soon = new Set(digest.timingOutSoon.map((d) => d.restId));
  // Read by status, not from the digest: the digest's unanswered list holds
  // stale and expired ones too, oldest first, and stops at 200, so 200 old
  // stale ones hid every fresh question ("Nothing awaits an answer"; consolefast).
  const awaiting = project.awaiting.nodes.filter((d) => !soon.has(d.restId));
  const awaitingTotal = Math.max(0, project.awaiting.totalCount -
    digest.timingOutSoon.filter((d) => d.status === "PENDING").length);
  // exact, unless the digest cut its list of those timing out soon
  const awaitingCount = digest.truncated.timingOutSoon
    ? `${awaiting.length}+` : `${awaitingTotal}`;
  // Stale and expired ones: unanswered and answered ones whose answer
  // stopped counting; both need a reopen before an answer.
  const needReopen = [...project.stale.nodes, ...project.expired.nodes];
  const section = h("section", { class: "project", "aria-labelledby": `proj-${project.restId}` },
    projectHeading(project),
    h("p", { class: "muted" },
      `${awaitingCount} awaiting an answer · `,
      // a digest list holds its first 200: "200+" where it was cut, as the group says
      `${digest.blockedTasks.length}${digest.truncated.blockedTasks ? "+" : ""} blocked task(s) · `,
      `${digest.readyTaskCount} ready task(s) · `,
      link(`#/p/${enc(project.restId)}/decisions`, "decisions"), " · ",
      link(`#/p/${enc(project.restId)}/knowledge`, "knowledge"), " · ",
      link(`#/p/${enc(project.restId)}/policy`, `policy r${project.policy.revision}`)),
  );
  const read = project.awaiting.nodes.length;
  const cut = read < project.awaiting.totalCount
    && [`Only the first ${read} are listed: `,
      allDecisions(project, "PENDING", "every one awaiting an answer"), "."];
  // the first read may all time out soon (listed below): the one asked after
  // 100 such was on no group, under "Nothing awaits an answer" (consoletruth)
  const nothingRead = cut && !awaiting.length;
  section.append(group(
    "Awaiting an answer", awaiting, (d) => pendingCard(project, d),
    nothingRead ? `The first ${read} read all time out soon (listed below).` : "Nothing awaits an answer.",
    nothingRead
      ? ["More await an answer: ", allDecisions(project, "PENDING", "every one awaiting an answer"), "."]
      : cut,
    `awaiting-${project.restId}`));
  if (needReopen.length) {
    // the first 50 stale and the first 50 expired: say so when there are more
    const total = project.stale.totalCount + project.expired.totalCount;
    section.append(group(
      "Stale or expired: reopen before answering", needReopen, (d) => reopenCard(project, d),
      "", needReopen.length < total
        && [`${needReopen.length} of ${total} are listed: `,
          allDecisions(project, "STALE", "every stale decision"), ", ",
          allDecisions(project, "EXPIRED", "every expired decision"), "."],
      `reopen-${project.restId}`));
  }
  section.append(group(
    "Timing out soon", digest.timingOutSoon, (d) => timingOutCard(project, d),
    "Nothing will time out in the next 6 hours.", digest.truncated.timingOutSoon,
    `soon-${project.restId}`));
  section.append(group(
    "Proceeded by timeout (last 7 days)", digest.proceededByTimeout,
    (d) => proceededCard(project, d), "Nothing proceeded by timeout.",
    digest.truncated.proceededByTimeout, `proceeded-${project.restId}`));
  section.append(group(
    "Blocked tasks", digest.blockedTasks, (t) => blockedCard(project, t),
    "No task is blocked by a decision.", digest.truncated.blockedTasks, `blocked-${project.restId}`));
  return section;
}

// `truncated`: true (a digest list: its first 200), or what to say of a cut
function group(title, items, render, empty, truncated, id) {
  const list = h("ul", { class: "cards" });
  for (const item of items) list.append(h("li", {}, render(item)));
  const note = truncated === true ? "Only the first 200 are listed." : truncated;
  // named by its heading and its project's: two projects' "Timing out soon"
  // were two regions of one name
  const project = id.slice(id.indexOf("-") + 1);
  return h("section", { class: "group", "aria-labelledby": `${id} proj-${project}`,
    dataset: { group: id.split("-")[0] } },
    h("h3", { id }, title, " ", h("span", { class: "count" }, `(${items.length}${note ? "+" : ""})`)),
    items.length ? list : h("p", { class: "muted" }, empty),
    note ? h("p", { class: "muted" }, note) : null);
}

// A link to the project's decisions page, with a status filter or none.
function allDecisions(project, status, text) {
  return link(`#/p/${enc(project.restId)}/decisions${status ? `?status=${status}` : ""}`, text);
}

function decisionLink(project, d) {
  return link(`#/p/${enc(project.restId)}/d/${enc(d.restId)}`, d.question);
}

// The tasks a decision affects: "Blocks" while it blocks them, "Affects"
// once it allows work (a decision that proceeded by timeout blocks nothing).
function blocks(d, label = "Blocks: ") {
  const tasks = d.current.affected.map((a) => (a.task ? a.task.title : a.taskId));
  return h("p", {}, h("span", { class: "label" }, label), joined(tasks, ", "));
}

function asked(d) {
  const who = d.current.actor || d.createdBy;
  const whoText = who ? words`${who.name} (${lower(who.kind)})` : "unknown";
  return h("p", { class: "muted" }, words`Asked by ${whoText}, `, ago(d.current.at),
    d.generation > 1 ? ` (reopened, generation ${d.generation})` : "");
}

function pendingCard(project, d) {
  return h("article", { class: "card", dataset: { decision: d.restId } },
    h("h4", {}, decisionLink(project, d)),
    h("p", {}, h("span", { class: "label" }, "Options: "), joined(d.options, " · ")),
    asked(d),
    blocks(d),
    h("p", { class: "meta" }, badge(lower(d.requiredActor) + " answers", "actor"),
      d.current.expiresAt ? [" expires ", until(d.current.expiresAt)] : null,
      d.reversible ? " · reversible" : null),
  );
}

export function inboxReason(d) {
  if (d.status === "EXPIRED") {
    const what = d.current.answer ? "its answer no longer applies" : "it can no longer be answered";
    return ["Expired ", d.current.expiresAt ? ago(d.current.expiresAt) : "", `: ${what}.`];
  }
  // The inbox does not read revisions: a revision number that moved may be a
  // priority edit or a lease-length change, which stale nothing, so it names
  // no revision here; the decision's page shows exactly what was judged.
  return [
    "Stale: what it judged changed after it was asked (a task's title,",
    " description, acceptance criteria or kind, or the project's rules).",
    " Its page shows exactly what changed.",
  ];
}

// At most `most` characters (code points, as the service counts them: a cut
// in UTF-16 units split an emoji and named half a surrogate pair).
function clipped(text, most) {
  const points = Array.from(text);
  return points.length <= most ? text : `${points.slice(0, most).join("")}…`;
}

function reopenCard(project, d) {
  return h("article", { class: "card card-warn", dataset: { decision: d.restId } },
    h("h4", {}, decisionLink(project, d), " ", badge(lower(d.status), d.status)),
    h("p", { class: "reason" }, ...inboxReason(d)),
    d.current.answer
      ? h("p", { class: "muted" }, words`Was answered ${lower(d.current.answer.disposition)}: "${d.current.answer.answer}".`)
      : null,
    blocks(d),
    // every card has one: its name says which decision (a list of links read
    // out of context gave "Reopen…" again and again); it starts with what shows
    h("p", {}, h("a", { href: `#/p/${enc(project.restId)}/d/${enc(d.restId)}`,
      "aria-label": `Reopen… ${clipped(d.question, 120)}` }, "Reopen…")),
  );
}

// Due from 24 hours after its cycle opened; the sweep (every 5 minutes by
// default, `--sweep-interval`) applies it then. One already due is still unanswered (no sweep since, a
// stopped service): "Applies 30 min ago unless someone answers" read as done
// (consoletruth). Said so as to hold either side of the instant, since the
// page's times move on without a redraw.
function timingOutCard(project, d) {
  const due = timeoutDue(d.current.at);
  return h("article", { class: "card", dataset: { decision: d.restId } },
    h("h4", {}, decisionLink(project, d)),
    h("p", {}, h("span", { class: "label" }, "Recommendation: "), d.recommendation || "none"),
    h("p", {}, "The sweep may apply it from ", when(due), " (", until(due), ") unless someone answers first."),
    blocks(d));
}

// Listed for the timeout that answered it in the last 7 days, shown as it is
// now (docs/decisions.md): one reopened since, and perhaps answered again,
// or gone stale or expired, said "Allowed ... by timeout" and "Affects:",
// though it blocked its tasks (digestaudit).
function proceededCard(project, d) {
  const answer = d.current.answer;
  const asApplied = Boolean(answer && answer.timedOut) && d.status === "ALLOWED";
  return h("article", { class: "card", dataset: { decision: d.restId } },
    h("h4", {}, decisionLink(project, d), asApplied ? null : [" ", badge(lower(d.status), d.status)]),
    h("p", {}, ...sinceTheTimeout(d, asApplied)),
    // allowed (by whom it may be), it blocks none of them
    blocks(d, d.status === "ALLOWED" ? "Affects: " : "Blocks: "));
}

function sinceTheTimeout(d, asApplied) {
  const answer = d.current.answer;
  if (!answer) {
    // a stale or expired one takes a reopen before any answer (review67)
    return [d.status === "PENDING" ? "Timed out, then reopened: it awaits an answer."
      : `Timed out, then reopened, and now ${lower(d.status)}: it takes a reopen before an answer.`];
  }
  const who = answer.actor ? answer.actor.name : null;
  if (!answer.timedOut) {
    return [words`Timed out, then reopened and answered ${lower(answer.disposition)}: "${answer.answer}" `,
      ago(answer.at), who ? words` by ${who}.` : "."];
  }
  return [words`Allowed with "${answer.answer}" by timeout `, ago(answer.at),
    who ? words` (attributed to ${who})` : "", asApplied ? "" : "; it no longer applies."];
}

function blockedCard(project, t) {
  return h("article", { class: "card", dataset: { task: t.restId } },
    h("h4", {}, t.title, " ", h("span", { class: "muted" }, `(${t.restId})`)),
    h("p", { class: "muted" }, `${lower(t.status)}, priority ${t.priority}`),
    t.blockedBy.decisionIds.length
      ? h("p", {}, "Waiting for: ",
        ...t.blockedBy.decisionIds.flatMap((id, i) => {
          const found = t.blockedBy.decisions.find((x) => x && x.restId === id);
          return [i ? "; " : "", link(`#/p/${enc(project.restId)}/d/${enc(id)}`, found ? found.question : id)];
        }),
        // the service names at most 20 of a task's blockers
        t.blockedBy.decisionsTruncated
          ? ["; and more (", allDecisions(project, null, "the project's decisions"), ")"] : "")
      : null,
    t.blockedBy.dependencies.length
      ? h("p", {}, "Depends on: ", joined(t.blockedBy.dependencies.map((x) => x.title), ", "))
      : null);
}
