"""Prometheus metrics of one process (one `Runtime`), in their own registry.

Labels are bounded: route templates (never raw paths), methods (the usual
seven; any other is "other"), statuses,
GraphQL operation types and outcomes. Client-chosen names (GraphQL operation
names, ids) go to the request log, never into a label.

Hooks for parts that report here:
- the writer: `observe_commit(batch_size, seconds)` after each COMMIT, and
  `set_queue_depth(fn)` and `set_unanswered_writes(fn)`, read at scrape time;
- the sweep: `sweep_runs.labels(outcome=...)`;
- the reranker (context): `reranker_outcome(outcome)` per provider call
  (`ok`, `timeout`, `bad_scores`, `http_error`, `circuit_open`, ...) and
  `set_circuit_state(fn)` returning 0 closed, 1 half-open, 2 open;
- the live hub and the MCP endpoint: `set_live(listeners, websockets)` and
  `set_mcp_sessions(fn)`, read at scrape time (what a long-running process
  holds open for its clients).
- the lifecycle delivery worker: `lifecycle_attempt(delivered, n)` per POST
  to the webhook, with the oldest pending delivery's failed attempts (what
  tells a receiver that is down, or refuses one event, from a quiet one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

# no `_created` series beside every counter: they double the output for
# nothing a dashboard uses (process start is in the standard collectors)
disable_created_metrics()  # type: ignore[no-untyped-call]

# The methods counted under their own name; any other is "other".
LABELLED_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Request latencies: 1 ms to 10 s (a write waits for its group commit's fsync).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
COMMIT_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0)


def _request_families(
    registry: CollectorRegistry, prefix: str, where: str
) -> tuple[Counter, Histogram]:
    """A listener's request counter and latency histogram."""
    labels = ["method", "route", "status"]
    count = Counter(
        f"{prefix}_requests",
        f"HTTP requests answered {where}, by method, route template and status.",
        labels,
        registry=registry,
    )
    timing = Histogram(
        f"{prefix}_request_duration_seconds",
        f"Time from a request's arrival to its response {where}, by route template and status"
        " (an event stream is counted, not timed).",
        labels,
        buckets=LATENCY_BUCKETS,
        registry=registry,
    )
    return count, timing


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._request_children: dict[tuple[bool, str, str, int, bool], tuple[Any, Any]] = {}
        r = self.registry
        self.requests, self.latency = _request_families(r, "waypost_http", "on the public listener")
        # the private lifecycle listener's: its own families, so that the
        # public ones keep meaning the public API (it was counted nowhere)
        self.lifecycle_requests, self.lifecycle_latency = _request_families(
            r, "waypost_lifecycle_http", "on the lifecycle listener"
        )
        self.graphql = Counter(
            "waypost_graphql_operations",
            "GraphQL operations by type (query, mutation, subscription) and outcome"
            " (ok, errors, refused: not valid or over a limit).",
            ["type", "outcome"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "waypost_writer_queue_depth",
            "Writes queued for the writer thread and not yet taken into a batch.",
            registry=r,
        )
        self.unanswered_writes = Gauge(
            "waypost_writes_unanswered",
            "Writes waiting for their answer: queued, or in the batch the writer runs"
            " or waits to begin (while another process holds the write lock, there).",
            registry=r,
        )
        self.wal_bytes = Gauge(
            "waypost_database_wal_bytes",
            "Size of the database's -wal file: past 32 MiB the writer restarts it;"
            " it grows further only while a read transaction held elsewhere lets no"
            " checkpoint finish.",
            registry=r,
        )
        self.batch_size = Histogram(
            "waypost_commit_batch_size",
            "Units of work per group commit.",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.commit_seconds = Histogram(
            "waypost_commit_seconds",
            "Time of each COMMIT, its fsync included.",
            buckets=COMMIT_BUCKETS,
            registry=r,
        )
        self.sweep_runs = Counter(
            "waypost_sweep_runs",
            "Sweeps (receipt cleanup, decision timeouts) by outcome (ok, skipped, failed).",
            ["outcome"],
            registry=r,
        )
        self.reranker = Counter(
            "waypost_reranker_calls",
            "Reranking provider calls by outcome.",
            ["outcome"],
            registry=r,
        )
        self.circuit = Gauge(
            "waypost_reranker_circuit_state",
            "The reranker circuit: 0 closed, 1 half-open, 2 open.",
            registry=r,
        )
        self.live_listeners = Gauge(
            "waypost_live_listeners",
            "Listeners of the event hub: SSE event streams, GraphQL subscriptions and"
            " MCP decision waits, each following one project's events.",
            registry=r,
        )
        self.graphql_websockets = Gauge(
            "waypost_graphql_websockets",
            "GraphQL WebSockets open (acknowledged), with or without subscriptions.",
            registry=r,
        )
        self.mcp_sessions = Gauge(
            "waypost_mcp_sessions",
            "MCP sessions over /mcp not yet idle past the 15-minute timeout.",
            registry=r,
        )
        self.lifecycle_deliveries = Counter(
            "waypost_lifecycle_deliveries",
            "Attempts to deliver a lifecycle event to the webhook, by outcome (delivered, failed).",
            ["outcome"],
            registry=r,
        )
        self.lifecycle_failing = Gauge(
            "waypost_lifecycle_delivery_failures_in_a_row",
            "Failed attempts at the oldest pending lifecycle delivery (its own count,"
            " kept across restarts); 0 after a success: no later event is sent before"
            " it, so a number that keeps growing is a receiver that is down or refuses"
            " that event.",
            registry=r,
        )

    def observe_request(
        self, method: str, route: str, status: int, seconds: float | None, lifecycle: bool = False
    ) -> None:
        """Count one request answered; time it unless `seconds` is None (an
        event stream: how long it stays open is no request's latency)."""
        # the method as the client sent it made a label value: the parser takes
        # some 35 (PROPFIND, MKCOL, ...), and one client without a token grew
        # the page 40-fold, each scrape holding the event loop 0.2-0.4 s (obsaudit)
        method = method if method in LABELLED_METHODS else "other"
        # the labelled children by key: `labels()` takes a lock and builds a
        # tuple on every call, and the set of keys is small (routes x status)
        key = (lifecycle, method, route, status, seconds is None)
        children = self._request_children.get(key)
        if children is None:
            labels = {"method": method, "route": route, "status": str(status)}
            count, timing = (
                (self.lifecycle_requests, self.lifecycle_latency)
                if lifecycle
                else (self.requests, self.latency)
            )
            # a stream's series has no timing child: one made and never
            # observed showed as a histogram of zeros
            timed = None if seconds is None else timing.labels(**labels)
            children = (count.labels(**labels), timed)
            self._request_children[key] = children
        children[0].inc()
        if children[1] is not None and seconds is not None:
            children[1].observe(seconds)

    def observe_commit(self, batch_size: int, seconds: float) -> None:
        self.batch_size.observe(batch_size)
        self.commit_seconds.observe(seconds)

    def set_queue_depth(self, read: Callable[[], float]) -> None:
        self.queue_depth.set_function(read)

    def set_unanswered_writes(self, read: Callable[[], float]) -> None:
        self.unanswered_writes.set_function(read)

    def set_wal_bytes(self, read: Callable[[], float]) -> None:
        self.wal_bytes.set_function(read)

    def graphql_refused(self) -> None:
        """A GraphQL request refused before its operation is known (its body,
        its media type, a limit; over HTTP or as a WebSocket `subscribe`)."""
        self.graphql.labels(type="unknown", outcome="refused").inc()

    def reranker_outcome(self, outcome: str) -> None:
        self.reranker.labels(outcome=outcome).inc()

    def set_circuit_state(self, read: Callable[[], float]) -> None:
        self.circuit.set_function(read)

    def set_live(self, listeners: Callable[[], float], websockets: Callable[[], float]) -> None:
        self.live_listeners.set_function(listeners)
        self.graphql_websockets.set_function(websockets)

    def set_mcp_sessions(self, read: Callable[[], float]) -> None:
        self.mcp_sessions.set_function(read)

    def lifecycle_attempt(self, delivered: bool, failures_in_a_row: int) -> None:
        """One POST to the webhook, and the failed attempts of the oldest
        pending delivery after it (0 once delivered)."""
        self.lifecycle_deliveries.labels(outcome="delivered" if delivered else "failed").inc()
        self.lifecycle_failing.set(failures_in_a_row)

    def lifecycle_queue_empty(self) -> None:
        """No delivery is pending: none has failed in a row."""
        self.lifecycle_failing.set(0)

    def render(self) -> bytes:
        return generate_latest(self.registry)
