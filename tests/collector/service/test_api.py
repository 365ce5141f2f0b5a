"""The HTTP API in this process (Starlette's test client): queries, admin SQL, blobs, bad input, auth."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from starlette.testclient import TestClient

from inferensics.collector.service import ServiceState, build_state, create_app, load_config
from inferensics.collector.service.engine_decoder import STAGES
from inferensics.collector.service.testing import any_value, build_request, encode_request
from inferensics.schema.migrations import LATEST_VERSION
from inferensics.schema.store import Store, StoreError
from tests.collector.service.harness import ADMIN, INGEST, READ, TOKENS
from tests.collector.service.named import TEST_QUERIES
from tests.collector.service.otel import request
from tests.collector.service.test_otlp_answers import otlp_refusal
from tests.polling import poll

PROTO = "application/x-protobuf"


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def arrow(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(io.BytesIO(data)).read_all()


def ingest(api: TestClient, body: bytes, **headers: str) -> tuple[int, bytes]:
    r = api.post("/v1/traces", content=body, headers={"Content-Type": PROTO, **auth(INGEST), **headers})
    return r.status_code, r.content


def wait_count(state: ServiceState, n: int, timeout: float = 20) -> int:
    def count() -> int:
        return int(state.query_store().query_rows(f"SELECT count() FROM {state.query_store().database}.requests")[0][0])

    return poll(count, lambda got: got >= n, timeout=timeout)


def test_named_query_arrow_and_errors(api: TestClient, app_state: ServiceState) -> None:
    status, _ = ingest(api, encode_request([request(i, model="m1") for i in range(7)]))
    assert status == 200
    assert wait_count(app_state, 7) == 7
    r = api.post("/api/v1/query/request_count", json={"model": "m1"}, headers=auth(READ))
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/vnd.apache.arrow.stream"
    assert arrow(r.content).to_pylist() == [{"model": "m1", "n": 7}]
    r = api.post("/api/v1/query/request_count", json={"model": "m1", "limit": "many"}, headers=auth(READ))
    assert r.status_code == 400
    assert "limit" in r.json()["error"]
    r = api.post("/api/v1/query/request_count", json={"modle": "m1"}, headers=auth(READ))
    assert r.status_code == 400
    assert "model" in r.json()["error"]
    r = api.post("/api/v1/query/request_count", json={"model": "no-such-model"}, headers=auth(READ))
    assert r.status_code == 400
    assert "unknown model" in r.json()["error"]
    r = api.post("/api/v1/query/request_count", content=b"[1,2", headers=auth(READ))
    assert r.status_code == 400
    r = api.post("/api/v1/query/nope", json={}, headers=auth(READ))
    assert r.status_code == 404
    assert "request_count" in r.json()["error"]
    listing = api.get("/api/v1/queries", headers=auth(READ)).json()["queries"]
    assert listing["request_count"]["parameters"]["required"] == ["model"]


@pytest.mark.parametrize(
    ("body", "byte"),
    [(b"\xff\xfe{\x00}\x00", "0xff at offset 0"), (b"\xfe\xff\x00{", "0xfe at offset 0"),
     (b'{"model": "\x80"}', "0x80 at offset 11"), (b'\xef\xbb\xbf{"m": "\xe9"}', "0xe9 at offset 10")],
)  # fmt: skip
def test_query_parameters_that_are_not_utf8_are_refused_as_such(api: TestClient, body: bytes, byte: str) -> None:
    """JSON travels as UTF-8. A body opening with a UTF-16 byte order mark was decoded as UTF-16 (and its
    error named the utf-16-le codec); now every undecodable body gets the same one line."""
    r = api.post("/api/v1/query/request_count", content=body, headers=auth(READ))
    assert (r.status_code, r.json()["error"]) == (
        400,
        f"parameters must be a JSON object in UTF-8 text: byte {byte} is not UTF-8",
    )


def test_a_lone_surrogate_in_a_string_parameter_is_refused_not_a_500(api: TestClient) -> None:
    """JSON ``"\\udcff"`` decodes to a str that is no UTF-8 text; the engine's binding failed the query with
    a 500 about casting to a C++ type."""
    for params, where in (({"model": "\udcff"}, "model"), ({"model": "m", "order": ["\ud800"]}, "order.0")):
        r = api.post("/api/v1/query/request_count", content=json.dumps(params).encode(), headers=auth(READ))
        assert (r.status_code, r.json()["error"]) == (
            400,
            f"bad parameters for request_count: {where} is not valid UTF-8 text (a lone surrogate)",
        )


def _counts(api: TestClient) -> dict[str, float]:
    out = {}
    for line in api.get("/metrics", headers=auth(READ)).text.splitlines():
        if line.startswith(("inferensics_collector_rejected_total", "inferensics_collector_query_errors_total")):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def test_refused_and_failed_queries_are_counted(
    api: TestClient, app_state: ServiceState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refusals of the query and SQL APIs left no trace in /metrics (only a log line for the 500s)."""

    def broken(client: Any, params: Any) -> Any:
        raise RuntimeError("the engine fell over")

    query = TEST_QUERIES["request_count"]
    failing = type(query)("broken", query.params, broken, "Always fails.")
    monkeypatch.setattr(app_state, "named_queries", {**TEST_QUERIES, "broken": failing})
    bad_query = 'inferensics_collector_rejected_total{reason="bad_query",unit="request"}'
    refused = 'inferensics_collector_rejected_total{reason="sql_refused",unit="request"}'
    errors = "inferensics_collector_query_errors_total"
    assert _counts(api).get(errors) == 0
    for body in (b"not json", b"\xff", b'{"modle": "m"}', b'{"model": "\\udcff"}'):
        assert api.post("/api/v1/query/request_count", content=body, headers=auth(READ)).status_code == 400
    assert api.post("/api/v1/query/nope", json={}, headers=auth(READ)).status_code == 404
    assert api.post("/api/v1/query/broken", json={"model": "m"}, headers=auth(READ)).status_code == 500
    for text in (b"DROP TABLE requests", b"SELEKT", b"\xff", b"SELECT 1 FORMAT JSON", b"\xed\xb3\xbf"):
        assert api.post("/api/v1/sql", content=text, headers=auth(ADMIN)).status_code == 400, text
    assert api.post("/api/v1/query/request_count", json={"model": "m"}, headers=auth(READ)).status_code == 200
    counts = _counts(api)
    assert (counts.get(bad_query), counts.get(refused), counts.get(errors)) == (5, 5, 1), counts
    assert app_state.metrics.by_label("rejected") == {"bad_query": 5, "sql_refused": 5}


