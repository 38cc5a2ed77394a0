// Keeps a page current. With GraphQL subscriptions on the service
// (graphql-transport-ws at /graphql: `projectEventBatches`, `decisionChanged`),
// messages trigger refreshes (at most one a second while they keep coming);
// without them, a bounded poll: one request every few seconds while the tab
// is visible, backing off after failures (or, when the service refused with a
// Retry-After, trying again when it said).

import { retryDelay } from "./api.js";
import { announce } from "./dom.js";

const POLL_MS = 4000;
// with the socket: a refresh this long after a message, and no sooner than
// this gap after the one before
const REFRESH_DELAY_MS = 150;
const REFRESH_GAP_MS = 1000;
const MAX_BACKOFF_MS = 60000;
// A token may hold 16 streams at once (docs/graphql.md), one per subscribed
// project. An inbox of more projects than this polls instead, which leaves
// room for a second tab and a decision's page; subscribing to every project
// had the service refuse the 17th and the page reconnect every few seconds.
export const SOCKET_PROJECTS = 8;

export class Live {
  constructor(refresh) {
    this.refresh = refresh; // async () => void; throws on failure
    this.timer = null;
    this.delay = POLL_MS;
    this.stopped = true;
    this.mode = "poll";
    this.socket = null;
    this.refreshTimer = null; // a refresh a message asked for, not run yet
    this.lastRefresh = -Infinity; // when the latest such refresh began
    this.running = null; // the refresh on its way, which others asked for join
    this.runAgain = false; // asked for while one was on its way: run once more
    this.onVisibility = () => {
      if (!document.hidden && !this.stopped) this.schedule(0);
    };
    // The browser's own word on the network: offline, the page says at once
    // that it may be out of date (with a socket it showed nothing for up to
    // a minute); back online, it looks at once, not after the poll's
    // back-off (27 s measured: consolenetaudit).
    this.onOffline = () => {
      if (!this.stopped) showPaused(true);
    };
    this.onOnline = () => {
      if (this.stopped) return;
      this.delay = POLL_MS;
      this.schedule(0);
    };
  }

  // subscriptions: [{query, variables}], each a document whose messages mean
  // "something changed, refresh"
  start(subscriptions, token) {
    this.stop();
    this.stopped = false;
    this.delay = POLL_MS;
    this.subscriptions = subscriptions;
    this.token = token;
    this.socketWorked = false;
    this.refusedAt = 0;
    document.addEventListener("visibilitychange", this.onVisibility);
    window.addEventListener("offline", this.onOffline);
    window.addEventListener("online", this.onOnline);
    this.trySocket(subscriptions, token);
    this.schedule(this.delay);
  }

  // What to watch changed (a project appeared since the page loaded): the
  // socket subscribes to the new set; the poll needs no change.
  follow(subscriptions) {
    if (this.stopped || JSON.stringify(subscriptions) === JSON.stringify(this.subscriptions)) return;
    this.subscriptions = subscriptions;
    this.refusedAt = 0;
    const old = this.socket;
    if (old) {
      this.socket = null; // its close event is then no fall back to the poll
      old.close(1000);
    }
    this.trySocket(subscriptions, this.token);
    if (!this.socket && this.mode === "socket") {
      // nothing to subscribe to any more (too many projects): the poll again
      this.setMode("poll");
      this.delay = POLL_MS;
      this.schedule(POLL_MS);
    }
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = null;
    clearTimeout(this.refreshTimer);
    this.refreshTimer = null;
    document.removeEventListener("visibilitychange", this.onVisibility);
    window.removeEventListener("offline", this.onOffline);
    window.removeEventListener("online", this.onOnline);
    if (this.socket) {
      const socket = this.socket;
      this.socket = null;
      socket.close(1000);
    }
    this.setMode("poll");
    // the next page says whether it loads: "Updates resumed" was said of a
    // page that then could not load (consoleslownet)
    showPaused(false, true);
  }

