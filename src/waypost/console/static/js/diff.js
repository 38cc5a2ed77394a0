// Line diffs for corrections, judged task fields and policy rules.
// The lines both texts begin and end with are matched first, and a plain
// LCS table compares what lies between: an edit of one line in rules of
// 9,000 (64 KiB) is one small table, where the whole texts' table passed
// the bound and the diff read "every line removed, every line added".
// Where what lies between is still past the bound (edits far apart), lines
// that occur once in each text anchor it (as patience diff does) and the
// stretches between anchors are compared the same way; with no anchor at
// all, that stretch is shown removed, then added.

import { h } from "./dom.js";

const MAX_CELLS = 1_000_000;
// Unchanged lines shown around each change; longer unchanged runs are
// folded into one "... N unchanged lines" line.
const CONTEXT = 3;

export function diffLines(before, after) {
  return diffArrays(splitLines(before), splitLines(after));
}

function diffArrays(a, b) {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start += 1;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA -= 1;
    endB -= 1;
  }
  const same = (lines) => lines.map((line) => [" ", line]);
  return [
    ...same(a.slice(0, start)),
    ...middle(a.slice(start, endA), b.slice(start, endB)),
    ...same(a.slice(endA)),
  ];
}

function middle(a, b) {
  if (a.length * b.length <= MAX_CELLS) return table(a, b);
  const anchors = uniqueAnchors(a, b);
  if (!anchors.length) {
    return [...a.map((line) => ["-", line]), ...b.map((line) => ["+", line])];
  }
  const out = [];
  let i = 0;
  let j = 0;
  for (const [ai, bj] of anchors) {
    out.push(...diffArrays(a.slice(i, ai), b.slice(j, bj)), [" ", a[ai]]);
    i = ai + 1;
    j = bj + 1;
  }
  out.push(...diffArrays(a.slice(i), b.slice(j)));
  return out;
}

// Pairs [i, j] of lines found exactly once in `a` and once in `b`, equal,
// the longest run of them in the same order in both (patience sorting).
function uniqueAnchors(a, b) {
  const count = (lines) => {
    const seen = new Map();
    lines.forEach((line, index) => {
      const got = seen.get(line);
      seen.set(line, got === undefined ? index : -1);
    });
    return seen;
  };
  const inA = count(a);
  const inB = count(b);
  const pairs = [];
  for (const [line, i] of inA) {
    const j = inB.get(line);
    if (i >= 0 && j !== undefined && j >= 0) pairs.push([i, j]);
  }
  pairs.sort((x, y) => x[0] - y[0]);
  // longest increasing subsequence of j: `tails[k]` ends the best run of k+1
  const tails = [];
  const before = new Array(pairs.length);
  for (let p = 0; p < pairs.length; p += 1) {
    let lo = 0;
    let hi = tails.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (pairs[tails[mid]][1] < pairs[p][1]) lo = mid + 1;
      else hi = mid;
    }
    before[p] = lo > 0 ? tails[lo - 1] : -1;
    tails[lo] = p;
  }
  const run = [];
  for (let p = tails.length ? tails[tails.length - 1] : -1; p >= 0; p = before[p]) run.push(pairs[p]);
  return run.reverse();
}

function table(a, b) {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const cells = new Uint32Array(rows * cols);
  for (let i = a.length - 1; i >= 0; i -= 1) {
    for (let j = b.length - 1; j >= 0; j -= 1) {
      cells[i * cols + j] = a[i] === b[j]
        ? cells[(i + 1) * cols + j + 1] + 1
        : Math.max(cells[(i + 1) * cols + j], cells[i * cols + j + 1]);
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
    } else if (cells[(i + 1) * cols + j] >= cells[i * cols + j + 1]) {
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

// The diff with each run of unchanged lines longer than the context around
// it folded into one ["…", count] entry (a text with no change keeps all).
export function foldUnchanged(lines) {
  if (!lines.some(([sign]) => sign !== " ")) return lines;
  const out = [];
  let run = [];
  const flush = (atStart, atEnd) => {
    const keepBefore = atStart ? 0 : CONTEXT;
    const keepAfter = atEnd ? 0 : CONTEXT;
    if (run.length > keepBefore + keepAfter + 1) {
      out.push(...run.slice(0, keepBefore));
      out.push(["…", run.length - keepBefore - keepAfter]);
      out.push(...run.slice(run.length - keepAfter));
    } else {
      out.push(...run);
    }
    run = [];
  };
  let seenChange = false;
  for (const line of lines) {
    if (line[0] === " ") {
      run.push(line);
      continue;
    }
    flush(!seenChange, false);
    seenChange = true;
    out.push(line);
  }
  flush(false, true);
  return out;
}

// A line's ending is not part of it: texts whose endings differ (CRLF
// against LF) compared every line unequal, and the diff read "every line
// removed, every line added". renderDiff says when the endings changed.
function splitLines(text) {
  if (text === null || text === undefined || text === "") return [];
  return String(text).split(/\r?\n/);
}

// "CRLF", "LF", "mixed", or null for a text of one line.
function lineEndings(text) {
  const s = String(text ?? "");
  const crlf = (s.match(/\r\n/g) || []).length;
  const lf = (s.match(/\n/g) || []).length - crlf;
  if (crlf && lf) return "mixed";
  return crlf ? "CRLF" : lf ? "LF" : null;
}

// One field's diff as a <pre>: "-" lines in <del>, "+" lines in <ins>, the
// sign kept in the text so the change does not rely on colour alone.
export function renderDiff(label, before, after) {
  let lines = foldUnchanged(diffLines(before, after));
  // a group, so that its label counts (a <pre> has no role to name)
  const pre = h("pre", { class: "diff", role: "group", "aria-label": `Changes to ${label}` });
  const [endingsBefore, endingsAfter] = [lineEndings(before), lineEndings(after)];
  const unchanged = lines.every(([sign]) => sign === " ");
  if (endingsBefore && endingsAfter && endingsBefore !== endingsAfter) {
    pre.append(h("span", { class: "same note" },
      `  (line endings changed: ${endingsBefore} before, ${endingsAfter} after)\n`));
  } else if (unchanged && String(before ?? "") !== String(after ?? "")) {
    // mixed endings both sides, some moved: no line differs in words
    pre.append(h("span", { class: "same note" }, "  (line endings changed)\n"));
  }
  // nothing else changed: the text itself is folded away
  if (unchanged && pre.childNodes.length) lines = [["…", lines.length]];
  if (!lines.length) pre.append(h("span", { class: "same" }, "  (empty)\n"));
  for (const [sign, text] of lines) {
    if (sign === "…") {
      const word = text === 1 ? "line" : "lines";
      pre.append(h("span", { class: "same folded" }, `  … ${text} unchanged ${word}\n`));
      continue;
    }
    // the sign a child of its own, before the line's text: in one string a
    // right-to-left line took its sign to its far end, out of the sign column
    const line = [`${sign} `, text, "\n"];
    if (sign === "-") pre.append(h("del", {}, ...line));
    else if (sign === "+") pre.append(h("ins", {}, ...line));
    else pre.append(h("span", { class: "same" }, ...line));
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
