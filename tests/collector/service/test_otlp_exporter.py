"""End to end over loopback: the real OTLPSpanExporter → a service process → the embedded store.

These tests send plain OpenTelemetry spans built by following schema/otlp.py (tests/collector/service/otel.py),
as any OpenTelemetry SDK would; the host SDK's path from a compiled model is test_host_sdk_e2e.py.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pytest

from inferensics.collector.client import ServiceClient, ServiceError
from inferensics.schema.events import RequestEvent
from tests.collector.service.harness import INGEST, RunningService
from tests.collector.service.otel import BASE, emit, request, tracer
from tests.polling import poll

pytestmark = pytest.mark.slow


def wait_rows(client: ServiceClient, sql: str, expected: int, timeout: float = 60) -> int:
    """Poll an admin SQL count until it reaches ``expected`` (or time out) and return the last value."""
    return poll(lambda: int(client.sql(sql)[0, 0]), lambda n: n >= expected, timeout=timeout, interval=0.1)


def wait_spool_empty(client: ServiceClient, timeout: float = 60) -> None:
    """Until every acknowledged span is decoded and in the store (the spool holds no segment)."""
    spool = poll(lambda: client.status()["spool"], lambda s: s["files"] == 0, timeout=timeout, interval=0.1)
    assert spool["files"] == 0, spool


@pytest.mark.parametrize("gzip", [False, True])
def test_exporter_spans_land_once_with_inherited_dimensions(service: RunningService, gzip: bool) -> None:
    events = [request(i, run=f"gz{gzip}") for i in range(500)]
    with tracer(service.url, INGEST, gzip=gzip) as t:
        emit(t, events, recompile_every=10)
    client = service.client()
    assert wait_rows(client, "SELECT count() FROM inferensics.requests", 500) == 500
    assert wait_rows(client, "SELECT count() FROM inferensics.recompiles", 50) == 50
    wait_spool_empty(client)  # all acknowledged spans are written: a late duplicate would be in the store now
    got = client.sql(
        "SELECT request_id, model, hw_pool, traffic_class, latency_ms, graph_us, attrs, ts "
        "FROM inferensics.requests ORDER BY request_id"
    )
    assert got.height == 500
    first = events[0]
    row = got.row(0, named=True)
    assert row["request_id"] == first.request_id
    assert row["traffic_class"] == first.traffic_class
    assert row["graph_us"] == list(first.graph_us)
    assert dict(row["attrs"]) == {"note": "n0"}
    assert got["request_id"].n_unique() == 500
    rec = client.sql("SELECT request_id, host, model, hw_pool, reason FROM inferensics.recompiles ORDER BY request_id")
    assert rec["request_id"].to_list() == [e.request_id for e in events[::10]]
    assert set(rec["host"]) == {"host-a"}
    assert set(rec["model"]) == {"llama"}
    assert set(rec["hw_pool"]) == {"h200-a"}
    metrics = client.metrics()
    assert metrics["inferensics_collector_written_rows_total"] == 550
    assert metrics["inferensics_collector_received_spans_total"] == 500


def test_status_reports_store_and_spool(service: RunningService) -> None:
    with tracer(service.url, INGEST) as t:
        emit(t, [request(i, run="st") for i in range(20)])
    client = service.client()
    wait_rows(client, "SELECT count() FROM inferensics.requests", 20)
    status = client.status()
    assert status["store"]["dsn"] == service.dsn
    assert status["store"]["schema_version"] >= 1
    assert status["store"]["row_counts"]["requests"] == 20
    assert status["spool"]["dir"] == str(service.spool_dir)
    assert {"bytes", "files", "max_bytes"} <= set(status["spool"])
    assert status["uptime_s"] > 0
    assert client.health()["ready"] is True
    assert isinstance(client.sql("SELECT 1 AS one"), pl.DataFrame)
    # the analytics library's real named queries, through the service
    assert {"fleet_overview", "request_detail"} <= set(client.queries())
    detail = client.query("request_detail", request_id="st-000003")
    assert detail.height >= 1
    overview = client.query("fleet_overview", start=BASE - timedelta(hours=1), end=BASE + timedelta(hours=1))
    assert overview.height >= 1
    with pytest.raises(ServiceError, match="400") as bad:
        client.query("fleet_overview", start=BASE, end=BASE - timedelta(hours=1))
    assert bad.value.status == 400
    with pytest.raises(ServiceError) as unknown:
        client.query("no_such_query")
    assert unknown.value.status == 404


def test_request_model_unchanged_by_the_trip(service: RunningService) -> None:
    sent = [request(i, run="rt") for i in range(5)]
    with tracer(service.url, INGEST) as t:
        emit(t, sent)
    client = service.client()
    wait_rows(client, "SELECT count() FROM inferensics.requests", 5)
    names = ", ".join(RequestEvent.model_fields)
    back = client.sql(f"SELECT {names} FROM inferensics.requests ORDER BY request_id")
    rows = [RequestEvent.model_validate({**r, "attrs": dict(r["attrs"])}) for r in back.iter_rows(named=True)]
    assert rows == sent