def test_admin_sql_is_read_only_and_limited(api: TestClient, app_state: ServiceState) -> None:
    db = app_state.query_store().database
    r = api.post("/api/v1/sql", content=b"SELECT number FROM numbers(5)", headers=auth(ADMIN))
    assert r.status_code == 200
    assert arrow(r.content).column("number").to_pylist() == [0, 1, 2, 3, 4]
    assert api.post("/api/v1/sql", content=b"SELECT 1", headers=auth(READ)).status_code == 403
    for text in (
        f"INSERT INTO {db}.requests (request_id) VALUES ('x')",
        f"DROP TABLE {db}.requests",
        f"CREATE TABLE {db}.evil (a UInt8) ENGINE = Memory",
        "SELECT 1 SETTINGS readonly = 0",
    ):
        r = api.post("/api/v1/sql", content=text.encode(), headers=auth(ADMIN))
        assert r.status_code == 400, text
        error = r.json()["error"]
        assert "readonly" in error.lower() or "read statements only" in error, r.json()
    assert api.post("/api/v1/sql", content=b"SET readonly = 0", headers=auth(ADMIN)).status_code == 400
    r = api.post("/api/v1/sql", content=f"DROP TABLE {db}.requests".encode(), headers=auth(ADMIN))
    assert r.status_code == 400
    assert "read statements only" in r.json()["error"]
    r = api.post("/api/v1/sql", content=b"SELECT number FROM numbers(1000000)", headers=auth(ADMIN))
    assert r.status_code == 400
    assert "Limit for result exceeded" in r.json()["error"]
    assert api.post("/api/v1/sql", content=b"SELEKT", headers=auth(ADMIN)).status_code == 400
    own = api.post("/api/v1/sql", content=b"SELECT 1 FORMAT JSONEachRow;\n", headers=auth(ADMIN))
    assert (own.status_code, own.json()["error"]) == (
        400,
        "leave out the FORMAT clause: the SQL endpoint answers in Arrow IPC (stream)",
    )
    for unfinished in (b"SELECT 1 +", b"SELECT * FROM numbers(3) WHERE"):
        r = api.post("/api/v1/sql", content=unfinished, headers=auth(ADMIN))
        assert r.status_code == 400
        assert r.json()["error"].startswith("query failed: the SQL ends before the statement does"), r.json()
    r = api.post("/api/v1/sql", content=b"SELECT count( FROM numbers(3)", headers=auth(ADMIN))
    assert r.json()["error"].startswith("query failed: Code: 62"), r.json()  # its own position: left as is
    quoted = api.post("/api/v1/sql", content=b"SELECT 'FORMAT JSON' AS f;", headers=auth(ADMIN))
    assert quoted.status_code == 200, quoted.text
    # The query right after one stopped by the row limit answers (chDB's session broke that one answer).
    stopped = api.post("/api/v1/sql", content=b"SELECT number FROM numbers(1000000)", headers=auth(ADMIN))
    assert stopped.status_code == 400
    after = api.post("/api/v1/sql", content=b"SELECT toString(number) AS s FROM numbers(2)", headers=auth(ADMIN))
    assert after.status_code == 200, after.text
    assert pa.ipc.open_stream(after.content).read_all().column("s").to_pylist() == ["0", "1"]
    assert app_state.query_store().row_counts()["requests"] == 0


