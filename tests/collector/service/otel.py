"""Send inferensics records as plain OpenTelemetry spans, following schema/otlp.py, with the real exporter."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from inferensics.schema.events import RecompileEvent, RequestEvent
from inferensics.schema.otlp import event_to_attributes, span_name

BASE = (datetime.now(UTC) - timedelta(days=1)).replace(minute=0, second=0, microsecond=0)
"""A day before the test run (whole hour): the service keeps rows only inside their table's retention window."""


def request(i: int, *, model: str = "llama", run: str = "r") -> RequestEvent:
    """A deterministic request record."""
    return RequestEvent(
        request_id=f"{run}-{i:06d}",
        ts=BASE + timedelta(milliseconds=i),
        host="host-a",
        model=model,
        hw_pool="h200-a",
        traffic_class="interactive" if i % 2 else "batch",
        latency_ms=1.5 + i,
        graph_keys=("g1",),
        graph_artifacts=("a1",),
        graph_calls=(1,),
        graph_us=(10 + i,),
        attrs={"note": f"n{i}"},
    )


def nanos(ts: datetime) -> int:
    """Aware datetime → nanoseconds since the epoch."""
    return int(ts.timestamp()) * 1_000_000_000 + ts.microsecond * 1000


@contextmanager
def tracer(
    url: str, token: str | None, *, gzip: bool = False, timeout: float = 30, certificate: str | None = None
) -> Iterator[Tracer]:
    """A tracer whose spans go to ``url`` through the real OTLP/HTTP protobuf exporter; flushed on exit."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    exporter = OTLPSpanExporter(
        endpoint=f"{url}/v1/traces",
        headers=headers,
        timeout=timeout,
        compression=Compression.Gzip if gzip else Compression.NoCompression,
        certificate_file=certificate,
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "test-host", "host.name": "host-a"}))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=256, schedule_delay_millis=50))
    try:
        yield provider.get_tracer("inferensics.test")
    finally:
        provider.force_flush(int(timeout * 1000))
        provider.shutdown()


def emit(t: Tracer, events: Sequence[RequestEvent], *, recompile_every: int = 0) -> None:
    """One span per request record; every ``recompile_every``-th carries a recompile span event."""
    for i, ev in enumerate(events):
        start = nanos(ev.ts)
        span = t.start_span(span_name(RequestEvent), start_time=start, attributes=event_to_attributes(ev))
        if recompile_every and i % recompile_every == 0:
            rec = RecompileEvent(
                ts=ev.ts, request_id="", host="", model="", hw_pool="", traffic_class="",
                code_location="m.py:1", compile_id="0/1", reason="size mismatch",
            )  # fmt: skip
            attrs = event_to_attributes(rec)
            # leave the shared dimensions unset so the event inherits them from its span
            for dim in ("request_id", "host", "model", "hw_pool", "traffic_class"):
                attrs.pop(f"inferensics.{dim}", None)
            span.add_event(span_name(RecompileEvent), attributes=attrs, timestamp=start + 1000)
        span.end(end_time=start + 1_000_000)
