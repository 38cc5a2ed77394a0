// Tiny DOM helpers: every text goes in as a text node or attribute, never as HTML,
// so nothing a record holds can become markup.

// Where a person types text, its direction follows what is typed: without
// `dir="auto"` a Hebrew "הבדיקות עברו!" showed its "!" at the start while
// typed, and at the end once recorded (a record's text is shown isolated).
const TYPED = new Set(["text", "search"]);

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  if ((tag === "textarea" || (tag === "input" && TYPED.has(attrs?.type))) && !attrs?.dir) {
    el.dir = "auto";
  }
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.className = value;
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key === "maxchars") {
      limitChars(el, value);
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

// A box that stops at `max` characters as the service counts them (code
// points). `maxlength` counts UTF-16 units, in which an emoji is two: a valid
// environment of 150 emoji read as 300 of 200 once edited, and its reopen
// would not send; a tag of 40 emoji was cut to 32. As `maxlength` does, what
// is typed or pasted past the limit is dropped, never the text already there.
// Code points always: counted in UTF-16 units while the box held at most `max`
// of them, 32 emoji in a box of 64 read as full and refused a 33rd. Text
// without a surrogate has as many code points as units.
const SURROGATE = /[\ud800-\udfff]/;

function limitChars(el, max) {
  const count = (text) => (SURROGATE.test(text) ? Array.from(text).length : text.length);
  el.addEventListener("beforeinput", (event) => {
    const added = event.inputType === "insertLineBreak" || event.inputType === "insertParagraph"
      ? "\n" : event.data ?? event.dataTransfer?.getData("text/plain") ?? null;
    if (added === null) return; // a deletion, or what adds no text
    const { value, selectionStart: start, selectionEnd: end } = el;
    const room = max - count(value.slice(0, start)) - count(value.slice(end));
    const chars = Array.from(added);
    if (chars.length <= room) return;
    event.preventDefault();
    if (room > 0) {
      el.setRangeText(chars.slice(0, room).join(""), start, end, "end");
      el.dispatchEvent(new Event("input", { bubbles: true }));
    }
  });
  // what no beforeinput could stop (an input method's composition): cut last
  el.addEventListener("input", () => {
    if (el.value.length > max && count(el.value) > max) {
      el.value = Array.from(el.value).slice(0, max).join("");
    }
  });
}

// Text that can turn the direction of what follows it: right-to-left letters
// (Hebrew, Arabic, ...) or a bidi control (U+202E RIGHT-TO-LEFT OVERRIDE and
// its kin). A task titled "Archive old logs \u202Enow" showed the console's
// own "(task_x, open)" after it reversed, "(nepo ,x_ksat)", on the page where
// a human decides. The console's own words hold none of these.
const DIRECTIONAL = /[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefe\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]|[\u{10800}-\u{10fff}\u{1e800}-\u{1efff}]/u;
// elements whose content is text only (a <bdi> inside would not show)
const TEXT_ONLY = new Set(["OPTION", "TEXTAREA", "TITLE"]);

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.append(child);
    else el.append(...isolated(el, String(child)));
  }
}

// A sentence of the console's with record text in it, as a tagged template
// (words`Task "${title}" changed`): each value becomes a child of its own,
// so that h() isolates it alone. In one string, the <bdi> held the console's
// words too, and a U+202E in an answer still reversed "by Alice (human)".
export function words(strings, ...values) {
  const parts = [];
  strings.forEach((text, i) => {
    if (text) parts.push(text);
    if (i < values.length) parts.push(values[i]);
  });
  return parts;
}

// Values of a record joined by the console's `separator`, each a child of
// its own so that h() isolates it alone: joined in one string, one option
// ending in U+202E turned the options after it ("Options: Wait won kcab lloR").
export function joined(values, separator) {
  return values.flatMap((value, i) => (i ? [separator, value] : [value]));
}

// Record text for a plain-text place (a tab's title), isolated when it must
// be by FIRST STRONG ISOLATE ... POP DIRECTIONAL ISOLATE, the <bdi> of text.
export function isolatedText(text) {
  if (!DIRECTIONAL.test(text)) return text;
  // without isolates of its own: a stray U+2069 closed this one early
  return `\u2068${text.replace(/[\u2066-\u2069]/g, "")}\u2069`;
}

// Fill `el` with children as h() does (record text isolated where it must be).
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

// Explicit direction controls (embeddings, overrides, isolates): letters of
// any script never need them, and within the text they still turn it, so
// "Keep \u202Eetirw" reads "Keep write" although "etirw" is what was sent.
const CONTROLS = /[\u202a-\u202e\u2066-\u2069]/;

