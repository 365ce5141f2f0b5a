"""The engine decoder against the Python reference: the same OTLP requests must give the same rows and the
same rejection counts.

Each generated request goes through ``EngineDecoder.insert`` (chDB's Protobuf format + the generated SQL)
into one database and through the reference ``decode_request`` + ``insert_arrow`` into another; both are
read back with the same query. Known, documented differences (collector/service/otlp_sql.py) are normalised: a float
stringified into a string (attrs, a resource host) compares by value.
"""

from __future__ import annotations

import math
import time
import uuid
from collections import Counter
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from inferensics.collector.service.decode import decode_request
from inferensics.collector.service.engine_decoder import MAX_MESSAGES, EngineDecoder, delimited
from inferensics.collector.service.otlp_sql import reject_messages
from inferensics.collector.service.testing import any_value, build_request
from inferensics.schema.arrow import arrow_schema
from inferensics.schema.dedup import SEEN_TABLE
from inferensics.schema.events import (
    EVENT_MODELS,
    CacheEvent,
    CompileEvent,
    GuardFailureEvent,
    RecompileEvent,
    RequestEvent,
)
from inferensics.schema.otlp import PREFIX
from inferensics.schema.store import Store
from inferensics.schema.table import Event
from tests.collector.service.otel import BASE, request
from tests.collector.service.test_decode_fuzz import requests, values
from tests.collector.service.test_omit_defaults import NOW_US as SDK_NOW_US
from tests.collector.service.test_omit_defaults import SPAN_MODELS, sdk_request, sent

NOW_US = 1_700_000_000_000_000
"""The clock both decoders measure the time window from: the fixed span times below are inside it, the
generated ones (1970..2554) mostly outside, so both the rows and the out_of_range_time rule are compared."""
DIFF = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


class Pair:
    """Two migrated databases: one written by the engine decoder, one by the reference."""

    def __init__(self, dsn: str, work: Path) -> None:
        base = dsn.split("?database=", maxsplit=1)[0]
        tag = uuid.uuid4().hex[:10]
        self.engine = Store.open(f"{base}?database=e_{tag}")
        self.reference = Store.open(f"{base}?database=r_{tag}")
        for s in (self.engine, self.reference):
            s.migrate()
            # generated times are anywhere in 1970..2554: keep TTL merges from dropping rows under the test
            for model in EVENT_MODELS:
                s.client.command(f"SYSTEM STOP TTL MERGES {s.database}.{model.TABLE.name}")
        self.now_us = NOW_US
        self.decoder = EngineDecoder(work, now_us=lambda: self.now_us)

    def close(self) -> None:
        for s in (self.engine, self.reference):
            s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
            s.close()

    def compare(self, message: ExportTraceServiceRequest) -> None:
        self.truncate()  # an example that failed left its rows and span keys
        token = uuid.uuid4().hex
        result = self.decoder.insert(self.engine, token, [message.SerializeToString()], possibly_seen=False)
        ref = decode_request(message, fast=True, now_us=self.now_us)
        tables = ref.tables()
        for model, table in tables.items():
            self.reference.insert_arrow(model, table, dedup_token=f"{token}:{model.TABLE.name}")
        assert result.rejected == ref.rejected_rows, (result.messages, ref.errors)
        assert result.sent == result.landed == ref.row_count
        assert result.duplicate_spans == ref.duplicate_spans
        for model in {*tables, *_models_with_rows(self.engine)}:
            got, want = _rows(self.engine, model), _rows(self.reference, model)
            assert got == want, (model.TABLE.name, result.messages, ref.errors)
        self.truncate()

    def truncate(self) -> None:
        for s in (self.engine, self.reference):
            for model in _models_with_rows(s):
                s.client.command(f"TRUNCATE TABLE {s.database}.{model.TABLE.name}")
            s.client.command(f"TRUNCATE TABLE {s.database}.{SEEN_TABLE}")


def _models_with_rows(store: Store) -> list[type[Event]]:
    counts = store.row_counts()
    return [m for m in EVENT_MODELS if counts.get(m.TABLE.name)]


