"""Insert N request events through the store API and print rows/s and bytes on disk per row, with peers.

Usage: python benchmarks/bench_store_insert.py [--rows 1000000] [--batch 100000] [--batch-seconds S] [--dir DIR]
                                              [--interleaved] [--repeat N]

The events are realistic request rows (random 32-hex request ids, 20 models × 10 pools × 5 classes,
log-normal latencies, 1 % errors, a few recompiles and fallbacks, one graph per request) over the hour
before the current one, built as Arrow columns up front so that the timing covers the store API (Arrow
conform + clickhouse-connect + chDB insert, the rollup views included) and not the generator. Two shapes
of batches, each with its own verdict line (``--batch-seconds S`` runs one):

* live traffic (the default first, S = 1): each batch covers S seconds of traffic and the batches follow
  each other in time, as the collector seals them (by size or by age, batch_max_age_s = 1 s): a 100k-row
  batch feeds at most 2 × 2,000 per-minute rollup groups;
* the whole hour (S = 0): every batch spreads over the whole hour, as a backfill of an hour's rows in
  random order would, so each 100k-row batch feeds about 56k per-minute rollup groups (2,000 series × 60
  minutes, ~1.8 requests each): the per-minute rollup is then nearly as many rows as the raw batch, the
  heavy case for the views.

The same batches then go, in the same process and run, to peers that each leave one cost out, so the
reader sees where the time goes:

* store API, dimensions as dictionaries: the same rows with the ten LowCardinality columns as Arrow
  dictionaries (as a Polars ``Categorical`` frame holds them; encoded before the timing), which the store
  passes on as such (schema/arrow.py's ``conform``);
* store API, no rollups: the same table and insert path with the rollup views dropped;
* bare table: a copy of the table with no views and no index, through ``client.insert_arrow`` with
  clickhouse-connect's default settings (the peer measured in earlier sessions);
* 3-column table: request id, time and model only (what a narrow table costs);
* Null engine: the store API into a table that discards rows (shipping + parsing, no writing).

Each target has its own database. By default the targets run one after another, each peer's database
dropped after its run so that its merges stop; with ``--interleaved`` every batch goes to each target in
turn, so that a change in the machine's load hits all of them alike. Every line gives wall
time, rows/s, the process CPU time (engine threads included; above the wall time when both cores work)
and the 1-minute load average before and after: on a shared machine, read the figures with the load.
With ``--repeat N`` the whole sequence runs N times (new databases each round) and the verdict takes each
target's median round.
Bytes per row are read from system.parts after OPTIMIZE FINAL for the requests table alone; the rollups'
bytes are printed beside them. Targets on the 2-core machine: >= 500k rows/s, <= 64 bytes per request row.

Recorded results (the 2-core machine, 1-s batches, ten LowCardinality columns, 1e6 rows, rollup views
included), behind schema/arrow.py's ``conform`` sending dimensions dictionary-encoded: dictionaries made
before the call took a median 1.45 s against 1.72 s for plain strings (5 rounds each); encoding plain
strings inside ``conform`` costs 0.17 s per 1e6 rows and still gains a little, 581k against 549k rows/s
(medians of 8 interleaved rounds, ``--interleaved --repeat 8``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from inferensics.schema import RequestEvent
from inferensics.schema import columns as c
from inferensics.schema.arrow import dimension_fields
from inferensics.schema.rollups import ROLLUPS
from inferensics.schema.store import Store

TARGET_ROWS_PER_S = 500_000
TARGET_BYTES_PER_ROW = 64
LIVE_BATCH_SECONDS = 1.0
"""The collector's default batch age (setting batch_max_age_s): live traffic reaches the store so."""


def make_batch(rng: np.random.Generator, start: int, n: int, t0: float, span_s: float = 3600.0) -> pa.Table:
    """``n`` request rows with times spread uniformly over ``span_s`` seconds from ``t0`` (µs since the epoch)."""
    models = np.array([f"model-{i:02d}" for i in range(20)])
    pools = np.array([f"pool-{i}" for i in range(10)])
    classes = np.array(["interactive", "batch", "shadow", "eval", "bulk"])
    outcome = rng.choice(np.array(["hit", "compile", "recompile", "fallback"]), n, p=[0.97, 0.005, 0.015, 0.01])
    ids = [f"{x:032x}" for x in rng.integers(0, 2**63, n, dtype=np.int64) * 7919 + np.arange(start, start + n)]
    ts = (t0 + np.sort(rng.uniform(0, span_s, n)) * 1e6).astype("int64")
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


def _load() -> float:
    return os.getloadavg()[0]


