"""The OTLP boundary of a real service on loopback, fed mutants of real exported bodies (a seeded mutator).

The bodies are what the OpenTelemetry SDK's OTLP/HTTP exporter sent to a stub on loopback (protobuf, plain and
gzip), and their OTLP/JSON twins (hex ids, as the specification encodes them). Each mutant is sent once, built from
a body of its own (no span is sent twice, so no span is dropped as already seen). Every answer must be 200, or a
refusal of the whole body (400, 413, 415) with one line saying what is wrong, counted in
``rejected_total{unit="request"}`` under its reason; never a 500, and the service's log holds no traceback. Of the
bodies taken, every row is kept or counted (rows written plus rows refused equal what the Python reference decoder
reads in the same bodies), and the good spans of a body whose other span was poisoned are stored.
"""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar, Final

import httpx
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValueList
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from inferensics.collector.service.decode import read_body
from inferensics.collector.service.otlp_body import JSON, PROTOBUF
from inferensics.schema import columns as col
from inferensics.schema.otlp import PREFIX
from tests.collector.service.harness import ADMIN, INGEST, RunningService
from tests.collector.service.otel import emit, request
from tests.collector.service.test_otlp_answers import otlp_refusal
from tests.loopback import serving
from tests.polling import poll

SEED: Final = 20261207
MUTANTS_PER_FAMILY: Final = 30
SPANS_PER_BODY: Final = 4
LIMIT: Final = 32 << 20
"""The service's default max_body_bytes (the reference decoder reads with the same limit)."""
REFUSALS: Final = {400: "malformed", 413: "too_large", 415: "unsupported_media"}