def _normal(value: Any) -> Any:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else value
    if isinstance(value, str):
        try:
            f = float(value)
        except ValueError:
            return value
        return "nan" if math.isnan(f) else f
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, dict):
        return sorted((k, _normal(v)) for k, v in value.items())
    return value


def _rows(store: Store, model: type[Event]) -> Counter[str]:
    schema = arrow_schema(model)
    exprs = [f"toUnixTimestamp64Micro({f.name})" if pa.types.is_timestamp(f.type) else f.name for f in schema]
    table = store.query_arrow(f"SELECT {', '.join(exprs)} FROM {store.database}.{model.TABLE.name}")
    out: Counter[str] = Counter()
    for row in table.to_pylist():
        values = [_normal(dict(v) if isinstance(v, list) and v and isinstance(v[0], tuple) else v)
                  for v in row.values()]  # fmt: skip
        out[repr(values)] += 1
    return out


def _foreign_twice() -> ExportTraceServiceRequest:
    """The same foreign span twice (no ids, no inferensics.* name or event): no duplicate for either decoder
    (the reference once counted it, the engine never staged it; found by this test in CI)."""
    message = ExportTraceServiceRequest()
    spans = message.resource_spans.add().scope_spans.add().spans
    spans.add().name = "GET /"
    spans.add().name = "GET /"
    return message


@DIFF
@given(message=requests())
@example(message=_foreign_twice())
def test_engine_and_reference_agree_on_generated_requests(pair: Pair, message: ExportTraceServiceRequest) -> None:
    pair.compare(message)


inherited_keys = st.sampled_from(
    [PREFIX + k for k in ("request_id", "host", "model", "hw_pool", "traffic_class", "bundle_id")]
)


@DIFF
@given(
    parent=st.sampled_from(["inferensics.requests", "inferensics.compiles", "GET /", "inferensics.nope"]),
    parent_attrs=st.dictionaries(inherited_keys, values, max_size=4),
    child=st.sampled_from([RecompileEvent, GuardFailureEvent, CacheEvent, CompileEvent]),
    child_attrs=st.dictionaries(
        st.one_of(inherited_keys, st.just(PREFIX + "cache"), st.just(PREFIX + "result")), values, max_size=4
    ),
    resource_host=st.one_of(st.none(), values),
    event_time=st.integers(0, 2**63),
)
def test_events_inherit_like_the_reference(  # noqa: PLR0917 (one argument per generated part)
    pair: Pair,
    parent: str,
    parent_attrs: dict[str, Any],
    child: type[Event],
    child_attrs: dict[str, Any],
    resource_host: Any,
    event_time: int,
) -> None:
    message = ExportTraceServiceRequest()
    rs = message.resource_spans.add()
    if resource_host is not None:
        rs.resource.attributes.add(key="host.name").value.CopyFrom(any_value(resource_host))
    span = rs.scope_spans.add().spans.add()
    span.name = parent
    span.start_time_unix_nano = 1_700_000_000_123_456_789
    for k, v in parent_attrs.items():
        span.attributes.add(key=k).value.CopyFrom(any_value(v))
    ev = span.events.add()
    ev.name = PREFIX + child.TABLE.name
    ev.time_unix_nano = event_time
    for k, v in child_attrs.items():
        ev.attributes.add(key=k).value.CopyFrom(any_value(v))
    pair.compare(message)


@DIFF
@given(
    ts=st.one_of(st.text(max_size=30), st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat())),
    data=st.one_of(st.binary(max_size=6), st.text(alphabet="0123456789abcdefABCDEF g", max_size=8)),
    whole_attrs=st.one_of(st.none(), values),
)
def test_times_bytes_and_whole_maps_like_the_reference(
    pair: Pair, ts: str, data: bytes | str, whole_attrs: Any
) -> None:
    message = build_request([request(0, run="x")])
    span = message.resource_spans[0].scope_spans[0].spans[0]
    span.attributes.add(key=PREFIX + "ts").value.CopyFrom(any_value(ts))
    if whole_attrs is not None:
        span.attributes.add(key=PREFIX + "attrs").value.CopyFrom(any_value(whole_attrs))
    blob = message.resource_spans[0].scope_spans[0].spans.add()
    blob.name = PREFIX + "blob_contents"
    blob.start_time_unix_nano = 1_700_000_000_000_000_000
    blob.attributes.add(key=PREFIX + "sha256").value.string_value = "ab"
    blob.attributes.add(key=PREFIX + "data").value.CopyFrom(any_value(data))
    pair.compare(message)


