// The knowledge browser: filters, a record's revisions with the feedback each
// revision received, and every correction as a diff against the one before.

import { RequestFailed, allNodes, gql } from "./api.js";
import { renderFieldDiffs } from "./diff.js";
import { ago, badge, enc, h, joined, link, lower, markInvalid, nextId, noSuch, notice, words } from "./dom.js";
import { pagedList } from "./paged.js";
import { KNOWLEDGE_ITEM, KNOWLEDGE_LIST, PROJECT_NAME } from "./queries.js";

const KINDS = ["LESSON", "FACT", "REJECTED_APPROACH", "CHECKPOINT"];
// the API's bounds on the two text filters (docs/knowledge.md), in the form's words
const TAG_MAX = 64;
const FILTER_WORDS = {
  q: "Words: at most 1,024 bytes and 32 words, without NUL characters.",
  tag: `Tag: at most ${TAG_MAX} characters.`,
};
const STATUSES = ["OBSERVED", "VALIDATED", "DEPRECATED", "SUPERSEDED"];

function select(id, label, values, chosen) {
  return h("div", { class: "field field-inline" },
    h("label", { for: id }, label),
    h("select", { id, name: id },
      h("option", { value: "" }, "any"),
      values.map((v) => h("option", { value: v, selected: v === chosen }, lower(v)))));
}

class NoSuchProject extends Error {}

// A kind or status in the address, in any case (`?kind=fact`, as the select
// shows it and as the decisions page reads its status); anything else is no
// filter.
function chosen(query, name, values) {
  const asked = (query.get(name) || "").toUpperCase();
  return values.includes(asked) ? asked : null;
}

export async function renderKnowledgeList(projectId, query) {
  const filters = {
    kind: chosen(query, "kind", KINDS),
    status: chosen(query, "status", STATUSES),
    tag: query.get("tag") || null,
    q: query.get("q") || null,
    shared: query.get("shared") === "1",
  };
  let projectName = projectId;
  const { list, more, failure, counter, page } = pagedList(async (after) => {
    const data = await gql(KNOWLEDGE_LIST, { project: projectId, ...filters, after });
    if (!data.project) throw new NoSuchProject();
    projectName = data.project.name;
    return data.project.knowledge;
  }, (k) => h("article", { class: "card" },
    h("h2", {}, link(`#/p/${enc(projectId)}/k/${enc(k.restId)}`, k.title)),
    h("p", { class: "meta" }, badge(lower(k.kind), "kind"), " ", badge(lower(k.status), k.status),
      ` revision ${k.revision} · updated `, ago(k.updatedAt),
      k.projectId !== projectId ? ` · shared from ${k.projectId}` : "",
      ` · useful ${k.feedbackTotals.useful}, not useful ${k.feedbackTotals.notUseful}`),
    // each tag a value of its own (one U+202E would turn the tags after it)
    k.tags.length ? h("p", { class: "muted" }, "Tags: ", joined(k.tags, ", ")) : null),
  (shown) => (shown ? `${shown} record(s) shown.` : "No record matches these filters."));
  // filters the service refuses (a tag too long, words past the search's
  // bounds) are said beside the form, which stays: the whole page was
  // replaced by "Something went wrong"
  let refusal = null;
  let refusedField = null;
  try {
    await page();
  } catch (error) {
    // the page the policy route shows for a project that is not there
    if (error instanceof NoSuchProject) return noSuch("project");
    if (!(error instanceof RequestFailed && error.code === "invalid_request")) throw error;
    more.hidden = true;
    refusal = notice("error", `These filters were refused. ${FILTER_WORDS[error.field] || error.message}`);
    refusedField = error.field;
    // the refused query brought no name: the heading and the tab's title read
    // "Knowledge · demo" for "Knowledge · Demo shop"
    const named = await gql(PROJECT_NAME, { project: projectId });
    if (!named.project) return noSuch("project");
    projectName = named.project.name;
  }

  const tagId = nextId("tag");
  const textId = nextId("text");
  const sharedId = nextId("shared");
  const form = h("form", { class: "filters", "aria-label": "Filters", onsubmit: (event) => {
    event.preventDefault();
    const params = new URLSearchParams();
    for (const name of ["kind", "status"]) {
      const value = form.querySelector(`[name=${name}]`).value;
      if (value) params.set(name, value);
    }
    // exactly as typed: a tag matches code point for code point, and a
    // record stored before the service refused a tag's blank ends keeps
    // its surrounding spaces (one of "  spaced  " was sent as "spaced" and
    // matched nothing)
    const tag = form.querySelector(`#${tagId}`).value;
    if (tag.trim()) params.set("tag", tag);
    const text = form.querySelector(`#${textId}`).value.trim();
    if (text) params.set("q", text);
    if (form.querySelector(`#${sharedId}`).checked) params.set("shared", "1");
    location.hash = `#/p/${enc(projectId)}/knowledge?${params}`;
  } },
  h("div", { class: "field field-inline" }, h("label", { for: textId }, "Words"),
    h("input", { id: textId, type: "search", value: filters.q || "" })),
  select("kind", "Kind", KINDS, filters.kind),
  select("status", "Status", STATUSES, filters.status),
  h("div", { class: "field field-inline" }, h("label", { for: tagId }, "Tag"),
    h("input", { id: tagId, type: "text", value: filters.tag || "", maxchars: TAG_MAX })),
  h("div", { class: "check" }, h("input", { id: sharedId, type: "checkbox", checked: filters.shared }),
    h("label", { for: sharedId }, "Include records shared by other projects")),
  h("button", { type: "submit", class: "btn" }, "Filter"));
  // the box the refusal is about says so, is described by it, and takes the
  // focus once shown (main.js show(); it stayed on the heading)
  const refusedBox = { q: textId, tag: tagId }[refusedField];
  if (refusal && refusedBox) {
    const box = form.querySelector(`#${refusedBox}`);
    markInvalid(box, refusal);
    box.dataset.focusFirst = "true";
  }

  return [h("p", {}, link("#/", "← Inbox")),
    h("h1", { tabindex: "-1" }, words`Knowledge · ${projectName}`),
    h("p", { class: "muted" }, "Advisory records: lessons, facts, rejected approaches and checkpoints. Only the policy's rules bind."),
    form, refusal, counter, list, failure, more];
}

