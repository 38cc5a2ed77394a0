"""The context suite: the packet over HTTP against the bare FTS5 query and Datasette.

For each size (knowledge records; tasks are a tenth of that) one SQLite file
is seeded directly (bench/corpus.py), then, in the same run and on the same
file:

- **context**: `GET /api/v1/projects/bench/context?q=...` (limit 20) over
  loopback HTTP against a real `waypost serve` subprocess, default search
  time limit (1,000 ms); the share of searches that the limit ended;
- **bare FTS5**: the ranked top 21 of `knowledge_fts` and of `tasks_fts`
  (`MATCH ... ORDER BY rank LIMIT 21`, the same escaped query), on a plain
  sqlite3 connection in this process: the floor any search service pays;
- **Datasette**: its full-text JSON API over the same `knowledge` table
  (`/bench/knowledge.json?_search=...&_size=20`, sorted by relevance), a
  `datasette serve` subprocess with its defaults (its own 1,000 ms SQL time
  limit: a search it ends is a 400 it counts as an error).

Queries are 1-3 words drawn from the corpus' own Zipf distribution, so common
words (matching most records) come up as often as they would in practice.
The machine is shared: figures are noisy and only comparable within one run.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.corpus import Corpus, seed
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

    def pct(self, q: float) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


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


def bare_fts(path: Path, queries: list[str]) -> Row:
    row = Row("bare FTS5 (both tables, ranked top 21)")
    conn = sqlite3.connect(path)
    started = time.perf_counter()
    for q in queries:
        if row.spent(started):
            break
        match = escape_fts(q.split())
        start = time.perf_counter()
        for table in ("knowledge_fts", "tasks_fts"):
            conn.execute(
                f"SELECT rowid, rank FROM {table} WHERE {table} MATCH ? ORDER BY rank LIMIT 21",
                (match,),
            ).fetchall()
        row.samples.append(time.perf_counter() - start)
    conn.close()
    return row


def context_http(
    path: Path, token: str, queries: list[str], limit_ms: int
) -> tuple[Row, Row, float]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TYPESAFE_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "waypost.cli", "serve", "--db", str(path), "--port", str(port),
         "--lifecycle-port", "0", "--search-time-limit-ms", str(limit_ms)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    row = Row(f"context over HTTP (time limit {limit_ms} ms)")
    floor = Row("GET policy over HTTP (the HTTP+auth floor)")
    try:
        base = f"http://127.0.0.1:{port}"
        wait_up(f"{base}/healthz", process)
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=120) as client:
            for q in queries[:5]:  # warm the page cache and code paths
                client.get(CONTEXT, params={"q": q})
            started = time.perf_counter()
            for q in queries:
                if row.spent(started):
                    break
                start = time.perf_counter()
                r = client.get(CONTEXT, params={"q": q, "limit": 20})
                row.samples.append(time.perf_counter() - start)
                if r.status_code != 200:
                    row.errors += 1
                elif any("time limit" in a for a in r.json()["next_actions"]):
                    row.limited += 1
            for _ in queries:
                start = time.perf_counter()
                client.get("/api/v1/projects/bench/policy")
                floor.samples.append(time.perf_counter() - start)
        rss = peak_rss_mb(process.pid)
    finally:
        stop(process)
    return row, floor, rss


def datasette_http(path: Path, queries: list[str]) -> Row | None:
    executable = shutil.which("datasette") or str(Path(sys.executable).parent / "datasette")
    if not Path(executable).exists():
        print("  datasette is not installed (pip install -e '.[bench]'): row skipped")
        return None
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
    row = Row("Datasette knowledge.json?_search (its defaults)")
    try:
        base = f"http://127.0.0.1:{port}"
        wait_up(f"{base}/-/versions.json", process)
        with httpx.Client(base_url=base, timeout=120) as client:
            for q in queries[:5]:
                client.get(f"/{name}/knowledge.json", params={"_search": q, "_size": 20})
            started = time.perf_counter()
            for q in queries:
                if row.spent(started):
                    break
                start = time.perf_counter()
                r = client.get(f"/{name}/knowledge.json", params={"_search": q, "_size": 20})
                row.samples.append(time.perf_counter() - start)
                if r.status_code != 200:
                    row.errors += 1
                    if "interrupted" in r.text or "too long" in r.text:
                        row.limited += 1
    finally:
        stop(process)
    return row


def plan(path: Path) -> list[str]:
    """EXPLAIN QUERY PLAN of the packet's ranked search (what it scans)."""
    from waypost.resolvers.context import search

    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    captured: list[str] = []
    conn.set_trace_callback(captured.append)
    search.ranked(conn, "bench", '"zzzz"', search.Scope(), False, 21)
    conn.set_trace_callback(None)
    sql = next(s for s in captured if "UNION ALL" in s)
    rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall()
    conn.close()
    return [r["detail"] for r in rows]


def report(size: int, rows: list[Row], rss: float, queries: int) -> None:
    print(f"\n  {size} knowledge + {size // 10} tasks, {queries} queries of 1-3 words"
          " (under shared load)")  # fmt: skip
    base = rows[0]
    print(f"  {'':48} {'p50':>9} {'p90':>9} {'p99':>9} {'p50 x':>6} {'p99 x':>6}"
          f" {'limited':>8} {'errors':>6} {'n':>4}")  # fmt: skip
    for r in rows:
        print(
            f"  {r.name:48} {r.pct(0.5) * 1e3:7.1f}ms {r.pct(0.9) * 1e3:7.1f}ms"
            f" {r.pct(0.99) * 1e3:7.1f}ms {r.pct(0.5) / base.pct(0.5):6.1f}"
            f" {r.pct(0.99) / base.pct(0.99):6.1f} {r.limited / len(r.samples):7.1%}"
            f" {r.errors:6d} {len(r.samples):4d}"
        )
    print(f"  serve peak RSS {rss:.0f} MB")


def run_suite(directory: Path, sizes: list[int], queries: int) -> None:
    for size in sizes:
        print(f"\n-- size {size}", flush=True)
        path, token = prepare(directory, size)
        asked = Corpus(seed=2026).queries(queries)
        bare = bare_fts(path, asked)
        context, floor, rss = context_http(path, token, asked, 1000)
        rows = [bare, context, floor]
        datasette = datasette_http(path, asked)
        if datasette is not None:
            rows.append(datasette)
        report(size, rows, rss, queries)
        print("  plan of the packet's search: " + "; ".join(plan(path)))
