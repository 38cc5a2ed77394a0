"""The context suite: the packet over HTTP against the bare FTS5 query and Datasette.

For each size (knowledge records; tasks are a tenth of that) one SQLite file
is seeded directly (bench/corpus.py), then, in the same run and on the same
file:

- **context**: `GET /api/v1/projects/bench/context?q=...` (limit 20) over
  loopback HTTP against a real `waypost serve` subprocess, default search
  time limit (1,000 ms); the share of searches that the limit ended;
- **bare FTS5**: the ranked top 21 of `knowledge_fts` and of `tasks_fts`
  (`MATCH ... ORDER BY rank LIMIT 21`, the same escaped query), on a plain
  sqlite3 connection in this process: the floor any search service pays
  (the row the ratios are taken against);
- **bare FTS5, bm25() form**: the same top 21, ranked by `bm25(...)` in a
  subquery under SQLite's bounded sorter instead of FTS5's `ORDER BY rank`
  (the form the packet's first pass uses; same values, same order);
- **bare FTS5 over HTTP**: the bare query behind a bare endpoint on the same
  server stack (bench/bare_search.py): no auth, policy, decisions or
  objects, so the floor of any search *service* over this file;
- **Datasette**: a `datasette serve` subprocess over the same `knowledge`
  table (its own 1,000 ms SQL time limit: a search it ends is a 400 it
  counts as an error), three ways: its full-text JSON API
  (`/bench/knowledge.json?_search=...&_size=20`) with its defaults, which
  do not rank (matches in `id` order) but count the matches and suggest
  facets; the same with `_nocount=1&_nosuggest=1`; and its SQL API running
  the ranked top 20 (`ORDER BY rank`), the same work as the packet's
  knowledge search.

Queries are 1-3 words drawn from the corpus' own Zipf distribution, so common
words (matching most records) come up as often as they would in practice;
words drawn independently and all required often match nothing (about half
the queries at 10k), so the p50s are printed again split by whether the
query matched anything.
The machine is shared: figures are noisy and only comparable within one run.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.corpus import Corpus, seed
from bench.store import percentile
from bench.wire import Answer, WireClient
from waypost.resolvers.access import principals
from waypost.resolvers.context.search import escape_fts
from waypost.resolvers.projects.models import ProjectCreate
from waypost.resolvers.projects.operations import insert_project
from waypost.storage.db import connect_sync, run_write
from waypost.storage.migrate import migrate

AT = "2026-11-30T00:00:00.000Z"
MIN_SAMPLES = 30
ROW_BUDGET = 90.0  # seconds per row at most (then >= MIN_SAMPLES are kept)
CONTEXT = "/api/v1/projects/bench/context"


@dataclass
class Row:
    name: str
    samples: list[float] = field(default_factory=list)
    errors: int = 0
    limited: int = 0  # searches ended by a time limit

    def spent(self, started: float) -> bool:
        """The row's time budget is spent (queries are random: a prefix is a fair sample)."""
        return len(self.samples) >= MIN_SAMPLES and time.perf_counter() - started > ROW_BUDGET

    def pct(self, q: float, only: list[bool] | None = None) -> float:
        """The nearest-rank percentile, of the queries `only` marks when given."""
        picked = [s for i, s in enumerate(self.samples) if only is None or only[i]]
        return percentile(picked, q) if picked else float("nan")


