"""The audit of issue 18, point by point (3-8 and the smaller findings), in this process where a socket is not
needed; each test failed on the service as the audit found it. The fault-injection half is test_disk_faults.py.
"""

from __future__ import annotations

import math
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from inferensics.collector.service import ServiceState, build_state, create_app, load_config
from inferensics.collector.service.app import redact
from inferensics.collector.service.otlp_sql import MAX_TEXT_CHARS
from inferensics.collector.service.server import masked_dsn
from inferensics.collector.service.testing import build_request, encode_request
from inferensics.schema.dsn import DSN_ENV
from inferensics.schema.store import Store, StoreError
from tests.collector.service.harness import ADMIN, INGEST, READ, TOKENS, RunningService
from tests.collector.service.otel import request
from tests.collector.service.test_otlp_answers import otlp_refusal

PROTO = "application/x-protobuf"


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def sql(api: TestClient, text: str) -> tuple[int, str]:
    r = api.post("/api/v1/sql", content=text.encode(), headers=auth(ADMIN))
    return r.status_code, (r.json()["error"] if r.status_code != 200 else "")


def rows(state: ServiceState, query: str) -> list[tuple[object, ...]]:
    store = state.query_store()
    return [tuple(r) for r in store.query_rows(query.format(db=store.database))]


def settle(state: ServiceState) -> None:
    """Seal what was spooled and wait until the writer has inserted it."""
    assert state.writer.drain(60), state.writer.last_error


# --- point 3 and 4: the admin SQL endpoint writes nothing, kills nothing ------------------------------------