@dataclass
class Target:
    """One place the batches go: how to insert one batch, the store it lives in, and its figures."""

    label: str
    store: Store
    insert: Callable[[pa.Table], object]
    wall: float = 0.0
    cpu: float = 0.0

    def run(self, batch: pa.Table) -> None:
        cpu0 = time.process_time()
        start = time.perf_counter()
        self.insert(batch)
        self.wall += time.perf_counter() - start
        self.cpu += time.process_time() - cpu0


def _open(tmp: str, database: str) -> Store:
    store = Store.open(f"chdb://{tmp}?database={database}")
    store.migrate()
    return store


def _drop(store: Store) -> None:
    store.client.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")
    store.close()


def as_dictionaries(batch: pa.Table) -> pa.Table:
    """``batch`` with its LowCardinality columns dictionary-encoded."""
    dims = dimension_fields(RequestEvent)
    for i, name in enumerate(batch.column_names):
        if name in dims:
            batch = batch.set_column(i, name, pc.dictionary_encode(batch.column(name)))
    return batch


def _targets(tmp: str, dictionaries: dict[int, pa.Table]) -> list[Target]:
    """The store API (first) and its peers, each in its own database; ``dictionaries`` maps a batch's id to
    its dictionary-encoded copy."""
    main = _open(tmp, "bench_store")
    dims = _open(tmp, "bench_dims")
    no_views = _open(tmp, "bench_no_rollups")
    for r in ROLLUPS:
        no_views.client.command(f"DROP VIEW {no_views.database}.{r.view_name}")
    bare = _open(tmp, "bench_bare")
    bdb = bare.database
    bare.client.command(f"CREATE TABLE {bdb}.requests_bare AS {bdb}.requests")
    bare.client.command(f"ALTER TABLE {bdb}.requests_bare DROP INDEX idx_request_id")
    narrow = _open(tmp, "bench_narrow")
    narrow.client.command(
        f"CREATE TABLE {narrow.database}.narrow ({c.REQUEST_ID} String, {c.TS} DateTime64(6, 'UTC'), "
        f"{c.MODEL} LowCardinality(String)) ENGINE = MergeTree ORDER BY ({c.MODEL}, {c.TS})"
    )
    null = _open(tmp, "bench_null")
    ndb = null.database
    for r in ROLLUPS:
        null.client.command(f"DROP VIEW {ndb}.{r.view_name}")
    null.client.command(f"RENAME TABLE {ndb}.requests TO {ndb}.requests_src")
    null.client.command(f"CREATE TABLE {ndb}.requests AS {ndb}.requests_src ENGINE = Null")
    plain = {"async_insert": 0}
    return [
        Target("store API (rollups included)", main, lambda b: main.insert_arrow(RequestEvent, b)),
        Target(
            "store API, dimensions as dictionaries",
            dims,
            lambda b: dims.insert_arrow(RequestEvent, dictionaries[id(b)]),
        ),
        Target("store API, no rollup views", no_views, lambda b: no_views.insert_arrow(RequestEvent, b)),
        Target(
            "bare table, client.insert_arrow",
            bare,
            lambda b: bare.client.insert_arrow(f"{bdb}.requests_bare", b, settings=plain),
        ),
        Target(
            "3-column table, client.insert_arrow",
            narrow,
            lambda b: narrow.client.insert_arrow(
                f"{narrow.database}.narrow", b.select([c.REQUEST_ID, c.TS, c.MODEL]), settings=plain
            ),
        ),
        Target("Null engine (ship + parse only)", null, lambda b: null.insert_arrow(RequestEvent, b)),
    ]


def _report(t: Target, rows: int, load0: float) -> None:
    print(
        f"{t.label:<36} {t.wall:6.2f} s  {rows / t.wall:>9,.0f} rows/s   CPU {t.cpu:6.2f} s   "
        f"load {load0:.2f} -> {_load():.2f}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--dir", default="")
    ap.add_argument(
        "--batch-seconds",
        type=float,
        default=None,
        help="each batch covers this many seconds of traffic, batches in time order (as the collector seals "
        "them by age); 0: every batch spans the whole hour (the heavy case for the rollup views); default: "
        f"both, {LIVE_BATCH_SECONDS:g} s then 0",
    )
    ap.add_argument(
        "--interleaved",
        action="store_true",
        help="send each batch to every target in turn (fairer on a busy machine; merges of all overlap)",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run every target this many times, each in a new database; the verdict takes the medians",
    )
    args = ap.parse_args()
    spans = [LIVE_BATCH_SECONDS, 0.0] if args.batch_seconds is None else [args.batch_seconds]
    verdicts = [run_shape(args, span) for span in spans]
    if len(verdicts) > 1:
        print("\n".join(verdicts))