def test_a_valid_request_round_trips_exactly(pair: Pair) -> None:
    pair.now_us = time.time_ns() // 1000  # request() times are a day before now
    sent = [request(i, run="v") for i in range(5)]
    recompile = RecompileEvent(ts=BASE + timedelta(seconds=1), host="h", reason="size",
                               reasons=("a", "b"))  # fmt: skip
    message = build_request(sent, resource={"host.name": "res"}, events={2: [recompile]})
    pair.compare(message)
    assert pair.engine.row_counts()["requests"] == 0  # compare() truncates after checking


@pytest.mark.parametrize("variant", ["typical", "empty"])
def test_columns_the_sdk_leaves_at_their_default_are_filled_like_the_reference(pair: Pair, variant: str) -> None:
    """The host SDK's encoding (``omit_defaults=True``) through the engine: the same rows as the reference, which
    decodes it as it decodes every column sent (test_omit_defaults.py), an event's inherited columns included."""
    pair.now_us = SDK_NOW_US
    pair.compare(sdk_request([sent(m, variant) for m in SPAN_MODELS], [], omit=True))
    child = RecompileEvent.model_validate({**sent(RecompileEvent, variant).model_dump(), "traffic_class": ""})
    pair.compare(sdk_request([sent(RequestEvent, "typical")], [child], omit=True))


def test_engine_sql_exists_for_every_model_a_span_carries_and_refuses_a_validator_it_does_not_know() -> None:
    from pydantic import model_validator

    from inferensics.collector.service.otlp_sql import REJECT, rows_sql

    for model in SPAN_MODELS:  # the blob tables travel in no span (tests/collector/service/test_span_columns.py)
        assert rows_sql(model, "records").startswith("SELECT " + ", ".join(model.model_fields) + f", {REJECT}, ")

    class Checked(RecompileEvent):
        @model_validator(mode="after")
        def _reason_given(self) -> Checked:
            return self

    with pytest.raises(NotImplementedError, match="_reason_given"):
        rows_sql(Checked, "records")


def test_sdk_drop_counts_are_summed(pair: Pair) -> None:
    pair.now_us = time.time_ns() // 1000  # request() times are a day before now
    message = build_request([request(0, run="d")])
    span = message.resource_spans[0].scope_spans[0].spans[0]
    span.dropped_attributes_count = 3
    span.dropped_events_count = 2
    span.events.add(name="exception", dropped_attributes_count=4)
    foreign = message.resource_spans[0].scope_spans[0].spans.add(name="GET /", dropped_attributes_count=5)
    assert foreign.name == "GET /"
    result = pair.decoder.insert(pair.engine, uuid.uuid4().hex, [message.SerializeToString()], possibly_seen=False)
    assert result.dropped == Counter({"sdk_attributes": 12, "sdk_events": 2})
    assert result.landed == 1


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])


_FIXED = {FieldDescriptor.TYPE_FIXED64: 1, FieldDescriptor.TYPE_DOUBLE: 1, FieldDescriptor.TYPE_SFIXED64: 1,
          FieldDescriptor.TYPE_FIXED32: 5, FieldDescriptor.TYPE_FLOAT: 5, FieldDescriptor.TYPE_SFIXED32: 5}  # fmt: skip
_LENGTH = {FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES}


def _wire_type(f: FieldDescriptor) -> int:
    return 2 if f.type in _LENGTH else _FIXED.get(f.type, 0)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    tag = _varint(number << 3 | wire)
    if wire == 0:
        return tag + _varint(int.from_bytes(payload[:8].ljust(1, b"\0"), "little"))
    if wire == 1:
        return tag + payload[:8].ljust(8, b"\0")
    if wire == 5:
        return tag + payload[:4].ljust(4, b"\0")
    if wire == 3:
        return tag + _varint(number << 3 | 4)  # an empty group
    return tag + _varint(len(payload)) + payload


