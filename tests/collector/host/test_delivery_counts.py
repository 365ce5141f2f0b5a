"""The exporters report the request rows they delivered (``on_requests_delivered``), which the tracker counts in its
crash journal: a process killed before it exported everything then tells how many finished requests it lost. A row
counts once it reached its destination (inserted into the store, taken by the service), never when only buffered,
and only request rows count (a compile record or a health record is no request)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from inferensics.collector.host.otlp_exporter import OtlpExporter
from inferensics.collector.host.store_exporter import StoreExporter
from inferensics.schema.events import RequestEvent, SdkHealthEvent
from inferensics.schema.store import Store
from tests.collector.service.harness import free_port


def _request(rid: str) -> RequestEvent:
    return RequestEvent(request_id=rid, ts=datetime.now(UTC), host="h", model="m", hw_pool="p", traffic_class="t")


def _health() -> SdkHealthEvent:
    return SdkHealthEvent(ts=datetime.now(UTC), host="h")


class _Taking(BaseHTTPRequestHandler):
    """A service that takes every export."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def test_the_store_exporter_reports_request_rows_once_inserted(store: Store) -> None:
    delivered: list[int] = []
    exporter = StoreExporter(store, host="h", batch_rows=3)
    exporter.on_requests_delivered = delivered.append
    exporter.export_request(_request("r0"), [])
    exporter.export_records([_health(), _health(), _health()])  # a full batch of another table: no request
    exporter.export_request(_request("r1"), [])
    assert delivered == []  # buffered: a death now would lose them
    exporter.export_request(_request("r2"), [])  # the batch is full: inserted
    exporter.export_request(_request("r3"), [])
    exporter.flush()
    assert delivered == [3, 1]


def test_the_otlp_exporter_reports_request_spans_the_service_took_held_ones_when_sent() -> None:
    """While the service is down the batches are held, not delivered; sent once it answers, they count then."""
    port = free_port()
    delivered: list[int] = []
    exporter = OtlpExporter(f"http://127.0.0.1:{port}", host="h", flush_timeout_s=5.0, export_timeout_s=0.5)
    exporter.on_requests_delivered = delivered.append
    try:
        exporter.export_request(_request("r0"), [])
        exporter.export_records([_health()])
        exporter.export_request(_request("r1"), [_health()])  # a sub-record is a span event, not a request
        exporter.wait_exported(5.0)
        assert exporter.stats()["export_spans_held"] == 3
        assert delivered == []
        httpd = ThreadingHTTPServer(("127.0.0.1", port), _Taking)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        try:
            exporter.export_request(_request("r2"), [])
            exporter.flush()  # the held batch first, then the new one
        finally:
            httpd.shutdown()
            httpd.server_close()
    finally:
        exporter.shutdown()
    assert exporter.stats()["export_spans_sent"] == 4
    assert delivered == [2, 1]
