"""Fault tests: each checks the store afterwards for every acknowledged event, exactly once.

Store outage: the embedded engine cannot be stopped like a server, so the service runs with the test-only
fault control (INFERENSICS_FAULT_CONTROL=1) and ``POST /api/v1/_faults {"store_down": true}`` makes the
store writer's insert call fail before it reaches the engine. Everything around it runs as in production:
retries with backoff, the spool growing, the cap answering 429/503, readiness, and the replay when the
store comes back.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import httpx
import pytest

from inferensics.collector.client import ServiceClient
from inferensics.collector.service.testing import encode_request
from tests.collector.service.harness import ADMIN, INGEST, RunningService, new_service
from tests.collector.service.otel import request, tracer
from tests.collector.service.test_otlp_answers import otlp_refusal
from tests.polling import poll

pytestmark = pytest.mark.slow
PROTO = {"Content-Type": "application/x-protobuf"}


def post(http: httpx.Client, url: str, body: bytes, token: str = INGEST) -> httpx.Response:
    """One export request."""
    return http.post(f"{url}/v1/traces", content=body, headers={**PROTO, "Authorization": f"Bearer {token}"})


def batch(run: str, start: int, n: int) -> tuple[list[str], bytes]:
    """``n`` request records as one encoded export request, with their ids."""
    events = [request(i, run=run) for i in range(start, start + n)]
    return [e.request_id for e in events], encode_request(events)


def stored_ids(client: ServiceClient) -> Counter[str]:
    """How often each request id is in the store."""
    frame = client.sql("SELECT request_id FROM inferensics.requests")
    return Counter(frame["request_id"].to_list())


def wait_drained(client: ServiceClient, timeout: float = 120) -> None:
    """Wait until the spool is empty and the store is up."""
    status = poll(client.status, lambda s: s["spool"]["files"] == 0 and s["store"]["ok"], timeout=timeout, interval=0.1)
    assert status["spool"]["files"] == 0, f"spool not drained: {status['spool']}"
    assert status["store"]["ok"], status["store"]


def set_store_down(url: str, down: bool) -> None:
    """Flip the test-only fault control."""
    r = httpx.post(f"{url}/api/v1/_faults", json={"store_down": down}, headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 200, r.text


def test_store_down_then_back_every_acknowledged_event_once(tmp_path: Path) -> None:
    svc = new_service(tmp_path, fault_control="1").start()
    try:
        client = svc.client()
        set_store_down(svc.url, True)
        acked: list[str] = []
        with httpx.Client(timeout=30) as http:
            for k in range(20):
                ids, body = batch("down", k * 50, 50)
                r = post(http, svc.url, body)
                assert r.status_code == 200, r.text
                acked += ids
        # wait for failed insert attempts while the store is "down"
        poll(client.metrics, lambda m: m["inferensics_collector_store_errors_total"] >= 2, timeout=60, interval=0.1)
        assert httpx.get(f"{svc.url}/readyz").status_code == 503
        status = client.status()
        assert status["store"]["ok"] is False
        assert "fault injected" in status["store"]["last_error"]
        assert status["spool"]["bytes"] > 0
        assert stored_ids(client) == Counter()
        set_store_down(svc.url, False)
        wait_drained(client)
        assert stored_ids(client) == Counter(acked)
        metrics = client.metrics()
        assert metrics["inferensics_collector_store_errors_total"] >= 1
        assert metrics["inferensics_collector_written_rows_total"] == len(acked)
        assert metrics["inferensics_collector_deduplicated_rows_total"] == 0
    finally:
        svc.stop()
    # a SIGTERM is said in the log, the drain and the end (it said nothing)
    stopping = svc.log.read_text()
    assert "inferensics collector stopping" in stopping
    assert stopping.rstrip().endswith("inferensics collector stopped")


def test_sigkill_mid_stream_and_restart_every_acknowledged_event_once(tmp_path: Path) -> None:
    svc = new_service(tmp_path).start()
    acked: list[str] = []
    sent: list[str] = []
    stop = threading.Event()

    def sender(run: str) -> None:
        k = 0
        with httpx.Client(timeout=10) as http:
            while not stop.is_set():
                ids, body = batch(run, k * 100, 100)
                k += 1
                sent.extend(ids)
                try:
                    r = post(http, svc.url, body)
                except httpx.HTTPError:
                    continue  # not acknowledged; the service is down
                if r.status_code == 200:
                    acked.extend(ids)

    threads = [threading.Thread(target=sender, args=(f"kill{n}",)) for n in range(2)]
    try:
        for t in threads:
            t.start()
        poll(lambda: len(acked), lambda n: n >= 3000, timeout=120)
        svc.kill()  # mid-stream: both senders have requests in flight
        stop.set()
        for t in threads:
            t.join(30)
        assert len(acked) >= 3000
        svc.start()
        client = svc.client()
        wait_drained(client)
        stored = stored_ids(client)
        assert all(n == 1 for n in stored.values()), [i for i, n in stored.items() if n > 1][:5]
        assert set(acked) <= set(stored)  # every acknowledged event is there
        assert set(stored) <= set(sent)  # plus at most requests fsynced but unanswered when killed
    finally:
        stop.set()
        svc.stop()


def test_spool_at_cap_answers_retry_after_and_loses_nothing_acknowledged(tmp_path: Path) -> None:
    svc = new_service(tmp_path, fault_control="1", spool_max_bytes="400000", retry_after_s="3").start()
    try:
        client = svc.client()
        set_store_down(svc.url, True)
        acked: list[str] = []
        refused: list[httpx.Response] = []
        refused_ids: list[str] = []
        with httpx.Client(timeout=30) as http:
            # the raw OTLP spooled now fills the cap within a second: let the writer learn the store is down
            ids, body = batch("cap", 0, 1)
            assert post(http, svc.url, body).status_code == 200
            acked += ids
            poll(client.status, lambda s: not s["store"]["ok"], timeout=60)
            for k in range(1, 200):
                ids, body = batch("cap", k * 50, 50)
                r = post(http, svc.url, body)
                if r.status_code == 200:
                    acked += ids
                else:
                    refused.append(r)
                    refused_ids += ids
                if len(refused) >= 3:
                    break
        assert acked, "nothing was accepted before the cap"
        assert len(refused) == 3
        for r in refused:
            assert r.status_code == 503  # store down: 503 (a healthy but lagging store gets 429)
            assert r.headers["Retry-After"] == "3"
            assert "cap" in otlp_refusal(r)
        assert client.status()["spool"]["bytes"] <= 400000
        set_store_down(svc.url, False)
        wait_drained(client)
        assert stored_ids(client) == Counter(acked)
        assert not set(refused_ids) & set(stored_ids(client))
        assert client.metrics()['inferensics_collector_rejected_total{reason="spool_full",unit="request"}'] == 3
        with httpx.Client(timeout=30) as http:  # room again
            assert post(http, svc.url, batch("cap-after", 0, 10)[1]).status_code == 200
    finally:
        svc.stop()


def test_wrong_token_is_401_counted_and_writes_nothing(service: RunningService) -> None:
    with tracer(service.url, "not-a-token", timeout=5) as t:
        from tests.collector.service.otel import emit

        emit(t, [request(i, run="bad") for i in range(10)])
    with httpx.Client(timeout=10) as http:
        r = post(http, service.url, batch("bad2", 0, 5)[1], token="wrong")
        assert r.status_code == 401
        assert r.headers["WWW-Authenticate"] == "Bearer"
        r = http.post(f"{service.url}/v1/traces", content=batch("bad3", 0, 5)[1], headers=PROTO)
        assert r.status_code == 401
        r = post(http, service.url, batch("bad4", 0, 5)[1], token=ADMIN.replace("admin", "read"))
        assert r.status_code == 403  # a read token cannot ingest
    client = service.client()
    # Refusals are answered before anything is spooled: nothing was received, so nothing can arrive later.
    assert client.metrics()["inferensics_collector_received_spans_total"] == 0
    assert stored_ids(client) == Counter()
    assert client.status()["spool"]["bytes"] == 0
    # and the service's log says so: once per client, path and reason (it said nothing), never the token
    logged = [line for line in service.log.read_text().splitlines() if "refused /v1/traces from 127.0.0.1" in line]
    assert any("HTTP 401, unknown bearer token" in line for line in logged), logged
    assert any("HTTP 401, missing bearer token" in line for line in logged), logged
    assert any("HTTP 403, token lacks the 'ingest' role" in line for line in logged), logged
    assert len([line for line in logged if "unknown bearer token" in line]) == 1  # not once per refused request
    assert not any("wrong" in line or "not-a-token" in line for line in logged)
    metrics = client.metrics()
    assert metrics["inferensics_collector_unauthorized_total"] >= 4  # the exporter's request(s) + 3 here
    assert metrics['inferensics_collector_rejected_total{reason="unauthorized",unit="request"}'] >= 3
    assert metrics["inferensics_collector_received_spans_total"] == 0
    bad = ServiceClient(service.url, token="wrong")
    try:
        with pytest.raises(Exception, match="refused the token"):
            bad.status()
    finally:
        bad.close()


def test_server_dsn_with_nothing_listening_spools_and_says_so(tmp_path: Path) -> None:
    """A ClickHouse server DSN whose port has nothing listening: the service starts, is alive but not
    ready, acknowledges into the spool, and reports why the store is unavailable. (No real server exists
    on this machine to bring up afterwards; the recovery half is covered by the fault-control test.)"""
    from tests.collector.service.harness import free_port

    svc = new_service(tmp_path)
    svc.dsn_override = f"http://default@127.0.0.1:{free_port()}/inferensics"
    svc.start(ready="/healthz")
    try:
        assert httpx.get(f"{svc.url}/readyz").status_code == 503
        with httpx.Client(timeout=30) as http:
            assert post(http, svc.url, batch("nodb", 0, 30)[1]).status_code == 200
        status = svc.client().status()
        assert status["store"]["ok"] is False
        assert "cannot open store" in status["store"]["last_error"]
        assert status["spool"]["bytes"] > 0
        assert "error" in status["store"]
    finally:
        svc.stop()
