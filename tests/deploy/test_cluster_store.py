"""The store's cluster path, as far as it runs without a cluster: a ``?cluster=`` DSN renders the cluster
schema (parsed by the engine), one migrations table spans the shards, a current store is migrated by nobody,
a user without DDL rights is told to run the migrator, and a segment retried through another collector lands
once (on the embedded engine, whose non-replicated tables keep the same tokens as replicated ones)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from clickhouse_connect.driver._backend.httpcommon import build_http_error

from inferensics.collector.service.engine_decoder import EngineDecoder
from inferensics.collector.service.testing import build_request
from inferensics.schema.ddl import DEDUP_WINDOW, Target
from inferensics.schema.dsn import DsnError, parse_dsn
from inferensics.schema.migrations import LATEST_VERSION, MIGRATIONS, KeepTtl, migrations_table_sql
from inferensics.schema.store import Store, StoreError
from tests.collector.service.otel import request

REFUSAL = (
    "Code: 497. DB::Exception: inferensics_ingest: Not enough privileges. To execute this query, it's necessary to "
    "have the grant CREATE TABLE ON inferensics.schema_migrations. (ACCESS_DENIED) (version 25.8.1.1)\n"
)
CLUSTER_DSN = "http://inferensics_migrator:pw@ch-s1-0.ch-s1:8123/inferensics?cluster=inferensics"


def test_cluster_dsn_names_the_cluster_and_says_so() -> None:
    dsn = parse_dsn(CLUSTER_DSN)
    assert (dsn.kind, dsn.host, dsn.database, dsn.cluster) == ("http", "ch-s1-0.ch-s1", "inferensics", "inferensics")
    assert str(dsn) == "http://inferensics_migrator:***@ch-s1-0.ch-s1:8123/inferensics?cluster=inferensics"
    assert parse_dsn("http://h:8123/db?cluster=%7Bcluster%7D").cluster == "{cluster}"
    for bad in ("http://h/db?cluster=a'b", "http://h/db?cluster=", "http://h/db?shards=2", "chdb:///tmp/x?cluster=c"):
        with pytest.raises(DsnError):
            parse_dsn(bad)


def test_a_cluster_store_renders_the_cluster_schema_the_engine_parses(store: Store) -> None:
    # A Store over the embedded engine's client with the cluster DSN: only the rendering is exercised here
    # (executing ON CLUSTER needs the cluster; `make cluster-test` does that).
    cluster = Store(parse_dsn(CLUSTER_DSN), store.client)
    assert cluster.target == Target("cluster", database="inferensics", cluster="inferensics")
    steps = [s for m in MIGRATIONS for s in m.statements(cluster.target)]
    # A KeepTtl step's text is its read of the old table's TTL (system.tables, the same on every node); the ALTER it
    # makes from it runs ON CLUSTER, like every statement that changes the schema.
    kept = [s for s in steps if isinstance(s, KeepTtl)]
    assert kept
    assert all(s.on_cluster == " ON CLUSTER 'inferensics'" for s in kept), kept
    assert all(str(s).startswith("SELECT engine_full FROM system.tables") for s in kept), kept
    statements = [migrations_table_sql(cluster.target)]
    statements += [str(s) for s in steps if not isinstance(s, KeepTtl)]
    for stmt in statements:
        assert "ON CLUSTER 'inferensics'" in stmt or stmt.startswith(("INSERT", "EXCHANGE", "ALTER TABLE"))
        formatted = store.query_rows("SELECT formatQuery({q:String})", {"q": stmt})[0][0]
        assert str(formatted).split()[0] == stmt.split()[0]
    text = "\n".join(statements)
    assert "Distributed('inferensics', inferensics, requests_local, cityHash64(request_id))" in text
    assert f"replicated_deduplication_window = {DEDUP_WINDOW}" in text
    assert "non_replicated" not in text


def test_one_migrations_table_spans_every_shard() -> None:
    sql = migrations_table_sql(Target("cluster"))
    assert "'/clickhouse/tables/inferensics/schema_migrations', '{shard}-{replica}'" in sql
    assert "{shard}/" not in sql  # a per-shard path would let a node of shard 2 run every migration again


class _Recorder:
    """The real client, with every DDL statement recorded (and, when asked, refused as a server refuses a
    user without the grant: no server runs here to refuse it)."""

    def __init__(self, client: Any, refuse: bool = False) -> None:
        self._client = client
        self.refuse = refuse
        self.commands: list[str] = []

    def command(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        self.commands.append(sql)
        if self.refuse:
            # the driver's own exception for the server's answer
            raise build_http_error(500, "497", REFUSAL, True, "http://ch-s1-0.ch-s1:8123", False)
        return self._client.command(sql, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_current_store_is_migrated_by_nobody(store: Store) -> None:
    real = store.client
    recorder = _Recorder(real, refuse=True)
    store.client = recorder  # type: ignore[assignment]
    try:
        assert store.migrate() == LATEST_VERSION
    finally:
        store.client = real
    assert recorder.commands == []  # an ingest user with no DDL right opens a migrated store


def test_a_store_behind_whose_user_may_not_migrate_says_to_run_the_migrator(store_dsn: str) -> None:
    s = Store.open(store_dsn)
    real = s.client
    try:
        s.client = _Recorder(real, refuse=True)  # type: ignore[assignment]
        with pytest.raises(StoreError) as err:
            s.migrate()
        message = str(err.value)
        assert "schema version 0, behind" in message
        assert "inferensics init" in message
        assert "inferensics_ingest: Not enough privileges" in message
        assert message.endswith("schema-migrator job)")
        assert "(ACCESS_DENIED)" in message
        assert "\n" not in message
    finally:
        real.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")


def test_a_segment_retried_through_another_collector_lands_once(store: Store, tmp_path: Path) -> None:
    # Two collectors (two decoders, two work directories) and one store. A segment keeps its name wherever it
    # is replayed (its file moves with the spool volume), so its tokens are the same and the engine drops the
    # second copy; on a cluster the block ids sit in Keeper per shard, whichever node received the insert.
    payloads = [build_request([request(i, run="retry") for i in range(j * 50, j * 50 + 50)]).SerializeToString()
                for j in range(4)]  # fmt: skip
    first, second = EngineDecoder(tmp_path / "collector-1"), EngineDecoder(tmp_path / "collector-2")
    name = "000000000007-0123456789ab"
    landed = first.insert(store, name, payloads, possibly_seen=False)
    again = second.insert(store, name, payloads, possibly_seen=True)
    assert (landed.sent, landed.landed) == (200, 200)
    # The second collector finds every span's key already stored (per-span dedup) and sends none of them;
    # the segment tokens would drop them too.
    assert (again.sent, again.landed, again.duplicate_spans) == (0, 0, 200)
    assert store.query_rows(f"SELECT count(), uniqExact(request_id) FROM {store.database}.requests") == [(200, 200)]
    minute = store.query_rows(f"SELECT sum(requests) FROM {store.database}.requests_1m")[0][0]
    assert int(minute) == 200  # the rollups dropped the view's copy too
    # The same spans sent twice (a sender retrying after a lost acknowledgement) are two segments with two
    # names: tokens cannot tell, the per-span keys do, so they are kept once.
    other = second.insert(store, "000000000000-ba9876543210", payloads[:1], possibly_seen=False)
    assert (other.landed, other.duplicate_spans) == (0, 50)
