"""Build OTLP export requests from event records (schema/otlp.py's contract) without the OTel SDK.

Used by the tests, the fuzzers and the load benchmark, which need many spans faster than the SDK makes them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from inferensics.schema.otlp import AttrValue, event_to_attributes, span_name
from inferensics.schema.table import Event


def any_value(value: object) -> AnyValue:
    """A Python value as an OTLP ``AnyValue``."""
    out = AnyValue()
    if isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, int):
        out.int_value = value
    elif isinstance(value, float):
        out.double_value = value
    elif isinstance(value, str):
        out.string_value = value
    elif isinstance(value, bytes):
        out.bytes_value = value
    elif isinstance(value, list | tuple):
        out.array_value.values.extend(any_value(v) for v in value)  # pyright: ignore[reportUnknownArgumentType]
    else:
        raise TypeError(f"no OTLP value for {type(value).__name__}")
    return out


def key_values(attributes: Mapping[str, AttrValue | object]) -> list[KeyValue]:
    """Attributes as OTLP ``KeyValue`` messages."""
    return [KeyValue(key=k, value=any_value(v)) for k, v in attributes.items()]


def nanos(ts: datetime) -> int:
    """Aware datetime → nanoseconds since the epoch."""
    return int(ts.timestamp()) * 1_000_000_000 + ts.microsecond * 1000


def build_request(
    records: Sequence[Event],
    *,
    resource: Mapping[str, object] | None = None,
    events: Mapping[int, Sequence[Event]] | None = None,
) -> ExportTraceServiceRequest:
    """One request with one span per record (its row) and optional span events (more rows) by index."""
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.extend(key_values(resource or {"service.name": "inferensics-test"}))
    scope = rs.scope_spans.add()
    scope.scope.name = "inferensics"
    for i, record in enumerate(records):
        span = scope.spans.add()
        span.name = span_name(type(record))
        span.trace_id = os.urandom(16)
        span.span_id = os.urandom(8)
        start = nanos(record.ts) if hasattr(record, "ts") else 0
        span.start_time_unix_nano = start
        span.end_time_unix_nano = start + 1000
        span.attributes.extend(key_values(event_to_attributes(record)))
        for ev in (events or {}).get(i, ()):
            e = span.events.add()
            e.name = span_name(type(ev))
            e.time_unix_nano = nanos(ev.ts) if hasattr(ev, "ts") else start
            e.attributes.extend(key_values(event_to_attributes(ev)))
    return request


def encode_request(
    records: Sequence[Event],
    *,
    resource: Mapping[str, object] | None = None,
    events: Mapping[int, Sequence[Event]] | None = None,
) -> bytes:
    """:func:`build_request` serialized as protobuf."""
    data: bytes = build_request(records, resource=resource, events=events).SerializeToString()
    return data
