// Every decision of a project, oldest first, by status: the inbox lists the
// first 200 awaiting an answer, and a project may hold more.

import { gql } from "./api.js";
import { ago, badge, enc, h, link, lower, nextId, noSuch, until, words } from "./dom.js";
import { pagedList } from "./paged.js";
import { DECISION_LIST } from "./queries.js";

export const STATUSES = ["PENDING", "ALLOWED", "DENIED", "DEFERRED", "EXPIRED", "STALE"];

class NoSuchProject extends Error {}

function card(projectId, d) {
  const answer = d.current.answer;
  return h("article", { class: "card", dataset: { decision: d.restId } },
    h("h2", {}, link(`#/p/${enc(projectId)}/d/${enc(d.restId)}`, d.question)),
    h("p", { class: "meta" }, badge(lower(d.status), d.status),
      ` generation ${d.generation} · ${lower(d.requiredActor)} answers · asked `, ago(d.current.at),
      d.current.expiresAt ? expiry(d) : ""),
    answer ? h("p", { class: "muted" }, words`${lower(answer.disposition)}: "${answer.answer}", `, ago(answer.at)) : null);
}

// an expired one "expired 2 h ago" (it read "expires 2 h ago"), by its status
function expiry(d) {
  return d.status === "EXPIRED"
    ? [" · expired ", ago(d.current.expiresAt)]
    : [" · expires ", until(d.current.expiresAt)];
}

export async function renderDecisionList(projectId, query) {
  // as the select shows them too (`pending`), and anything else is no filter
  const asked = (query.get("status") || "").toUpperCase();
  const status = STATUSES.includes(asked) ? asked : null;
  let projectName = projectId;
  const { list, more, failure, counter, page } = pagedList(async (after) => {
    const data = await gql(DECISION_LIST, { project: projectId, status, after });
    if (!data.project) throw new NoSuchProject();
    projectName = data.project.name;
    return data.project.decisions;
  }, (d) => card(projectId, d),
  (shown) => (shown ? `${shown} decision(s) shown.`
    : status ? "No decision has this status." : "The project has no decision yet."));
  try {
    await page();
  } catch (error) {
    if (error instanceof NoSuchProject) return noSuch("project");
    throw error;
  }
  const statusId = nextId("status");
  const form = h("form", { class: "filters", "aria-label": "Filters", onsubmit: (event) => {
    event.preventDefault();
    const chosen = form.querySelector(`#${statusId}`).value;
    location.hash = `#/p/${enc(projectId)}/decisions${chosen ? `?status=${chosen}` : ""}`;
  } },
  h("div", { class: "field field-inline" }, h("label", { for: statusId }, "Status"),
    h("select", { id: statusId },
      h("option", { value: "" }, "any"),
      STATUSES.map((s) => h("option", { value: s, selected: s === status }, lower(s))))),
  h("button", { type: "submit", class: "btn" }, "Filter"));
  return [h("p", {}, link("#/", "← Inbox")),
    h("h1", { tabindex: "-1" }, words`Decisions · ${projectName}`),
    h("p", { class: "muted" }, "Every decision of the project, oldest first."),
    form, counter, list, failure, more];
}
