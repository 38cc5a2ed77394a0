// A `datetime-local` value (the person's own time) as the instant it names.
//
// `new Date(value)` resolves the browser's zone silently: a time the clocks
// skip (02:30 on the night they move forward) became 03:30, a time they
// pass twice the first of the two, and the page showed the result in UTC
// only; a year past 9999 (Chromium's box takes up to 275760) made no Date
// at all, and its `toISOString` threw before the form could say anything.

import { formatAbsolute } from "./dom.js";

const pad = (n, width = 2) => String(n).padStart(width, "0");

// The instant's local wall time, as the box writes it (minutes; seconds
// when the value had them).
function wallTime(date, withSeconds) {
  const day = `${pad(date.getFullYear(), 4)}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
  const time = `${pad(date.getHours())}:${pad(date.getMinutes())}`;
  return `${day}T${time}${withSeconds ? `:${pad(date.getSeconds())}` : ""}`;
}

// { iso, utc, note } for a value the service can take, or { refusal }.
// `note` says how the zone resolved a time the clocks skip or repeat.
export function localInstant(value) {
  const date = new Date(value);
  if (Number.isNaN(date.getTime()) || date.getUTCFullYear() > 9999) {
    return { refusal: "Set an expiry before the year 10000 (UTC)." };
  }
  const withSeconds = value.length > 16;
  const typed = value.slice(0, withSeconds ? 19 : 16);
  const written = wallTime(date, withSeconds);
  if (written !== typed) {
    return {
      refusal: `${typed.replace("T", " ")} does not exist in your time zone (the clocks`
        + ` skip it that day): choose another time, such as ${written.replace("T", " ")}.`,
    };
  }
  const result = { iso: date.toISOString(), utc: formatAbsolute(date.toISOString()), note: "" };
  // a time the clocks pass twice: the same wall time an hour (or the zone's
  // step, at most 2 hours) later is the second one
  for (let minutes = 30; minutes <= 120; minutes += 15) {
    const later = new Date(date.getTime() + minutes * 60000);
    if (wallTime(later, withSeconds) === typed) {
      result.note = ` It happens twice in your time zone that day: this is the first`
        + ` (the second is ${formatAbsolute(later.toISOString())}).`;
      break;
    }
  }
  return result;
}

// The zone the browser reads the box in, by name: a machine set to the
// wrong zone (a VM left in UTC) is then seen before the expiry is sent.
function zoneName() {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  return zone ? ` (read in your time zone, ${zone})` : "";
}

// What the hint under the box says of its value, as it is typed.
export function instantEcho(value) {
  if (!value) return "";
  const found = localInstant(value);
  return found.refusal || `That is ${found.utc}${zoneName()}.${found.note}`;
}