def run_shape(args: argparse.Namespace, span: float) -> str:
    """Run every target on one shape of batches (``span`` seconds each, 0: the whole hour); the verdict."""
    tmp = args.dir or tempfile.mkdtemp(prefix="inferensics-bench-")
    rng = np.random.default_rng(42)
    # The hour before the current one: inside the requests table's 30-day TTL whenever the script runs.
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    t0 = hour.timestamp() * 1e6
    if span > 0:
        batches = [
            make_batch(rng, i, min(args.batch, args.rows - i), t0 + k * span * 1e6, span)
            for k, i in enumerate(range(0, args.rows, args.batch))
        ]
        shape = f"each batch {span:g} s of traffic, in time order"
    else:
        batches = [make_batch(rng, i, min(args.batch, args.rows - i), t0) for i in range(0, args.rows, args.batch)]
        shape = "each batch spread over the whole hour"
    rows = sum(b.num_rows for b in batches)
    dictionaries = {id(b): as_dictionaries(b) for b in batches}
    mode = "interleaved: each batch to every target in turn" if args.interleaved else "one target after another"
    print(
        f"{rows:,} request rows in {len(batches)} batches of {args.batch:,} ({shape}); {mode}; {os.cpu_count()} cores; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; chDB directory {tmp}"
    )

    # Warm-up: the engine's first inserts of a process pay for expression compilation and page faults (a
    # 10k-row warm-up left the first round 25-35 % slower than the next ones).
    warm = _open(tmp, "bench_warmup")
    warm.insert_arrow(RequestEvent, batches[0])
    _drop(warm)

    walls: dict[str, list[float]] = {}
    for k in range(args.repeat):
        if args.repeat > 1:
            print(f"round {k + 1} of {args.repeat}")
        targets = _targets(tmp, dictionaries)
        main_target, dims_target, no_views = targets[0], targets[1], targets[2]
        if args.interleaved:
            load0 = _load()
            for b in batches:
                for t in targets:
                    t.run(b)
            for t in targets:
                _report(t, rows, load0)
        else:
            # Peers wait in empty databases; each target's database is dropped after its run (its merges
            # stop), except the store API's, which is measured for bytes after the last round.
            for t in targets:
                load0 = _load()
                for b in batches:
                    t.run(b)
                _report(t, rows, load0)
                if t is not main_target:
                    _drop(t.store)
        for t in targets:
            walls.setdefault(t.label, []).append(t.wall)
        if k < args.repeat - 1:
            for t in targets if args.interleaved else [main_target]:
                _drop(t.store)

    store = main_target.store
    db = store.database
    store.client.command(f"OPTIMIZE TABLE {db}.requests FINAL")
    n = store.query_rows(f"SELECT count() FROM {db}.requests")[0][0]
    assert n == rows, f"{n} rows stored, {rows} inserted"
    disk = store.disk_bytes()
    raw = store.query_rows(
        "SELECT sum(data_uncompressed_bytes) FROM system.parts WHERE database = {db:String} AND table = 'requests' "
        "AND active",
        {"db": db},
    )[0][0]
    for t in targets if args.interleaved else [main_target]:
        _drop(t.store)

    per_row = disk.get("requests", 0) / rows
    print(
        f"requests on disk     {disk.get('requests', 0):,} B  ->  {per_row:.1f} bytes/row "
        f"(uncompressed {raw / rows:.1f} bytes/row)"
    )
    for r in ROLLUPS[:3]:
        print(f"{r.name:<20} {disk.get(r.name, 0):,} B")
    if args.repeat > 1:
        for label, w in walls.items():
            print(
                f"median of {args.repeat} rounds: {label:<36} {rows / statistics.median(w):>9,.0f} rows/s "
                f"(rounds {rows / max(w):,.0f} .. {rows / min(w):,.0f})"
            )
    rate = rows / statistics.median(walls[main_target.label])
    dims_rate = rows / statistics.median(walls[dims_target.label])
    bare_rate = rows / statistics.median(walls[no_views.label])
    verdict = "met" if rate >= TARGET_ROWS_PER_S else f"missed by {1 - rate / TARGET_ROWS_PER_S:.1%}"
    line = (
        f"[{shape}] target >= {TARGET_ROWS_PER_S:,} rows/s through the store API: {verdict} ({rate:,.0f} with plain "
        f"string columns; {dims_rate:,.0f} with dimensions as dictionaries; {bare_rate:,.0f} without the "
        f"rollups); target <= {TARGET_BYTES_PER_ROW} bytes/row: "
        f"{'met' if per_row <= TARGET_BYTES_PER_ROW else 'missed'} ({per_row:.1f})"
    )
    print(line, flush=True)
    if not args.dir:
        shutil.rmtree(tmp, ignore_errors=True)
    return line


if __name__ == "__main__":
    main()
