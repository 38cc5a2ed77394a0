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
import subprocess
import sys
from pathlib import Path

SHIM = Path(__file__).resolve().parent / "slow_fsync.c"

_PROBE = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("PRAGMA synchronous=FULL")
conn.execute("CREATE TABLE IF NOT EXISTS probe (n INTEGER)")
costs = []
for n in range(200):
    started = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO probe VALUES (?)", (n,))
    conn.execute("COMMIT")
    costs.append(time.perf_counter() - started)
costs.sort()
print(costs[len(costs) // 2] * 1000)
"""


def commit_ms(directory: Path, env: dict[str, str]) -> float:
    """The p50 of one INSERT and COMMIT (WAL, synchronous=FULL) in `directory`,
    in a process started with `env` (so a preloaded shim counts)."""
    db = directory / "commit-probe.db"
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(db)], env=env, check=True, capture_output=True,
        text=True,
    )  # fmt: skip
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
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