const CONTENT = [
  ["Title", (r) => r.title],
  ["Body", (r) => r.body],
  ["Status", (r) => lower(r.status)],
  // one value a line: a diff line is isolated whole, and one tag ending in
  // U+202E turned the tags after it on a line of all of them
  ["Tags", (r) => r.tags.join("\n")],
  ["Applicability", (r) => r.applicability],
  ["Scope", (r) => ["taskIds", "components", "environments", "versions"]
    .flatMap((dim) => (r.scope[dim].length ? r.scope[dim] : ["any"]).map((v) => `${dim}: ${v}`))
    .join("\n")],
  ["Provenance", (r) => [r.provenance.summary, r.provenance.sourceUri, r.provenance.sourceTaskId]
    .filter(Boolean).join("\n")],
  ["Superseded by", (r) => r.supersededById || ""],
];

const SCOPE = [["taskIds", "tasks"], ["components", "components"],
  ["environments", "environments"], ["versions", "versions"]];

// Its tags, scope and provenance as they are now: only a correction's diff
// showed them, and only where they changed (consolefast).
function facts(k) {
  const label = (text) => h("span", { class: "label" }, text);
  const scoped = SCOPE.filter(([dim]) => k.scope[dim].length);
  const p = k.provenance;
  const source = [
    p.summary,
    p.sourceUri ? h("code", {}, p.sourceUri) : null,
    p.sourceTaskId ? ["task ", h("code", {}, p.sourceTaskId)] : null,
  ].filter(Boolean);
  return [
    h("p", { dataset: { fact: "tags" } }, label("Tags: "),
      k.tags.length ? joined(k.tags.map((t) => h("span", { class: "tag" }, t)), ", ") : "none"),
    h("p", { dataset: { fact: "scope" } }, label("Scope: "), scoped.length
      ? joined(scoped.map(([dim, name]) => [`${name} `, joined(k.scope[dim], ", ")]), "; ")
      : "general (any task, component, environment and version)"),
    h("p", { dataset: { fact: "provenance" } }, label("Source: "),
      source.length ? joined(source, " · ") : "not given"),
  ];
}

export async function renderKnowledgeItem(projectId, id) {
  const data = await gql(KNOWLEDGE_ITEM, { project: projectId, id });
  // a missing project read "No such record" (consoledocaudit)
  if (!data.project) return noSuch("project");
  const k = data.project.knowledgeItem;
  if (!k) return noSuch("record");
  const revs = await allNodes(k.revisions, async (after) => {
    const more = await gql(KNOWLEDGE_ITEM, { project: projectId, id, after });
    return more.project && more.project.knowledgeItem && more.project.knowledgeItem.revisions;
  });
  // another project's shared record, opened from this project's list: its
  // page named no source (the list did), and "← Knowledge" led to the list
  // without other projects' records, where it is not (consoletruth)
  const foreign = k.projectId !== projectId;
  return [
    h("p", {}, link(`#/p/${enc(projectId)}/knowledge${foreign ? "?shared=1" : ""}`, "← Knowledge")),
    h("h1", { tabindex: "-1" }, k.title),
    h("p", { class: "meta" }, badge(lower(k.kind), "kind"), " ", badge(lower(k.status), k.status),
      ` revision ${k.revision} · ${lower(k.collection)} collection${k.shareAcrossProjects ? ", shared across projects" : ""}`,
      foreign ? ` · shared from ${k.projectId}` : "",
      ` · useful ${k.feedbackTotals.useful}, not useful ${k.feedbackTotals.notUseful} (all revisions)`),
    h("section", { "aria-labelledby": "k-body" }, h("h2", { id: "k-body" }, "Current text"),
      h("p", { class: "prose" }, k.body),
      k.applicability ? h("p", {}, h("span", { class: "label" }, "Applies when: "), k.applicability) : null,
      ...facts(k),
      k.supersededById ? h("p", {}, "Superseded by ",
        link(`#/p/${enc(k.projectId)}/k/${enc(k.supersededById)}`, k.supersededById)) : null),
    h("section", { "aria-labelledby": "k-revs" }, h("h2", { id: "k-revs" }, "Revisions and corrections"),
      h("ol", { class: "plain history", reversed: true }, revs.map((r, i) => {
        const previous = revs[i + 1];
        const who = r.provenance.actor ? words`${r.provenance.actor.name} (${lower(r.provenance.actor.kind)})` : "unknown";
        return h("li", {},
          h("h3", {}, `Revision ${r.revision}`, r.revision === k.revision ? " (current)" : ""),
          h("p", { class: "muted" }, r.revision === 1 ? "Created" : "Corrected", " by ", who, ", ",
            ago(r.provenance.recordedAt),
            ` · feedback on this revision: useful ${r.feedback.useful}, not useful ${r.feedback.notUseful}`),
          previous
            ? h("details", { open: i === 0 }, h("summary", {}, `What changed from revision ${previous.revision}`),
              renderFieldDiffs(previous, r, CONTENT))
            : h("p", { class: "muted" }, "The first revision."));
      }))),
  ];
}
