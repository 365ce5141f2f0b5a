"""Attribute keys a span, span event or resource repeats (OTLP forbids it): both decoders keep the first value and
count the repeats of a row's own attributes as ``dropped{reason="duplicate_key"}``.

What it got wrong: the engine kept the first value of a column's key and the Python reference the last, and a
repeated key bound for ``attrs`` was stored twice by the engine (a map with the key twice); nothing was counted.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from starlette.testclient import TestClient

from inferensics.collector.service import ServiceState
from inferensics.collector.service.decode import decode_request
from inferensics.collector.service.testing import any_value, build_request
from inferensics.schema.events import RecompileEvent
from inferensics.schema.otlp import PREFIX
from tests.collector.service.harness import ADMIN, INGEST
from tests.collector.service.otel import request
from tests.collector.service.test_decode_fuzz import keys, names, values
from tests.collector.service.test_engine_decoder_fuzz import DIFF, Pair
from tests.polling import poll

DUPLICATE_KEY = "duplicate_key"


def _add(attributes: Any, key: str, value: object) -> None:
    attributes.add(key=key).value.CopyFrom(any_value(value))


def repeated() -> ExportTraceServiceRequest:
    """A request row repeating a column's key, an unknown key and an ``attrs`` entry; its recompile event repeating
    its reason; a resource repeating ``host.name``: five repeats in the rows' own attributes."""
    base = request(0, run="dup")
    child = RecompileEvent(ts=base.ts, host="", reason="first reason", code_location="m.py:1")
    message = build_request([base], events={0: [child]}, resource={"host.name": "first-host"})
    _add(message.resource_spans[0].resource.attributes, "host.name", "second-host")
    span = message.resource_spans[0].scope_spans[0].spans[0]
    _add(span.attributes, PREFIX + "model", "second-model")  # request() set model "llama" before
    _add(span.attributes, PREFIX + "model", "third-model")
    _add(span.attributes, "user.k", "first")
    _add(span.attributes, "user.k", "second")
    _add(span.attributes, PREFIX + "attrs.e", "first")
    _add(span.attributes, PREFIX + "attrs.e", "second")
    _add(span.events[0].attributes, PREFIX + "reason", "second reason")
    return message


def test_both_decoders_keep_the_first_value_and_count_the_repeats(pair: Pair) -> None:
    pair.now_us = time.time_ns() // 1000
    message = repeated()
    result = pair.decoder.insert(pair.engine, "dup", [message.SerializeToString()], possibly_seen=False)
    assert result.dropped == Counter({DUPLICATE_KEY: 5}), result.messages
    assert any("duplicate keys" in m for m in result.messages), result.messages
    db = pair.engine.database
    model, attrs, keys_stored = pair.engine.query_rows(
        f"SELECT model, attrs, length(mapKeys(attrs)) - length(arrayDistinct(mapKeys(attrs))) FROM {db}.requests"
    )[0]
    assert (model, dict(attrs)["user.k"], dict(attrs)["e"]) == ("llama", "first", "first")
    assert keys_stored == 0  # no key stored twice
    assert pair.engine.query_rows(f"SELECT reason FROM {db}.recompiles") == [("first reason",)]
    for fast in (True, False):
        ref = decode_request(message, fast=fast, now_us=pair.now_us)
        assert ref.dropped == result.dropped, fast
        assert ref.rejected_rows == result.rejected
    pair.compare(message)  # the same rows from both


def test_a_resource_repeating_host_gives_rows_its_first(pair: Pair) -> None:
    pair.now_us = time.time_ns() // 1000
    row = request(0, run="host").model_copy(update={"host": ""})  # the resource's host.name fills it in
    message = build_request([row], resource={"host.name": "first-host"})
    _add(message.resource_spans[0].resource.attributes, "host.name", "second-host")
    pair.decoder.insert(pair.engine, "host", [message.SerializeToString()], possibly_seen=False)
    assert pair.engine.query_rows(f"SELECT host FROM {pair.engine.database}.requests") == [("first-host",)]
    pair.compare(message)


pairs = st.lists(st.tuples(keys, values), max_size=8)


@st.composite
def requests_with_repeats(draw: st.DrawFn) -> ExportTraceServiceRequest:
    """Spans and events whose attributes are drawn as lists of pairs: keys repeat."""
    message = ExportTraceServiceRequest()
    rs = message.resource_spans.add()
    for k, v in draw(st.lists(st.tuples(st.sampled_from(["host.name", "x"]), values), max_size=3)):
        _add(rs.resource.attributes, k, v)
    scope = rs.scope_spans.add()
    for i in range(draw(st.integers(1, 3))):
        span = scope.spans.add()
        span.name = draw(names)
        span.span_id = bytes([i + 1]) * 8
        span.start_time_unix_nano = 1_700_000_000_000_000_000 + i
        for k, v in draw(pairs):
            _add(span.attributes, k, v)
        for k, v in draw(st.lists(st.tuples(keys, st.just("twice")), max_size=3)):
            _add(span.attributes, k, v)  # one more value of a key drawn before, or a new one
            _add(span.attributes, k, v + "!")
        for _ in range(draw(st.integers(0, 2))):
            ev = span.events.add()
            ev.name = draw(names)
            ev.time_unix_nano = 1_700_000_000_000_000_000
            for k, v in draw(pairs):
                _add(ev.attributes, k, v)
    return message


@DIFF
@given(message=requests_with_repeats())
def test_engine_and_reference_agree_on_repeated_keys(pair: Pair, message: ExportTraceServiceRequest) -> None:
    pair.truncate()
    result = pair.decoder.insert(pair.engine, uuid.uuid4().hex, [message.SerializeToString()], possibly_seen=False)
    ref = decode_request(message, now_us=pair.now_us)
    assert result.dropped == ref.dropped, (result.messages, ref.errors)
    pair.compare(message)


def test_repeats_are_counted_in_metrics(app_state: ServiceState, api: TestClient) -> None:
    message = repeated()
    headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {INGEST}"}
    assert api.post("/v1/traces", content=message.SerializeToString(), headers=headers).status_code == 200

    def dropped() -> str:
        text = api.get("/metrics", headers={"Authorization": f"Bearer {ADMIN}"}).text
        lines = [line for line in text.splitlines() if line.startswith("inferensics_collector_dropped_total{")]
        return "\n".join(line for line in lines if f'reason="{DUPLICATE_KEY}"' in line)

    assert poll(dropped, bool, timeout=30) == f'inferensics_collector_dropped_total{{reason="{DUPLICATE_KEY}"}} 5'
    assert app_state.metrics.by_label("dropped") == {DUPLICATE_KEY: 5}
