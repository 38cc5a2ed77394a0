"""What a durable COMMIT costs on the bench's disk, and a slower disk on demand.

Group commit wins back what fsync costs: on a disk where it is cheap (this
development machine's virtual disk: about 0.2 ms) a commit per request is
cheap too; where it is slow (1.1 ms when issue 8 set its target) one fsync per
batch is most of the difference. `--fsync-delay-us N` measures the store suite
as on such a disk: every server process preloads `slow_fsync.c` (built here
with the system's C compiler), which adds N microseconds to each fsync.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from bench.timing import Result

ROOT = Path(__file__).resolve().parent.parent
SHIM = ROOT / "bench" / "slow_fsync.c"


def commit_cost(directory: Path, synchronous: str, n: int) -> Result:
    """One small INSERT per committed transaction on a raw WAL connection."""
    path = directory / f"raw-{synchronous.lower()}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
    samples = []
    for i in range(n):
        start = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?)", (i,))
        conn.execute("COMMIT")
        samples.append(time.perf_counter() - start)
    conn.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return Result(f"raw SQLite commit, WAL synchronous={synchronous}", samples)


def commit_ms(directory: Path, env: dict[str, str]) -> float:
    """The p50 of `commit_cost` with synchronous=FULL in `directory`, in a
    process started with `env` (so that a preloaded shim counts)."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.disk", str(directory)], cwd=ROOT, env=env, check=True,
        capture_output=True, text=True,
    )  # fmt: skip
    return float(out.stdout)


def slow_fsync_env(directory: Path, delay_us: int) -> dict[str, str]:
    """The environment additions that make a process's fsync `delay_us` slower."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SystemExit("--fsync-delay-us needs a C compiler (cc) to build bench/slow_fsync.c")
    library = directory / "slow_fsync.so"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(SHIM), "-ldl"], check=True
    )
    preload = " ".join(p for p in (os.environ.get("LD_PRELOAD"), str(library)) if p)
    return {"LD_PRELOAD": preload, "WAYPOST_FSYNC_DELAY_US": str(delay_us)}


if __name__ == "__main__":
    # `python -m bench.disk DIR`: the p50 of one durable commit in DIR, in ms
    print(commit_cost(Path(sys.argv[1]), "FULL", 200).median * 1000)