def test_blobs_put_get_verify(api: TestClient) -> None:
    data = b"def kernel(): pass\n" * 100
    digest = hashlib.sha256(data).hexdigest()
    r = api.put(f"/api/v1/blobs/{digest}?kind=output_code&media_type=text/x-python", content=data,
                headers=auth(INGEST))  # fmt: skip
    assert r.status_code == 201
    assert r.json() == {"sha256": digest, "size_bytes": len(data)}
    assert api.get(f"/api/v1/blobs/{digest}", headers=auth(READ)).content == data
    wrong = hashlib.sha256(b"other").hexdigest()
    r = api.put(f"/api/v1/blobs/{wrong}", content=data, headers=auth(INGEST))
    assert r.status_code == 400
    assert digest in r.json()["error"]
    assert api.get(f"/api/v1/blobs/{wrong}", headers=auth(READ)).status_code == 404
    assert api.get(f"/api/v1/blobs/{digest}").status_code == 401


def test_bad_bodies(api: TestClient, app_state: ServiceState) -> None:
    limit = app_state.config.max_body_bytes
    cases: list[tuple[bytes, dict[str, str], int, str]] = [
        (b"\xff\xff\xff garbage", {}, 400, "malformed OTLP protobuf"),
        (b"{not json", {"Content-Type": "application/json"}, 400, "malformed OTLP JSON"),
        (b"x", {"Content-Type": "text/plain"}, 415, "use application/x-protobuf or application/json"),
        (b"x", {"Content-Encoding": "br"}, 415, "use gzip or identity"),
        (b"not gzip", {"Content-Encoding": "gzip"}, 400, "malformed gzip body"),
        (gzip.compress(b"\0" * (limit + 10)), {"Content-Encoding": "gzip"}, 413, f"limit of {limit} bytes"),
        (b"\0" * (limit + 1), {}, 413, f"limit of {limit} bytes"),
    ]
    for body, headers, status, words in cases:
        r = api.post("/v1/traces", content=body, headers={"Content-Type": PROTO, **auth(INGEST), **headers})
        assert r.status_code == status, words
        message = otlp_refusal(r)  # a google.rpc.Status, protobuf as the request was (JSON for text/plain)
        assert words in message
        assert "\n" not in message
    assert app_state.spool.bytes == 0
    rejected = app_state.metrics.render()
    assert 'rejected_total{reason="too_large",unit="request"} 2' in rejected
    assert 'rejected_total{reason="malformed",unit="request"} 3' in rejected


def wait_metric(state: ServiceState, name: str, value: float, label: str = "", timeout: float = 20) -> float:
    return poll(lambda: state.metrics.get(name, label), lambda got: got >= value, timeout=timeout)