  // shown on the page (data-live on <html>) so people and tests can tell
  setMode(mode) {
    if (mode === "socket") this.socketWorked = true;
    this.mode = mode;
    document.documentElement.dataset.live = mode;
  }

  schedule(ms) {
    clearTimeout(this.timer);
    if (this.stopped) return;
    this.timer = setTimeout(() => this.tick(), ms);
  }

  async tick() {
    if (this.stopped) return;
    if (document.hidden) return; // resumes on visibilitychange
    if (this.mode === "socket") {
      // the socket drives refreshes; a slow safety poll catches what the
      // sweep changes by the clock alone (timing out soon)
      this.schedule(MAX_BACKOFF_MS);
      this.retriedOnSocket(await this.run());
      return;
    }
    const failure = await this.run();
    const ok = failure === null;
    // the service's Retry-After (it is starting, or busy) sets the next try
    // and restarts the back-off; any other failure doubles it
    const asked = ok ? null : retryDelay(failure, null, MAX_BACKOFF_MS);
    this.delay = ok || asked !== null ? POLL_MS : Math.min(this.delay * 2, MAX_BACKOFF_MS);
    this.schedule(asked !== null ? asked : this.delay);
    // the socket had worked and went (the service restarted): once the
    // service answers again, subscribe again instead of polling for good
    // (a socket the service refused, too many streams, waits a while)
    const refusedLately = Date.now() - this.refusedAt < MAX_BACKOFF_MS;
    if (ok && this.socketWorked && !this.socket && !this.stopped && !refusedLately) {
      this.trySocket(this.subscriptions, this.token);
    }
  }

  // A refresh the socket asked for that failed is tried again on the poll's
  // back-off (or the service's Retry-After), not at the minute's safety poll:
  // one dropped request left the page stale, "Retrying...", for about a
  // minute (consoleslownet).
  retriedOnSocket(failure) {
    if (failure === null) {
      this.delay = POLL_MS;
    } else if (!this.stopped && this.mode === "socket") {
      this.delay = Math.min(this.delay * 2, MAX_BACKOFF_MS);
      this.schedule(retryDelay(failure, this.delay / 2, MAX_BACKOFF_MS));
    }
  }

  // The refresh's failure, or null when it worked. One at a time: a second
  // asked for while one is on its way runs once it has ended, so an older
  // reply can never be drawn over a newer one (consoleslownet).
  run() {
    if (this.running) {
      this.runAgain = true;
      return this.running;
    }
    this.running = (async () => {
      let failure;
      do {
        this.runAgain = false;
        failure = await this.runOnce();
      } while (this.runAgain && !this.stopped);
      return failure;
    })();
    return this.running.finally(() => { this.running = null; });
  }

  async runOnce() {
    try {
      await this.refresh();
      showPaused(false);
      return null;
    } catch (error) {
      // said on the page: what it shows may be out of date until a refresh works
      if (!this.stopped) showPaused(true);
      return error;
    }
  }