def prepare(directory: Path, knowledge: int) -> tuple[Path, str]:
    """The seeded database for this size (reused when --dir already holds it) and a token."""
    path = directory / f"context-{knowledge}.db"
    token_file = path.with_suffix(".token")
    if path.exists() and token_file.exists():
        return path, token_file.read_text()
    for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        stale.unlink(missing_ok=True)
    conn = connect_sync(path)
    migrate(conn)
    human = run_write(conn, lambda c: principals.create_principal(c, "human", "bench", AT))
    run_write(
        conn,
        lambda c: insert_project(
            c, ProjectCreate(id="bench", name="Bench"), human["principal_id"], "human", AT
        ),
    )
    conn.execute("PRAGMA synchronous = OFF")  # seeding only; serve reopens with FULL
    started = time.perf_counter()
    seed(conn, "bench", knowledge, knowledge // 10, human["principal_id"], AT, Corpus())
    conn.execute("PRAGMA optimize")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    print(f"  seeded {knowledge} knowledge + {knowledge // 10} tasks"
          f" in {time.perf_counter() - started:.0f}s", flush=True)  # fmt: skip
    token_file.write_text(human["token"])
    return path, str(human["token"])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_up(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{url}: the server exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


BARE_RANK = "SELECT rowid, rank FROM {t} WHERE {t} MATCH ? ORDER BY rank LIMIT 21"
BARE_BM25 = (
    "SELECT rowid, r FROM (SELECT rowid, bm25({t}) AS r FROM {t} WHERE {t} MATCH ?)"
    " ORDER BY r LIMIT 21"
)
ROUND_BUDGET = 240.0  # seconds for the interleaved rounds at most (then >= MIN_SAMPLES)


def start_server(argv: list[str], ready: str) -> tuple[subprocess.Popen[bytes], str]:
    """A server subprocess on a free loopback port, once `ready` answers."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TYPESAFE_")}
    process = subprocess.Popen(
        [sys.executable, "-m", *argv, "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    wait_up(base + ready, process)
    return process, base


def timed(row: Row, run: Callable[[], Answer | None]) -> Answer | None:
    start = time.perf_counter()
    response = run()
    row.samples.append(time.perf_counter() - start)
    if response is not None and response.status_code != 200:
        row.errors += 1
    return response


def interleaved(
    path: Path, token: str, queries: list[str], limit_ms: int
) -> tuple[list[Row], float, list[bool]]:
    """Every row measured query by query in turn, so that all rows see the same
    load (the machine is shared): the bare query in-process (both forms), the
    bare query over HTTP, the packet over HTTP, and GET policy. The first of
    the four search rows rotates, so none is always the one that finds the
    query's pages cold."""
    bare, bm25 = Row("bare FTS5 (both tables, ranked top 21)"), Row("bare FTS5, bm25() form")
    over_http = Row("bare FTS5 over HTTP (no auth, no objects)")
    context = Row(f"context over HTTP (time limit {limit_ms} ms)")
    floor = Row("GET policy over HTTP (the HTTP+auth floor)")
    # One connection per in-process row: a connection's page cache would
    # otherwise hand one row the pages the other just read (each server
    # process has its own cache too; only the OS cache is shared by all).
    connections = {BARE_RANK: sqlite3.connect(path), BARE_BM25: sqlite3.connect(path)}
    matched: list[bool] = []  # query i matched a record or task (the bare query's answer)

    def in_process(sql: str, match: str) -> None:
        found = 0
        for table in ("knowledge_fts", "tasks_fts"):
            found += len(connections[sql].execute(sql.format(t=table), (match,)).fetchall())
        if sql == BARE_RANK:
            matched.append(found > 0)

    serve, base = start_server(
        ["waypost.cli", "serve", "--db", str(path), "--lifecycle-port", "0",
         "--search-time-limit-ms", str(limit_ms)], "/healthz",
    )  # fmt: skip
    try:
        search, search_base = start_server(
            ["bench.bare_search", "--db", str(path)], "/search?q=warm"
        )
        try:
            auth = {"Authorization": f"Bearer {token}"}
            with (
                WireClient(base, headers=auth) as api,
                WireClient(search_base) as plain,
            ):
                for q in queries[:5]:  # warm the page cache and code paths
                    api.get(CONTEXT, params={"q": q})
                    plain.get("/search", params={"q": q})

                def one_round(turn: int, q: str) -> None:
                    match = escape_fts(q.split())

                    def packet() -> Answer:
                        r = api.get(CONTEXT, params={"q": q, "limit": 20})
                        if r.status_code == 200 and any(
                            "time limit" in a for a in r.json()["next_actions"]
                        ):
                            context.limited += 1
                        return r

                    runs: list[tuple[Row, Callable[[], Answer | None]]] = [
                        (bare, lambda: in_process(BARE_RANK, match)),
                        (bm25, lambda: in_process(BARE_BM25, match)),
                        (over_http, lambda: plain.get("/search", params={"q": q})),
                        (context, packet),
                    ]
                    # Whichever row runs a query first reads its pages into the
                    # caches for the others: each row goes first in turn.
                    for row, run in runs[turn % 4 :] + runs[: turn % 4]:
                        timed(row, run)
                    timed(floor, lambda: api.get("/api/v1/projects/bench/policy"))

                started = time.perf_counter()
                for turn, q in enumerate(queries):
                    if len(context.samples) >= MIN_SAMPLES and (
                        time.perf_counter() - started > ROUND_BUDGET
                    ):
                        break
                    one_round(turn, q)
        finally:
            stop(search)
        rss = peak_rss_mb(serve.pid)
    finally:
        stop(serve)
        for conn in connections.values():
            conn.close()
    return [bare, bm25, over_http, context, floor], rss, matched


# Datasette's table API does not rank a `_search`: it answers the matches in
# `id` order (its SQL: `where rowid in (select rowid from knowledge_fts where
# knowledge_fts match ...) order by id`), and by default also counts them and
# suggests facets. So three rows: the table API as a user gets it, the same
# without the count and the suggestions (the least it does), and its SQL API
# running the ranked top 20 (the same work as the packet's knowledge search).
RANKED_SQL = (
    "select k.* from knowledge k join (select rowid from knowledge_fts"
    " where knowledge_fts match :q order by rank limit 20) f on k.rowid = f.rowid"
)


def _datasette_requests(name: str) -> list[tuple[str, str, Callable[[str], dict[str, Any]]]]:
    table = f"/{name}/knowledge.json"
    return [
        ("Datasette _search, defaults (unranked, count, facets)", table,
         lambda q: {"_search": q, "_size": 20}),
        ("Datasette _search&_nocount&_nosuggest (unranked)", table,
         lambda q: {"_search": q, "_size": 20, "_nocount": 1, "_nosuggest": 1}),
        ("Datasette SQL API, ranked top 20 (ORDER BY rank)", f"/{name}.json",
         lambda q: {"sql": RANKED_SQL, "q": escape_fts(q.split())}),
    ]  # fmt: skip


def datasette_http(path: Path, queries: list[str]) -> list[Row]:
    executable = shutil.which("datasette") or str(Path(sys.executable).parent / "datasette")
    if not Path(executable).exists():
        print(
            "  datasette is not installed"
            " (pip install -c constraints.txt -e '.[bench]'): rows skipped"
        )
        return []
    port = free_port()
    name = path.stem  # Datasette names the database after its file
    # Datasette finds an FTS table by `content="knowledge"`; ours is spelled
    # `content = 'knowledge'`, so the metadata names it (as a user would)
    metadata = path.with_suffix(".datasette.json")
    tables = {"knowledge": {"fts_table": "knowledge_fts", "fts_pk": "rowid"}}
    metadata.write_text(json.dumps({"databases": {name: {"tables": tables}}}))
    process = subprocess.Popen(
        [executable, "serve", str(path), "--port", str(port), "--metadata", str(metadata)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    rows: list[Row] = []
    try:
        base = f"http://127.0.0.1:{port}"
        wait_up(f"{base}/-/versions.json", process)
        with WireClient(base) as client:
            for label, route, params in _datasette_requests(name):
                row = Row(label)
                for q in queries[:5]:
                    client.get(route, params=params(q))
                started = time.perf_counter()
                for q in queries:
                    if row.spent(started):
                        break
                    start = time.perf_counter()
                    r = client.get(route, params=params(q))
                    row.samples.append(time.perf_counter() - start)
                    if r.status_code != 200:
                        row.errors += 1
                        if "interrupted" in r.text or "too long" in r.text:
                            row.limited += 1
                rows.append(row)
    finally:
        stop(process)
    return rows


def plan(path: Path) -> list[str]:
    """EXPLAIN QUERY PLAN of the packet's two statements over knowledge: the
    window (ranks from the index) and the read of the window's content rows."""
    from waypost.resolvers.context import ranking_store as ranking

    params = {"match": '"zzzz"', "w": 168, "rids": "[1, 2]", "project": "bench",
              "task_id": None, "component": None, "environment": None, "version": None}  # fmt: skip
    conn = sqlite3.connect(path)
    try:
        return [
            row[3]
            for sql in (ranking._KNOWLEDGE.window_sql, ranking._KNOWLEDGE.passes_sql)
            for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
        ]
    finally:
        conn.close()


def paired_median(row: Row, base: Row) -> float:
    """The median, over the queries both rows ran, of one row's time for a
    query over the base row's time for the same query. Every row runs the
    same queries in the same order, so sample i of each is query i's."""
    return statistics.median(r / b for r, b in zip(row.samples, base.samples, strict=False))


def report(
    size: int, rows: list[Row], over_http: Row, rss: float, queries: int, matched: list[bool]
) -> None:
    """Percentiles and ratios: `x` against the bare query in-process (rows[0],
    `ORDER BY rank`), `xB` against its bm25() form (rows[1], the form the
    packet's search uses, and the cheaper), `xH` against the bare query over
    HTTP; `q x`: the median of the per-query ratios to the bare query
    in-process (the p50 of each row falls where the cost of a query climbs
    steeply, so their quotient swings between runs; this one does not:
    docs/context.md). Then the same p50s split by whether the query matched
    anything: a query of independent words often matches nothing, and those
    measure the fixed cost of an answer, not the search."""
    print(f"\n  {size} knowledge + {size // 10} tasks, {queries} queries of 1-3 words,"
          f" {sum(matched)} of {len(matched)} run matching something")  # fmt: skip
    base, bm25 = rows[0], rows[1]
    print(f"  {'':56} {'p50':>9} {'p90':>9} {'p99':>9} {'p50 x':>6} {'p50 xB':>6}"
          f" {'p99 x':>6} {'p50 xH':>6} {'p99 xH':>6} {'q x':>6} {'limited':>8}"
          f" {'errors':>6} {'n':>4}")  # fmt: skip
    for r in rows:
        print(
            f"  {r.name:56} {r.pct(0.5) * 1e3:7.2f}ms {r.pct(0.9) * 1e3:7.1f}ms"
            f" {r.pct(0.99) * 1e3:7.1f}ms {r.pct(0.5) / base.pct(0.5):6.1f}"
            f" {r.pct(0.5) / bm25.pct(0.5):6.1f}"
            f" {r.pct(0.99) / base.pct(0.99):6.1f} {r.pct(0.5) / over_http.pct(0.5):6.1f}"
            f" {r.pct(0.99) / over_http.pct(0.99):6.1f} {paired_median(r, base):6.1f}"
            f" {r.limited / len(r.samples):7.1%} {r.errors:6d} {len(r.samples):4d}"
        )
    empty = [not m for m in matched]
    print(f"  {'p50 split by the query':56} {'matching':>9} {'x':>6} {'xB':>6}"
          f" {'empty':>9} {'x':>6} {'xB':>6}")  # fmt: skip
    for r in rows:
        hit = [m for m, _ in zip(matched, r.samples, strict=False)]
        miss = [e for e, _ in zip(empty, r.samples, strict=False)]
        print(
            f"  {r.name:56} {r.pct(0.5, hit) * 1e3:7.2f}ms"
            f" {r.pct(0.5, hit) / base.pct(0.5, matched):6.1f}"
            f" {r.pct(0.5, hit) / bm25.pct(0.5, matched):6.1f}"
            f" {r.pct(0.5, miss) * 1e3:7.2f}ms"
            f" {r.pct(0.5, miss) / base.pct(0.5, empty):6.1f}"
            f" {r.pct(0.5, miss) / bm25.pct(0.5, empty):6.1f}"
        )
    print(f"  serve peak RSS {rss:.0f} MB")


def run_suite(directory: Path, sizes: list[int], queries: int) -> None:
    for size in sizes:
        print(f"\n-- size {size}", flush=True)
        path, token = prepare(directory, size)
        asked = Corpus(seed=2026).queries(queries)
        rows, rss, matched = interleaved(path, token, asked, 1000)
        over_http = rows[2]
        rows += datasette_http(path, asked)
        report(size, rows, over_http, rss, queries, matched)
        print("  plan of the packet's search: " + "; ".join(plan(path)))
