"""The exporter's own OTLP encoding (otlp_wire) against OpenTelemetry's: for generated records of every kind
the SDK exports, the bytes are those ``encode_spans`` makes of the reference spans (otlp_spans), and they
parse, with the official protobuf classes, into the same message.

Values cover what the contract can hand the encoder: unicode, empty and long strings, lone surrogates
(which protobuf cannot carry: the attribute is left out on both sides), ints inside and outside int64,
NaN, infinities and -0.0, empty and long lists, bools, maps, bytes; times before 1970 or NaN latencies
(which no span can carry: the record is left out here, its whole batch failed in OpenTelemetry's encoder).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from itertools import count
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.sdk.trace import ReadableSpan

from inferensics.collector.host import otlp_spans, otlp_wire
from inferensics.collector.host.otlp_spans import SCOPE_NAME, host_resource, record_span, request_span
from inferensics.collector.host.otlp_wire import Item, TraceRequestEncoder, any_value, varint
from inferensics.schema.events import EVENT_MODELS, RecompileEvent, RequestEvent
from inferensics.schema.otlp import event_to_attributes
from inferensics.schema.table import Event
from tests.schema.samples import LONG, UNICODE, sample

RESOURCE = host_resource("wire-host")
OTEL_ENCODER_LOGGER = "opentelemetry.exporter.otlp.proto.common._internal"
"""Where OpenTelemetry's encoder logs (with a traceback) each attribute it leaves out."""
CHILD_MODELS = [m for m in EVENT_MODELS if m is not RequestEvent]

texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", UNICODE, LONG, "\x00", "model-a"]),
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2),  # lone surrogates
)
ints = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, 1, -1, 127, 128, 16383, 16384, 2**63 - 1, -(2**63), 2**63, 2**64 - 1]),
)
floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, math.nan, 0.03125]))
times = st.one_of(
    st.datetimes(datetime(1970, 1, 1), datetime(2290, 1, 1), timezones=st.just(UTC)),
    st.datetimes(datetime(1900, 1, 1), datetime(1970, 1, 1), timezones=st.just(UTC)),  # before OTLP's range
    st.just(datetime(1970, 1, 1, tzinfo=UTC)),  # time zero: the field is left out
)


def _values_for(annotation: Any) -> st.SearchStrategy[Any]:
    return {
        str: texts,
        int: ints,
        float: floats,
        bool: st.booleans(),
        bytes: st.one_of(st.binary(max_size=40), st.just(bytes(range(256)))),
        datetime: times,
        tuple[str, ...]: st.lists(texts, max_size=3).map(tuple) | st.lists(texts, min_size=50, max_size=80).map(tuple),
        tuple[int, ...]: st.lists(ints, max_size=3).map(tuple) | st.lists(ints, min_size=50, max_size=80).map(tuple),
        dict[str, str]: st.dictionaries(texts, texts, max_size=4),
    }[annotation]


@st.composite
def records(draw: st.DrawFn, model: type[Event]) -> Event:
    """A record of ``model``, each column drawn or (half the time) left at a sample value, unvalidated."""
    base = sample(model, draw(st.sampled_from(["typical", "empty"])))
    values = dict(base.__dict__)
    for name, info in model.model_fields.items():
        if draw(st.booleans()):
            values[name] = draw(_values_for(info.annotation))
    return model.model_construct(**values)


@st.composite
def items(draw: st.DrawFn) -> Item:
    """A request with up to three sub-records of any kind, or a record of any kind on its own."""
    if draw(st.booleans()):
        request = draw(records(RequestEvent))
        children = draw(st.lists(st.sampled_from(CHILD_MODELS).flatmap(records), max_size=3))
        return request, children
    return draw(st.sampled_from(EVENT_MODELS).flatmap(records)), None


@pytest.fixture(autouse=True)
def _quiet_reference_encoder() -> Iterator[None]:
    logger = logging.getLogger(OTEL_ENCODER_LOGGER)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


@contextmanager
def _numbered_ids() -> Iterator[None]:
    """Span ids 1, 2, 3, ... on both sides (the same draws in the same order compare byte for byte)."""
    n = count(1)

    def ids() -> tuple[int, int]:
        i = next(n)
        return i << 64 | i, i

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(otlp_wire, "random_ids", ids)
        mp.setattr(otlp_spans, "random_ids", ids)
        yield


def _reference_span(item: Item) -> ReadableSpan:
    record, children = item
    if children is None:
        return record_span(RESOURCE, record)
    assert isinstance(record, RequestEvent)
    return request_span(RESOURCE, record, children)