def test_json_gzip_and_rejections_counted_after_the_engine_decodes(api: TestClient, app_state: ServiceState) -> None:
    message = build_request([request(0, run="j"), request(1, run="j")])
    bad = message.resource_spans[0].scope_spans[0].spans.add()
    bad.name = "inferensics.requests"  # no required attributes: this row is rejected
    bad.attributes.add(key="inferensics.latency_ms").value.string_value = "fast"
    foreign = message.resource_spans[0].scope_spans[0].spans.add()
    foreign.name = "GET /health"  # not ours: kept out of the tables, not an error
    unknown = message.resource_spans[0].scope_spans[0].spans.add()
    unknown.name = "inferensics.no_such_table"
    body = gzip.compress(json_format.MessageToJson(message).encode())
    r = api.post("/v1/traces", content=body,
                 headers={"Content-Type": "application/json", "Content-Encoding": "gzip", **auth(INGEST)})  # fmt: skip
    assert r.status_code == 200
    # rows are validated when the engine decodes the spooled batch: the answer reports no row rejections
    assert "partialSuccess" not in r.json()
    assert wait_count(app_state, 2) == 2
    assert wait_metric(app_state, "rejected", 1, "unknown_table") == 1
    assert wait_metric(app_state, "rejected", 1, "invalid_row") == 1
    assert app_state.metrics.get("decoded_rows") == 4  # the 2 written and the 2 rejected, as its help says
    assert app_state.metrics.get("received_spans") == app_state.metrics.get("spooled_spans") == 5


def test_meaningless_values_and_attributes_without_text_are_counted_in_metrics(
    api: TestClient, app_state: ServiceState
) -> None:
    """A negative latency, an unknown outcome and a path in a digest column were stored silently, and a kvlist
    attribute as an empty string; each is now counted where /metrics shows it, and the good row is kept."""
    message = build_request([request(i, run="m") for i in range(4)])
    good, negative, word, digest = message.resource_spans[0].scope_spans[0].spans
    for span, key, value in (
        (negative, "latency_ms", -5.0),
        (word, "outcome", "bogus"),
        (digest, "capture_blob", ".."),
    ):
        held = [kv for kv in span.attributes if kv.key == f"inferensics.{key}"]
        (held[0] if held else span.attributes.add(key=f"inferensics.{key}")).value.CopyFrom(any_value(value))
    good.attributes.add(key="user.kv").value.kvlist_value.values.add(key="k").value.string_value = "v"
    assert ingest(api, message.SerializeToString())[0] == 200
    assert wait_count(app_state, 1) == 1
    assert wait_metric(app_state, "rejected", 3, "invalid_row") == 3
    assert wait_metric(app_state, "dropped", 1, "unsupported_value") == 1
    text = api.get("/metrics", headers=auth(READ)).text
    assert 'inferensics_collector_rejected_total{reason="invalid_row",unit="row"} 3' in text
    assert 'inferensics_collector_dropped_total{reason="unsupported_value"} 1' in text


def test_the_rejection_warning_names_every_reason_with_its_count(
    api: TestClient, app_state: ServiceState, caplog: pytest.LogCaptureFixture
) -> None:
    """Four kinds of bad rows in one batch: the writer's one-line warning names each with its row count (it
    named three kinds a table, so an operator never learned of the fourth)."""
    caplog.set_level(logging.WARNING, logger="inferensics.collector.service")
    message = build_request([request(i, run="w") for i in range(5)])
    wrong = ["host", "host", "model", "hw_pool", "traffic_class"]
    for span, column in zip(message.resource_spans[0].scope_spans[0].spans, wrong, strict=True):
        next(kv for kv in span.attributes if kv.key == f"inferensics.{column}").value.int_value = 7
    assert ingest(api, message.SerializeToString())[0] == 200
    assert wait_metric(app_state, "rejected", 5, "invalid_row") == 5

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.getMessage().startswith("spool segment ")]

    (line,) = poll(warnings, bool, timeout=20)
    assert "\n" not in line
    assert line.endswith(
        "rejected {'invalid_row': 5}; inferensics.requests: host: expected an OTLP string (2 rows); "
        "inferensics.requests: model: expected an OTLP string (1 row); "
        "inferensics.requests: hw_pool: expected an OTLP string (1 row); "
        "inferensics.requests: traffic_class: expected an OTLP string (1 row)"
    ), line


