"""OTLP export: one ``inferensics.requests`` span per request, sub-records as its span events, compiles
and kernel inventory as small spans of their own (contract: :mod:`inferensics.schema.otlp`).

Uses the real OpenTelemetry SDK: a private ``TracerProvider`` (the host's global provider is left alone)
with a ``BatchSpanProcessor`` around ``OTLPSpanExporter`` (OTLP/HTTP protobuf). Blobs go through
:class:`~inferensics.collector.host.blob_sender.BlobSender`. What the service refuses is counted by cause
in :class:`~inferensics.collector.host.export_health.ExportHealth` (``health``), and ``flush`` is bounded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON

from inferensics.collector.host.blob_sender import BlobSender
from inferensics.collector.host.export_health import HELD_EXPORTER_LINES, ExportHealth, ObservedSession
from inferensics.schema import columns as col
from inferensics.schema.events import RequestEvent
from inferensics.schema.otlp import RESOURCE_HOST, event_to_attributes, span_name
from inferensics.schema.table import Event


def _nanos(ts: datetime) -> int:
    return int(ts.timestamp() * 1_000_000) * 1000


class _CountingSpanExporter(SpanExporter):
    """The OTLP span exporter, with each batch's delivery or refusal (and its cause) counted."""

    def __init__(self, inner: OTLPSpanExporter, session: ObservedSession, health: ExportHealth) -> None:
        self.inner, self.session, self.health = inner, session, health

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        HELD_EXPORTER_LINES.hold()  # OpenTelemetry's line per refused batch: counted and logged by health
        try:
            result = self.inner.export(spans)
        finally:
            held = HELD_EXPORTER_LINES.release()
        if result == SpanExportResult.SUCCESS:
            self.health.delivered("spans", len(spans))
        else:
            cause, detail = self.session.last_outcome()
            if held and (not cause or cause == "rejected"):
                detail = f"{detail}; {held[-1]}" if detail else held[-1]
            self.health.refuse(cause or "rejected", "spans", len(spans), detail)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


class OtlpExporter:
    """Spans over OTLP/HTTP to ``{service_url}/v1/traces``, blobs to the service's blob API.

    ``export_timeout_s`` bounds one batch's export with its retries; ``flush_timeout_s`` bounds ``flush``
    (a service that is down costs the caller of ``flush`` at most that, never the serving path).
    """

    def __init__(
        self,
        service_url: str,
        *,
        host: str,
        token: str | None = None,
        max_queue_size: int = 8192,
        schedule_delay_ms: int = 1000,
        export_timeout_s: float = 2.0,
        flush_timeout_s: float = 3.0,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self.health = ExportHealth(service_url)
        self.flush_timeout_s = flush_timeout_s
        self.spans_started = 0
        session = ObservedSession()
        otlp = OTLPSpanExporter(
            endpoint=f"{service_url.rstrip('/')}/v1/traces",
            headers=headers,
            timeout=export_timeout_s,
            session=session,
        )
        self._span_exporter = _CountingSpanExporter(otlp, session, self.health)
        # Every record is one span: ALWAYS_ON, not the provider's default, which reads $OTEL_TRACES_SAMPLER (a
        # host that samples its own traces would drop request records without a word) and looks for a parent.
        self.provider = TracerProvider(
            resource=Resource.create({RESOURCE_HOST: host, "service.name": "inferensics-host"}), sampler=ALWAYS_ON
        )
        self.processor = BatchSpanProcessor(
            self._span_exporter, max_queue_size=max_queue_size, schedule_delay_millis=schedule_delay_ms
        )
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("inferensics.collector.host")
        self.blobs = BlobSender(service_url, token, health=self.health)

    def export_request(self, request: RequestEvent, children: Sequence[Event]) -> None:
        """One span for the request; each child is a span event named after its table."""
        start = _nanos(request.ts)
        end = start + int(request.latency_ms * 1_000_000)
        span = self.tracer.start_span(
            span_name(RequestEvent), start_time=start, attributes=event_to_attributes(request, omit_defaults=True)
        )
        for child in children:
            ts = getattr(child, col.TS, None)
            span.add_event(
                span_name(type(child)),
                attributes=event_to_attributes(child, omit_defaults=True),
                timestamp=_nanos(ts) if isinstance(ts, datetime) else start,
            )
        span.end(end_time=end)
        self.spans_started += 1

    def export_records(self, records: Sequence[Event]) -> None:
        """One small span per record."""
        for record in records:
            ts = getattr(record, col.TS, None)
            t = _nanos(ts) if isinstance(ts, datetime) else None
            span = self.tracer.start_span(
                span_name(type(record)), start_time=t, attributes=event_to_attributes(record, omit_defaults=True)
            )
            span.end(end_time=t)
            self.spans_started += 1

    def put_blob(self, data: bytes, kind: str, attrs: Mapping[str, str]) -> str:
        """Upload through the blob API."""
        return self.blobs.put_blob(data, kind, attrs)

    def flush(self) -> None:
        """Export everything queued in the span processor, waiting at most ``flush_timeout_s``."""
        self.processor.force_flush(timeout_millis=int(self.flush_timeout_s * 1000))

    def stats(self) -> dict[str, int]:
        """Deliveries and refusals by cause; ``export_spans_unaccounted``: spans ended but neither
        delivered nor refused (still queued, or dropped by a full span queue)."""
        out = self.health.stats()
        settled = out["export_spans_sent"] + sum(v for k, v in out.items() if k.startswith("export_refused_"))
        out["export_spans_unaccounted"] = max(0, self.spans_started - settled)
        return out

    def shutdown(self) -> None:
        """Flush and stop the processor's thread."""
        self.provider.shutdown()