def _encodable(item: Item) -> bool:
    """Whether OpenTelemetry can encode this record's span at all (its times in range)."""
    try:
        with _numbered_ids():
            encode_spans([_reference_span(item)]).SerializePartialToString()
    except (ValueError, OverflowError):
        return False
    return True


def _left_out(message: ExportTraceServiceRequest, good: Sequence[Item]) -> int:
    """Attributes the contract gave that the encoded message lacks (values protobuf cannot carry)."""
    spans = [s for rs in message.resource_spans for ss in rs.scope_spans for s in ss.spans]
    missing = 0
    for span, (record, children) in zip(spans, good, strict=True):
        missing += len(event_to_attributes(record, omit_defaults=True)) - len(span.attributes)
        for event, child in zip(span.events, children or (), strict=True):
            missing += len(event_to_attributes(child, omit_defaults=True)) - len(event.attributes)
    return missing


@settings(
    derandomize=True,  # the same examples every run (a fixed seed)
    database=None,
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(st.lists(items(), min_size=1, max_size=6))
def test_the_bytes_are_opentelemetrys(batch: list[Item]) -> None:
    good = [item for item in batch if _encodable(item)]
    errors: list[Exception] = []
    dropped: list[str] = []
    encoder = TraceRequestEncoder(RESOURCE.attributes, SCOPE_NAME, RESOURCE.schema_url)
    with _numbered_ids():
        ours, n = encoder.encode(batch, errors.append, lambda key, exc: dropped.append(key))
    assert (n, len(errors)) == (len(good), len(batch) - len(good))
    if not good:
        assert ours == b""
        return
    with _numbered_ids():
        reference = encode_spans([_reference_span(item) for item in good])
    assert ours == reference.SerializePartialToString()
    parsed = ExportTraceServiceRequest.FromString(ours)
    assert parsed == reference
    assert len(dropped) == _left_out(parsed, good)


def test_cached_values_encode_the_same_each_time() -> None:
    """A value served from the cache gives the bytes the first encoding gave; a cache that starts over
    (past its limit) too."""
    request = sample(RequestEvent, "typical")
    child = sample(RecompileEvent, "typical")
    assert isinstance(request, RequestEvent)
    batch: list[Item] = [(request, [child])] * 3
    batch += [(request.model_copy(update={"request_id": f"r{i}"}), []) for i in range(otlp_wire._CACHE_LIMIT + 10)]
    encoder = TraceRequestEncoder(RESOURCE.attributes, SCOPE_NAME, RESOURCE.schema_url)
    failures: list[object] = []
    with _numbered_ids():
        ours, _ = encoder.encode(batch, failures.append, lambda key, exc: failures.append(key))
    with _numbered_ids():
        again, _ = encoder.encode(batch, failures.append, lambda key, exc: failures.append(key))
    assert failures == []
    with _numbered_ids():
        reference = encode_spans([_reference_span(item) for item in batch]).SerializePartialToString()
    assert ours == again == reference


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, b"\x18\x00"),
        (-1, b"\x18" + b"\xff" * 9 + b"\x01"),
        (300, b"\x18\xac\x02"),
        (True, b"\x10\x01"),
        ("é", b"\x0a\x02\xc3\xa9"),
        ([], b"\x2a\x00"),
        (None, b""),
    ],
)
def test_values_encode_as_protobuf_writes_them(value: object, expected: bytes) -> None:
    assert any_value(value) == expected


def test_values_the_contract_never_sends_encode_as_protobuf_writes_them_too() -> None:
    """Maps, bytes, nested lists and empty values: what OpenTelemetry's encoder makes of each."""
    value = {"a": 1, "b": [b"\x00\xff", None, 2.5], 3: {"c": False}}
    expected = AnyValue(
        kvlist_value=KeyValueList(
            values=[
                KeyValue(key="a", value=AnyValue(int_value=1)),
                KeyValue(
                    key="b",
                    value=AnyValue(
                        array_value=ArrayValue(
                            values=[AnyValue(bytes_value=b"\x00\xff"), AnyValue(), AnyValue(double_value=2.5)]
                        )
                    ),
                ),
                KeyValue(
                    key="3",
                    value=AnyValue(
                        kvlist_value=KeyValueList(values=[KeyValue(key="c", value=AnyValue(bool_value=False))])
                    ),
                ),
            ]
        )
    )
    assert any_value(value) == expected.SerializePartialToString()


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, "\ud800", object()])
def test_a_value_protobuf_cannot_carry_raises(value: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        any_value(value)


def test_varints() -> None:
    assert [varint(n) for n in (0, 127, 128, 16383, 16384, 2**64 - 1)] == [
        b"\x00",
        b"\x7f",
        b"\x80\x01",
        b"\xff\x7f",
        b"\x80\x80\x01",
        b"\xff" * 9 + b"\x01",
    ]