// Such text in a <bdi> of its own: what it turns ends where it ends, and the
// console's words around it keep their order (as record text, it is kept as
// it was written, within). Text holding explicit controls is followed by a
// note that says so, where a human decides on what it seems to say.
function isolated(el, text) {
  if (TEXT_ONLY.has(el.tagName) || !DIRECTIONAL.test(text)) return [text];
  const bdi = document.createElement("bdi");
  bdi.textContent = text;
  if (!CONTROLS.test(text)) return [bdi];
  const note = document.createElement("span");
  note.className = "controls-note";
  note.textContent = " [direction controls]";
  note.title = "This text holds Unicode direction controls (U+202A to U+202E, U+2066 to"
    + " U+2069): it may not read in the order it was written.";
  return [bdi, note];
}

let uid = 0;
export function nextId(prefix = "f") {
  uid += 1;
  return `${prefix}-${uid}`;
}

// The server's "now" (its clock may be simulated, the browser's may be hours
// off): every GraphQL answer says it (`Waypost-Now`), read as of the middle
// of the exchange; used for "how long ago" so it agrees with the service.
let serverOffsetMs = 0;
export function learnServerNow(iso, sent, received) {
  const t = Date.parse(iso || "");
  if (!Number.isNaN(t)) serverOffsetMs = t - (sent + received) / 2;
}
export function serverNow() {
  return Date.now() + serverOffsetMs;
}

export function formatAbsolute(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC").replace(/Z$/, " UTC");
}

export function describeSpan(ms) {
  const abs = Math.abs(ms);
  const minutes = Math.round(abs / 60000);
  if (minutes < 1) return "less than a minute";
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) {
    const rest = minutes % 60;
    return rest ? `${hours} h ${rest} min` : `${hours} h`;
  }
  return `${Math.round(hours / 24)} days`;
}

// <time> with the absolute instant in its attribute and title, relative text.
// serverNow() is an estimate (`Waypost-Now` read as of the middle of its
// exchange) and may run a little behind the instant an answer was stamped:
// an answer recorded just now read "in less than a minute". Within that
// margin an instant recorded is taken as just past; a deadline (an expiry,
// a timeout) is not recorded, and one a few seconds ahead read "less than a
// minute ago" on a question still open (consoletruth).
const LEARNED_LATE_MS = 5000;

export function ago(iso) {
  return h("time", { class: "ago", datetime: iso, title: formatAbsolute(iso) }, agoText(iso, false));
}

// the sweep's 24 hours (docs/decisions.md; tests/test_console_limits.py
// holds it to the service's)
const TIMEOUT_MS = 24 * 60 * 60 * 1000;

// When a cycle opened at `openedAt` is due for the sweep's timeout (24 hours
// unanswered), as an ISO instant.
export function timeoutDue(openedAt) {
  return new Date(Date.parse(openedAt) + TIMEOUT_MS).toISOString();
}

// the same as ago(), for a deadline: ahead until it has passed
export function until(iso) {
  return h("time", { class: "ago", datetime: iso, title: formatAbsolute(iso), dataset: { deadline: "" } },
    agoText(iso, true));
}

function agoText(iso, deadline) {
  const ms = serverNow() - Date.parse(iso);
  const past = deadline ? ms > 0 : ms > -LEARNED_LATE_MS;
  return past ? `${describeSpan(Math.max(ms, 0))} ago` : `in ${describeSpan(ms)}`;
}

// Bring every "... ago" under `root` up to the service's clock, in place: a
// refresh that found nothing else changed leaves the page as it is (a
// selection, a screen reader's place), but the times still move on.
export function refreshAgo(root) {
  for (const time of root.querySelectorAll("time.ago")) {
    const text = agoText(time.getAttribute("datetime"), time.hasAttribute("data-deadline"));
    if (time.textContent !== text) time.textContent = text;
  }
}

// How long until the soonest deadline under `root` passes by the service's
// clock (ms), or null when none is ahead.
export function msToNextDeadline(root) {
  let soonest = null;
  for (const time of root.querySelectorAll("time[data-deadline]")) {
    const ms = Date.parse(time.getAttribute("datetime")) - serverNow();
    if (ms > 0 && (soonest === null || ms < soonest)) soonest = ms;
  }
  return soonest;
}

export function when(iso) {
  return h("time", { datetime: iso }, formatAbsolute(iso));
}

export function badge(text, kind = text) {
  return h("span", { class: `badge badge-${String(kind).toLowerCase()}` }, text);
}

export function lower(enumValue) {
  return String(enumValue || "").toLowerCase().replaceAll("_", " ");
}