def test_unknown_attributes_go_to_attrs(api: TestClient, app_state: ServiceState) -> None:
    message = build_request([request(0, run="u")])
    span = message.resource_spans[0].scope_spans[0].spans[0]
    span.attributes.add(key="http.route").value.string_value = "/generate"
    span.attributes.add(key="inferensics.future_column").value.int_value = 42
    assert ingest(api, message.SerializeToString())[0] == 200
    assert wait_count(app_state, 1) == 1
    store = app_state.query_store()
    attrs = dict(store.query_rows(f"SELECT attrs FROM {store.database}.requests")[0][0])
    assert attrs == {"note": "n0", "http.route": "/generate", "inferensics.future_column": "42"}
    # the writer timed each stage of the segment, exported with a stage label
    assert all(wait_metric(app_state, "writer_seconds", 1e-9, stage) > 0 for stage in STAGES)
    text = app_state.metrics.render()
    assert all(f'inferensics_collector_writer_seconds_total{{stage="{stage}"}}' in text for stage in STAGES)


def test_health_metrics_openapi(api: TestClient) -> None:
    assert api.get("/healthz").json() == {"status": "ok"}
    assert api.get("/readyz").status_code == 200
    assert api.get("/metrics").status_code == 401
    text = api.get("/metrics", headers=auth(READ)).text
    for name in ("received_spans", "spooled_spans", "decoded_rows", "written_rows", "deduplicated_rows", "dropped",
                 "rejected"):  # fmt: skip
        assert f"inferensics_collector_{name}_total" in text
    assert "inferensics_collector_batch_latency_seconds_bucket" in text
    assert "inferensics_collector_spool_bytes" in text
    doc = api.get("/openapi.json").json()
    assert {"/v1/traces", "/api/v1/sql", "/api/v1/blobs/{sha256}", "/api/v1/query/{name}"} <= set(doc["paths"])
    assert api.post("/api/v1/_faults", json={"store_down": True}, headers=auth(ADMIN)).status_code == 404
    # Paths and methods the API does not have answer like the rest of it: JSON with what to do.
    nowhere = api.get("/v1/trace")
    assert (nowhere.status_code, nowhere.json()) == (
        404,
        {"error": "no such path /v1/trace; the API is listed at /openapi.json"},
    )
    wrong = api.get("/v1/traces", headers=auth(INGEST))
    assert (wrong.status_code, wrong.json()) == (405, {"error": "GET is not allowed on /v1/traces; use POST"})
    assert wrong.headers["Allow"] == "POST"


@pytest.mark.parametrize("token", [None, "nope"])
def test_every_protected_route_wants_a_token(api: TestClient, token: str | None) -> None:
    headers = auth(token) if token else {}
    routes = [
        ("GET", "/api/v1/status"),
        ("GET", "/api/v1/queries"),
        ("POST", "/api/v1/sql"),
        ("POST", "/api/v1/query/request_count"),
        ("POST", "/v1/traces"),
        ("GET", "/metrics"),
    ]
    for method, path in routes:
        assert api.request(method, path, headers=headers).status_code == 401, path


def test_decode_workers_give_the_same_answers(store_dsn: str, tmp_path: Path) -> None:
    config = load_config(
        {"dsn": store_dsn, "spool_dir": str(tmp_path / "spool"), "batch_max_age_s": 0.05, "tokens": TOKENS,
         "decode_workers": 1},
        environ={},
    )  # fmt: skip
    state = build_state(config, open_store=lambda: Store.open(store_dsn))
    try:
        with TestClient(create_app(state)) as api:
            assert ingest(api, b"\xff\xff garbage")[0] == 400
            message = build_request([request(i, run="w") for i in range(3)])
            message.resource_spans[0].scope_spans[0].spans.add().name = "inferensics.requests"
            status, body = ingest(api, message.SerializeToString())
            assert status == 200
            response = ExportTraceServiceResponse.FromString(body)
            assert not response.HasField("partial_success")
            assert wait_count(state, 3) == 3
            assert wait_metric(state, "rejected", 1, "invalid_row") == 1
            assert 'rejected_total{reason="malformed",unit="request"} 1' in state.metrics.render()
            # A decode process that dies (killed here) costs no request: the pool starts again.
            pool = state.ingest._pool
            assert pool is not None
            for process in list(pool._processes.values()):
                assert process.pid is not None
                os.kill(process.pid, signal.SIGKILL)
                process.join(10)
            for run in ("x", "y"):
                status, _ = ingest(api, build_request([request(i, run=run) for i in range(2)]).SerializeToString())
                assert status == 200
            assert wait_count(state, 7) == 7
            assert state.metrics.get("decode_pool_restarts") == 1
            assert state.ingest._pool is not pool
    finally:
        state.close()


