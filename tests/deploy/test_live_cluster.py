"""The live cluster: deploy/compose/cluster.yml up on loopback (3 Keeper, 2 shards x 2 replicas, two
collectors behind nginx, the dashboard), started, checked and removed by ``make cluster-test``.

No ClickHouse server recent enough for the schema installs from this machine's package registries (Debian's
clickhouse-server is 18.16, without DateTime64, Map, Bool, codecs or Keeper; PyPI ships chDB, the engine as
a library, with no server), so these tests run only where Docker is: they are skipped unless
``INFERENSICS_CLUSTER_TEST=1`` (set by deploy/compose/cluster-test.sh, with the secrets it generated).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from inferensics.collector.service.engine_decoder import EngineDecoder
from inferensics.collector.service.testing import build_request
from inferensics.schema.events import EVENT_MODELS
from inferensics.schema.migrations import LATEST_VERSION
from inferensics.schema.store import Store
from tests.collector.service.otel import emit, request, tracer

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("INFERENSICS_CLUSTER_TEST") != "1",
        reason="needs the live cluster of deploy/compose/cluster.yml: run `make cluster-test` where Docker is",
    ),
]

NODES = {"ch-s1-0": 8123, "ch-s1-1": 18124, "ch-s2-0": 18125, "ch-s2-1": 18126}
LB = "http://127.0.0.1:4318"
COLLECTOR_1 = "http://127.0.0.1:14318"
DEADLINE_S = 120.0


def _dsn(user: str, node: str, *, cluster: bool = True) -> str:
    password = os.environ[f"INFERENSICS_{user.upper()}_PASSWORD"]
    suffix = "?cluster=inferensics" if cluster else ""
    return f"http://inferensics_{user}:{password}@127.0.0.1:{NODES[node]}/inferensics{suffix}"


@pytest.fixture(scope="module")
def admin() -> Iterator[Store]:
    with Store.open(_dsn("migrator", "ch-s1-0")) as s:
        yield s


def _until(what: str, check: Callable[[], bool]) -> None:
    end = time.monotonic() + DEADLINE_S
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"not within {DEADLINE_S:.0f} s: {what}")
        time.sleep(0.5)


def _count(store: Store, where: str = "1") -> int:
    return int(store.query_rows(f"SELECT count() FROM inferensics.requests WHERE {where}")[0][0])


def _init(node: str) -> str:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "inferensics"), "init", "--dsn", _dsn("migrator", node)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_init_ran_once_and_is_idempotent_through_any_node() -> None:
    # the compose `migrate` service already ran: every node sees the cluster-wide version
    for node in ("ch-s1-0", "ch-s2-1"):
        assert f"up to date, schema version {LATEST_VERSION}" in _init(node)


def test_every_node_has_replicated_shard_tables_and_distributed_tables(admin: Store) -> None:
    rows = admin.query_rows(
        "SELECT hostName(), name, engine FROM clusterAllReplicas('inferensics', system.tables) "
        "WHERE database = 'inferensics'"
    )
    by_host: dict[str, dict[str, str]] = {}
    for host, name, engine in rows:
        by_host.setdefault(str(host), {})[str(name)] = str(engine)
    assert len(by_host) == 4
    for tables in by_host.values():
        for model in EVENT_MODELS:
            assert tables[model.TABLE.name] == "Distributed"
            assert tables[f"{model.TABLE.name}_local"].startswith("Replicated")
        assert tables["schema_migrations"] == "ReplicatedReplacingMergeTree"
    versions = admin.query_rows(
        "SELECT hostName(), max(version) FROM clusterAllReplicas('inferensics', inferensics.schema_migrations) "
        "GROUP BY 1"
    )
    assert {int(v) for _, v in versions} == {LATEST_VERSION}


def test_spans_through_the_load_balancer_land_sharded_by_request_id(admin: Store) -> None:
    before = _count(admin, "request_id LIKE 'lb-%'")
    with tracer(LB, "ingest-test") as t:
        emit(t, [request(i, run="lb") for i in range(2000)])
    _until("2000 rows from the load balancer", lambda: _count(admin, "request_id LIKE 'lb-%'") == before + 2000)
    shards = admin.query_rows(
        "SELECT _shard_num, count() FROM inferensics.requests WHERE request_id LIKE 'lb-%' GROUP BY 1 ORDER BY 1"
    )
    assert [int(s) for s, _ in shards] == [1, 2]
    assert all(int(n) > 500 for _, n in shards)
    # each shard's rows on each of its replicas; a row's shard is cityHash64(request_id) % 2
    admin.client.command("SYSTEM SYNC REPLICA ON CLUSTER 'inferensics' inferensics.requests_local")
    per_node = admin.query_rows(
        "SELECT hostName(), count(), countIf(cityHash64(request_id) % 2 + 1 != _shard_num) "
        "FROM clusterAllReplicas('inferensics', inferensics.requests_local) WHERE request_id LIKE 'lb-%' GROUP BY 1"
    )
    assert sorted(int(n) for _, n, _ in per_node) == sorted([int(n) for _, n in shards] * 2)
    assert all(int(wrong) == 0 for _, _, wrong in per_node)
    # `inferensics status` on a cluster counts parts over one replica of every shard
    assert admin.row_counts()["requests"] == _count(admin)


def test_the_server_decodes_protobuf_and_a_segment_retried_through_another_node_lands_once(
    admin: Store, tmp_path: Path
) -> None:
    # The server path of the store: INSERT ... FORMAT Protobuf with the format schema in the server's
    # format_schema_path, as the ingest user. Then the same segment through a node of the other shard,
    # as another collector would after taking over the spool: the block ids in Keeper drop it.
    payloads = [build_request([request(i, run="seg") for i in range(j * 100, j * 100 + 100)]).SerializeToString()
                for j in range(5)]  # fmt: skip
    name = "000000000001-live0retried"
    with Store.open(_dsn("ingest", "ch-s1-0")) as one, Store.open(_dsn("ingest", "ch-s2-1")) as other:
        first = EngineDecoder(tmp_path / "a").insert(one, name, payloads, possibly_seen=False)
        # every replica has the first copy before the counts around the second are taken (a Distributed read
        # may ask either replica of a shard)
        admin.client.command("SYSTEM SYNC REPLICA ON CLUSTER 'inferensics' inferensics.requests_local")
        again = EngineDecoder(tmp_path / "b").insert(other, name, payloads, possibly_seen=True)
        assert (first.sent, first.landed, dict(first.rejected)) == (500, 500, {})
        assert (again.sent, again.landed) == (500, 0)
        assert _count(other, "request_id LIKE 'seg-%'") == 500
        minute = other.query_rows("SELECT sum(requests) FROM inferensics.requests_1m WHERE model = 'llama'")[0][0]
        assert int(minute) >= 500


def test_a_collector_restart_loses_nothing_it_acknowledged(admin: Store) -> None:
    compose = shlex.split(os.environ["INFERENSICS_CLUSTER_COMPOSE"])
    before = _count(admin, "request_id LIKE 'rs-%'")
    with tracer(COLLECTOR_1, "ingest-test") as t:
        emit(t, [request(i, run="rs") for i in range(3000)])
    # acknowledged = fsynced in collector-1's spool; restart it before its writer can have inserted it all
    subprocess.run([*compose, "restart", "-t", "10", "collector-1"], check=True, timeout=120)
    _until("3000 acknowledged rows after a restart", lambda: _count(admin, "request_id LIKE 'rs-%'") == before + 3000)
    assert (
        admin.query_rows("SELECT uniqExact(request_id) FROM inferensics.requests WHERE request_id LIKE 'rs-%'")[0][0]
        == before + 3000
    )


def test_users_are_held_to_their_roles() -> None:
    with Store.open(_dsn("reader", "ch-s1-0")) as reader:
        assert reader.query_rows("SELECT count() > 0 FROM inferensics.requests")[0][0]
        with pytest.raises(Exception, match=r"readonly|READONLY"):
            reader.client.command("INSERT INTO inferensics.requests (request_id) VALUES ('x')")
        with pytest.raises(Exception, match=r"SETTING_CONSTRAINT_VIOLATION|should not be greater"):
            reader.query_rows("SELECT 1 SETTINGS max_execution_time = 3600")
    with Store.open(_dsn("ingest", "ch-s2-0")) as ingest:
        with pytest.raises(Exception, match="ACCESS_DENIED"):
            ingest.client.command("DROP TABLE inferensics.requests_local")
        assert ingest.migrate() == LATEST_VERSION  # current: nothing to run, no DDL right needed


def test_the_dashboard_and_the_service_api_answer() -> None:
    assert httpx.get("http://127.0.0.1:8501/_stcore/health", timeout=10).text == "ok"
    ready: dict[str, Any] = httpx.get(f"{LB}/readyz", timeout=10).json()
    assert ready["ready"] is True
    assert ready["store_ok"] is True
