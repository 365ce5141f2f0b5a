"""Sizing figures for a deployment: spool bytes per span (and so per minute of store outage), and bytes on
disk per request row, each table and the whole store, through the collector's own path.

Usage: python benchmarks/bench_deploy_sizing.py [--spans 2000] [--requests 50] [--rates 1000,10000,60000]

* Spool: the collector spools each OTLP request's protobuf bytes with a 12-byte frame
  (collector/service/spool.py), so a store outage costs (body bytes + 12 per request) for every span sent
  while it lasts. The bodies are benchmarks/bench_collector_load.py's realistic request records (one span per
  request, ~33 attributes, as the host SDK sends them), at several spans per export request (the host
  SDK's OtlpExporter sends up to 2048). Printed per span and as MiB per minute of outage at --rates spans/s.
* Disk: the same bodies decoded and inserted by the engine decoder into an embedded store (the rollup views
  included), then bytes on disk per request row from system.parts, before and after the parts are merged.
  A replicated cluster stores each row on every replica of its shard: multiply by the replica count.

Spans per second per collector core and query latency against rows come from bench_collector_load.py
(``--decode-only``: CPU µs per span of ingest and of the engine) and bench_queries.py (``--rows N``);
deploy/SIZING.md puts them together.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_collector_load import make_bodies

from inferensics.collector.service.engine_decoder import EngineDecoder
from inferensics.collector.service.spool import encode_record
from inferensics.schema.store import Store


def spool_figures(rates: list[int]) -> None:
    print("spool bytes per span (protobuf body + 12-byte frame per request):")
    for per_request in (1, 64, 512, 2000):
        bodies = make_bodies(4, per_request, seed=per_request)
        total = sum(len(encode_record(b.data)) for b in bodies)
        per_span = total / (4 * per_request)
        minutes = ", ".join(f"{r:,} spans/s: {per_span * r * 60 / 2**20:,.0f} MiB" for r in rates)
        print(f"  {per_request:>5} spans/request: {per_span:7.0f} B/span; per minute of outage at {minutes}")


def disk_figures(spans: int, requests: int) -> None:
    bodies = make_bodies(requests, spans, seed=11)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"chdb://{tmp}/store")
        store.migrate()
        decoder = EngineDecoder(Path(tmp) / "engine")
        t0 = time.perf_counter()
        landed = 0
        for i in range(0, len(bodies), 10):  # segments of 10 requests, as the spool seals them
            payloads = [b.data for b in bodies[i : i + 10]]
            landed += decoder.insert(store, f"{i:012d}-sizing", payloads, possibly_seen=False).landed
        elapsed = time.perf_counter() - t0
        rows = store.row_counts()["requests"]
        print(f"disk: {rows:,} request rows inserted ({landed:,} rows in all tables) in {elapsed:.1f} s")
        for state in ("as inserted", "merged"):
            if state == "merged":
                for table in store.table_names():
                    store.client.command(f"OPTIMIZE TABLE {store.database}.{table} FINAL")
            disk = store.disk_bytes()
            req = disk.get("requests", 0)
            everything = sum(disk.values())
            print(
                f"  {state:>11}: requests {req / rows:6.1f} B/row; whole store (rollups, other tables) "
                f"{everything / rows:6.1f} B per request row"
            )
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spans", type=int, default=2000, help="spans per export request for the disk figures")
    ap.add_argument("--requests", type=int, default=50, help="export requests for the disk figures")
    ap.add_argument("--rates", default="1000,10000,60000", help="spans/s for the per-minute spool figures")
    args = ap.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
    spool_figures([int(r) for r in args.rates.split(",")])
    disk_figures(args.spans, args.requests)


if __name__ == "__main__":
    main()