class _Capture(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver that keeps what the exporter sends."""

    bodies: ClassVar[list[tuple[bytes, str]]] = []

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        _Capture.bodies.append((raw, self.headers.get("Content-Encoding", "")))
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", PROTOBUF)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


def _finished_spans(n: int) -> list[ReadableSpan]:
    """``n`` request spans (every third with a recompile event) as the SDK finishes them."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "fuzz-host", "host.name": "host-a"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    emit(provider.get_tracer("inferensics.fuzz"), [request(i, run="fuzz") for i in range(n)], recompile_every=3)
    provider.shutdown()
    return list(memory.get_finished_spans())


def _exported_bodies(count: int) -> list[tuple[bytes, str]]:
    """``count`` bodies the real exporter sent (every other one gzip), :data:`SPANS_PER_BODY` spans each."""
    spans = _finished_spans(count * SPANS_PER_BODY)
    _Capture.bodies = []
    with serving(_Capture) as url:
        for i in range(count):
            exporter = OTLPSpanExporter(
                endpoint=f"{url}/v1/traces",
                compression=Compression.Gzip if i % 2 else Compression.NoCompression,
            )
            exporter.export(spans[i * SPANS_PER_BODY : (i + 1) * SPANS_PER_BODY])
            exporter.shutdown()  # type: ignore[no-untyped-call]
    assert len(_Capture.bodies) == count
    return list(_Capture.bodies)


def _plain(raw: bytes, encoding: str) -> bytes:
    return gzip.decompress(raw) if encoding == "gzip" else raw


def _otlp_json(body: bytes) -> dict[str, Any]:
    """The OTLP/JSON of a protobuf body: ids in hex, as the specification encodes them."""
    message = ExportTraceServiceRequest.FromString(body)
    tree: dict[str, Any] = json_format.MessageToDict(message)
    spans = [s for rs in tree["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    sent = [s for rs in message.resource_spans for ss in rs.scope_spans for s in ss.spans]
    for wire, span in zip(spans, sent, strict=True):
        wire["traceId"], wire["spanId"] = span.trace_id.hex(), span.span_id.hex()
    return tree


# --- the mutator: each family takes a body (plain protobuf bytes) and the seeded generator --------------------


@dataclass(frozen=True)
class Mutant:
    """A body to send: its bytes, headers, and the request ids of spans left intact that must be stored."""

    body: bytes
    content_type: str
    encoding: str = ""
    must_store: tuple[str, ...] = ()


def _protobuf_bytes(body: bytes, rng: random.Random) -> Mutant:
    data = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        how = rng.randrange(5)
        at = rng.randrange(len(data))
        if how == 0:
            data[at] ^= 1 << rng.randrange(8)
        elif how == 1:
            del data[at:]
            data = data or bytearray(b"\x0a")
        elif how == 2:
            data[at:at] = rng.randbytes(rng.randint(1, 12))
        elif how == 3:
            data[at : at + 10] = b"\xff" * 10  # a varint (a length, a tag) that never ends or is huge
        else:
            start = rng.randrange(len(data))
            data[at:at] = data[start : start + rng.randint(1, 64)]  # a copy of another stretch: tags out of place
    return Mutant(bytes(data), PROTOBUF)


def _gzip_bytes(body: bytes, rng: random.Random) -> Mutant:
    packed = bytearray(gzip.compress(body, mtime=0))
    how = rng.randrange(4)
    if how == 0:
        del packed[rng.randrange(1, len(packed)) :]
    elif how == 1:
        packed[rng.randrange(10, len(packed))] ^= 1 << rng.randrange(8)
    elif how == 2:
        packed += rng.randbytes(rng.randint(1, 30))  # garbage after the member
    else:
        packed[:2] = b"\x1f\x8c"  # not a gzip header
    return Mutant(bytes(packed), PROTOBUF, "gzip")


def _json_text(body: bytes, rng: random.Random) -> Mutant:
    text = json.dumps(_otlp_json(body))
    how = rng.randrange(6)
    if how == 0:
        out = text[: rng.randrange(len(text))].encode()
    elif how == 1:
        at = rng.randrange(len(text))
        out = (text[:at] + rng.choice('{}[]",:\\\n\x00') + text[at + 1 :]).encode()
    elif how == 2:
        raw = bytearray(text.encode())
        raw[rng.randrange(len(raw))] = rng.choice([0x80, 0xC3, 0xFF, 0xED])  # not UTF-8
        out = bytes(raw)
    elif how == 3:
        out = b'{"resourceSpans": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"  # deeper than the parser recurses
    elif how == 4:
        out = text.replace('"scopeSpans"', '"scopeSpans": [], "scopeSpans"', 1).encode()  # a field named twice
    else:
        out = rng.choice([b"[]", b'"abc"', b"null", b"", b"   ", b"{"])
    return Mutant(out, JSON)


_WRONG: Final[list[Callable[[random.Random], Any]]] = [
    lambda r: "line one\nline two\r\x00\u2028",
    lambda r: r.choice(["1\n2", "NaN", "Infinity", "-0", "1e999", "0x10"]),
    lambda r: r.choice([1.5, -1, 2**70, -(2**70), 0]),
    lambda r: None,
    lambda r: r.choice([True, False]),
    lambda r: [{"x": [1, "2"]}, None],
    lambda r: {"stringValue": 5, "intValue": "z"},
    lambda r: "zz" * r.randint(1, 40),
]


def _nodes(tree: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _nodes(v, (*path, k))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _nodes(v, (*path, i))


def _json_tree(body: bytes, rng: random.Random) -> Mutant:
    tree = _otlp_json(body)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice([p for p in _nodes(tree) if p])
        parent = tree
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = rng.choice(_WRONG)(rng)
    return Mutant(json.dumps(tree).encode(), JSON)


def _poison(value: AnyValue, rng: random.Random) -> None:
    """A value no column of its key takes (or a kind the engine cannot read), set in place."""
    how = rng.randrange(7)
    if how == 0:
        value.CopyFrom(AnyValue(int_value=rng.choice([-1, 2**63 - 1])))
    elif how == 1:
        value.CopyFrom(AnyValue(double_value=rng.choice([float("nan"), float("inf"), -1.0])))
    elif how == 2:
        value.CopyFrom(AnyValue(string_value="x" * rng.choice([0, 300, 70_000]) + "\x00"))
    elif how == 3:
        value.CopyFrom(AnyValue(kvlist_value=KeyValueList()))
    elif how == 4:
        value.CopyFrom(AnyValue(bytes_value=rng.randbytes(rng.randint(0, 8))))
    elif how == 5:
        value.CopyFrom(AnyValue(bool_value=True))
    else:
        value.Clear()  # an AnyValue with no value at all


def _rows(body: bytes, rng: random.Random, encode: str) -> Mutant:
    """One span of the body poisoned (a value, its name, or its time); the others left as exported."""
    message = ExportTraceServiceRequest.FromString(body)
    spans = [s for rs in message.resource_spans for ss in rs.scope_spans for s in ss.spans]
    bad = rng.randrange(len(spans))
    span = spans[bad]
    how = rng.randrange(6)
    if how <= 2:
        for kv in rng.sample(list(span.attributes), rng.randint(1, 3)):
            _poison(kv.value, rng)
    elif how == 3:
        span.name = rng.choice([PREFIX + "blobs", PREFIX + "blob_contents", PREFIX + "nope", PREFIX])
    elif how == 4:
        span.start_time_unix_nano = rng.choice([0, 2**64 - 1])
    else:
        dup = span.attributes.add()
        dup.CopyFrom(span.attributes[0])  # a key given twice: the first value is kept, the repeat counted
        _poison(dup.value, rng)
    good = tuple(_request_id(s) for i, s in enumerate(spans) if i != bad)
    data = message.SerializeToString()
    if encode == "json":
        tree = json_format.MessageToDict(message)
        return Mutant(json.dumps(tree).encode(), JSON, must_store=good)
    return Mutant(data, PROTOBUF, must_store=good)


def _request_id(span: Any) -> str:
    return str(next(kv.value.string_value for kv in span.attributes if kv.key == PREFIX + col.REQUEST_ID))


FAMILIES: Final[dict[str, Callable[[bytes, random.Random], Mutant]]] = {
    "protobuf_bytes": _protobuf_bytes,
    "gzip_bytes": _gzip_bytes,
    "json_text": _json_text,
    "json_tree": _json_tree,
    "rows_protobuf": lambda body, rng: _rows(body, rng, "protobuf"),
    "rows_json": lambda body, rng: _rows(body, rng, "json"),
}


def _request_refusals(svc: RunningService) -> Counter[str]:
    out: Counter[str] = Counter()
    for name, value in svc.client(ADMIN).metrics().items():
        if name.startswith("inferensics_collector_rejected_total{") and 'unit="request"' in name:
            out[name.split('reason="', 1)[1].split('"', 1)[0]] = int(value)
    return out


def _total(svc: RunningService, series: str, unit: str = "") -> int:
    """A series' value summed over its labels (those of ``unit`` only, when given)."""
    metrics = svc.client(ADMIN).metrics()
    return int(sum(v for k, v in metrics.items() if k.split("{")[0] == series and (not unit or f'unit="{unit}"' in k)))


def test_mutated_exported_bodies_are_kept_or_refused_in_one_counted_line(service: RunningService) -> None:
    rng = random.Random(SEED)
    bodies = iter(_exported_bodies(MUTANTS_PER_FAMILY * len(FAMILIES)))
    headers = {"Authorization": f"Bearer {INGEST}"}
    taken: list[Mutant] = []
    answers: Counter[tuple[str, int]] = Counter()
    with httpx.Client(timeout=60) as http:
        for family, mutate in FAMILIES.items():
            for _ in range(MUTANTS_PER_FAMILY):
                mutant = mutate(_plain(*next(bodies)), rng)
                before = _request_refusals(service)
                sent = {"Content-Type": mutant.content_type, **headers}
                if mutant.encoding:
                    sent["Content-Encoding"] = mutant.encoding
                r = http.post(f"{service.url}/v1/traces", content=mutant.body, headers=sent)
                answers[family, r.status_code] += 1
                after = _request_refusals(service)
                if r.status_code == 200:
                    assert after == before, (family, mutant.body[:200])
                    taken.append(mutant)
                    continue
                assert r.status_code in REFUSALS, (family, r.status_code, r.text)
                line = otlp_refusal(r)
                assert line.splitlines() == [line], (family, line)  # one line, not empty
                assert "Traceback" not in line, (family, line)
                assert after - before == Counter({REFUSALS[r.status_code]: 1}), (family, line)
    # each family was answered both ways where it can be (the mutator reaches the refusals and the kept bodies)
    assert {f for f, s in answers if s != 200} >= {"protobuf_bytes", "gzip_bytes", "json_text", "json_tree"}, answers
    assert {f for f, s in answers if s == 200} >= {"protobuf_bytes", "json_tree", "rows_protobuf", "rows_json"}, answers
    assert answers["rows_protobuf", 200] == answers["rows_json", 200] == MUTANTS_PER_FAMILY, answers

    # every row of the bodies taken is kept or counted, as the reference decoder reads them
    references = [read_body(m.body, m.content_type, m.encoding or None, LIMIT) for m in taken]
    rows = sum(d.row_count + sum(d.rejected_rows.values()) for d in references)

    def settled() -> int:
        return _total(service, "inferensics_collector_written_rows_total") + _total(
            service, "inferensics_collector_rejected_total", "row"
        )

    assert poll(settled, lambda n: n >= rows, timeout=120, interval=0.2) == rows
    duplicates = sum(d.duplicate_spans for d in references)
    assert _total(service, "inferensics_collector_duplicate_spans_total") == duplicates
    stored = set(service.client(ADMIN).sql("SELECT request_id FROM inferensics.requests")["request_id"].to_list())
    must = {rid for m in taken for rid in m.must_store}
    assert len(must) == 3 * 2 * MUTANTS_PER_FAMILY
    assert must <= stored, sorted(must - stored)[:10]
    assert "Traceback" not in service.log.read_text()


def test_a_refusal_quoting_what_the_sender_sent_stays_one_line(service: RunningService) -> None:
    """The JSON parser's message quotes a number it cannot read as sent: a newline in it made a two-line refusal."""
    tree = _otlp_json(_plain(*_exported_bodies(1)[0]))
    span = tree["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    latency = next(a for a in span["attributes"] if a["key"] == PREFIX + col.LATENCY_MS)
    latency["value"] = {"doubleValue": "1\n2\r\u2028"}
    with httpx.Client(timeout=60) as http:
        before = _request_refusals(service)
        r = http.post(
            f"{service.url}/v1/traces",
            content=json.dumps(tree).encode(),
            headers={"Content-Type": JSON, "Authorization": f"Bearer {INGEST}"},
        )
    assert r.status_code == 400
    line = otlp_refusal(r)
    assert line.splitlines() == [line]
    assert line.startswith("malformed OTLP JSON: ")
    assert "Couldn't parse float: 1\\n2\\r\\u2028 at " in line
    assert _request_refusals(service) - before == Counter({"malformed": 1})
