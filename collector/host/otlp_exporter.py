"""OTLP export: one ``inferensics.requests`` span per request, sub-records as its span events, compiles
and kernel inventory as small spans of their own (contract: :mod:`inferensics.schema.otlp`).

Uses the real OpenTelemetry SDK: a private ``TracerProvider`` (the host's global provider is left alone)
with a ``BatchSpanProcessor`` around ``OTLPSpanExporter`` (OTLP/HTTP protobuf). Blobs go through
:class:`~inferensics.collector.host.blob_sender.BlobSender`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from inferensics.collector.host.blob_sender import BlobSender
from inferensics.schema import columns as col
from inferensics.schema.events import RequestEvent
from inferensics.schema.otlp import RESOURCE_HOST, event_to_attributes, span_name
from inferensics.schema.table import Event


def _nanos(ts: datetime) -> int:
    return int(ts.timestamp() * 1_000_000) * 1000


class OtlpExporter:
    """Spans over OTLP/HTTP to ``{service_url}/v1/traces``, blobs to the service's blob API."""

    def __init__(
        self,
        service_url: str,
        *,
        host: str,
        token: str | None = None,
        max_queue_size: int = 8192,
        schedule_delay_ms: int = 1000,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self._span_exporter = OTLPSpanExporter(endpoint=f"{service_url.rstrip('/')}/v1/traces", headers=headers)
        self.provider = TracerProvider(
            resource=Resource.create({RESOURCE_HOST: host, "service.name": "inferensics-host"})
        )
        self.processor = BatchSpanProcessor(
            self._span_exporter, max_queue_size=max_queue_size, schedule_delay_millis=schedule_delay_ms
        )
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("inferensics.collector.host")
        self.blobs = BlobSender(service_url, token)

    def export_request(self, request: RequestEvent, children: Sequence[Event]) -> None:
        """One span for the request; each child is a span event named after its table."""
        start = _nanos(request.ts)
        end = start + int(request.latency_ms * 1_000_000)
        span = self.tracer.start_span(
            span_name(RequestEvent), start_time=start, attributes=event_to_attributes(request)
        )
        for child in children:
            ts = getattr(child, col.TS, None)
            span.add_event(
                span_name(type(child)),
                attributes=event_to_attributes(child),
                timestamp=_nanos(ts) if isinstance(ts, datetime) else start,
            )
        span.end(end_time=end)

    def export_records(self, records: Sequence[Event]) -> None:
        """One small span per record."""
        for record in records:
            ts = getattr(record, col.TS, None)
            t = _nanos(ts) if isinstance(ts, datetime) else None
            span = self.tracer.start_span(span_name(type(record)), start_time=t, attributes=event_to_attributes(record))
            span.end(end_time=t)

    def put_blob(self, data: bytes, kind: str, attrs: Mapping[str, str]) -> str:
        """Upload through the blob API."""
        return self.blobs.put_blob(data, kind, attrs)

    def flush(self) -> None:
        """Export everything queued in the span processor."""
        self.processor.force_flush()

    def shutdown(self) -> None:
        """Flush and stop the processor's thread."""
        self.provider.shutdown()
