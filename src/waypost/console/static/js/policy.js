// The policy's history: every immutable revision, and the diff between any two.

import { allNodes, gql } from "./api.js";
import { renderFieldDiffs } from "./diff.js";
import { ago, enc, h, link, lower, nextId, noSuch, words } from "./dom.js";
import { POLICY } from "./queries.js";

const FIELDS = [
  ["Rules", (r) => r.rules],
  ["Review mode", (r) => lower(r.reviewMode)],
  ["Lease seconds", (r) => String(r.leaseSeconds)],
  ["Agents may edit rules", (r) => (r.agentRuleEditing ? "yes" : "no")],
  ["Relayed human answers allowed", (r) => (r.allowRelayedHumanAnswers ? "yes" : "no")],
  ["Integration owner", (r) => r.integrationOwnerId || "none"],
];

export async function renderPolicy(projectId) {
  const data = await gql(POLICY, { project: projectId });
  if (!data.project) return noSuch("project");
  const revs = await allNodes(data.project.policyHistory, async (after) => {
    const more = await gql(POLICY, { project: projectId, after });
    return more.project && more.project.policyHistory;
  });
  const byRevision = new Map(revs.map((r) => [r.revision, r]));
  const fromId = nextId("from");
  const toId = nextId("to");
  const options = (chosen) => revs.map((r) => h("option", { value: String(r.revision), selected: r.revision === chosen },
    `revision ${r.revision}`));
  const latest = revs.length ? revs[0].revision : 1;
  const from = h("select", { id: fromId }, options(revs.length > 1 ? revs[1].revision : latest));
  const to = h("select", { id: toId }, options(latest));
  // what changed, said in one short sentence: the whole diff in a live
  // region was read out again at every press of an arrow key in a select
  const out = h("div", {});
  const said = h("p", { class: "visually-hidden", role: "status" });
  const update = () => {
    const a = byRevision.get(Number(from.value));
    const b = byRevision.get(Number(to.value));
    out.replaceChildren(h("h3", {}, `From revision ${from.value} to revision ${to.value}`),
      ...renderFieldDiffs(a, b, FIELDS));
    const differ = FIELDS.filter(([, pick]) => (a ? pick(a) : "") !== (b ? pick(b) : "")).length;
    said.textContent = `Revision ${from.value} to ${to.value}: ${differ} field(s) differ.`;
  };
  from.addEventListener("change", update);
  to.addEventListener("change", update);
  update();
  return [
    h("p", {}, link("#/", "← Inbox")),
    h("h1", { tabindex: "-1" }, words`Policy · ${data.project.name}`),
    h("p", {}, `Current revision ${data.project.policy.revision}. `,
      link(`#/p/${enc(projectId)}/knowledge`, "Knowledge")),
    h("section", { "aria-labelledby": "compare-h" }, h("h2", { id: "compare-h" }, "Compare two revisions"),
      h("div", { class: "filters" },
        h("div", { class: "field field-inline" }, h("label", { for: fromId }, "From"), from),
        h("div", { class: "field field-inline" }, h("label", { for: toId }, "To"), to)),
      said, out),
    h("section", { "aria-labelledby": "revs-h" }, h("h2", { id: "revs-h" }, "Every revision"),
      h("ol", { class: "plain history", reversed: true }, revs.map((r) => h("li", {},
        h("h3", {}, `Revision ${r.revision}`),
        h("p", { class: "muted" }, words`By ${r.actor ? r.actor.name : r.actorId} (${r.actorKind.toLowerCase()}), `, ago(r.at),
          r.provenance ? words` · ${r.provenance}` : ""),
        h("pre", { class: "rules" }, r.rules || "(no rules)"))))),
  ];
}