export function announce(text) {
  const region = document.getElementById("announce");
  if (!region) return;
  region.textContent = "";
  // a fresh text node so screen readers read the same message twice
  setTimeout(() => { region.textContent = text; }, 50);
}

// Empty the announcer: what it last said belongs to a page no longer shown.
export function clearAnnouncement() {
  const region = document.getElementById("announce");
  if (region) region.textContent = "";
}

// The page for a project, decision or record that is not there (one wording).
export function noSuch(what) {
  return [h("h1", { tabindex: "-1" }, `No such ${what}`), h("p", {}, link("#/", "Back to the inbox"))];
}

// An error is an alert, said as it appears. Any other notice is only seen:
// the page says it through the announcer (`announce`), its one voice, since
// a notice of role=status whose words changed (a second change elsewhere)
// was read out beside the announcer's own sentence (consoleux2).
export function notice(kind, ...children) {
  return h("div", { class: `notice notice-${kind}`, role: kind === "error" ? "alert" : null }, ...children);
}

// A form's refusal, said in `box` as a role=alert notice and tied to the field
// it is about: the field is marked invalid and described by the notice, so
// whoever comes back to it hears why, not only as the alert is read (WCAG
// 3.3.1; the field said nothing but its hint), and the focus goes there.
export function sayError(box, field, ...children) {
  clearError(box);
  box.append(notice("error", ...children));
  if (field) {
    markInvalid(field, box);
    field.focus();
  }
}

// "What you wrote": [label, text] of each box typed into, to copy from, in a
// conflict's notice, below the sign-in form a refused token brings, and over
// a decision shown anew after it changed elsewhere; labelled alike in each
// ("Why reopen: ... / Environment: staging"), the label left out when it is
// the only one. Null when nothing was typed.
export function whatYouWrote(written, open = false) {
  const typed = written.filter(([, text]) => text.trim());
  if (!typed.length) return null;
  return h("details", { class: "kept", open }, h("summary", {}, "What you wrote"),
    ...typed.map(([label, text]) => h("p", { class: "prose" },
      typed.length > 1 ? h("strong", {}, `${label}: `) : null, text.trim())));
}

// [label, text] of each text box under `root` typed into (`data-typed`, set by
// main.js) whose text is not what it came with: a reopen form's Environment
// and Conditions come filled in, and are what you wrote only once edited (a
// sign-out kept textareas alone, and lost an edited Environment). The label is
// the one a conflict's notice gives the box (`data-kept`), else its own.
export function typedInto(root) {
  return [...root.querySelectorAll("textarea[data-typed], input[data-typed]")]
    .filter((el) => el.value.trim() && el.value !== el.defaultValue)
    .map((el) => [el.dataset.kept || (el.labels && el.labels[0] ? el.labels[0].textContent : ""), el.value]);
}

const marked = new WeakMap(); // box -> the fields it describes

// `field` invalid, described by `box` (given an id for it).
export function markInvalid(field, box) {
  if (!box.id) box.id = nextId("error");
  field.setAttribute("aria-invalid", "true");
  const ids = (field.getAttribute("aria-describedby") || "").split(" ").filter(Boolean);
  if (!ids.includes(box.id)) field.setAttribute("aria-describedby", [...ids, box.id].join(" "));
  marked.set(box, [...(marked.get(box) || []), field]);
}

// `box` emptied, and the fields it marked valid again.
export function clearError(box) {
  box.replaceChildren();
  for (const field of marked.get(box) || []) {
    field.removeAttribute("aria-invalid");
    const ids = (field.getAttribute("aria-describedby") || "").split(" ").filter((id) => id && id !== box.id);
    if (ids.length) field.setAttribute("aria-describedby", ids.join(" "));
    else field.removeAttribute("aria-describedby");
  }
  marked.delete(box);
}

// An idempotency key from the browser's CSPRNG (randomUUID needs a secure
// context; getRandomValues does not).
export function newKey(prefix) {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `console-${prefix}-${hex}`;
}

export function link(href, ...children) {
  return h("a", { href }, ...children);
}

export function enc(part) {
  return encodeURIComponent(part);
}

// A button busy while its request is on its way: aria-disabled, not
// disabled, since a disabled button drops the keyboard focus to <body> for
// as long as the request takes (a11yjourney); its handler asks `isBusy`
// first, as a disabled button took no press.
export function setBusy(button, busy) {
  if (busy) button.setAttribute("aria-disabled", "true");
  else button.removeAttribute("aria-disabled");
}

export function isBusy(button) {
  return button.getAttribute("aria-disabled") === "true";
}
