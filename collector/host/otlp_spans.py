"""Records as finished OpenTelemetry spans (the SDK's public ``ReadableSpan``), built directly rather than
through a ``Tracer``: what OpenTelemetry's OTLP encoder reads, nothing more.

The exporter writes its spans' bytes itself (:mod:`~inferensics.collector.host.otlp_wire`); these spans are
the reference those bytes are held to (OpenTelemetry's ``encode_spans`` of them gives the same message, a
test checks it) and what the previous export path sent. A ``Tracer`` span runs the sampler, copies and
cleans every attribute into bounded attributes under a lock, and hands the span to a processor on ``end``;
for a record whose attributes are already OTLP values (the contract's
:func:`~inferensics.schema.otlp.event_to_attributes`) and a span that is over when it is made, none of it is
needed. Nothing is bounded or truncated here either: the SDK's default limits (128 attributes, 128 events a
span) and ``$OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` would have cut a record's columns or its sub-records
without a word.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from time import time_ns
from typing import Final

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event as SpanEvent
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from inferensics.collector.host.otlp_wire import random_ids, unix_nanos
from inferensics.schema import columns as col
from inferensics.schema.events import RequestEvent
from inferensics.schema.otlp import RESOURCE_HOST, event_to_attributes, span_name
from inferensics.schema.table import Event

SCOPE_NAME: Final = "inferensics.collector.host"
"""The instrumentation scope of every span the SDK exports."""
SERVICE_NAME: Final = "inferensics-host"

_SCOPE: Final = InstrumentationScope(SCOPE_NAME)
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
_UNSET: Final = Status(StatusCode.UNSET)
_REQUEST_SPAN: Final = span_name(RequestEvent)


class HostResource(Resource):
    """The exporting host's resource, hashed once.

    ``Resource`` hashes a JSON dump of its attributes on every call, and the OTLP encoder hashes each
    span's resource to group the spans of a batch: once per span, for a value that never changes.
    """

    def __init__(self, attributes: Mapping[str, str]) -> None:
        # Resource.create: the SDK's own attributes and $OTEL_RESOURCE_ATTRIBUTES, as a TracerProvider has.
        base = Resource.create(dict(attributes))
        super().__init__(base.attributes, base.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return other is self or super().__eq__(other)


def host_resource(host: str) -> HostResource:
    """The resource of a host's spans (``host.name`` fills a record's empty ``host`` on the service)."""
    return HostResource({RESOURCE_HOST: host, "service.name": SERVICE_NAME})


def _context() -> SpanContext:
    """A new root span's context (:func:`~inferensics.collector.host.otlp_wire.random_ids`)."""
    trace_id, span_id = random_ids()
    return SpanContext(trace_id, span_id, False, _SAMPLED)


def request_span(resource: Resource, request: RequestEvent, children: Sequence[Event]) -> ReadableSpan:
    """The request's span (start: the record's time; end: start + latency); each child a span event named
    after its table, at its own time or the span's start."""
    start = unix_nanos(request.ts)
    events: list[SpanEvent] = []
    for child in children:
        ts = getattr(child, col.TS, None)
        events.append(
            SpanEvent(
                span_name(type(child)),
                event_to_attributes(child, omit_defaults=True),
                unix_nanos(ts) if isinstance(ts, datetime) else start,
            )
        )
    return ReadableSpan(
        name=_REQUEST_SPAN,
        context=_context(),
        resource=resource,
        attributes=event_to_attributes(request, omit_defaults=True),
        events=events,
        kind=SpanKind.INTERNAL,
        status=_UNSET,
        start_time=start,
        end_time=start + int(request.latency_ms * 1_000_000),
        instrumentation_scope=_SCOPE,
    )


def record_span(resource: Resource, record: Event) -> ReadableSpan:
    """A record of its own (a compile, the kernel inventory, health) as a span that starts and ends at its
    time (now, for a record without one)."""
    ts = getattr(record, col.TS, None)
    t = unix_nanos(ts) if isinstance(ts, datetime) else time_ns()
    return ReadableSpan(
        name=span_name(type(record)),
        context=_context(),
        resource=resource,
        attributes=event_to_attributes(record, omit_defaults=True),
        kind=SpanKind.INTERNAL,
        status=_UNSET,
        start_time=t,
        end_time=t,
        instrumentation_scope=_SCOPE,
    )