def test_into_outfile_is_refused_and_writes_no_file(api: TestClient, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    fresh = tmp_path / "created.txt"
    for text in (
        f"SELECT 1 INTO OUTFILE '{victim}' TRUNCATE",
        f"SELECT 1 INTO OUTFILE '{victim}' APPEND",
        f"SELECT * FROM system.one INTO OUTFILE '{fresh}'",
        f"SELECT 1 INTO/* a comment */OUTFILE '{fresh}'",
        f"SELECT 1 into\n-- line comment\noutfile '{fresh}' FORMAT CSV",
    ):
        status, error = sql(api, text)
        assert status == 400, text
        assert "INTO OUTFILE is refused" in error
    assert victim.read_text() == "keep me\n"
    assert not fresh.exists()
    # the words inside a string literal are data, not a clause
    assert sql(api, "SELECT 'INTO OUTFILE' AS words") == (200, "")


@pytest.mark.parametrize(
    "text",
    [
        "KILL QUERY WHERE 1",
        "kill mutation where 1",
        "SELECT 1; KILL QUERY WHERE 1",
        "SELECT 1;SELECT 2",
        "INSERT INTO FUNCTION file('x.csv', 'CSV') SELECT 1",
        "BACKUP TABLE system.one TO File('b.zip')",
        "SYSTEM FLUSH LOGS",
        "OPTIMIZE TABLE system.one",
        "TRUNCATE TABLE system.one",
        "ALTER TABLE system.one DELETE WHERE 1",
        "ATTACH TABLE x",
        "SET readonly = 0",
        "GRANT ALL ON *.* TO default",
        "/* SELECT */ KILL QUERY WHERE 1",
    ],
)
def test_sql_refuses_every_write_path(api: TestClient, text: str) -> None:
    status, error = sql(api, text)
    assert status == 400, text
    assert error.startswith("refused:"), error


@pytest.mark.parametrize(
    ("text", "blocked"),
    [
        ("SELECT query FROM system.processes", "processes"),
        ('SELECT count() FROM system."stack_trace"', "stack_trace"),
        ("SELECT count() FROM `system`.`processes`", "processes"),
        ("SELECT count() FROM merge('system', '^proc')", "merge"),
        ("SELECT query FROM system.query_log", "query_log"),
        ("SHOW PROCESSLIST", "processlist"),
    ],
)
def test_sql_blocks_other_sessions_queries_and_stacks(api: TestClient, text: str, blocked: str) -> None:
    status, error = sql(api, text)
    assert status == 400
    assert blocked in error


@pytest.mark.parametrize(
    "text",
    [
        "INSERT INTO {db}.requests (request_id) VALUES ('x')",
        "CREATE TABLE {db}.evil (a UInt8) ENGINE = Memory",
        "SET max_threads = 1",
        "SYSTEM FLUSH LOGS",
        "INSERT INTO FUNCTION file('x.csv', 'CSV') SELECT 1",
        "SELECT * FROM file('/etc/hostname', 'LineAsString')",
        "SELECT * FROM url('http://127.0.0.1:1/', 'LineAsString')",
        "SELECT * FROM remote('127.0.0.1', system.one)",
    ],
)
def test_the_engine_setting_refuses_what_it_covers_without_the_gate(app_state: ServiceState, text: str) -> None:
    """The admin session itself is ``readonly = 1``: these fail in the engine even past the statement gate."""
    client = app_state.sql_store().client
    assert client.query("SELECT getSetting('readonly')").result_rows == [(1,)]
    with pytest.raises(Exception, match=r"READONLY|readonly"):
        client.query(text.format(db=app_state.query_store().database))


def test_reads_still_work(api: TestClient) -> None:
    for text in ("SELECT 1", "WITH 2 AS x SELECT x", "(SELECT 1)", "SHOW TABLES", "EXPLAIN SELECT 1", "SELECT 1;"):
        assert sql(api, text) == (200, ""), text


# --- point 5: times the table cannot keep -------------------------------------------------------------------


def test_spans_outside_the_window_are_rejected_as_out_of_range_time(api: TestClient, app_state: ServiceState) -> None:
    now = datetime.now(UTC)
    good = request(0, run="in")
    message = build_request([good, *(request(i, run="out") for i in range(1, 6))])
    spans = message.resource_spans[0].scope_spans[0].spans
    for span, nanos in zip(
        spans[1:],
        (
            0,  # 1970
            int((now - timedelta(days=40)).timestamp()) * 10**9,  # past the 30-day TTL
            2**63 - 1,  # wraps to 1990 through toDateTime
            2**64 - 1,
            int((now + timedelta(days=3)).timestamp()) * 10**9,  # a host clock days ahead
        ),
        strict=True,
    ):
        span.start_time_unix_nano = nanos
    r = api.post("/v1/traces", content=message.SerializeToString(), headers={"Content-Type": PROTO, **auth(INGEST)})
    assert r.status_code == 200
    settle(app_state)
    assert rows(app_state, "SELECT request_id FROM {db}.requests") == [(good.request_id,)]
    metrics = app_state.metrics
    assert metrics.get("rejected", "out_of_range_time") == 5
    assert metrics.get("written_rows") == 1
    assert metrics.get("decoded_rows") == 6  # written, duplicate or rejected: the rejected ones too


# --- point 7: named query time ranges ------------------------------------------------------------------------


@pytest.fixture
def analytics_api(store_dsn: str, tmp_path: Path) -> Iterator[TestClient]:
    """The app with the analytics library's named queries (what ``inferensics serve`` hands the service)."""
    from inferensics.analytics.registry import NAMED_QUERIES

    config = load_config({"dsn": store_dsn, "spool_dir": str(tmp_path / "spool"), "tokens": TOKENS}, environ={})
    state = build_state(config, open_store=lambda: Store.open(store_dsn), named_queries=NAMED_QUERIES)
    try:
        with TestClient(create_app(state)) as client:
            yield client
    finally:
        state.close()
        store = Store.open(store_dsn)
        store.client.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")
        store.close()


@pytest.mark.parametrize("name", ["fleet_overview", "fleet_timeseries", "recompile_storms", "cache_health"])
def test_named_query_date_range_outside_the_column_type_is_400(analytics_api: TestClient, name: str) -> None:
    wide = {"start": "0001-01-01T00:00:00", "end": "9999-12-31T23:59:59"}
    r = analytics_api.post(f"/api/v1/query/{name}", json=wide, headers=auth(READ))
    assert r.status_code == 400, r.text
    assert "outside the times the store holds" in r.json()["error"]
    ok = {"start": "2026-01-01T00:00:00", "end": "2026-01-02T00:00:00"}
    assert analytics_api.post(f"/api/v1/query/{name}", json=ok, headers=auth(READ)).status_code == 200


# --- point 8: the DSN password in logs -----------------------------------------------------------------------


def test_masked_dsn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert masked_dsn("http://audit:SECRET@ch.example:8123/obs") == "http://audit:***@ch.example:8123/obs"
    assert "SECRET" not in masked_dsn("http://audit:SECRET@[bad")
    # No --dsn: the startup line names the store the service opens, not only "(default)".
    monkeypatch.setenv(DSN_ENV, f"chdb://{tmp_path}/store")
    assert masked_dsn("") == f"chdb://{tmp_path}/store (default)"
    monkeypatch.setenv(DSN_ENV, "http://audit:SECRET@ch.example:8123/obs")
    assert masked_dsn("") == "http://audit:***@ch.example:8123/obs (default)"


# --- smaller findings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"[]", b'"abc"', b"1", b"null", b"  [{}]"])
def test_otlp_json_that_is_not_an_object_is_400(api: TestClient, body: bytes) -> None:
    r = api.post("/v1/traces", content=body, headers={"Content-Type": "application/json", **auth(INGEST)})
    assert r.status_code == 400
    assert "JSON object" in otlp_refusal(r)  # a google.rpc.Status in JSON, as the request was


def test_openapi_lists_401_and_optional_bodies(api: TestClient) -> None:
    doc = api.get("/openapi.json").json()
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            if op.get("security") == []:
                continue  # public: /healthz, /readyz, /openapi.json
            assert "401" in op["responses"], (method, path)
    assert doc["paths"]["/v1/traces"]["post"]["requestBody"]["required"] is False
    assert doc["paths"]["/api/v1/blobs/{sha256}"]["put"]["requestBody"]["required"] is False
    empty = api.post("/v1/traces", content=b"", headers={"Content-Type": PROTO, **auth(INGEST)})
    assert empty.status_code == 200


def test_unauthenticated_readyz_shows_no_paths(api: TestClient, app_state: ServiceState, tmp_path: Path) -> None:
    app_state.writer._failed(f"cannot open store chdb://{tmp_path}/db: cannot create data directory at {tmp_path}/x")
    body = api.get("/readyz").json()
    assert body["ready"] is False
    assert str(tmp_path) not in body["last_error"]
    assert "cannot open store" in body["last_error"]
    assert redact("moved to /var/lib/x/quarantine/1.seg: Code: 243") == "moved to <redacted>: Code: 243"


def test_store_errors_count_a_store_that_cannot_be_reached(tmp_path: Path) -> None:
    def unreachable() -> Store:
        raise StoreError("cannot open store http://default@127.0.0.1:9/x: Connection refused")

    config = load_config({"spool_dir": str(tmp_path / "spool"), "tokens": TOKENS}, environ={})
    state = build_state(config, open_store=unreachable)
    try:
        assert state.metrics.get("store_errors") >= 1
    finally:
        state.close()


def test_blob_ids_that_are_not_digests(api: TestClient) -> None:
    r = api.get("/api/v1/blobs/" + "a" * 100, headers=auth(READ))
    assert r.status_code == 400
    assert "not a sha256 digest" in r.json()["error"]
    r = api.put("/api/v1/blobs/" + "z" * 64, content=b"x", headers=auth(INGEST))
    assert r.status_code == 400
    r = api.get("/api/v1/blobs/" + "a" * 9000, headers=auth(READ))
    assert r.status_code == 414


def test_a_one_mib_blob_id_is_answered_414_over_a_socket(service: RunningService) -> None:
    """The head is read whole (h11 closed the connection at 16 KiB, resetting it under the sender)."""
    head = f"GET /api/v1/blobs/{'a' * (1 << 20)} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {READ}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", service.port), timeout=30) as sock:
        sock.sendall(head.encode())
        answer = sock.recv(4096).decode(errors="replace")
    assert answer.startswith("HTTP/1.1 414"), answer[:200]


