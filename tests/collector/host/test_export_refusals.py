"""Exports the service refuses are counted by cause, logged once per cause with what to do, and never
silent; ``flush`` stays bounded with the service down; the SDK's own health record reaches the store.

The real collector service (its own process) answers the token cases; a closed port is the service down;
a loopback stub answering 503 stands in for a service shedding load (the real one needs a full spool)."""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import torch

from inferensics.collector.host import CaptureRules, ConfigError, SdkConfig, Tracker, instrument
from inferensics.schema import SdkHealthEvent
from tests.collector.service.harness import INGEST, READ, RunningService, free_port, new_service
from tests.loopback import serving

pytestmark = pytest.mark.slow


def _serve(tracker: Tracker, n: int = 3) -> None:
    for i in range(n):
        with tracker.request(f"r-{i}") as req:
            req.set_output(torch.randn(2, 5))


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    with new_service(tmp_path_factory.mktemp("svc")) as svc:
        yield svc


@pytest.mark.parametrize(("token", "status"), [(None, "401"), (READ, "403")], ids=["no-token", "read-token"])
def test_a_refused_token_is_counted_and_logged_once(
    service: RunningService, token: str | None, status: str, caplog: pytest.LogCaptureFixture
) -> None:
    tracker = instrument(service_url=service.url, token=token, host="h-auth", model="m")
    try:
        with caplog.at_level(logging.WARNING):
            _serve(tracker)
            tracker.flush()
            _serve(tracker)
            tracker.flush()
        stats = tracker.stats()
        assert stats["export_refused_auth"] >= 6
        assert stats["export_spans_sent"] == 0
        assert status in tracker.last_error
        # one line, ours, with what to do (OpenTelemetry's exporter logged one more per refused batch)
        lines = [(r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(lines) == 1
        assert lines[0][0] == "inferensics.collector.host"
        assert "INFERENSICS_TOKEN" in lines[0][1]
    finally:
        tracker.shutdown()


def test_service_down_is_counted_and_flush_is_bounded(caplog: pytest.LogCaptureFixture) -> None:
    tracker = instrument(service_url=f"http://127.0.0.1:{free_port()}", token=INGEST, host="h-down", model="m")
    try:
        with caplog.at_level(logging.ERROR, logger="inferensics.collector.host"):
            _serve(tracker)
            t0 = time.monotonic()
            tracker.flush()
            took = time.monotonic() - t0
        assert took < 4.0  # export_timeout_s 2 s, flush_timeout_s 3 s (it blocked 7 s)
        stats = tracker.stats()
        assert stats["export_spans_held"] >= 3  # held for the service to come back, not dropped
        assert stats["export_refused_down"] == stats["export_spans_unaccounted"] == 0
        assert any("cannot reach the collector service" in r.getMessage() for r in caplog.records)
        _serve(tracker)  # left queued: shutdown is bounded too
    finally:
        t0 = time.monotonic()
        tracker.shutdown()
        took = time.monotonic() - t0
    assert took < 8.0  # the last health record's flush and the exporter's own stop, 3 s each at most
    stats = tracker.stats()
    assert stats["export_spans_held"] == 0  # still held at exit: counted as refused
    assert stats["export_refused_down"] >= 3
    assert stats["export_refused_down"] + stats["export_spans_unaccounted"] >= 7  # 6 requests, 1 health record


def _answering(status: int, says_path: bool = False) -> type[BaseHTTPRequestHandler]:
    """A stub service answering every POST with ``status`` (its body naming the path asked, if ``says_path``)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            body = f"no such path {self.path}".encode() if says_path else b""
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


_Busy = _answering(503)


def test_back_pressure_is_its_own_cause() -> None:
    with serving(_Busy) as url:
        tracker = instrument(service_url=url, host="h-busy", model="m")
        try:
            _serve(tracker)
            tracker.flush()
            stats = tracker.stats()
            assert stats["export_refused_back_pressure"] + stats["export_spans_unaccounted"] >= 3
            assert stats["export_refused_auth"] == stats["export_refused_down"] == 0
        finally:
            tracker.shutdown()
    assert tracker.stats()["export_refused_back_pressure"] >= 3


def test_health_record_reaches_the_store(service: RunningService) -> None:
    tracker = instrument(service_url=service.url, token=INGEST, host="h-health", hw_pool="cpu", model="m")
    _serve(tracker, 4)
    tracker.shutdown()  # exports a last health record
    client = service.client()
    deadline = time.monotonic() + 30
    sql = f"SELECT requests_seen, spans_refused, queue_depth FROM inferensics.{SdkHealthEvent.TABLE.name} "
    frame = client.sql(sql + "WHERE host = 'h-health'")
    while time.monotonic() < deadline and frame.is_empty():
        time.sleep(0.2)
        frame = client.sql(sql + "WHERE host = 'h-health'")
    assert frame.height >= 1
    last = frame.sort("requests_seen").row(-1, named=True)
    assert last["requests_seen"] == 4
    assert last["spans_refused"] == 0


@contextmanager
def _silent_service() -> Iterator[str]:
    """A port that accepts connections (the kernel's backlog) and never answers: a hung service."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def test_a_service_that_never_answers_keeps_flush_and_shutdown_bounded(caplog: pytest.LogCaptureFixture) -> None:
    """Captured inputs are blobs: each upload used to wait its 10 s timeout on the flushing thread, one after
    another (42 s for a flush of 6 requests, 45 s to exit). Uploads now run on their own thread, and after one
    finds the service unreachable the next ones are refused untried for a while, each counted."""
    config = SdkConfig(capture=CaptureRules(enabled=True, rate=1.0), health_interval_s=0)
    with _silent_service() as url:
        tracker = instrument(service_url=url, token=INGEST, host="h-hung", model="m", config=config)
        try:
            with caplog.at_level(logging.ERROR, logger="inferensics.collector.host"):
                for i in range(6):
                    with tracker.request(f"r-{i}", inputs={"x": torch.full((4,), float(i))}) as req:
                        req.set_output(torch.randn(2, 5))
                t0 = time.monotonic()
                tracker.flush()
                took = time.monotonic() - t0
            assert took < 4.0  # flush_timeout_s is 3 s for spans and blobs together
        finally:
            t0 = time.monotonic()
            tracker.shutdown()
            took = time.monotonic() - t0
        assert took < 8.0
    stats = tracker.stats()
    assert stats["captures"] == 6
    # every blob is accounted for: refused (down: timed out, or untried within the back-off) or still in flight
    assert stats["blobs_sent"] == 0
    assert stats["blobs_refused_down"] >= 5
    assert any("cannot reach the collector service" in r.getMessage() for r in caplog.records)


def _serve_logging(url: str, caplog: pytest.LogCaptureFixture) -> tuple[Tracker, list[str]]:
    """Serve a few requests to ``url`` and flush; the tracker (shut down) and the SDK's logged lines."""
    tracker = instrument(service_url=url, host="h-log", model="m", config=SdkConfig(health_interval_s=0))
    try:
        with caplog.at_level(logging.ERROR, logger="inferensics.collector.host"):
            _serve(tracker)
            tracker.flush()
    finally:
        tracker.shutdown()
    return tracker, [r.getMessage() for r in caplog.records if r.name == "inferensics.collector.host"]


def test_a_404_says_to_give_the_base_url(caplog: pytest.LogCaptureFixture) -> None:
    with serving(_answering(404, says_path=True)) as url:
        tracker, lines = _serve_logging(url, caplog)
    assert len(lines) == 1
    assert "has no such endpoint" in lines[0]
    assert "without /v1/traces" in lines[0]
    assert "same inferensics version" not in lines[0]
    assert tracker.stats()["export_refused_rejected"] >= 3


def test_https_to_a_plain_http_service_says_so(caplog: pytest.LogCaptureFixture) -> None:
    with serving(_Busy) as url:
        _, lines = _serve_logging(url.replace("http://", "https://"), caplog)
    assert lines
    assert "TLS handshake" in lines[0]
    assert "http://" in lines[0]


def test_the_otlp_endpoint_given_as_service_url_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        instrument(service_url="http://127.0.0.1:4318/v1/traces", host="h", model="m")
    assert "without /v1/traces" in str(info.value)
    assert "\n" not in str(info.value)


def test_every_outage_is_logged_and_so_is_the_recovery(caplog: pytest.LogCaptureFixture) -> None:
    """The cause was logged once a process: a second outage, after the service came back, was silent."""
    port = free_port()
    tracker = instrument(
        service_url=f"http://127.0.0.1:{port}", token=INGEST, host="h-flap", model="m",
        config=SdkConfig(health_interval_s=0),
    )  # fmt: skip
    try:
        with caplog.at_level(logging.WARNING, logger="inferensics.collector.host"):
            _serve(tracker)
            tracker.flush()  # down
            httpd = ThreadingHTTPServer(("127.0.0.1", port), _answering(200))
            thread = threading.Thread(target=httpd.serve_forever, daemon=True)
            thread.start()
            try:
                _serve(tracker)
                tracker.flush()  # back
            finally:
                httpd.shutdown()
                httpd.server_close()
            _serve(tracker)
            tracker.flush()  # down again
    finally:
        tracker.shutdown()
    lines = [r.getMessage() for r in caplog.records if r.name == "inferensics.collector.host"]
    down = [i for i, line in enumerate(lines) if "cannot reach the collector service" in line]
    back = [i for i, line in enumerate(lines) if "accepts exports again" in line]
    assert len(down) == 2, lines
    assert len(back) == 1, lines
    assert down[0] < back[0] < down[1]
    # at least the first outage's 3 request spans (more where the process has other records to send), held
    # while the service was down and sent when it came back
    held = re.search(r"held meanwhile and sent now: (\d+) spans", lines[back[0]])
    assert held is not None, lines[back[0]]
    assert int(held.group(1)) >= 3
    assert tracker.stats()["export_spans_sent"] >= 6


def test_a_collector_restart_loses_no_request(tmp_path: Any) -> None:
    """A routine collector restart (a deploy) dropped every record exported while it was down: the walk lost 10 to
    12 requests and their captured inputs a restart, each counted `down`. The SDK now holds them (spans as encoded
    batches, blobs in their queue) and sends them, in order, once the service answers again."""
    config = SdkConfig(capture=CaptureRules(enabled=True, rate=1.0), health_interval_s=0)
    svc = new_service(tmp_path)
    with svc:
        tracker = instrument(service_url=svc.url, token=INGEST, host="h-restart", model="m", config=config)
        try:
            _serve(tracker, 2)
            tracker.flush()
            svc.stop()  # SIGTERM: the service's own way out, as a deploy stops it
            for i in range(2, 8):
                with tracker.request(f"r-{i}", inputs={"x": torch.full((4,), float(i))}) as req:
                    req.set_output(torch.randn(2, 5))
            tracker.flush()  # bounded: a post may still be finding the service gone when it returns
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and tracker.stats()["export_spans_held"] < 6:
                time.sleep(0.1)
            held = tracker.stats()
            assert held["export_spans_held"] >= 6
            assert held["export_refused_down"] == 0
            svc.start()  # the same port, store and spool
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and (
                tracker.stats()["export_spans_held"] or tracker.stats()["blobs_held"]
            ):
                tracker.flush()
        finally:
            tracker.shutdown()
        stats = tracker.stats()
        assert stats["export_spans_held"] == stats["blobs_held"] == 0
        assert stats["export_refused_down"] == stats["blobs_refused_down"] == 0
        client = svc.client()
        sql = "SELECT request_id, capture_blob FROM inferensics.requests WHERE host = 'h-restart' ORDER BY request_id"
        frame = client.sql(sql)
        while time.monotonic() < deadline + 30 and frame.height < 8:
            time.sleep(0.2)
            frame = client.sql(sql)
        assert frame["request_id"].to_list() == [f"r-{i}" for i in range(8)]
        blobs = [b for b in frame["capture_blob"].to_list() if b]
        assert len(blobs) == 6
        for digest in blobs:  # the captured inputs came through too
            assert client.get_blob(digest)


def test_a_refusal_of_the_real_service_reads_as_its_message(service: RunningService) -> None:
    # The service answers a protobuf request's refusal with a protobuf google.rpc.Status: the reason the SDK
    # keeps (last_error, its one log line) is that Status's message, not its raw bytes.
    from inferensics.collector.host.otlp_poster import OtlpPoster

    poster = OtlpPoster(f"{service.url}/v1/traces", headers={"authorization": f"Bearer {INGEST}"}, timeout_s=10)
    cause, reason = poster.post(b"\xff\xff not a protobuf message")
    assert cause == "rejected"
    assert reason.startswith("HTTP 400 Bad Request: ")
    said = reason.removeprefix("HTTP 400 Bad Request: ")
    assert said.isprintable(), reason
    assert len(said) > 10, reason
