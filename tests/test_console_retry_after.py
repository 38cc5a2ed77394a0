"""docs/console.md: a refusal that says when to ask again (a `503` with
`Retry-After`) sets the console's next try to that many seconds, never sooner
than a second nor later than a minute. The console's own module
(`static/js/api.js`) run by Node against answers of a stand-in `fetch`: the
browser tests cover the service's JSON 503; a proxy's 503, which is no JSON,
and a header without `extensions.retryAfter` are covered here."""

from __future__ import annotations

import json

from tests.console_support import needs_node, run_console_module

pytestmark = needs_node

# Each case: the HTTP answer (status, headers, body); printed: what gql()
# threw (code, retryAfter) and retryDelay(error, null, 60000).
_RUN = """
const [api, cases] = [await import(process.argv[1]), JSON.parse(process.argv[2])];
globalThis.sessionStorage = { getItem: () => "wp_token", setItem() {}, clear() {} };
const out = [];
for (const [status, headers, body] of cases) {
  globalThis.fetch = async () => new Response(body, { status, headers });
  try {
    await api.gql("{ me { id } }");
    out.push("answered");
  } catch (error) {
    out.push([error.code, error.retryAfter, api.retryDelay(error, null, 60000)]);
  }
}
console.log(JSON.stringify(out));
"""


def thrown(cases: list[tuple[int, dict[str, str], str]]) -> list[object]:
    return list(run_console_module("api.js", _RUN, cases))


def _errors(extensions: dict[str, object]) -> str:
    return json.dumps({"errors": [{"message": "busy", "extensions": extensions}]})


def test_a_retry_after_sets_the_next_try_whoever_answered() -> None:
    as_json = {"Content-Type": "application/json"}
    cases = [
        # the service's own 503: extensions.retryAfter (and the same header)
        (503, {**as_json, "Retry-After": "1"}, _errors({"code": "unavailable", "retryAfter": 1})),
        # a proxy's 503 in HTML: no JSON, but its Retry-After still counts
        (503, {"Retry-After": "7"}, "<h1>Service Unavailable</h1>"),
        # an answer with only the header (GraphQL's busy answer carries both)
        (200, {**as_json, "Retry-After": "3"}, _errors({"code": "unavailable"})),
        # never sooner than a second, never later than a minute
        (503, {**as_json, "Retry-After": "0"}, _errors({"code": "unavailable", "retryAfter": 0})),
        (503, {"Retry-After": "600"}, "busy"),
        # a proxy's HTTP-date is no advice: the page's own back-off
        (503, {"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}, "busy"),
        # a proxy's rate limit counts as its 503 (weakprobes: it was "internal",
        # its Retry-After ignored, the page never tried again by itself)
        (429, {"Retry-After": "5"}, "<h1>Too Many Requests</h1>"),
        # another status without JSON is the service's fault: no advice
        (500, {"Retry-After": "5"}, "oops"),
    ]
    assert thrown(cases) == [
        ["unavailable", 1, 1000],
        ["network", 7, 7000],
        ["unavailable", 3, 3000],
        ["unavailable", 0, 1000],
        ["network", 600, 60000],
        ["network", None, None],
        ["network", 5, 5000],
        ["internal", None, None],
    ]
