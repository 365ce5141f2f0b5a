"""The host SDK leaves out the columns a receiver fills in by itself (``event_to_attributes(...,
omit_defaults=True)``, schema/otlp.py): every model's rows decode the same as with every column sent, on the
decoder's fast path and on its pydantic path, and an event row still inherits nothing it should not."""

from __future__ import annotations

import hashlib
import os

import pyarrow as pa
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from inferensics.collector.service.decode import decode_request
from inferensics.collector.service.testing import key_values, nanos
from inferensics.collector.service.value_checks import value_checks
from inferensics.schema.events import EVENT_MODELS, RecompileEvent, RequestEvent
from inferensics.schema.otlp import API_ONLY_MODELS, INHERITED, PREFIX, event_to_attributes, span_name
from inferensics.schema.table import Event
from tests.schema.samples import TYPICAL_TS, sample

NOW_US = nanos(TYPICAL_TS) // 1000
SPAN_MODELS = [m for m in EVENT_MODELS if m not in API_ONLY_MODELS]
"""The models whose rows travel as spans (the blob tables are written by the blob API alone)."""


def sent(model: type[Event], variant: str) -> Event:
    """``sample(model, variant)`` with the values the receiver checks for meaning (``value_checks``: closed
    vocabularies, signs, hex digests) made ones a sender sends: the samples fill every string with ``value-N``,
    which the receiver rightly refuses for an ``outcome`` or a digest."""
    record = sample(model, variant)
    update: dict[str, object] = {}
    for check in value_checks(model):
        value = getattr(record, check.column)
        if not check.breaks(value):
            continue
        if check.rule == "vocabulary":
            update[check.column] = check.words[-1]
        elif check.rule == "digest":
            update[check.column] = hashlib.sha256(str(value).encode()).hexdigest()
        elif check.rule == "non_negative":
            update[check.column] = abs(value)
        else:
            update[check.column] = str(value).replace("\x00", "")
    return record.model_copy(update=update)


def sdk_request(records: list[Event], children: list[Event], *, omit: bool) -> ExportTraceServiceRequest:
    """Each record a span (the first one with ``children`` as its span events), attributes as the SDK sends them."""
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.extend(key_values({"host.name": "resource-host"}))
    scope = rs.scope_spans.add()
    for i, record in enumerate(records):
        span = scope.spans.add()
        span.name = span_name(type(record))
        span.trace_id, span.span_id = os.urandom(16), os.urandom(8)
        span.start_time_unix_nano = nanos(TYPICAL_TS)  # the edge samples' times are outside OTLP's range
        span.attributes.extend(key_values(event_to_attributes(record, omit_defaults=omit)))
        for child in children if i == 0 else ():
            e = span.events.add()
            e.name = span_name(type(child))
            e.time_unix_nano = nanos(TYPICAL_TS)
            e.attributes.extend(key_values(event_to_attributes(child, omit_defaults=omit)))
    return request


def _rows(request: ExportTraceServiceRequest, fast: bool) -> dict[str, str]:
    """Each table's rows (repr: a NaN-safe comparison), and what was refused and why (an empty id is)."""
    decoded = decode_request(request, fast=fast, now_us=NOW_US)
    tables: dict[type[Event], pa.Table] = decoded.tables()
    rows = {m.TABLE.name: repr(t.to_pylist()) for m, t in tables.items()}
    return rows | {"refused": repr((decoded.rejected_rows, decoded.rejected_spans, decoded.errors))}


@pytest.mark.parametrize("variant", ["typical", "empty"])  # "edge" holds values OTLP cannot carry (2**64-1)
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "pydantic"])
def test_rows_decode_the_same_with_defaults_left_out(variant: str, fast: bool) -> None:
    records = [sent(m, variant) for m in SPAN_MODELS]
    full = _rows(sdk_request(records, [], omit=False), fast)
    assert _rows(sdk_request(records, [], omit=True), fast) == full
    assert {m.TABLE.name for m in SPAN_MODELS} <= set(full) or variant == "empty"  # typical: every table has a row


def test_a_request_sends_only_what_differs_from_the_defaults() -> None:
    event = sample(RequestEvent, "empty")
    sent = event_to_attributes(event, omit_defaults=True)
    # required and inherited columns always travel, even empty: a receiver must not fill them otherwise
    required = {n for n, f in RequestEvent.model_fields.items() if f.is_required() and n != "ts"}
    assert {PREFIX + n for n in required | set(INHERITED)} <= set(sent)
    assert len(sent) < len(event_to_attributes(event))
    # -0.0 equals the default 0.0 but is not what a receiver would fill in: it is sent
    negative = RequestEvent.model_validate({**event.model_dump(), "latency_ms": -0.0})
    assert PREFIX + "latency_ms" in event_to_attributes(negative, omit_defaults=True)


def test_an_event_under_a_span_keeps_its_own_empty_inherited_columns() -> None:
    span = sent(RequestEvent, "typical")
    child = RecompileEvent.model_validate({**sent(RecompileEvent, "typical").model_dump(), "traffic_class": ""})
    assert "traffic_class" in INHERITED
    assert isinstance(span, RequestEvent)
    assert span.traffic_class
    for fast in (True, False):
        full = _rows(sdk_request([span], [child], omit=False), fast)
        assert _rows(sdk_request([span], [child], omit=True), fast) == full
        assert "'traffic_class': ''" in full[RecompileEvent.TABLE.name]
