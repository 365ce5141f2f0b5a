"""Fuzzing OTLP decoding: nothing a sender can put in a body makes decoding raise anything but BadRequestError."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from inferensics.collector.service.decode import decode_request, read_body
from inferensics.collector.service.otlp_body import JSON, PROTOBUF, BadRequestError, decompress
from inferensics.collector.service.testing import any_value, build_request
from inferensics.schema.arrow import events_to_arrow
from inferensics.schema.events import RecompileEvent, RequestEvent
from inferensics.schema.otlp import PREFIX
from inferensics.schema.table import Event
from tests.collector.service.otel import request

LIMIT = 1 << 20
NOW_US = int(datetime(2026, 12, 1, tzinfo=UTC).timestamp()) * 1_000_000
"""The decoders' clock: the fixed times below are inside the requests table's window."""

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

    # a span repeated in the request (same identity) is decoded once, and counted as a duplicate: among the
    # spans that carry something for the store (as the engine decoder stages them), not foreign ones
    def carries(s: Any) -> bool:
        events = any(e.name.startswith(PREFIX) or e.dropped_attributes_count for e in s.events)
        return s.name.startswith(PREFIX) or bool(s.dropped_attributes_count or s.dropped_events_count) or events

    def key(s: Any) -> tuple[bytes, bytes, str, int]:
        return (s.trace_id, s.span_id, s.name, s.start_time_unix_nano)

    unique = {key(s): s for s in reversed(spans) if carries(s)}
    assert decoded.duplicate_spans == sum(map(carries, spans)) - len(unique)
    spans = [s for s in spans if not carries(s) or unique.get(key(s)) is s]
    ours = sum(s.name.startswith(PREFIX) for s in spans) + sum(
        e.name.startswith(PREFIX) for s in spans for e in s.events
    )
    assert decoded.row_count + sum(decoded.rejected_rows.values()) == ours
    assert decoded.rejected_spans <= len(spans)
    tables = decoded.tables()
    assert sum(t.num_rows for t in tables.values()) == decoded.row_count
    as_json = read_body(json_format.MessageToJson(message).encode(), JSON, None, LIMIT)
    assert as_json.row_count == decoded.row_count


def same_tables(a: dict[type[Event], pa.Table], b: dict[type[Event], pa.Table]) -> None:
    assert set(a) == set(b)
    for model, table in a.items():
        # NaN != NaN: compare through a NaN-safe representation
        assert repr(table.to_pylist()) == repr(b[model].to_pylist()), model


@FUZZ
@given(message=requests())
def test_fast_path_and_pydantic_path_give_the_same_rows(message: ExportTraceServiceRequest) -> None:
    fast = decode_request(message, fast=True, now_us=NOW_US)
    slow = decode_request(message, fast=False, now_us=NOW_US)
    same_tables(fast.tables(), slow.tables())
    assert fast.rejected_rows == slow.rejected_rows
    assert fast.rejected_spans == slow.rejected_spans


@FUZZ
@given(
    latency=st.one_of(st.floats(), st.integers(-(2**63), 2**63 - 1)),
    recompiles=st.one_of(st.integers(-(2**63), 2**63 - 1), st.booleans(), st.floats(), st.text(max_size=3)),
    graph_calls=st.lists(st.one_of(st.integers(-5, 2**33), st.booleans()), max_size=3),
    host=st.one_of(st.text(max_size=3), st.integers(-(2**63), 2**63 - 1)),
)
def test_fast_and_slow_agree_on_typed_values(
    latency: object, recompiles: object, graph_calls: object, host: object
) -> None:
    message = build_request([request(0, run="t")])
    span = message.resource_spans[0].scope_spans[0].spans[0]
    for key, value in (("latency_ms", latency), ("recompiles", recompiles), ("graph_calls", graph_calls),
                       ("host", host)):  # fmt: skip
        span.attributes.add(key=PREFIX + key).value.CopyFrom(any_value(value))
    fast = decode_request(message, fast=True, now_us=NOW_US)
    slow = decode_request(message, fast=False, now_us=NOW_US)
    same_tables(fast.tables(), slow.tables())
    assert fast.rejected_rows == slow.rejected_rows


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
    assert decoded.tables()[RequestEvent].to_pylist() == events_to_arrow(RequestEvent, sent).to_pylist()
    assert decoded.rejected_spans == 0


@FUZZ
@given(chunks=st.lists(st.binary(max_size=300), min_size=1, max_size=4), garbage=st.binary(max_size=8))
def test_a_gzip_body_of_several_members_inflates_whole(chunks: list[bytes], garbage: bytes) -> None:
    """Concatenated gzip members are one body (RFC 1952), against the limit as a whole; bytes after the
    last member that are no gzip member are refused, not dropped."""
    body = b"".join(gzip.compress(c) for c in chunks)
    whole = b"".join(chunks)
    assert decompress(body, "gzip", LIMIT) == whole
    if len(whole) > 0:
        with pytest.raises(BadRequestError) as info:
            decompress(body, "gzip", len(whole) - 1)
        assert info.value.status == 413
    if garbage:
        with pytest.raises(BadRequestError) as bad:
            decompress(body + garbage, "gzip", LIMIT)
        assert bad.value.status == 400
