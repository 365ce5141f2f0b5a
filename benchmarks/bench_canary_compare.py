"""Time ``inferensics canary compare`` end to end on a generated store, and split one comparison's time.

Usage: python benchmarks/bench_canary_compare.py [--data-dir DIR] [--rows 1500000] [--days 7] [--runs 3]

Without ``--data-dir`` (or with an empty one) a store is generated first, as ``benchmarks/bench_queries.py``
generates it (20 models × 10 hardware pools, a baseline and a candidate bundle per model, the candidate on
10 % of traffic): ``--rows`` requests over ``--days`` days. Two figures follow:

* **the command**: ``inferensics canary compare --baseline bundle-3-0 --candidate bundle-3-1`` over the whole
  generated span, run ``--runs`` times as its own process (the store is chDB's: one process at a time), wall
  seconds per run. Both bundles served every pool, so the command judges the ten pools one by one. Each
  run records its verdicts in the store, as the command does.
  Besides wall seconds, the CPU seconds the process used (user + system, the engine's threads included):
  on a shared machine they move far less with the load than the wall time.
* **the Python side**: the same comparisons in this process, pool by pool: wall seconds, and the CPU seconds
  of the calling thread outside ``query_frame`` (the bootstrap, the tests, the evidence frame: the work
  that is not the engine's; the agreement query runs on a second thread meanwhile and is not counted).

The load average is printed with the figures: the machine is shared, so judge them against it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from inferensics.analytics.canary import CanaryParams, canary_compare, canary_compare_pools
from inferensics.schema import columns as col
from inferensics.schema.store import Store

MODEL, BASELINE, CANDIDATE = "model-3", "bundle-3-0", "bundle-3-1"


def _load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


class _TimedStore:
    """A store that sums the calling thread's CPU seconds inside ``query_frame`` (the engine's share of the
    thread's work, Arrow to Polars included)."""

    def __init__(self, store: Store) -> None:
        self.store, self.database, self.thread = store, store.database, threading.get_ident()
        self.cpu, self.queries = 0.0, 0

    def query_frame(self, sql: str, parameters: Mapping[str, Any] | None = None) -> pl.DataFrame:
        started = time.thread_time()
        try:
            return self.store.query_frame(sql, parameters)
        finally:
            self.queries += 1
            if threading.get_ident() == self.thread:
                self.cpu += time.thread_time() - started


def _span(store: Store) -> tuple[datetime, datetime, int]:
    """The generated span (whole hours) and the requests in it."""
    lo, hi, n = store.query_rows(f"SELECT min({col.TS}), max({col.TS}), count() FROM {store.database}.requests")[0]
    start = lo.replace(minute=0, second=0, microsecond=0, tzinfo=UTC)
    return start, hi.replace(minute=0, second=0, microsecond=0, tzinfo=UTC) + timedelta(hours=1), int(n)


def _command(path: Path, start: datetime, end: datetime, runs: int) -> None:
    argv = [
        sys.executable, "-m", "inferensics.cli", "canary", "compare", "--baseline", BASELINE, "--candidate",
        CANDIDATE, "--dsn", f"chdb://{path}", "--start", f"{start:%Y-%m-%dT%H:%M:%S}", "--end",
        f"{end:%Y-%m-%dT%H:%M:%S}",
    ]  # fmt: skip
    print("command: inferensics " + " ".join(argv[3:]))
    walls, cpus, out = [], [], ""
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode not in (0, 1, 3):
            raise SystemExit(f"canary compare exited {done.returncode}: {done.stderr.strip()}")
        out = done.stdout
    verdict = [line for line in out.splitlines() if line.startswith("verdict: ")][-1:] or [""]
    print(f"  wall {', '.join(f'{t:.2f}' for t in walls)} s (median {statistics.median(walls):.2f} s)")
    print(f"  CPU {', '.join(f'{t:.2f}' for t in cpus)} s (median {statistics.median(cpus):.2f} s; {_load()})")
    print(f"  {verdict[0][:120]}")


def _split(store: Store, start: datetime, end: datetime) -> None:
    pools = [r[0] for r in store.query_rows(f"SELECT DISTINCT {col.HW_POOL} FROM {store.database}.requests ORDER BY 1")]
    timed = _TimedStore(store)
    canary_compare(timed, CanaryParams(model=MODEL, baseline=BASELINE, candidate=CANDIDATE, start=start, end=end))
    timed.cpu, timed.queries = 0.0, 0  # the first call warmed the engine's caches
    started, cpu = time.perf_counter(), time.thread_time()
    params = CanaryParams(model=MODEL, baseline=BASELINE, candidate=CANDIDATE, start=start, end=end)
    canary_compare_pools(timed, params, pools)
    wall, python = time.perf_counter() - started, time.thread_time() - cpu - timed.cpu
    print(
        f"in process, {len(pools)} pools each alone, sharing queries ({timed.queries} queries): {wall:.2f} s wall; "
        f"the calling thread's CPU outside the queries {python:.2f} s ({_load()})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data-dir", help="chDB data directory; one holding requests is reused")
    parser.add_argument("--rows", type=int, default=1_500_000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    path = Path(args.data_dir or tempfile.mkdtemp(prefix="bench-canary-"))
    existed = args.data_dir is not None and path.exists() and any(path.iterdir())
    try:
        store = Store.open(f"chdb://{path}")
        if not existed:
            from bench_queries import generate  # the benchmarks folder is the script's: on sys.path

            store.migrate()
            end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
            print(f"generating {args.rows:,} requests over {args.days} days into {path} ({_load()})", flush=True)
            generate(store, args.rows, end, args.days)
        start, end, rows = _span(store)
        print(f"store {path}: {rows:,} requests, {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC")
        _split(store, start, end)
        store.close()
        _command(path, start, end, args.runs)
    finally:
        if args.data_dir is None:
            shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main()
