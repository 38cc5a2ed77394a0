"""The store suite: knowledge create under concurrency against a bare endpoint.

Servers run as real processes on loopback, all started side by side before
any measurement: `waypost serve` and the bare Starlette endpoint of
bench/bare.py (same body, one INSERT and COMMIT per request, WAL with
synchronous=FULL), each once on asyncio + h11 and once on uvloop + httptools
when those are installed. Rounds then alternate between the servers (A, B, C,
D, A, B, ...), so a change in the machine's load hits every server alike.
Each round is 16 keep-alive connections sending creates back to back for a
fixed time; the load generator is a minimal raw HTTP/1.1 client (cheaper than
httpx, and the same for every server).

Then, sequentially on one connection: the p50 of a create (fresh idempotency
key) and of its replay (same key, same body).

`--before-src PATH` adds one more server: the public app of another checkout
(its `src/`), e.g. the commit before a change, served by this tree's
launcher (bench/serve_variant.py, so `serving.run`, on asyncio + h11) with
the other tree's `waypost` imported, measured in the same rotation.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench import disk

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = 16
BODY = {
    "kind": "lesson",
    "title": "Run the migrations before the tests",
    "body": "The test database is created from the migrations; a stale one hides errors.",
    "tags": ["tests", "migrations"],
}
BODY_BYTES = json.dumps(BODY).encode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Target:
    name: str
    port: int
    path: str
    token: str = ""
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    failures: int = 0
    pid: int = 0  # the server's process, whose CPU time each round adds up
    cpu_seconds: float | None = 0.0  # None where /proc cannot tell

    def request(self, key: str) -> bytes:
        head = (
            f"POST {self.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(BODY_BYTES)}\r\n"
            f"Idempotency-Key: {key}\r\n"
        )
        if self.token:
            head += f"Authorization: Bearer {self.token}\r\n"
        return head.encode() + b"\r\n" + BODY_BYTES


async def read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    match = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
    if match is None:
        raise RuntimeError("the benchmark client reads content-length bodies only")
    await reader.readexactly(int(match.group(1)))
    return status


async def load_round(target: Target, seconds: float, tag: str) -> None:
    """CLIENTS keep-alive connections sending creates back to back for `seconds`."""
    stop_at = time.perf_counter() + seconds

    async def client(worker: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", target.port)
        try:
            i = 0
            while time.perf_counter() < stop_at:
                start = time.perf_counter()
                writer.write(target.request(f"{tag}-{worker}-{i}"))
                status = await read_response(reader)
                # only a create counts: a refusal (a 401, a 503 shedding
                # load) is cheap, and counted it made a server look faster
                if status == 201:
                    target.latencies.append(time.perf_counter() - start)
                else:
                    target.failures += 1
                i += 1
        finally:
            writer.close()

    cpu_before = process_cpu_seconds(target.pid)
    started = time.perf_counter()
    await asyncio.gather(*(client(w) for w in range(CLIENTS)))
    target.seconds += time.perf_counter() - started
    cpu_after = process_cpu_seconds(target.pid)
    if cpu_before is None or cpu_after is None or target.cpu_seconds is None:
        target.cpu_seconds = None
    else:
        target.cpu_seconds += cpu_after - cpu_before


def process_cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of a process so far (Linux's /proc), or None.

    Said beside the throughput because on a fast disk both servers are bound
    by one core (the GIL), so what a create costs in CPU decides the ratio."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # fields[11] and [12] are utime and stime (fields 14 and 15 of proc(5))
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def sequential(target: Target, n: int, replay: bool) -> list[float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", target.port)
    samples = []
    try:
        for i in range(-20, n):  # 20 untimed warm-up requests
            start = time.perf_counter()
            writer.write(target.request("replayed" if replay else f"seq-{i}"))
            status = await read_response(reader)
            if status not in (200, 201):
                raise SystemExit(f"{target.name}: sequential create answered {status}")
            if i >= 0:
                samples.append(time.perf_counter() - start)
    finally:
        writer.close()
    return samples


# -- servers ---------------------------------------------------------------------------


@dataclass
class Process:
    name: str
    process: subprocess.Popen[str]
    port: int


def wait_ready(proc: Process, path: str = "/healthz", timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.process.poll() is not None:
            raise SystemExit(f"{proc.name} exited with {proc.process.returncode}")
        try:
            httpx.get(f"http://127.0.0.1:{proc.port}{path}", timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"{proc.name} did not start within {timeout}s")


@contextmanager
def servers(
    directory: Path, variants: list[tuple[str, str]], before: Path | None, extra_env: dict[str, str]
) -> Iterator[list[Target]]:
    procs: list[Process] = []
    targets: list[Target] = []
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **extra_env}
    env.pop("WAYPOST_CLOCK_FILE", None)
    try:
        for loop, http in variants:
            label = f"{loop}+{http}"
            for kind in ("waypost", "bare"):
                port = free_port()
                db = directory / f"{kind}-{loop}-{http}.db"
                module = "bench.serve_variant" if kind == "waypost" else "bench.bare"
                cmd = [sys.executable, "-m", module, "--db", str(db), "--port", str(port),
                       "--loop", loop, "--http", http]  # fmt: skip
                proc = subprocess.Popen(
                    cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                    text=True,
                )  # fmt: skip
                procs.append(Process(f"{kind} {label}", proc, port))
                path = "/api/v1/projects/bench/knowledge" if kind == "waypost" else "/knowledge"
                targets.append(Target(f"{kind} {label}", port, path, pid=proc.pid))
        if before is not None:
            port = free_port()
            db = directory / "before.db"
            # the same launcher as this tree's servers (bench/serve_variant.py,
            # `serving.run`: its GC settings, deadlines and connection caps),
            # importing the other tree's `waypost`: a bare `uvicorn.run` of its
            # app compared launchers as well as code (createprofile)
            proc = subprocess.Popen(
                [sys.executable, "-m", "bench.serve_variant", "--db", str(db),
                 "--port", str(port), "--loop", "asyncio", "--http", "h11"],
                cwd=ROOT, env={**env, "PYTHONPATH": str(before.resolve() / "src")},
                stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            procs.append(Process("waypost before", proc, port))
            targets.append(Target("waypost before (asyncio+h11)", port,
                                  "/api/v1/projects/bench/knowledge", pid=proc.pid))  # fmt: skip
        for proc, target in zip(procs, targets, strict=True):
            if proc.name.startswith("bare"):
                wait_ready(proc, "/")
                continue
            target.token = admin_token(proc)
            wait_ready(proc)
            r = httpx.post(
                f"http://127.0.0.1:{proc.port}/api/v1/projects",
                json={"id": "bench", "name": "Bench"},
                headers={"Authorization": f"Bearer {target.token}", "Idempotency-Key": "p"},
            )
            if r.status_code != 201:
                raise SystemExit(f"{proc.name}: project create answered {r.status_code}")
        yield targets
    finally:
        for proc in procs:
            proc.process.terminate()
        for proc in procs:
            try:
                proc.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.process.kill()
                proc.process.wait()
            if proc.process.stderr is not None:
                proc.process.stderr.close()


def admin_token(proc: Process) -> str:
    """The token `serve` prints once on its first start."""
    assert proc.process.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.process.stderr.readline()
        if not line:
            break
        match = re.match(r"^\s+(wp_\S+)$", line.rstrip("\n"))
        if match:
            # keep reading what it logs, so that a full pipe never blocks it
            stream = proc.process.stderr
            threading.Thread(target=stream.read, daemon=True).start()
            return match.group(1)
    raise SystemExit(f"{proc.name} printed no admin token")


# -- the suite ------------------------------------------------------------------------------


def percentile(samples: list[float], q: float) -> float:
    """The nearest-rank percentile: the smallest sample with at least `q` of
    them at or below it (`int(q * n)` was one rank high: p99 of 100 samples
    was their maximum)."""
    ordered = sorted(samples)
    if not ordered:
        return math.nan  # a server that answered no request as asked
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def variants() -> list[tuple[str, str]]:
    found = [("asyncio", "h11")]
    try:
        import httptools  # noqa: F401
        import uvloop  # noqa: F401
    except ImportError:
        print("(uvloop/httptools not installed: only asyncio+h11 measured)")
    else:
        found.append(("uvloop", "httptools"))
    return found


async def measure(targets: list[Target], rounds: int, seconds: float, n: int) -> None:
    for r in range(rounds):
        for t in targets:
            await load_round(t, seconds, f"r{r}")
    print(f"\n{CLIENTS} concurrent keep-alive clients, knowledge create, {rounds} alternated"
          f" rounds of {seconds:.1f}s per server:")  # fmt: skip
    print(f"{'server':34}  {'ops/s':>7}  {'p50':>8}  {'p99':>8}  {'non-201':>7}"
          f"  {'CPU/create':>10}  {'cores':>5}")  # fmt: skip
    for t in targets:
        ops = len(t.latencies) / t.seconds
        cpu = "         -      -"
        if t.cpu_seconds is not None:
            per_create = t.cpu_seconds / max(1, len(t.latencies)) * 1e3
            cpu = f"  {per_create:8.3f}ms  {t.cpu_seconds / t.seconds:5.2f}"
        print(f"{t.name:34}  {ops:7.0f}  {percentile(t.latencies, 0.5) * 1e3:6.1f}ms"
              f"  {percentile(t.latencies, 0.99) * 1e3:6.1f}ms  {t.failures:7d}{cpu}")  # fmt: skip
    by_name = {t.name: t for t in targets}
    print()
    for t in targets:
        if t.name.startswith("waypost ") and "before" not in t.name:
            bare = by_name[t.name.replace("waypost", "bare", 1)]
            if not bare.latencies:
                print(f"{t.name} / {bare.name} throughput: no ratio ({bare.name} created nothing)")
                continue
            ratio = (len(t.latencies) / t.seconds) / (len(bare.latencies) / bare.seconds)
            refused = ""
            if t.failures or bare.failures:
                refused = " (creates only; some answers were not 201)"
            print(f"{t.name} / {bare.name} throughput: {ratio:.2f}x (target >= 1.0x){refused}")
    print(f"\nsequential, one connection, n={n}:")
    for t in targets:
        if not t.name.startswith("waypost"):
            continue
        create = statistics.median(await sequential(t, n, replay=False))
        replay = statistics.median(await sequential(t, n, replay=True))
        print(f"{t.name:34}  create p50 {create * 1e3:6.2f}ms  replay p50 {replay * 1e3:6.2f}ms"
              f"  replay/create {replay / create:.2f}x (target <= 0.5x)")  # fmt: skip


def run_suite(
    directory: Path,
    rounds: int,
    seconds: float,
    n: int,
    before: Path | None = None,
    fsync_delay_us: int = 0,
) -> None:
    # what a commit per request costs on this disk decides how much group
    # commit can win back: said first, so the ratios below can be read
    plain = {**os.environ}
    print(f"one INSERT + COMMIT (WAL, synchronous=FULL) on this disk: p50"
          f" {disk.commit_ms(directory, plain):.2f}ms")  # fmt: skip
    slower: dict[str, str] = {}
    if fsync_delay_us:
        slower = disk.slow_fsync_env(directory, fsync_delay_us)
        print(f"every server's fsync made {fsync_delay_us}us slower (bench/slow_fsync.c):"
              f" p50 {disk.commit_ms(directory, {**plain, **slower}):.2f}ms")  # fmt: skip
    with servers(directory, variants(), before, slower) as targets:
        asyncio.run(measure(targets, rounds, seconds, n))