def test_rows_are_bounded_and_cuts_counted(api: TestClient, app_state: ServiceState) -> None:
    good = request(0, run="ok")
    nan = request(1, run="nan").model_copy(update={"latency_ms": math.nan})
    inf = request(2, run="inf").model_copy(update={"latency_ms": math.inf})
    neg = request(3, run="ninf").model_copy(update={"compile_ms": -math.inf})
    huge_id = request(4, run="id").model_copy(update={"request_id": "r" * (4 << 20)})
    empty_id = request(5, run="empty").model_copy(update={"request_id": ""})
    long_error = request(6, run="err").model_copy(update={"error": "e" * (30 << 20)})
    for sent in ([good, nan, inf, neg, huge_id, empty_id], [long_error]):  # two bodies: each under 32 MiB
        r = api.post("/v1/traces", content=encode_request(sent), headers={"Content-Type": PROTO, **auth(INGEST)})
        assert r.status_code == 200
    settle(app_state)
    stored = rows(app_state, "SELECT request_id, length(error) FROM {db}.requests ORDER BY request_id")
    assert stored == sorted([(good.request_id, 0), (long_error.request_id, MAX_TEXT_CHARS)])
    metrics = app_state.metrics
    assert metrics.get("rejected", "invalid_row") == 5
    assert metrics.get("dropped", "truncated_value") == 1
    assert metrics.get("written_rows") == 2


def test_the_reference_decoder_is_off_the_service_import_path() -> None:
    """decode.py is a test oracle: running the service does not import it (issue 19)."""
    code = (
        "import sys, inferensics.collector.service.server, inferensics.collector.service.__main__; "
        "sys.exit('inferensics.collector.service.decode' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