def _with_event() -> ExportTraceServiceRequest:
    return build_request([request(0, run="w")], events={0: [RecompileEvent(ts=request(0).ts, host="h", reason="r")]})


def _parts(message: ExportTraceServiceRequest) -> list[Message]:
    rs = message.resource_spans[0]
    span = rs.scope_spans[0].spans[0]
    return [message, rs, rs.resource, rs.scope_spans[0], rs.scope_spans[0].scope, span, span.attributes[0],
            span.attributes[0].value, span.events[0], span.events[0].attributes[0], span.status]  # fmt: skip


@DIFF
@given(
    where=st.integers(0, 10),
    number=st.integers(1, 20),
    wire=st.sampled_from([0, 1, 2, 3, 5]),
    payload=st.binary(max_size=12),
)
def test_fields_the_engine_does_not_expect_never_wedge_the_writer(
    pair: Pair, where: int, number: int, wire: int, payload: bytes
) -> None:
    """Protobuf keeps a field of an unknown number, or of a known number and the wrong wire type, as an unknown
    field: ingest accepts the body (200). The engine's reader refused some of them for the whole segment, and
    the writer retried that segment forever with every later one behind it; now it re-encodes and goes on.

    Unknown numbers give exactly the reference's rows. A known number of the wrong wire type is read by the
    engine as a value (the reference skips it): those rows may differ, but the insert never fails.
    """
    message = _with_event()
    part = _parts(message)[where]
    known = part.DESCRIPTOR.fields_by_number.get(number)
    assume(known is None or _wire_type(known) != wire)  # a well-typed known field is just a value
    try:
        part.MergeFromString(_field(number, wire, payload))  # kept as an unknown field, re-emitted below
    except DecodeError:
        assume(False)
    if known is None:
        pair.compare(message)
        return
    result = pair.decoder.insert(pair.engine, uuid.uuid4().hex, [message.SerializeToString()], possibly_seen=False)
    pair.truncate()
    assert result.sent == result.landed
    assert result.landed + sum(result.rejected.values()) <= 2


def test_a_known_field_of_the_wrong_wire_type_lands_the_request(pair: Pair) -> None:
    for where, number in ((0, 1), (5, 5), (1, 2)):  # resource_spans, span name, scope_spans as varints
        message = _with_event()
        _parts(message)[where].MergeFromString(_field(number, 0, b"\x05"))
        pair.compare(message)


def test_files_left_by_a_killed_staging_are_not_read_again(pair: Pair) -> None:
    """A process killed while staging a segment leaves its input files; staging it again after a restart
    (with another split into files) must read this staging's files only."""
    pair.now_us = time.time_ns() // 1000  # request() times are a day before now
    payloads = [build_request([request(i, run="s")]).SerializeToString() for i in range(3)]
    name = "segment-00000042"
    pair.decoder.work_dir.mkdir(parents=True, exist_ok=True)
    # what a staging split into six files left behind (the split is the engine_parse_files setting)
    (pair.decoder.work_dir / f"{name}.5.pb").write_bytes(delimited(payloads))
    result = pair.decoder.insert(pair.engine, name, payloads, possibly_seen=True)
    assert (result.sent, result.landed) == (3, 3)
    assert pair.engine.row_counts()["requests"] == 3
    assert not list(pair.decoder.work_dir.glob(f"{name}.*"))


def _with_wrong_columns(columns: list[str], run: str) -> ExportTraceServiceRequest:
    """One request row per entry of ``columns``, that column sent as an int where a string is expected."""
    message = build_request([request(i, run=run) for i in range(len(columns))])
    for span, column in zip(message.resource_spans[0].scope_spans[0].spans, columns, strict=True):
        key = PREFIX + column
        held = [kv for kv in span.attributes if kv.key == key]
        (held[0] if held else span.attributes.add(key=key)).value.int_value = 7
    return message


