"""Insert N request events through the store API and print rows/s and bytes on disk per row.

Usage: python benchmarks/bench_store_insert.py [--rows 1000000] [--batch 100000] [--dir DIR]

The events are realistic request rows (random 32-hex request ids, 20 models × 10 pools × 5 classes,
log-normal latencies, 1 % errors, a few recompiles and fallbacks, one graph per request), built as Arrow
columns up front so that the timing covers the store API (Arrow conform + clickhouse-connect + chDB insert,
the materialized views included) and not the generator. Bytes per row are read from system.parts after
OPTIMIZE FINAL for the requests table alone; the rollups' bytes are printed beside them.
Targets on the 2-core machine: >= 500k rows/s, <= 64 bytes per request row.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

from inferensics.schema import RequestEvent
from inferensics.schema import columns as c
from inferensics.schema.store import Store


def make_batch(rng: np.random.Generator, start: int, n: int, t0: float) -> pa.Table:
    models = np.array([f"model-{i:02d}" for i in range(20)])
    pools = np.array([f"pool-{i}" for i in range(10)])
    classes = np.array(["interactive", "batch", "shadow", "eval", "bulk"])
    outcome = rng.choice(np.array(["hit", "compile", "recompile", "fallback"]), n, p=[0.97, 0.005, 0.015, 0.01])
    ids = [f"{x:032x}" for x in rng.integers(0, 2**63, n, dtype=np.int64) * 7919 + np.arange(start, start + n)]
    ts = (t0 + np.sort(rng.uniform(0, 3600, n)) * 1e6).astype("int64")
    graph = rng.integers(0, 40, n)
    keys = [[f"g{g:03d}"] for g in graph]
    arts = [[f"{g:064x}"] for g in graph]
    return pa.table(
        {
            c.REQUEST_ID: ids,
            c.TS: pa.array(ts, pa.timestamp("us", tz="UTC")),
            c.HOST: np.char.add("host-", (rng.integers(0, 100, n)).astype(str)),
            c.MODEL: models[rng.integers(0, 20, n)],
            c.HW_POOL: pools[rng.integers(0, 10, n)],
            c.TRAFFIC_CLASS: classes[rng.integers(0, 5, n)],
            c.BUNDLE_ID: np.where(rng.random(n) < 0.1, "bundle-candidate", "bundle-baseline"),
            c.SHAPE_BUCKET: np.char.add("s<=", (2 ** rng.integers(4, 12, n)).astype(str)),
            c.LATENCY_MS: pa.array(rng.lognormal(3, 1, n).astype("float32")),
            c.STATUS: np.where(rng.random(n) < 0.01, "error", "ok"),
            c.OUTCOME: outcome,
            c.GUARD_OUTCOME: np.where(outcome == "hit", "hit", "miss"),
            c.RECOMPILES: pa.array((outcome == "recompile").astype("uint8")),
            c.GRAPH_KEYS: keys,
            c.GRAPH_ARTIFACTS: arts,
            c.GRAPH_CALLS: pa.array([[1]] * n, pa.list_(pa.uint32())),
            c.GRAPH_US: pa.array(rng.integers(100, 50_000, (n, 1)).astype("uint32").tolist(), pa.list_(pa.uint32())),
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--dir", default="")
    args = ap.parse_args()
    tmp = args.dir or tempfile.mkdtemp(prefix="inferensics-bench-")
    rng = np.random.default_rng(42)
    t0 = datetime(2026, 11, 30, 10, tzinfo=UTC).timestamp() * 1e6
    batches = [make_batch(rng, i, min(args.batch, args.rows - i), t0) for i in range(0, args.rows, args.batch)]
    store = Store.open(f"chdb://{tmp}")
    store.migrate()
    # The peer in the same run: the same batches into a copy of the table with no views and no index,
    # inserted by clickhouse-connect directly (what the engine costs before our schema adds to it).
    db = store.database
    store.client.command(f"CREATE TABLE {db}.requests_bare AS {db}.requests")
    store.client.command(f"ALTER TABLE {db}.requests_bare DROP INDEX idx_request_id")
    start = time.perf_counter()
    for b in batches:
        store.client.insert_arrow(f"{db}.requests_bare", b, settings={"async_insert": 0})
    bare = time.perf_counter() - start
    store.client.command(f"DROP TABLE {db}.requests_bare")
    start = time.perf_counter()
    cpu0 = time.process_time()
    for b in batches:
        store.insert_arrow(RequestEvent, b)
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    store.client.command(f"OPTIMIZE TABLE {store.database}.requests FINAL")
    n = store.query_rows(f"SELECT count() FROM {store.database}.requests")[0][0]
    disk = store.disk_bytes()
    raw = store.query_rows(
        "SELECT sum(data_uncompressed_bytes) FROM system.parts WHERE database = {db:String} AND table = 'requests' "
        "AND active",
        {"db": store.database},
    )[0][0]
    print(f"rows inserted        {n:,} in {len(batches)} batches of {args.batch:,}")
    print(
        f"wall                 {wall:.2f} s  ->  {n / wall:,.0f} rows/s (process CPU {cpu:.2f} s, engine threads incl.)"
    )
    print(f"peer (bare table)    {bare:.2f} s  ->  {n / bare:,.0f} rows/s: no rollup views, no index, no conform")
    print(f"store API / peer     {bare / wall:.2f}x the peer's throughput")
    print(
        f"requests on disk     {disk.get('requests', 0):,} B  ->  {disk.get('requests', 0) / n:.1f} bytes/row "
        f"(uncompressed {raw / n:.1f} bytes/row)"
    )
    for name in ("requests_1m", "requests_1h"):
        print(f"{name:<20} {disk.get(name, 0):,} B")
    store.close()
    if not args.dir:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
