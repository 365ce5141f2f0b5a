"""Fuzzing OTLP decoding: nothing a sender can put in a body makes decoding raise anything but BadRequestError."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime

from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from inferensics.collector.service.decode import JSON, PROTOBUF, BadRequestError, read_body
from inferensics.collector.service.testing import any_value, build_request
from inferensics.schema.events import RecompileEvent, RequestEvent
from inferensics.schema.otlp import PREFIX

LIMIT = 1 << 20
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.text(max_size=20),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True),
    st.booleans(),
    st.binary(max_size=8),
)
values = st.one_of(scalars, st.lists(st.one_of(st.text(max_size=5), st.integers(0, 2**40)), max_size=4))
keys = st.one_of(
    st.sampled_from(
        [PREFIX + f for f in RequestEvent.model_fields] + [PREFIX + f for f in RecompileEvent.model_fields]
    ),
    st.text(max_size=12),
    st.just(PREFIX + "attrs.k"),
)
names = st.sampled_from(["inferensics.requests", "inferensics.recompiles", "inferensics.nope", "GET /", ""])


@st.composite
def requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    message = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        rs = message.resource_spans.add()
        for k, v in draw(
            st.dictionaries(st.sampled_from(["host.name", "service.name", "x"]), values, max_size=2)
        ).items():
            rs.resource.attributes.add(key=k).value.CopyFrom(any_value(v))
        scope = rs.scope_spans.add()
        for _ in range(draw(st.integers(0, 4))):
            span = scope.spans.add()
            span.name = draw(names)
            span.start_time_unix_nano = draw(st.integers(0, 2**64 - 1))
            for k, v in draw(st.dictionaries(keys, values, max_size=12)).items():
                span.attributes.add(key=k).value.CopyFrom(any_value(v))
            for _ in range(draw(st.integers(0, 2))):
                ev = span.events.add()
                ev.name = draw(names)
                ev.time_unix_nano = draw(st.integers(0, 2**64 - 1))
                for k, v in draw(st.dictionaries(keys, values, max_size=6)).items():
                    ev.attributes.add(key=k).value.CopyFrom(any_value(v))
    return message


@FUZZ
@given(body=st.binary(max_size=400), media=st.sampled_from([PROTOBUF, JSON]), gz=st.booleans())
def test_arbitrary_bytes_are_decoded_or_refused_with_400(body: bytes, media: str, gz: bool) -> None:
    status = 200
    try:
        read_body(gzip.compress(body) if gz else body, media, "gzip" if gz else None, LIMIT)
    except BadRequestError as exc:
        status = exc.status
    assert status in (200, 400)


@FUZZ
@given(message=requests())
def test_structured_requests_never_crash_and_every_row_is_kept_or_counted(message: ExportTraceServiceRequest) -> None:
    decoded = read_body(message.SerializeToString(), PROTOBUF, None, LIMIT)
    spans = [s for rs in message.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert decoded.spans == len(spans)
    ours = sum(s.name.startswith(PREFIX) for s in spans) + sum(
        e.name.startswith(PREFIX) for s in spans for e in s.events
    )
    assert decoded.row_count + sum(decoded.rejected_rows.values()) == ours
    assert decoded.rejected_spans <= len(spans)
    for model, rows in decoded.rows.items():
        assert all(type(r) is model for r in rows)
        assert decoded.tables()[model].num_rows == len(rows)
    as_json = read_body(json_format.MessageToJson(message).encode(), JSON, None, LIMIT)
    assert as_json.row_count == decoded.row_count


@FUZZ
@given(
    ids=st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=5, unique=True),
    latency=st.floats(0, 1e6, width=32),
    shape=st.text(max_size=40),
    attrs=st.dictionaries(st.text(min_size=1, max_size=10).filter(lambda k: "." not in k), st.text(max_size=10)),
)
def test_valid_records_round_trip_exactly(ids: list[str], latency: float, shape: str, attrs: dict[str, str]) -> None:
    ts = datetime(2026, 11, 30, 1, 2, 3, 456789, tzinfo=UTC)
    sent = [
        RequestEvent(
            request_id=i,
            ts=ts,
            host="h",
            model="m",
            hw_pool="p",
            traffic_class="c",
            latency_ms=latency,
            shape=shape,
            attrs=attrs,
        )
        for i in ids
    ]
    decoded = read_body(build_request(sent).SerializeToString(), PROTOBUF, None, LIMIT)
    assert decoded.rows[RequestEvent] == sent
    assert decoded.rejected_spans == 0
