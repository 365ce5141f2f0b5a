"""What the captured-inputs check costs a blob read by a token without ``replay``, before and after the blob index
held capture markers.

    .venv/bin/python benchmarks/bench_blob_read.py                   # 1,000,000 request rows, 200 reads
    .venv/bin/python benchmarks/bench_blob_read.py --rows 200000 --reads 50

One embedded (chDB) store with ``--rows`` request rows (one in 50 naming a captured-inputs blob), a few hundred
blobs and their markers. Per read, ``before`` runs the check the service ran until now (a ``count()`` over
``requests`` for ``capture_blob = digest`` beside the index lookup) and ``after`` the check it runs now
(:func:`inferensics.collector.service.capture_index.captured_inputs`, two keys of the blob index); reads alternate
between the two and between a captured blob and generated code. Prints the median, p90 and max of each in
milliseconds, their ratio and that both answered alike.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta

import pyarrow as pa

from inferensics.collector.service.capture_index import backfill_sql, captured_inputs
from inferensics.collector.service.row_plan import plan_for
from inferensics.schema.events import RequestEvent
from inferensics.schema.store import Store

BEFORE = (
    "SELECT (SELECT count() FROM {db}.blobs WHERE sha256 = {{h:String}} AND lower(kind) IN {{kinds:Array(String)}}) "
    "+ (SELECT count() FROM {db}.requests WHERE capture_blob = {{h:String}})"
)
"""The check of collector/service/app.py before the markers (the ``requests`` scan)."""


def _requests(n: int, start: int, captured: list[str]) -> pa.Table:
    """``n`` request rows (every 50th naming one of ``captured``) in the table's Arrow schema."""
    now = datetime.now(UTC) - timedelta(days=1)
    rows = {
        "request_id": [f"r-{start + i:09d}" for i in range(n)],
        "ts": [now + timedelta(milliseconds=start + i) for i in range(n)],
        "host": [f"host-{i % 64}" for i in range(n)],
        "model": [f"model-{i % 4}" for i in range(n)],
        "hw_pool": ["h200-a"] * n,
        "traffic_class": ["interactive"] * n,
        "capture_blob": [
            captured[(start + i) // 50 % len(captured)] if (start + i) % 50 == 0 else "" for i in range(n)
        ],
    }
    plan = plan_for(RequestEvent)
    columns = []
    for f, default in zip(plan.schema, plan.defaults, strict=True):
        if f.name in rows:
            columns.append(pa.array(rows[f.name], type=f.type))
        else:  # the column's default on every row (a map's as no entries)
            columns.append(pa.array([[] if pa.types.is_map(f.type) else default] * n, type=f.type))
    return pa.Table.from_arrays(columns, schema=plan.schema)


def _fill(store: Store, rows: int, captured: list[str]) -> None:
    chunk = 200_000
    for start in range(0, rows, chunk):
        table = _requests(min(chunk, rows - start), start, captured)
        store.insert_arrow(RequestEvent, table, dedup_token=f"bench:{start}")


def main() -> None:
    """Build the store, time both checks and print the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--reads", type=int, default=200)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-blob-read-") as tmp:
        store = Store.open(f"chdb://{os.path.join(tmp, 'db')}")
        store.migrate()
        captured = [store.put_blob(f"inputs {i}".encode(), "") for i in range(200)]
        code = [store.put_blob(f"def call_{i}(): pass".encode(), "output_code") for i in range(200)]
        t0 = time.perf_counter()
        _fill(store, args.rows, captured)
        fill_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        store.client.command(backfill_sql(store.database))  # what ingest writes for rows that arrive now
        backfill_s = time.perf_counter() - t0
        store.client.command(f"OPTIMIZE TABLE {store.database}.requests FINAL")
        db = store.database
        kinds = ["inputs"]
        times: dict[str, list[float]] = {"before": [], "after": []}
        agree = True
        for i in range(args.reads):
            digest = captured[i % len(captured)] if i % 2 else code[i % len(code)]
            answers = {}
            for side in ("before", "after") if i % 2 else ("after", "before"):
                t = time.perf_counter()
                if side == "before":
                    answers[side] = bool(store.query_rows(BEFORE.format(db=db), {"h": digest, "kinds": kinds})[0][0])
                else:
                    answers[side] = captured_inputs(store, digest)
                times[side].append((time.perf_counter() - t) * 1000)
            agree &= answers["before"] == answers["after"] == (digest in captured)
        store.close()
    print(f"store: {args.rows:,} request rows ({args.rows // 50:,} naming one of {len(captured)} captured "
          f"blobs), filled in {fill_s:.1f} s; markers of the stored rows written in {backfill_s * 1000:.0f} ms "
          "(once)")  # fmt: skip
    for side, ms in times.items():
        ms.sort()
        print(f"{side:>6}: median {statistics.median(ms):7.2f} ms  p90 {ms[int(len(ms) * 0.9)]:7.2f} ms  "
              f"max {ms[-1]:7.2f} ms  ({len(ms)} reads)")  # fmt: skip
    ratio = statistics.median(times["before"]) / statistics.median(times["after"])
    print(f"before/after (medians): {ratio:.1f}x; both checks refused every captured blob and no other: {agree}; "
          f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
