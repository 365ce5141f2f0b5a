"""The real OTLPSpanExporter over a socket: one ``inferensics.requests`` span per request whose attributes
decode (with the shared contract) into a valid RequestEvent; output code arrives through the blob API."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import pytest
import torch
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from inferensics.collector.host import ConfigError, delivery, instrument
from inferensics.collector.host.otlp_exporter import OtlpExporter
from inferensics.schema import RequestEvent
from inferensics.schema.events import RecompileEvent, SdkHealthEvent
from inferensics.schema.otlp import attributes_to_record, event_to_attributes, span_name
from tests.loopback import serving
from tests.schema.samples import sample


class _Sink(BaseHTTPRequestHandler):
    spans: ClassVar[list[Any]] = []
    blobs: ClassVar[dict[str, tuple[bytes, str, str]]] = {}

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def do_POST(self) -> None:
        req = ExportTraceServiceRequest()
        req.ParseFromString(self._body())
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                _Sink.spans.extend(ss.spans)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def do_PUT(self) -> None:
        digest = self.path.split("/")[-1].split("?")[0]
        _Sink.blobs[digest] = (self._body(), self.path, self.headers.get("Authorization", ""))
        self.send_response(201)
        self.end_headers()


@pytest.fixture
def service() -> Iterator[str]:
    _Sink.spans.clear()
    _Sink.blobs.clear()
    with serving(_Sink) as url:
        yield url


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind)


def test_requests_travel_as_spans(service: str) -> None:
    tracker = instrument(service_url=service, token="s3cret", host="otlp-host", model="otlp-m")

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) + 0.25

    compiled = tracker.compile(fn)
    for i in range(3):
        with tracker.request(f"otlp-{i}", traffic_class="interactive", shape=(5,)) as req:
            req.set_output(compiled(torch.ones(5)))
    tracker.shutdown()

    names = [s.name for s in _Sink.spans]
    assert names.count(span_name(RequestEvent)) == 3  # one span per request
    assert "inferensics.compiles" in names
    rows = []
    for s in _Sink.spans:
        if s.name != span_name(RequestEvent):
            continue
        attrs = {kv.key: _value(kv.value) for kv in s.attributes}
        record = attributes_to_record(
            RequestEvent, attrs, time=datetime.fromtimestamp(s.start_time_unix_nano / 1e9, UTC)
        )
        rows.append(RequestEvent.model_validate(record))
    by_id = {r.request_id: r for r in rows}
    assert by_id["otlp-0"].outcome == "compile"
    assert by_id["otlp-1"].outcome == "hit"
    assert by_id["otlp-2"].host == "otlp-host"
    assert by_id["otlp-2"].traffic_class == "interactive"
    artifact = by_id["otlp-0"].graph_artifacts[0]
    data, path, auth = _Sink.blobs[artifact]
    assert hashlib.sha256(data).hexdigest() == artifact
    assert path.endswith(f"/api/v1/blobs/{artifact}?kind=output_code")
    assert auth == "Bearer s3cret"


def test_a_host_that_samples_its_own_traces_still_sends_every_record(
    service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's provider took its sampler from $OTEL_TRACES_SAMPLER: ``always_off`` dropped every record."""
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    tracker = instrument(service_url=service, host="sampled-host", model="m")
    for i in range(3):
        with tracker.request(f"sampled-{i}"):
            pass
    tracker.shutdown()
    assert [s.name for s in _Sink.spans].count(span_name(RequestEvent)) == 3
    assert tracker.stats()["export_spans_sent"] >= 3


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("notaurl", "expected http(s)://host:port of the collector service"),
        ("ftp://host:4318", "expected http(s)://host:port of the collector service"),
        ("http://", "expected http(s)://host:port of the collector service"),
        ("http://host:99999", "Port out of range"),
    ],
)
def test_a_service_url_no_export_could_reach_fails_at_start(
    url: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was accepted, and every request's span then failed to export, counted but never said why."""
    with pytest.raises(ConfigError) as info:
        instrument(service_url=url, host="h")
    assert str(info.value).startswith(f"service_url {url!r}: ")
    assert message in str(info.value)
    monkeypatch.setenv("INFERENSICS_SERVICE_URL", url)
    with pytest.raises(ConfigError, match=r"^\$INFERENSICS_SERVICE_URL "):
        instrument(host="h")


def test_a_request_keeps_every_sub_record_and_column(service: str) -> None:
    """Through a Tracer span the SDK's default limits cut a request to 128 span events and 128 attributes
    without a word (a long decode's kernel timings, a wide ``attrs`` map)."""
    exporter = OtlpExporter(service, host="wide-host")
    base = sample(RequestEvent, "typical")
    assert isinstance(base, RequestEvent)
    request = RequestEvent.model_validate({**base.model_dump(), "attrs": {f"k{i}": str(i) for i in range(150)}})
    children = [
        RecompileEvent.model_validate({**sample(RecompileEvent, "typical").model_dump(), "compile_id": f"0/{i}"})
        for i in range(200)
    ]
    exporter.export_request(request, children)
    assert exporter.wait_exported(10)
    exporter.shutdown()
    (span,) = [s for s in _Sink.spans if s.name == span_name(RequestEvent)]
    assert len(span.events) == 200
    assert len(span.attributes) == len(event_to_attributes(request, omit_defaults=True)) > 150
    attrs = {kv.key: _value(kv.value) for kv in span.attributes}
    record = attributes_to_record(RequestEvent, attrs, time=request.ts)
    assert RequestEvent.model_validate(record) == request.model_copy(update={"ts": record["ts"]})
    assert exporter.stats()["export_spans_sent"] == 1


def test_a_full_queue_drops_counts_and_says_so(service: str, caplog: pytest.LogCaptureFixture) -> None:
    exporter = OtlpExporter(service, host="h", max_queue_size=5, max_batch_size=100, schedule_delay_ms=600_000)
    record = sample(RequestEvent, "typical")
    assert isinstance(record, RequestEvent)
    with caplog.at_level(logging.ERROR, logger="inferensics.collector.host"):
        for _ in range(8):
            exporter.export_request(record, ())
    assert exporter.wait_exported(10)
    stats = exporter.stats()
    assert (stats["export_spans_sent"], stats["export_spans_dropped"], stats["export_spans_unaccounted"]) == (5, 3, 3)
    lines = [r.getMessage() for r in caplog.records if r.name == "inferensics.collector.host"]
    assert len(lines) == 1
    assert "queue is full" in lines[0]
    exporter.shutdown()
    assert len(_Sink.spans) == 5


def test_a_record_that_cannot_become_a_span_costs_only_itself(service: str) -> None:
    """Spans are made as the encoder reads the batch: a record that fails is left out, the rest of its batch is
    delivered. The one left out is counted as refused (rejected), never as delivered: not in the request rows the
    exporter reports delivered (the crash journal's count), and its watcher is told it was not."""
    exporter = OtlpExporter(service, host="h")
    delivered: list[int] = []
    exporter.on_requests_delivered = delivered.append
    settled: list[delivery.Outcome] = []
    good = sample(RequestEvent, "typical")
    broken = RequestEvent.model_construct(**{**good.model_dump(), "ts": None})  # no time: no span
    exporter.delivery_watch.watch(broken, settled.append)
    for record in (good, broken, good):
        exporter.export_request(record, ())  # type: ignore[arg-type]
    assert exporter.wait_exported(10)
    stats = exporter.stats()
    assert (stats["export_spans_sent"], stats["export_span_errors"], stats["export_spans_unaccounted"]) == (2, 1, 0)
    assert stats["export_refused_rejected"] == 1
    assert exporter.health.last_error.startswith("spans refused (rejected): span not built: AttributeError")
    assert delivered == [2]
    assert [(o.delivered, o.refused.split(":")[0]) for o in settled] == [(False, "span not built")]  # for good
    exporter.shutdown()
    assert len(_Sink.spans) == 2


def test_shutdown_alone_sends_what_is_queued(service: str) -> None:
    """The CLI records one row and shuts the exporter down without a flush."""
    exporter = OtlpExporter(service, host="cli-host")
    record = sample(RecompileEvent, "typical")
    exporter.export_records([record])
    exporter.shutdown()
    assert [s.name for s in _Sink.spans] == [span_name(RecompileEvent)]
    assert exporter.stats()["export_spans_sent"] == 1


def test_what_otlp_cannot_carry_costs_only_itself_and_is_counted(
    service: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An int outside int64 leaves its attribute out (as OpenTelemetry's encoder did, with a traceback per
    span): counted, said once. A time before 1970 leaves its record out (it failed the whole batch)."""
    exporter = OtlpExporter(service, host="h")
    good = sample(SdkHealthEvent, "typical")
    huge = SdkHealthEvent.model_construct(**{**good.model_dump(), "spans_sent": 2**64 - 1})  # a U64 column
    ancient = SdkHealthEvent.model_construct(**{**good.model_dump(), "ts": datetime(1960, 1, 1, tzinfo=UTC)})
    with caplog.at_level(logging.WARNING):
        exporter.export_records([huge, ancient, huge, good])
        assert exporter.wait_exported(10)
    stats = exporter.stats()
    assert (stats["export_spans_sent"], stats["export_span_errors"], stats["export_attributes_dropped"]) == (3, 1, 2)
    assert stats["export_refused_rejected"] == 1
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert "inferensics.spans_sent left out" in lines[0]
    assert lines[1].startswith("inferensics: a record could not be encoded as an OTLP span for ")
    assert "counted in stats() as export_refused_rejected and export_span_errors" in lines[1]
    exporter.shutdown()
    assert len(_Sink.spans) == 3