  // graphql-transport-ws: connection_init with the bearer token, then one
  // subscription per project. Any refusal (no Subscription type, a 4401, no
  // socket at all) leaves the poll in charge.
  trySocket(subscriptions, token) {
    if (!subscriptions.length || typeof WebSocket === "undefined") return;
    const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/graphql`;
    let socket;
    try {
      socket = new WebSocket(url, "graphql-transport-ws");
    } catch (error) {
      return;
    }
    this.socket = socket;
    socket.addEventListener("open", () => {
      socket.send(JSON.stringify({ type: "connection_init", payload: { Authorization: `Bearer ${token}` } }));
    });
    socket.addEventListener("message", (event) => {
      let message;
      try {
        message = JSON.parse(event.data);
      } catch (error) {
        return;
      }
      if (message.type === "connection_ack") {
        subscriptions.forEach((payload, index) => {
          socket.send(JSON.stringify({ id: `s${index}`, type: "subscribe", payload }));
        });
      } else if (message.type === "error" || (message.type === "next" && message.payload?.errors)) {
        // the service refused a subscription (too many streams): the poll,
        // and a new socket after a while (a refused `next` still shows that
        // the service has subscriptions; an `error` may mean it has none)
        this.refusedAt = Date.now();
        if (message.type === "next") this.socketWorked = true;
        this.fallBack(socket);
      } else if (message.type === "next") {
        if (this.mode !== "socket") {
          this.setMode("socket");
          this.schedule(MAX_BACKOFF_MS);
        }
        this.refreshSoon();
      } else if (message.type === "complete") {
        // the service ended a subscription without refusing it (it is
        // stopping, or the token went): the poll, and a new socket as soon as
        // a refresh works again
        this.fallBack(socket);
      } else if (message.type === "ping") {
        socket.send(JSON.stringify({ type: "pong" }));
      }
    });
    // a subscription that is accepted but quiet still means "live": after the
    // ack, give the server a moment to refuse the documents, then trust it
    socket.addEventListener("message", (event) => {
      if (String(event.data).includes("connection_ack")) {
        setTimeout(() => {
          if (this.socket === socket && socket.readyState === WebSocket.OPEN) {
            this.setMode("socket");
            this.schedule(MAX_BACKOFF_MS);
            // a subscription starts at the next new event: read once more what
            // changed between the page's last read and the subscriptions
            this.refreshSoon();
          }
        }, 1500);
      }
    }, { once: false });
    socket.addEventListener("close", () => this.fallBack(socket));
  }

  // One refresh REFRESH_DELAY_MS after a message, for it and every message
  // until then, and at most one a REFRESH_GAP_MS while messages keep coming
  // (each is a query of the whole page); a refresh put off again by each
  // message never came while a project's events came closer together than
  // that. Timed by the monotonic clock: a wall clock set back an hour held
  // the refresh for the hour.
  refreshSoon() {
    if (this.refreshTimer !== null || this.stopped) return;
    const wait = Math.max(REFRESH_DELAY_MS, this.lastRefresh + REFRESH_GAP_MS - performance.now());
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = null;
      this.lastRefresh = performance.now();
      this.run().then((failure) => this.retriedOnSocket(failure));
    }, wait);
  }

  fallBack(socket) {
    if (this.socket !== socket) return;
    this.socket = null;
    try {
      socket.close(1000);
    } catch (error) {
      // already closed
    }
    if (this.mode === "socket" && !this.stopped) {
      this.setMode("poll");
      this.delay = POLL_MS;
      this.schedule(POLL_MS);
    }
  }
}

// The page-wide notice that refreshes are failing (index.html #live-status).
// A live region that appears with its text already in it is often not read
// out (a11yaudit), so the change is also said in the page's announcer, once
// per pause rather than at every failed retry; and so is its end (a screen
// reader heard "paused" and never that the page was current again).
function showPaused(paused, quietly = false) {
  const status = document.getElementById("live-status");
  if (status) {
    if (paused && status.hidden) announce(status.textContent);
    if (!paused && !status.hidden && !quietly) announce("Updates resumed: this page is current again.");
    status.hidden = !paused;
  }
  document.documentElement.dataset.livePaused = paused ? "true" : "false";
}

export function projectSubscriptions(projectIds) {
  if (projectIds.length > SOCKET_PROJECTS) return [];
  return projectIds.map((projectId) => ({
    // batches: one message per wake of the service's event hub, not one per
    // event (each message costs the service the same; the page only refreshes)
    query: "subscription Events($projectId: ID!) { projectEventBatches(projectId: $projectId) { lastSequence } }",
    variables: { projectId },
  }));
}

export function decisionSubscription(decisionId) {
  return [{
    query: "subscription Changed($id: ID!) { decisionChanged(id: $id) { generation status } }",
    variables: { id: decisionId },
  }];
}
