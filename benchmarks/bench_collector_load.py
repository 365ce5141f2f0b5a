"""Load the collector service with pre-encoded OTLP request spans over loopback; print throughput and latency.

Usage: python benchmarks/bench_collector_load.py [--seconds 20] [--concurrency 4] [--spans 2000]
       [--batch-spans N] [--batch-mib N] [--parse-files 2] [--max-threads 0] [--decode-workers 0]
       [--retry {after,immediate}] [--fixed-start] [--peer-python PYTHON [--rounds 2]] [--decode-only]

Starts ``python -m inferensics.collector.service`` on a free loopback port with an embedded store in a
temporary directory, pre-encodes a pool of ExportTraceServiceRequest bodies (protobuf; one span per
request record, attributes exactly as schema/otlp.py's ``event_to_attributes`` writes them, so ~33
attributes per span like the host SDK sends), and sends them from ``--concurrency`` keep-alive connections
for ``--seconds``. Each request sent is new spans (new trace ids; the service stores a re-sent span once)
that started a moment ago (their times moved to the time of sending, as from a live fleet; ``--fixed-start``
re-sends the pool's times, so every span of the run starts within the same few milliseconds). A sender
refused with 429/503 waits the answer's Retry-After before it sends again, as the OpenTelemetry OTLP/HTTP
exporter does (``--retry immediate`` sends again at once: a retry storm, each refused 2.4 MB body read over
loopback by the service). Then it waits until the store has every acknowledged row.

The service spools the raw OTLP and the engine decodes it (collector/service/engine_decoder.py), so the
figures are: acknowledged spans/s while sending (ingest: parse + fsync), sustained spans/s (rows in the
store over the time from the first send until the last acknowledged row is in the store: the engine's
decode + insert), p50/p99/max time to acknowledgement, the service's CPU time per stored span (all its
threads: ingest, decode, insert, merges; unlike the rates it does not fall when other processes take the
cores), the service's RSS (current and peak) and where the store writer's time went (its stage timers,
``writer_seconds_total{stage}`` in /metrics). Target on the 2-core machine: >= 50k spans/s sustained, p99
<= 250 ms. Every result line carries the load average.

``--peer-python`` runs another checkout's service (its venv's interpreter, e.g. ``/work/main/.venv/bin/python``)
in turn with this one's, ``--rounds`` rounds, the order swapped each round, with the same bodies and settings,
and prints each figure's ratio this/peer per round with the median and spread.

``--decode-only`` prints the CPU time per span of each stage in this process instead: the service's path
(ingest parse + spool frame, then the engine's parse, pivot and insert) and, as the peer measured in the
same run, the Python reference decoder (parse, rows, Arrow tables, spool record) that the service used
before. CPU time (``time.process_time``, engine threads included) is robust to a loaded machine; wall time
is printed beside it. It then prints what a segment costs whatever its size: the engine's analysis of the
pivot query (run on no rows; about 150-300 ms of CPU on the 2-core machine) and a trivial query.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import os
import random
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from inferensics.collector.service.testing import encode_request
from inferensics.schema.events import RequestEvent

TOKEN = "bench-token"


@dataclass(frozen=True)
class Body:
    """A pre-encoded request body and where its spans' start and end times are (to move them to now)."""

    data: bytes
    index: np.ndarray
    """Byte positions of every start and end time (8 per time, little-endian fixed64)."""
    times: np.ndarray
    """The times at those positions (uint64 nanoseconds)."""


