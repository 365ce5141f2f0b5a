"""The host SDK's OTLP export path alone: process CPU per exported request record, the product's
OtlpExporter (its own OTLP encoder, otlp_wire, and poster) against the previous path (the same exporter's
queue and thread, records made into ReadableSpans and sent through OpenTelemetry's OTLPSpanExporter and its
encoder, as up to commit 8ed541c), both over loopback to a receiver subprocess that answers 200.

    .venv/bin/python benchmarks/bench_otlp_export.py                     # 9 rounds x 4000 records
    .venv/bin/python benchmarks/bench_otlp_export.py --rounds 15 --records 8000 --profile

Each round hands ``--records`` request records (a steady-state decode request of the demo: the same
columns as the SDK sends for one, with its sub-records every ``--children-every``-th request) to each
exporter on this thread, as the SDK's background thread does, then flushes it; the two exporters take
turns within a round (which goes first alternates). Per record: the calling thread's CPU (its thread
clock), the process's other threads' CPU (the export thread: encoding and posting) and their sum, the
figure the serving process pays. Per round the ratio new / previous; the median and range over rounds.
``--profile`` prints where the new export thread's time goes (cProfile of one batch cycle on this thread).
Prints figures; asserts nothing. Every figure line ends with the load average.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import overload

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from inferensics.collector.host.otlp_exporter import OtlpExporter
from inferensics.collector.host.otlp_spans import record_span, request_span
from inferensics.collector.host.otlp_wire import Item
from inferensics.schema.events import RecompileEvent, RequestEvent
from inferensics.schema.otlp import event_to_attributes
from inferensics.schema.table import Event

sys.path.insert(0, str(Path(__file__).parent))
from bench_sdk_overhead import _otlp_sink


class SpanBatch(Sequence[ReadableSpan]):
    """The previous path's batch: queued records made into spans as OpenTelemetry's encoder reads them (a
    span freed as soon as it is encoded); a record whose span cannot be made is left out and passed to
    ``on_error``."""

    def __init__(self, exporter: OtlpExporter, items: Sequence[Item]) -> None:
        self.exporter, self.items = exporter, items
        self.failed = 0

    def __len__(self) -> int:
        return len(self.items) - self.failed

    def __iter__(self) -> Iterator[ReadableSpan]:
        self.failed = 0
        resource = self.exporter.resource
        for record, children in self.items:
            try:
                span = (
                    record_span(resource, record) if children is None else request_span(resource, record, children)  # type: ignore[arg-type]
                )
            except Exception as exc:
                self.failed += 1
                self.exporter._span_error(exc)
                continue
            yield span

    @overload
    def __getitem__(self, index: int) -> ReadableSpan: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[ReadableSpan]: ...
    def __getitem__(self, index: int | slice) -> ReadableSpan | Sequence[ReadableSpan]:
        return list(self)[index]


class PreviousExporter(OtlpExporter):
    """The previous export path, kept as the peer: the same queue and thread, each batch made into
    ReadableSpans and exported through OpenTelemetry's OTLPSpanExporter (its encoder, its POST)."""

    def __init__(self, service_url: str, host: str) -> None:
        super().__init__(service_url, host=host)
        self.otlp = OTLPSpanExporter(endpoint=f"{service_url}/v1/traces", timeout=self.export_timeout_s)

    def export_batch(self, items: Sequence[Item]) -> None:
        spans = SpanBatch(self, items)
        if self.otlp.export(spans) == SpanExportResult.SUCCESS:
            self.health.delivered("spans", len(spans))
        else:
            self.health.refuse("rejected", "spans", len(spans), "OTLPSpanExporter failed")

    def shutdown(self) -> None:
        super().shutdown()
        self.otlp.shutdown()  # type: ignore[no-untyped-call]


def records(n: int, children_every: int) -> list[tuple[RequestEvent, list[Event]]]:
    """``n`` steady-state request records of the demo decoder served on CPU (the columns the SDK sets for
    one: a hit on one graph, fingerprint unsampled), every ``children_every``-th with two recompile rows."""
    now = datetime.now(UTC)
    out: list[tuple[RequestEvent, list[Event]]] = []
    for i in range(n):
        request = RequestEvent(
            request_id=f"r{i}",
            ts=now,
            host="bench",
            model="demo",
            hw_pool="",
            traffic_class="",
            shape="2x32",
            shape_bucket="b<=2,s<=32",
            latency_ms=0.4 + (i % 97) / 1000,
            graph_keys=("c2f56717c6d42d79f7f64780a0a8b109b96e6f5199e5474e5b84392451354c52",),
            graph_artifacts=("9a3a768ca9ab37aa8905ab53baf7f8527ff54f7045eaa49a777d5ce718e82583",),
            graph_calls=(1,),
            graph_us=(380 + i % 50,),
            fp_status="unsampled",
            fp_rate=0.03125,
            attrs={"compile_ids": "0/0"},
        )
        children: list[Event] = []
        if children_every and i % children_every == children_every - 1:
            children = [
                RecompileEvent(ts=now, host="bench", model="demo", request_id=f"r{i}", compile_id=f"0/{k + 1}")
                for k in range(2)
            ]
        out.append((request, children))
    return out