def test_every_reject_reason_is_named_with_the_rows_it_refused(pair: Pair) -> None:
    """Rows refused for several reasons: each reason is named once with its count. The decoder sampled three
    reasons a table, so the warning said nothing of the fourth kind of bad row."""
    pair.now_us = time.time_ns() // 1000  # request() times are a day before now
    wrong = ["host", "host", "host", "model", "hw_pool", "hw_pool", "traffic_class", "tenant", "shape"]
    message = _with_wrong_columns(wrong, "why")
    result = pair.decoder.insert(pair.engine, uuid.uuid4().hex, [message.SerializeToString()], possibly_seen=False)
    assert result.rejected == Counter({"invalid_row": len(wrong)})
    table = PREFIX + RequestEvent.TABLE.name
    assert result.messages == [
        f"{table}: host: expected an OTLP string (3 rows)",
        f"{table}: hw_pool: expected an OTLP string (2 rows)",
        f"{table}: model: expected an OTLP string (1 row)",
        f"{table}: traffic_class: expected an OTLP string (1 row)",
        f"{table}: tenant: expected an OTLP string (1 row)",
        f"{table}: shape: expected an OTLP string (1 row)",
    ]


def test_reasons_past_the_message_cap_are_counted(pair: Pair) -> None:
    """More kinds of bad rows than the warning lists: the last message says how many more and their rows."""
    pair.now_us = time.time_ns() // 1000
    strings = [n for n, f in RequestEvent.model_fields.items() if f.annotation is str and n != "request_id"]
    wrong = strings[: MAX_MESSAGES + 2]
    assert len(wrong) == MAX_MESSAGES + 2
    message = _with_wrong_columns([*wrong, wrong[-1]], "cap")
    result = pair.decoder.insert(pair.engine, uuid.uuid4().hex, [message.SerializeToString()], possibly_seen=False)
    assert result.rejected == Counter({"invalid_row": len(wrong) + 1})
    assert len(result.messages) == MAX_MESSAGES + 1
    assert result.messages[0].endswith(f"{wrong[-1]}: expected an OTLP string (2 rows)")  # the most rows first
    assert result.messages[-1] == "and 2 more reasons (2 rows)"


def _set(span: Any, key: str, value: object) -> None:
    """Set attribute ``key`` of ``span`` (replacing the one the builder wrote, if any)."""
    held = [kv for kv in span.attributes if kv.key == key]
    (held[0] if held else span.attributes.add(key=key)).value.CopyFrom(any_value(value))


MEANINGLESS: list[tuple[str, object]] = [
    ("latency_ms", -5.0),
    ("compile_ms", -1),
    ("outcome", "bogus"),
    ("guard_outcome", "sideways"),
    ("cache_status", "warm"),
    ("status", "fine"),
    ("fp_status", "maybe"),
    ("capture_blob", "../../etc/passwd"),
    ("input_digest", "zz"),
    ("fp_argmax_digest", "ab" * 65),
    ("model", "a\x00b"),
    ("host", "h\x00"),
]
"""Values of the right OTLP kind that no sender means (the fuzz walk stored each of them silently)."""


def test_values_outside_a_columns_meaning_are_rejected_like_the_reference(pair: Pair) -> None:
    pair.now_us = time.time_ns() // 1000  # request() times are a day before now
    message = build_request([request(i, run="meaning") for i in range(len(MEANINGLESS) + 1)])
    spans = message.resource_spans[0].scope_spans[0].spans
    for span, (column, value) in zip(spans, MEANINGLESS, strict=False):
        _set(span, PREFIX + column, value)
    good = spans[len(MEANINGLESS)]  # every checked column at a value senders do send: kept
    for column, value in [("latency_ms", 0.0), ("outcome", "recompile"), ("guard_outcome", "unknown"),
                          ("cache_status", "mixed"), ("status", "error"), ("fp_status", "unsampled"),
                          ("capture_blob", "ab" * 32), ("input_digest", "AB" * 32), ("model", "m-1")]:  # fmt: skip
        _set(good, PREFIX + column, value)
    result = pair.decoder.insert(pair.engine, uuid.uuid4().hex, [message.SerializeToString()], possibly_seen=False)
    assert result.rejected == Counter({"invalid_row": len(MEANINGLESS)})
    assert result.sent == result.landed == 1
    named = " ".join(result.messages)  # the warning names the first reasons and counts the rest
    assert sum(f"requests: {column}: " in named for column, _ in MEANINGLESS) == MAX_MESSAGES, result.messages
    assert result.messages[-1] == f"and {len(MEANINGLESS) - MAX_MESSAGES} more reasons (2 rows)"
    messages = reject_messages(RequestEvent)
    assert "latency_ms: negative (it must be 0 or more)" in messages
    assert "outcome: not one of 'hit', 'compile', 'recompile', 'fallback', 'eager', 'error'" in messages
    assert "capture_blob: not a hex digest (0-9 and a-f, at most 128 digits, or empty)" in messages
    ref = decode_request(message, now_us=pair.now_us)
    assert ref.rejected_rows == Counter({"invalid_row": len(MEANINGLESS)})
    pair.compare(message)  # the same rows and counts from both decoders