def make_bodies(pool: int, spans: int, seed: int = 7) -> list[Body]:
    """``pool`` request bodies of ``spans`` realistic request records each.

    Every span's trace id starts with :data:`SENTINEL` then the body's number (8 bytes): :func:`fresh`
    replaces them so that each request sent is new spans (the service stores a re-sent span once), and
    moves the spans' times to the moment of sending.
    """
    rng = random.Random(seed)
    t0 = datetime.now(UTC)
    models = [f"model-{i:02d}" for i in range(20)]
    pools = [f"pool-{i}" for i in range(10)]
    classes = ["interactive", "batch", "shadow", "eval", "bulk"]
    bodies = []
    n = 0
    for _ in range(pool):
        records = []
        for _ in range(spans):
            n += 1
            g = rng.randrange(40)
            records.append(
                RequestEvent(
                    request_id=f"{rng.getrandbits(128):032x}",
                    ts=t0 + timedelta(microseconds=n),
                    host=f"host-{n % 50}",
                    model=rng.choice(models),
                    hw_pool=rng.choice(pools),
                    traffic_class=rng.choice(classes),
                    shape=f"{rng.randrange(1, 9)}x{rng.choice([128, 256, 512])}",
                    latency_ms=rng.lognormvariate(3, 0.5),
                    outcome="hit" if rng.random() < 0.97 else "recompile",
                    graph_keys=(f"g{g:03d}",),
                    graph_artifacts=(f"{g:064x}",),
                    graph_calls=(1,),
                    graph_us=(rng.randrange(100, 5000),),
                    attrs={"route": "/generate"},
                )
            )
        message = ExportTraceServiceRequest.FromString(
            encode_request(records, resource={"service.name": "bench", "host.name": "host-x"})
        )
        times = []
        for span in message.resource_spans[0].scope_spans[0].spans:
            span.trace_id = SENTINEL + span.trace_id[8:]
            times += [span.start_time_unix_nano, span.end_time_unix_nano]
        data = message.SerializeToString()
        offsets: list[int] = []
        for i, t in enumerate(times):  # in field order: start (field 7, tag 0x39) then end (field 8, tag 0x41)
            at = data.find(bytes([0x41 if i % 2 else 0x39]) + struct.pack("<Q", t), offsets[-1] + 8 if offsets else 0)
            if at < 0:
                raise RuntimeError("a span time is not found in its encoded body")
            offsets.append(at + 1)
        index = np.asarray(offsets, dtype=np.int64)[:, None] + np.arange(8, dtype=np.int64)
        body = Body(data, index, np.asarray(times, dtype=np.uint64))
        moved = ExportTraceServiceRequest.FromString(fresh(body, shift_ns=1))
        if [t for sp in moved.resource_spans[0].scope_spans[0].spans
                for t in (sp.start_time_unix_nano - 1, sp.end_time_unix_nano - 1)] != times:  # fmt: skip
            raise RuntimeError("moving the span times changed something else in the body")
        bodies.append(body)
    return bodies


SENTINEL = bytes.fromhex("5eed5eed5eed5eed")
_SENT = itertools.count(1)
_T0_NS = time.time_ns()


def fresh_ids(data: bytes) -> bytes:
    """``data`` with new trace ids (the first 8 bytes of each replaced by a number never sent before)."""
    return data.replace(SENTINEL, struct.pack(">Q", next(_SENT) | 1 << 62))


