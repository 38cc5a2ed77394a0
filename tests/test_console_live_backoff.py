"""docs/console.md: the inbox's poll backs off "to one a minute after
failures", and when the browser says it is back online the page "looks at
once instead of waiting out the back-off". The console's own module
(`static/js/live.js`) run by Node with a stand-in page and timers: the
browser test of the offline and online events moves the page's clock nine
seconds, short of the minute's cap, and a look that succeeds resets the
back-off by itself, so neither the cap nor the reset on `online` showed there; nor did a
Retry-After's restart of the back-off, its next try being the one they see."""

from __future__ import annotations

from tests.console_support import needs_node, run_console_module

pytestmark = needs_node

# Prints the delay of each timer the poll sets: one after start, then one
# after each failed tick (argv[2]: each failure's Retry-After in seconds, or
# null), then (after the `online` event) one, and one after a further failure.
_RUN = """
const listeners = {};
const on = (type, fn) => { listeners[type] = fn; };
globalThis.document = { hidden: false, addEventListener() {}, removeEventListener() {},
  getElementById: () => null, documentElement: { dataset: {} } };
globalThis.window = { addEventListener: on, removeEventListener() {} };
globalThis.location = { protocol: "http:", host: "localhost" };
const timers = [];
globalThis.setTimeout = (fn, ms) => { timers.push(ms); return timers.length; };
globalThis.clearTimeout = () => {};
const { Live } = await import(process.argv[1]);
const failures = JSON.parse(process.argv[2]);
let next = null;
const live = new Live(async () => {
  const error = new TypeError("Failed to fetch");
  if (next !== null) Object.assign(error, { code: "unavailable", retryAfter: next });
  throw error;
});
live.start([], "wp_token");
for (const retryAfter of failures) {
  next = retryAfter;
  await live.tick();
}
next = null;
listeners.offline();
listeners.online();
await live.tick();
console.log(JSON.stringify(timers));
"""


def poll_timers(failures: list[int | None]) -> list[int]:
    return list(run_console_module("live.js", _RUN, failures))


def test_the_poll_backs_off_to_once_a_minute_and_starts_over_back_online() -> None:
    timers = poll_timers([None] * 6)
    # start: the poll's 4 s; each failure doubles it, up to a minute
    assert timers[:7] == [4000, 8000, 16000, 32000, 60000, 60000, 60000]
    # back online: a look at once, and a failure then waits 8 s, not another minute
    assert timers[7:] == [0, 8000]


def test_a_retry_after_sets_the_next_try_and_starts_the_back_off_over() -> None:
    timers = poll_timers([None, None, None, 3, None])
    # three failures (8, 16, 32 s), the service's Retry-After (3 s), then a
    # failure without one: the back-off begins again at 8 s, not at a minute
    assert timers == [4000, 8000, 16000, 32000, 3000, 8000, 0, 8000]
