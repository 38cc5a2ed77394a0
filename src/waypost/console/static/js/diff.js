// Line diffs for corrections, judged task fields and policy rules.
// A plain LCS table: texts here are short (rules, task descriptions,
// knowledge bodies); past a bound the diff is "all removed, all added".

import { h } from "./dom.js";

const MAX_CELLS = 1_000_000;

export function diffLines(before, after) {
  const a = splitLines(before);
  const b = splitLines(after);
  if (a.length * b.length > MAX_CELLS) {
    return [...a.map((line) => ["-", line]), ...b.map((line) => ["+", line])];
  }
  const rows = a.length + 1;
  const cols = b.length + 1;
  const table = new Uint32Array(rows * cols);
  for (let i = a.length - 1; i >= 0; i -= 1) {
    for (let j = b.length - 1; j >= 0; j -= 1) {
      table[i * cols + j] = a[i] === b[j]
        ? table[(i + 1) * cols + j + 1] + 1
        : Math.max(table[(i + 1) * cols + j], table[i * cols + j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push([" ", a[i]]);
      i += 1;
      j += 1;
    } else if (table[(i + 1) * cols + j] >= table[i * cols + j + 1]) {
      out.push(["-", a[i]]);
      i += 1;
    } else {
      out.push(["+", b[j]]);
      j += 1;
    }
  }
  while (i < a.length) out.push(["-", a[i++]]);
  while (j < b.length) out.push(["+", b[j++]]);
  return out;
}

function splitLines(text) {
  if (text === null || text === undefined || text === "") return [];
  return String(text).split("\n");
}

// One field's diff as a <pre>: "-" lines in <del>, "+" lines in <ins>, the
// sign kept in the text so the change does not rely on colour alone.
export function renderDiff(label, before, after) {
  const lines = diffLines(before, after);
  const pre = h("pre", { class: "diff", "aria-label": `Changes to ${label}` });
  if (!lines.length) pre.append(h("span", { class: "same" }, "  (empty)\n"));
  for (const [sign, text] of lines) {
    const line = `${sign} ${text}\n`;
    if (sign === "-") pre.append(h("del", {}, line));
    else if (sign === "+") pre.append(h("ins", {}, line));
    else pre.append(h("span", { class: "same" }, line));
  }
  return pre;
}

// Field-by-field comparison of two records: only the fields that differ,
// each as a diff. `fields` is [[label, value-to-text], ...].
export function renderFieldDiffs(before, after, fields) {
  const parts = [];
  for (const [label, pick] of fields) {
    const x = before ? pick(before) : "";
    const y = after ? pick(after) : "";
    if (x === y) continue;
    parts.push(h("div", { class: "field-diff" }, h("h4", {}, label), renderDiff(label, x, y)));
  }
  if (!parts.length) parts.push(h("p", { class: "muted" }, "No differences in these fields."));
  return parts;
}
