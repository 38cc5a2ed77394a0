// The console's only channel to the service: POST /graphql with the bearer
// token kept in this tab's sessionStorage. No cookies, no other endpoint.

import { learnServerNow } from "./dom.js";

const TOKEN_KEY = "waypost.token";

export class Unauthenticated extends Error {}

// Called once the stored token is refused (revoked, expired, removed), from
// whatever asked: a page, a form or a background refresh all sign out the
// same way, with the same message (main.js sets it).
let onRefused = () => {};
export function whenRefused(handler) {
  onRefused = handler;
}

function refused(message, checkingACandidate) {
  if (!checkingACandidate) onRefused();
  return new Unauthenticated(message);
}
export class RequestFailed extends Error {
  constructor(message, code, field = null, retryAfter = null, reason = null) {
    super(message);
    this.code = code;
    this.field = field; // the argument a refusal names (extensions.field)
    // seconds the service asked to wait before trying again (a start, a
    // busy lock: `Retry-After`), or null when it said nothing of the kind
    this.retryAfter = retryAfter;
    this.reason = reason; // extensions.reason: `starting`, `database_damaged`...
  }
}

// When to try again after `error`: the service's own Retry-After when it
// gave one (it is answering, and says when it will be ready: a retry on the
// page's back-off came up to a minute after a long start had ended), never
// sooner than a second nor later than `most`; otherwise the caller's
// back-off. In milliseconds.
export function retryDelay(error, backOff, most) {
  const asked = error && error.retryAfter;
  if (typeof asked !== "number" || !Number.isFinite(asked)) return backOff;
  return Math.min(Math.max(asked * 1000, 1000), most);
}

// `Retry-After` in delta-seconds (the only form the service sends); a
// proxy's HTTP-date is read as no advice
function retryAfterHeader(response) {
  const value = (response.headers.get("Retry-After") || "").trim();
  return /^\d{1,6}$/.test(value) ? Number(value) : null;
}

// Requests answered by the service from now on: `handler` runs once, after
// the first request sent later than this call that the service answered
// (a form says its refusal "the service is starting" no longer holds).
let requestsSent = 0;
let waitingForAnAnswer = [];
export function onceAnswered(handler) {
  waitingForAnAnswer.push({ after: requestsSent, handler });
}

function answered(sentAs) {
  const due = waitingForAnAnswer.filter((w) => sentAs > w.after);
  if (!due.length) return;
  waitingForAnAnswer = waitingForAnAnswer.filter((w) => sentAs <= w.after);
  for (const w of due) w.handler();
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function saveToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
}

// Signing out forgets everything this tab kept: the token, and GraphiQL's
// history and tabs (graphiql/init.js), which hold the headers, token
// included, that each query ran with.
export function forgetToken() {
  sessionStorage.clear();
}

// How long one request may take before the page says the service did not
// answer (no request of the console's takes long; a service stopped, not
// gone, held a form's "sending" and the inbox's refresh for ever).
export const REQUEST_TIMEOUT_MS = 30000;
// a reverse proxy's answers for a service it could not get an answer from,
// or would not ask now (429: its rate limit, whose Retry-After counts as a
// 503's; the service itself answers /graphql's refusals in JSON)
const GATEWAY_STATUSES = new Set([429, 502, 503, 504]);

// Runs one GraphQL document. Top-level errors become a RequestFailed (their
// first message, with extensions.code); a 401 becomes Unauthenticated; no
// answer within REQUEST_TIMEOUT_MS is a RequestFailed of code "network", as
// an unreachable service is (the page then says so and tries again).
export async function gql(query, variables = {}, tokenOverride = null) {
  const bearer = tokenOverride || token();
  // the sign-in form checks a candidate token: its refusal is the form's to show
  const candidate = Boolean(tokenOverride);
  if (!bearer) throw refused("not signed in", candidate);
  // every token the service makes is printable ASCII; the browser will not
  // send anything else in a header, and its refusal read as "cannot be reached"
  if (!/^[\x21-\x7e]+$/.test(bearer)) throw refused("token refused", candidate);
  let response;
  let body;
  const sent = Date.now();
  const sentAs = ++requestsSent;
  const signal = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
  try {
    response = await fetch("/graphql", {
      method: "POST",
      credentials: "omit",
      cache: "no-store",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${bearer}` },
      body: JSON.stringify({ query, variables }),
      signal,
    });
    learnServerNow(response.headers.get("Waypost-Now"), sent, Date.now());
    if (response.status === 401) throw refused("token refused", candidate);
    body = await response.json();
  } catch (error) {
    if (error instanceof Unauthenticated) throw error;
    if (signal.aborted) {
      throw new RequestFailed(
        `The service did not answer within ${REQUEST_TIMEOUT_MS / 1000} seconds. Is it running?`, "network");
    }
    if (!response) {
      // the browser's own word: offline, the service is not the one to look at
      throw new RequestFailed(navigator.onLine === false
        ? "This browser is offline: check its network connection."
        : "The service cannot be reached. Is it running?", "network");
    }
    // a proxy's own answer for a service that is down, slow or overloaded:
    // the request may have reached the service (and been recorded), as when
    // the network fails, not a fault of the service's ("answered 504"); a
    // proxy's 429 never reached it, which the lost-reply check then finds
    if (GATEWAY_STATUSES.has(response.status)) {
      throw new RequestFailed(
        `The service did not answer (${response.status} from the way to it).`, "network", null,
        retryAfterHeader(response));
    }
    throw new RequestFailed(`The service answered ${response.status} without JSON.`, "internal");
  }
  if (body.errors && body.errors.length) {
    const first = body.errors[0];
    const extensions = first.extensions || {};
    const code = extensions.code || "error";
    if (code === "unauthenticated") throw refused(first.message, candidate);
    // the service's refusal to do anything now (503: starting, busy) is no
    // answer to wait for; any other is
    if (code !== "unavailable") answered(sentAs);
    const retryAfter = typeof extensions.retryAfter === "number" ? extensions.retryAfter : retryAfterHeader(response);
    throw new RequestFailed(first.message, code, extensions.field || null, retryAfter,
      extensions.reason || null);
  }
  answered(sentAs);
  return body.data;
}

// Every node of a connection whose first page `conn` came with a larger
// answer: `page(cursor)` fetches the same connection after `cursor`, until no
// page is left or `enough(nodes)` says the caller has what it came for.
// Histories run newest first, so the pages that follow hold older revisions.
export async function allNodes(conn, page, enough = () => false) {
  const nodes = conn.edges.map((e) => e.node);
  let info = conn.pageInfo;
  while (info.hasNextPage && !enough(nodes)) {
    const next = await page(info.endCursor);
    if (!next) break;
    nodes.push(...next.edges.map((e) => e.node));
    info = next.pageInfo;
  }
  return nodes;
}

// A mutation's payload: its userErrors are returned, not thrown, so that each
// page can say what a refusal means there (a conflict, a missing field...).
export async function mutate(query, input, field) {
  const data = await gql(query, { input });
  return data[field];
}