def _load() -> str:
    return "load avg " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def _round(exp: OtlpExporter, recs: list[tuple[RequestEvent, list[Event]]]) -> tuple[float, float]:
    """Calling-thread CPU and other threads' CPU, µs per record, for one round of records and its flush."""
    p0, t0 = time.process_time_ns(), time.thread_time_ns()
    for request, children in recs:
        exp.export_request(request, children)
    caller = time.thread_time_ns() - t0
    f0 = time.thread_time_ns()
    exp.flush()
    flush_caller = time.thread_time_ns() - f0  # waiting, not working: kept out of the caller's figure
    other = time.process_time_ns() - p0 - caller - flush_caller
    return caller / len(recs) / 1e3, other / len(recs) / 1e3


def _breakdown(exp: OtlpExporter, recs: list[tuple[RequestEvent, list[Event]]]) -> None:
    """The new path's parts, this thread's clock, per record: the contract's attributes alone
    (``event_to_attributes``, part of the encoding), the encoding of whole batches of ``max_batch_size``
    (attributes included), and posting those bodies."""
    clock, n, size = time.thread_time_ns, len(recs), exp.max_batch_size
    items: list[Item] = list(recs)
    best = [float("inf")] * 3

    def ignore(*_: object) -> None:
        pass

    for _ in range(3):  # best of three, each part in turn: other load on the machine only adds
        t0 = clock()
        for request, children in recs:
            event_to_attributes(request, omit_defaults=True)
            for child in children:
                event_to_attributes(child, omit_defaults=True)
        t1 = clock()
        bodies = [exp.encoder.encode(items[i : i + size], ignore, ignore)[0] for i in range(0, n, size)]
        t2 = clock()
        for body in bodies:
            exp.poster.post(body)
        t3 = clock()
        best = [min(b, (y - x) / n / 1e3) for b, (x, y) in zip(best, ((t0, t1), (t1, t2), (t2, t3)), strict=True)]
    attrs, encode, post = best
    print(
        f"new path by part, us/record: encoding {encode:.1f} (of which event_to_attributes {attrs:.1f}), "
        f"posting {post:.1f} (batches of {size}: {len(bodies[0]) / min(size, n):.0f} bytes a span; best of 3); "
        f"{_load()}"
    )


def _profile(url: str, recs: list[tuple[RequestEvent, list[Event]]]) -> None:
    """Where the new export thread's time goes: its batch cycle (spans built, encoded, posted) run here."""
    # one batch, and a thread that is not woken while it is taken here
    exp = OtlpExporter(url, host="bench", schedule_delay_ms=3_600_000, max_batch_size=len(recs) + 1)
    for request, children in recs:
        exp.export_request(request, children)
    prof = cProfile.Profile()
    prof.enable()
    exp._export_queued()
    prof.disable()
    exp.shutdown()
    print(f"cProfile of the export thread's work for {len(recs)} records (top by own time):")
    pstats.Stats(prof).sort_stats("tottime").print_stats(14)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--records", type=int, default=4000, help="request records per round and exporter")
    ap.add_argument("--children-every", type=int, default=100, help="every Nth request has 2 sub-records (0: none)")
    ap.add_argument("--profile", action="store_true", help="cProfile the new export thread's work once")
    args = ap.parse_args()
    recs = records(args.records, args.children_every)
    sink, url = _otlp_sink()
    try:
        n_attrs = len(event_to_attributes(recs[0][0], omit_defaults=True))
        print(
            f"OTLP export of {args.records} request records x {args.rounds} rounds per exporter, {n_attrs} "
            f"attributes a request, 2 sub-records every {args.children_every}th; {_load()}"
        )
        variants: dict[str, Callable[[], OtlpExporter]] = {
            "previous (ReadableSpans + OTLPSpanExporter)": lambda: PreviousExporter(url, "bench"),
            "OtlpExporter (otlp_wire + otlp_poster)": lambda: OtlpExporter(url, host="bench"),
        }
        exporters = {name: make() for name, make in variants.items()}
        names = list(exporters)
        for exp in exporters.values():  # warm: connections open, code paths run once
            _round(exp, recs[:200])
        rows: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
        for r in range(args.rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                rows[name].append(_round(exporters[name], recs))
            old, new = rows[names[0]][-1], rows[names[1]][-1]
            print(
                f"  round {r}: previous {old[0]:.1f} + {old[1]:.1f} = {sum(old):.1f} us/record, new {new[0]:.1f} + "
                f"{new[1]:.1f} = {sum(new):.1f} us/record (calling thread + export thread); {_load()}"
            )
        for name in names:
            caller = [c for c, _ in rows[name]]
            other = [o for _, o in rows[name]]
            total = [c + o for c, o in rows[name]]
            print(
                f"{name}: process CPU per record {statistics.median(total):.1f} us [{min(total):.1f}, "
                f"{max(total):.1f}] (calling thread {statistics.median(caller):.1f}, export thread "
                f"{statistics.median(other):.1f}), median [range] over rounds"
            )
        ratios = [sum(b) / sum(a) for a, b in zip(rows[names[0]], rows[names[1]], strict=True)]
        print(
            f"new / previous, per round: {statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}]; "
            f"{_load()}"
        )
        _breakdown(exporters[names[1]], recs)
        for name, exp in exporters.items():
            exp.shutdown()
            print(f"stats {name}: { {k: v for k, v in exp.stats().items() if v} }")
        if args.profile:
            _profile(url, recs)
    finally:
        sink.kill()
        sink.wait()


if __name__ == "__main__":
    main()
