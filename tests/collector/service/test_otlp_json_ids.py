"""OTLP/JSON sends trace and span ids as hex (the OTLP specification's JSON encoding), not as the base64 of
protobuf's generic JSON mapping: a hex trace id of 32 digits was read as 24 bytes of something else (walk 42), so
a sender that follows the specification (an OpenTelemetry Collector exporting JSON) had its ids changed."""

from __future__ import annotations

import json

import pytest
from google.protobuf import json_format

from inferensics.collector.service.otlp_body import JSON, BadRequestError, parse_request
from inferensics.collector.service.testing import build_request
from tests.collector.service.otel import request


def _as_json(tree: dict[str, object]) -> bytes:
    return json.dumps(tree).encode()


def test_hex_ids_are_read_as_the_ids_they_spell_and_base64_still_is() -> None:
    message = build_request([request(0, run="ids")])
    span = message.resource_spans[0].scope_spans[0].spans[0]
    span.parent_span_id = bytes(range(8, 16))
    link = span.links.add()
    link.trace_id, link.span_id = bytes(range(32, 48)), bytes(range(48, 56))
    tree = json_format.MessageToDict(message)
    as_base64 = parse_request(_as_json(tree), JSON)
    assert as_base64 == message
    wire = tree["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    wire["traceId"], wire["spanId"] = span.trace_id.hex(), span.span_id.hex()
    wire["parentSpanId"] = span.parent_span_id.hex()
    wire["links"][0]["traceId"], wire["links"][0]["spanId"] = link.trace_id.hex(), link.span_id.hex()
    as_hex = parse_request(_as_json(tree), JSON)
    assert as_hex == message
    parsed = as_hex.resource_spans[0].scope_spans[0].spans[0]
    assert (len(parsed.trace_id), len(parsed.span_id)) == (16, 8)


def test_a_field_given_twice_is_still_malformed() -> None:
    with pytest.raises(BadRequestError, match="given twice"):
        parse_request(b'{"resourceSpans": [], "resourceSpans": []}', JSON)