def fresh(body: Body, *, now: bool = True, shift_ns: int | None = None) -> bytes:
    """``body`` with new trace ids (:func:`fresh_ids`) and, with ``now``, its spans' times moved by the time
    since the pool was encoded (or by ``shift_ns``), as a live fleet sends spans that started a moment ago.
    (Without: every request re-sends the pool's start times, so all spans of a run start within the same few
    milliseconds, which no fleet does; the dedup key table is sorted by start second, so then each segment's
    lookup reads every key stored so far.)"""
    data = fresh_ids(body.data)
    if not now:
        return data
    out = np.frombuffer(bytearray(data), dtype=np.uint8)
    shifted = body.times + np.uint64(time.time_ns() - _T0_NS if shift_ns is None else shift_ns)
    out[body.index] = shifted.astype("<u8").view(np.uint8).reshape(-1, 8)
    return out.tobytes()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) that process ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> tuple[int, int]:
    """Current and peak resident set size of ``pid`` in KiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def decode_costs(bodies: list[bytes], spans: int, parse_files: int, max_threads: int) -> None:
    """CPU time per span of each stage of the engine path and of the Python reference, in this process."""
    from inferensics.collector.service.decode import decode_request
    from inferensics.collector.service.engine_decoder import EngineDecoder
    from inferensics.collector.service.ingest import prepare
    from inferensics.collector.service.otlp_body import parse_request
    from inferensics.schema.store import Store

    n = spans * len(bodies)
    load = f"load average {os.getloadavg()[0]:.1f}"
    t0 = time.process_time()
    records = [prepare(body, None, None, 1 << 30).record for body in bodies]
    ingest = (time.process_time() - t0) / n * 1e6
    print(f"engine path   ingest (parse, count, frame) CPU {ingest:.1f} us/span   [{load}]")
    root = Path(tempfile.mkdtemp(prefix="inferensics-bench-decode-"))
    try:
        store = Store.open(f"chdb://{root / 'db'}")
        store.migrate()
        decoder = EngineDecoder(root / "engine", {"max_threads": max_threads} if max_threads else None,
                                parse_files=parse_files)  # fmt: skip
        # warm up on other spans: the same ones would be dropped from the measured segment as duplicates
        warm = prepare(fresh_ids(bodies[0]), None, None, 1 << 30).record
        decoder.insert(store, "warm", [warm[12:]], possibly_seen=False)
        timings: dict[str, list[float]] = {}
        command = store.client.command

        def timed(sql: str, *args: Any, **kwargs: Any) -> Any:
            c, w = time.process_time(), time.perf_counter()
            try:
                return command(sql, *args, **kwargs)
            finally:
                words = sql.split()
                stage = words[0]
                if stage == "CREATE":
                    stage = ("pivot into " if words[4].endswith("_ingest_rows") else "parse into ") + words[4]
                elif stage == "INSERT":
                    stage = ("pivot into " if words[2].endswith("_ingest_rows") else "insert into ") + words[2]
                acc = timings.setdefault(stage.strip(), [0.0, 0.0])
                acc[0] += time.process_time() - c
                acc[1] += time.perf_counter() - w

        store.client.command = timed  # type: ignore[method-assign]
        c, w = time.process_time(), time.perf_counter()
        result = decoder.insert(store, "bench", [r[12:] for r in records], possibly_seen=False)
        cpu, wall = time.process_time() - c, time.perf_counter() - w
        store.client.command = command  # type: ignore[method-assign]
        for stage, (sc, sw) in timings.items():
            if sc > 0.001 * n / 1e6 or sw > 0.001:
                print(f"engine path     {stage:34s} CPU {sc / n * 1e6:6.1f} us/span, wall {sw / n * 1e6:6.1f} us/span")
        total = ingest + cpu / n * 1e6
        print(f"engine path   one segment of {n} spans: CPU {cpu / n * 1e6:.1f} us/span, "
              f"wall {wall / n * 1e6:.1f} us/span ({result.landed} rows); with ingest {total:.1f} us/span: "
              f"{2e6 / total:,.0f} spans/s if 2 cores were all ours   "
              f"[parse_files={parse_files}, max_threads={max_threads or 'default'}, "
              f"load average {os.getloadavg()[0]:.1f}]")  # fmt: skip
        fixed_costs(store, decoder)
        store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)

    from inferensics.collector.service.spool import encode_record

    decode_request(parse_request(bodies[0], None)).tables()  # warm up (plans, first Arrow conversions)
    totals = [0.0, 0.0, 0.0, 0.0]
    for body in bodies:
        t0 = time.process_time()
        message = parse_request(body, None)
        t1 = time.process_time()
        decoded = decode_request(message)
        t2 = time.process_time()
        tables = decoded.tables()
        t3 = time.process_time()
        for table in tables.values():  # the Arrow IPC framing the old spool record did
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            encode_record(sink.getvalue().to_pybytes())
        t4 = time.process_time()
        for i, dt in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            totals[i] += dt
    parse, rows, arrow, ipc = (x / n * 1e6 for x in totals)
    total = parse + rows + arrow + ipc
    print(f"peer: Python reference decoder CPU us/span: parse {parse:.1f}, rows {rows:.1f}, arrow {arrow:.1f}, "
          f"spool record {ipc:.1f}; total {total:.1f} us/span (before the insert)   "
          f"[load average {os.getloadavg()[0]:.1f}]")  # fmt: skip


def fixed_costs(store: Any, decoder: Any) -> None:
    """What a segment costs whatever its size: the engine's analysis of the pivot query (run on no rows) and
    a trivial query; per span they shrink as segments grow (batch_max_rows, or a backlog when load is high)."""
    from inferensics.collector.service.engine_decoder import RECORDS
    from inferensics.collector.service.otlp_proto import structure
    from inferensics.collector.service.otlp_sql import records_sql, rows_sql

    db = store.database
    quoted = structure().replace("'", "\\'")
    empty = f"(SELECT * FROM format(Protobuf, '{quoted}', '') LIMIT 0)"
    store.client.command(f"CREATE OR REPLACE TABLE {db}.{RECORDS} ENGINE = Memory EMPTY AS {records_sql(empty)}",
                         settings=decoder._settings(store))  # fmt: skip
    for label, sql in (("pivot query on no rows (analysis)", rows_sql(RequestEvent, f"{db}.{RECORDS}", events=False)),
                       ("trivial query (SELECT 1)", "SELECT 1")):  # fmt: skip
        best = float("inf")
        for _ in range(3):
            c = time.process_time()
            store.client.command(f"{sql} FORMAT Null")
            best = min(best, time.process_time() - c)
        print(f"engine path   fixed per segment: {label:34s} CPU {best * 1000:6.1f} ms   "
              f"[load average {os.getloadavg()[0]:.1f}]")  # fmt: skip
    store.client.command(f"DROP TABLE {db}.{RECORDS}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--spans", type=int, default=2000, help="spans per export request")
    ap.add_argument("--pool", type=int, default=16, help="distinct pre-encoded bodies (cycled)")
    ap.add_argument("--dir", default="", help="data directory (default: a temporary one, removed)")
    ap.add_argument("--decode-workers", type=int, default=0, help="service setting decode_workers")
    ap.add_argument(
        "--batch-spans",
        type=int,
        default=0,
        help="service setting batch_max_rows (spans/segment; 0: the service's default)",
    )
    ap.add_argument("--batch-mib", type=int, default=0,
                    help="service setting batch_max_bytes in MiB (0: the service's default)")  # fmt: skip
    ap.add_argument("--parse-files", type=int, default=2, help="service setting engine_parse_files")
    ap.add_argument("--max-threads", type=int, default=0, help="service setting engine_max_threads (0: default)")
    ap.add_argument(
        "--retry",
        choices=("after", "immediate"),
        default="after",
        help="after a 429/503: wait its Retry-After as OTLP exporters do (default), or send again at once",
    )
    ap.add_argument(
        "--fixed-start",
        action="store_true",
        help="re-send the pool's span start times (all spans of the run start within a few ms) instead of "
        "moving them to the time of sending",
    )
    ap.add_argument(
        "--peer-python",
        default="",
        help="interpreter of another checkout's venv (e.g. /work/main/.venv/bin/python): its service is run "
        "in turn with this checkout's, same bodies and settings, and the ratios are printed",
    )
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the A/B with --peer-python (order swapped)")
    ap.add_argument("--decode-only", action="store_true", help="only print the CPU cost per span of each stage")
    args = ap.parse_args()
    if args.decode_only:
        encoded = [b.data for b in make_bodies(args.pool, args.spans)]
        decode_costs(encoded, args.spans, args.parse_files, args.max_threads)
        return

    print(f"encoding {args.pool} bodies of {args.spans} spans ...", flush=True)
    bodies = make_bodies(args.pool, args.spans)
    size = sum(len(b.data) for b in bodies) / len(bodies)
    print(f"body size {size / 1024:.0f} KiB ({size / args.spans:.0f} B/span)")
    if args.peer_python and args.dir:
        ap.error("--dir keeps one store; an A/B (--peer-python) starts each service on an empty one")
    if not args.peer_python:
        run_once(args, bodies, sys.executable, "this checkout")
        return
    # interleaved A/B: this checkout and the peer alternate, the order swapped every round (ABBA)
    figures: dict[str, list[dict[str, float]]] = {"this": [], "peer": []}
    for r in range(args.rounds):
        order = [("this", sys.executable), ("peer", args.peer_python)]
        for side, python in order if r % 2 == 0 else order[::-1]:
            print(f"=== round {r + 1}/{args.rounds}, {side}", flush=True)
            figures[side].append(run_once(args, bodies, python, side))
    print(f"=== this checkout ({sys.executable}) vs peer ({args.peer_python}), {args.rounds} rounds of "
          f"{args.seconds:.0f} s, load average now {os.getloadavg()[0]:.1f}")  # fmt: skip
    for key in ("sustained", "acknowledged", "p99_ms", "cpu_us_per_span"):
        ratios = [a[key] / b[key] for a, b in zip(figures["this"], figures["peer"], strict=True) if b[key]]
        mine = statistics.median(f[key] for f in figures["this"])
        peer = statistics.median(f[key] for f in figures["peer"])
        spread = f"rounds {min(ratios):.2f}-{max(ratios):.2f}" if ratios else "no ratio"
        print(f"{key:15s} this median {mine:,.1f}, peer median {peer:,.1f}; ratio this/peer per round: "
              f"{', '.join(f'{x:.2f}' for x in ratios)} (median {statistics.median(ratios) if ratios else 0:.2f}, "
              f"{spread})")  # fmt: skip


def run_once(args: argparse.Namespace, bodies: list[Body], python: str, label: str) -> dict[str, float]:
    """Start the service with ``python`` (its venv's code), load it, print the figures; return them."""
    root = Path(args.dir or tempfile.mkdtemp(prefix="inferensics-bench-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    env["INFERENSICS_TOKENS"] = f"{TOKEN}=admin"
    env["INFERENSICS_DECODE_WORKERS"] = str(args.decode_workers)
    if args.batch_spans:
        env["INFERENSICS_BATCH_MAX_ROWS"] = str(args.batch_spans)
    if args.batch_mib:
        env["INFERENSICS_BATCH_MAX_BYTES"] = str(args.batch_mib << 20)
    env["INFERENSICS_ENGINE_PARSE_FILES"] = str(args.parse_files)
    env["INFERENSICS_ENGINE_MAX_THREADS"] = str(args.max_threads)
    cmd = [python, "-m", "inferensics.collector.service", "--port", str(port),
           "--dsn", f"chdb://{root / 'db'}", "--spool-dir", str(root / "spool")]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        latencies: list[float] = []
        acked = [0]
        refused = [0]
        waited = [0.0]
        reconnects = [0]
        lock = threading.Lock()
        stop_at = time.monotonic() + args.seconds

        def sender(k: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            i = k
            while time.monotonic() < stop_at:
                body = fresh(bodies[i % len(bodies)], now=not args.fixed_start)
                i += args.concurrency
                t = time.perf_counter()
                try:
                    conn.request("POST", "/v1/traces", body=body,
                                 headers={"Content-Type": "application/x-protobuf", **headers})  # fmt: skip
                    resp = conn.getresponse()
                    resp.read()
                except (ConnectionError, http.client.HTTPException):
                    # The server closes a keep-alive connection idle for 5 s (uvicorn's timeout_keep_alive,
                    # as long as a Retry-After wait): connect again and send the body again, as HTTP
                    # clients do on a stale pooled connection. Not acknowledged, so not counted.
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                    with lock:
                        reconnects[0] += 1
                    i -= args.concurrency
                    continue
                dt = time.perf_counter() - t
                with lock:
                    if resp.status == 200:
                        latencies.append(dt)
                        acked[0] += args.spans
                    else:
                        refused[0] += 1
                if resp.status in (429, 503) and args.retry == "after":
                    # what an OTLP exporter does (opentelemetry-exporter-otlp-proto-http waits Retry-After)
                    wait = min(float(resp.getheader("Retry-After") or 1), max(0.0, stop_at - time.monotonic()))
                    with lock:
                        waited[0] += wait
                    time.sleep(wait)
            conn.close()

        threads = [threading.Thread(target=sender, args=(k,)) for k in range(args.concurrency)]
        load_at_start = os.getloadavg()[0]
        cpu_at_start = cpu_s(proc.pid)
        start = time.monotonic()
        for t in threads:
            t.start()
        peak_during = 0
        while any(t.is_alive() for t in threads):
            peak_during = max(peak_during, rss_kib(proc.pid)[0])
            time.sleep(0.5)
        send_s = time.monotonic() - start
        with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
            while True:
                text = client.get("/metrics").text
                written = next(
                    float(line.split()[-1])
                    for line in text.splitlines()
                    if line.startswith("inferensics_collector_written_rows_total")
                )
                if written >= acked[0]:
                    break
                time.sleep(0.05)
            total_s = time.monotonic() - start
            status = client.get("/api/v1/status").json()
            counts = status["store"]["row_counts"]
            metrics = client.get("/metrics").text.splitlines()
            duplicates = next(
                (float(line.split()[-1]) for line in metrics
                 if line.startswith("inferensics_collector_duplicate_spans_total")), 0.0
            )  # fmt: skip
            stages = {
                line.split('"')[1]: float(line.split()[-1])
                for line in metrics
                if line.startswith("inferensics_collector_writer_seconds_total{")
            }
            segments = next(
                (float(line.split()[-1]) for line in metrics
                 if line.startswith("inferensics_collector_batch_latency_seconds_count")), 0.0
            )  # fmt: skip
        cpu = cpu_s(proc.pid) - cpu_at_start
        rss, hwm = rss_kib(proc.pid)
        lat = sorted(latencies)
        q = statistics.quantiles(lat, n=100, method="inclusive") if len(lat) >= 2 else [lat[0]] * 99
        print(f"--- {label}: {python}")
        print(f"sent for {send_s:.1f} s with {args.concurrency} connections, {args.spans} spans/request, "
              f"batch_spans={args.batch_spans or 'default'}, batch_mib={args.batch_mib or 'default'}, "
              f"parse_files={args.parse_files}, "
              f"max_threads={args.max_threads}, "
              f"decode_workers={args.decode_workers}, retry={args.retry}, load average {os.getloadavg()[0]:.1f} "
              f"(at start {load_at_start:.1f})")  # fmt: skip
        print(f"acknowledged      {acked[0]:,} spans ({acked[0] / send_s:,.0f} spans/s while sending); "
              f"refused requests {refused[0]} (senders waited {waited[0]:.0f} s in all on Retry-After; "
              f"{reconnects[0]} connections closed by the server and opened again)")  # fmt: skip
        print(f"sustained         {written:,.0f} rows in the store after {total_s:.1f} s: "
              f"{written / total_s:,.0f} spans/s")  # fmt: skip
        cpu_us = cpu / max(written, 1) * 1e6
        print(f"service CPU       {cpu:.1f} s: {cpu_us:.1f} us per stored span (ingest, decode, insert, merges; "
              f"robust to load): {2e6 / cpu_us:,.0f} spans/s if both cores were the service's")  # fmt: skip
        print(f"time to ack       p50 {q[49] * 1000:.0f} ms, p99 {q[98] * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms "
              f"({len(lat)} requests)")  # fmt: skip
        print(f"service RSS       {rss / 1024:.0f} MiB now, {max(hwm, peak_during) / 1024:.0f} MiB peak")
        print(f"store requests    {counts['requests']:,} rows ({acked[0]:,} acknowledged; duplicate spans dropped "
              f"{duplicates:,.0f})   [load average now {os.getloadavg()[0]:.1f}]")  # fmt: skip
        if stages:  # the service's own stage timers (absent in code from before they were added)
            busy = sum(stages.values())
            parts = ", ".join(f"{k} {v:.1f} s ({v / busy:.0%})" for k, v in stages.items())
            print(f"writer stages     {busy:.1f} s in {segments:.0f} segments ({written / max(segments, 1):,.0f} "
                  f"rows each; {busy / total_s:.0%} of the run): {parts}")  # fmt: skip
        verdict = "met" if written / total_s >= 50_000 and q[98] <= 0.25 else "MISSED"
        print(f"target            >= 50,000 spans/s sustained and p99 <= 250 ms: {verdict}", flush=True)
        return {
            "sustained": written / total_s,
            "acknowledged": acked[0] / send_s,
            "p99_ms": q[98] * 1000,
            "cpu_us_per_span": cpu_us,
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