def test_event_rows_and_other_tables_check_values_too(pair: Pair) -> None:
    pair.now_us = time.time_ns() // 1000
    base = request(0, run="ev")
    compile_row = sent(CompileEvent, "typical").model_copy(update={"ts": base.ts, "entire_frame_s": -0.5})
    ok_row = sent(CompileEvent, "typical").model_copy(update={"ts": base.ts, "artifact_id": "0f" * 32})
    bad_digest = sent(CompileEvent, "typical").model_copy(update={"ts": base.ts, "artifact_id": "not-hex"})
    message = build_request([base], events={0: [compile_row, ok_row, bad_digest]})
    result = pair.decoder.insert(pair.engine, uuid.uuid4().hex, [message.SerializeToString()], possibly_seen=False)
    assert result.rejected == Counter({"invalid_row": 2}), result.messages
    assert any("entire_frame_s: negative" in m for m in result.messages), result.messages
    assert any("artifact_id: not a hex digest" in m for m in result.messages), result.messages
    pair.compare(message)


def test_attributes_with_no_text_form_and_past_the_cap_are_dropped_and_counted(pair: Pair) -> None:
    """A kvlist or nested array in ``attrs`` was stored as an empty string, and a row kept 200,000 attributes."""
    from inferensics.collector.service.otlp_sql import MAX_MAP_ENTRIES, TOO_MANY_ENTRIES, UNSUPPORTED_VALUE

    pair.now_us = time.time_ns() // 1000
    message = build_request([request(i, run="attrs") for i in range(3)])
    odd, many, bad = message.resource_spans[0].scope_spans[0].spans
    _set(odd, "user.list", ["a", "b"])  # one level of array: joined, as before
    for key in ("user.kv", "inferensics.attrs.kv"):
        value = odd.attributes.add(key=key).value
        value.kvlist_value.values.add(key="k").value.string_value = "v"
    deep = odd.attributes.add(key="user.deep").value
    deep.array_value.values.add().array_value.values.add().string_value = "x"
    for i in range(MAX_MAP_ENTRIES + 5):
        many.attributes.add(key=f"user.a{i:05d}").value.string_value = "v"
    bad.attributes.add(key="user.kv").value.kvlist_value.values.add(key="k").value.int_value = 1
    _set(bad, PREFIX + "outcome", "bogus")  # a rejected row's dropped values are not counted
    result = pair.decoder.insert(pair.engine, uuid.uuid4().hex, [message.SerializeToString()], possibly_seen=False)
    over = MAX_MAP_ENTRIES + 5 + 1 - MAX_MAP_ENTRIES  # request() sends one attrs entry of its own
    assert result.dropped == Counter({UNSUPPORTED_VALUE: 3, TOO_MANY_ENTRIES: over}), result.messages
    assert result.rejected == Counter({"invalid_row": 1})
    ref = decode_request(message, now_us=pair.now_us)
    assert ref.dropped == result.dropped
    rows = pair.engine.query_rows(f"SELECT attrs FROM {pair.engine.database}.requests ORDER BY request_id")
    stored = [dict(r[0]) for r in rows]
    assert any(a.get("user.list") == "a,b" and "user.kv" not in a and "user.deep" not in a for a in stored), stored
    assert len(stored) == 2  # the third row was rejected
    assert max(len(a) for a in stored) == MAX_MAP_ENTRIES
    pair.compare(message)