def test_fault_control_refuses_a_body_that_is_not_an_object(store_dsn: str, tmp_path: Path) -> None:
    config = load_config(
        {"dsn": store_dsn, "spool_dir": str(tmp_path / "spool"), "tokens": TOKENS, "fault_control": True}, environ={}
    )
    state = build_state(config, open_store=lambda: Store.open(store_dsn))
    try:
        with TestClient(create_app(state)) as api:
            for body in (b"{", b"[1]", b"\xff"):
                r = api.post("/api/v1/_faults", content=body, headers=auth(ADMIN))
                assert r.status_code == 400, body
                assert "JSON object" in r.json()["error"]
            assert api.post("/api/v1/_faults", json={"store_down": True}, headers=auth(ADMIN)).status_code == 200
            assert state.faults.store_down
            # A refused request changes nothing: "false" is no boolean, and a bad count refused the request only
            # after store_down had been applied (walk 42: the store stayed down after a 400).
            assert api.post("/api/v1/_faults", json={"store_down": False}, headers=auth(ADMIN)).status_code == 200
            refused: list[dict[str, object]] = [
                {"store_down": "false"}, {"store_down": True, "kill_inserts": "x"},
                {"store_down": True, "kill_inserts": True}, {"store_dwn": True},
            ]  # fmt: skip
            for fault in refused:
                r = api.post("/api/v1/_faults", json=fault, headers=auth(ADMIN))
                assert r.status_code == 400, (fault, r.text)
                assert not state.faults.store_down, fault
    finally:
        state.close()


def test_a_store_down_at_start_up_is_migrated_before_the_first_query(store_dsn: str, tmp_path: Path) -> None:
    """The store cannot be opened when the service starts; while it stays down every query and blob call
    is a 503 with Retry-After saying so; once it is back, the first query opens and migrates it (no batch
    has arrived to make the writer do it) and is answered. Before, the query API opened the bare store
    itself and every query failed on a missing table until the first batch came in."""
    from tests.collector.service.named import TEST_QUERIES

    down = True

    def opener() -> Store:
        if down:
            raise StoreError(f"cannot open store {store_dsn}: it is down (test)")
        return Store.open(store_dsn)

    config = load_config(
        {"dsn": store_dsn, "spool_dir": str(tmp_path / "spool"), "tokens": TOKENS, "retry_after_s": 7}, environ={}
    )
    state = build_state(config, open_store=opener, named_queries=TEST_QUERIES)
    try:
        with TestClient(create_app(state)) as api:
            assert not state.writer.store_ok
            calls: list[Callable[[], Any]] = [
                lambda: api.post("/api/v1/query/request_count", json={"model": "m"}, headers=auth(READ)),
                lambda: api.post("/api/v1/sql", content=b"SELECT 1", headers=auth(ADMIN)),
                lambda: api.get(f"/api/v1/blobs/{'0' * 64}", headers=auth(READ)),
                lambda: api.put(
                    f"/api/v1/blobs/{hashlib.sha256(b'x').hexdigest()}", content=b"x", headers=auth(INGEST)
                ),
            ]
            for call in calls:
                r = call()
                assert r.status_code == 503, r.text
                assert r.headers["Retry-After"] == "7"
                assert r.json()["error"].startswith("the store is unavailable: cannot open store")
                assert "it is down (test)" in r.json()["error"]
            down = False
            r = api.post("/api/v1/query/request_count", json={"model": "m"}, headers=auth(READ))
            assert r.status_code == 200, r.text
            assert arrow(r.content).num_rows == 0
            store = state.writer.store
            assert store is not None
            assert store.schema_version() == LATEST_VERSION
            assert api.post("/api/v1/sql", content=b"SELECT 1 AS one", headers=auth(ADMIN)).status_code == 200
    finally:
        state.close()
