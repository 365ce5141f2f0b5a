"""A migration that rebuilds a table (fills a copy in the new form, exchanges the two: migrations 5, 6 and 7) keeps
the TTL the operator gave the table (README, "Retention": ``ALTER TABLE … MODIFY TTL``), or its lack of one. The
copies used to be created with the schema's TTL, so upgrading reset a retention the operator had set."""

from __future__ import annotations

import pytest

from inferensics.schema.ddl import BACKENDS, Backend, Target
from inferensics.schema.migrations import LATEST_VERSION, MIGRATIONS, KeepTtl
from inferensics.schema.migrator import ttl_clause
from inferensics.schema.store import Store
from tests.schema.test_old_store_upgrades import load_old_store


def _ttls(s: Store) -> dict[str, str]:
    rows = s.query_rows(
        "SELECT name, engine_full FROM system.tables WHERE database = {db:String} AND engine LIKE '%MergeTree'",
        {"db": s.database},
    )
    return {str(name): ttl_clause(str(engine)) for name, engine in rows}


def test_an_operators_ttl_survives_the_migrations_that_rebuild_its_table(store_dsn: str) -> None:
    s = Store.open(store_dsn)
    try:
        load_old_store(s, 4)  # before migrations 5 (rollups), 6 (requests) and 7 (requests_1m again)
        db = s.database
        s.client.command(f"ALTER TABLE {db}.requests MODIFY TTL toDateTime(ts) + INTERVAL 400 DAY")
        s.client.command(f"ALTER TABLE {db}.requests_1m MODIFY TTL toDateTime(bucket) + INTERVAL 90 DAY")
        s.client.command(f"ALTER TABLE {db}.requests_1h REMOVE TTL")  # kept until deleted
        assert s.migrate() == LATEST_VERSION
        ttls = _ttls(s)
        assert ttls["requests"] == "toDateTime(ts) + toIntervalDay(400)"
        assert ttls["requests_1m"] == "toDateTime(bucket) + toIntervalDay(90)"
        assert ttls["requests_1h"] == ""
        # tables the operator left alone have the schema's TTL (the daily rollup was rebuilt too)
        assert ttls["requests_1d"] == "toDateTime(bucket) + toIntervalDay(800)"
        assert ttls["compiles_1h"] == "toDateTime(bucket) + toIntervalDay(400)"
        assert ttls["compiles"] == "toDateTime(ts) + toIntervalDay(180)"
        left = s.query_rows(
            "SELECT name FROM system.tables WHERE database = {db:String} AND match(name, '__v[0-9]+')", {"db": db}
        )
        assert left == []
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_rebuilding_migrations_carry_the_ttl_before_their_copies_fill(backend: Backend) -> None:
    """Every copy-and-exchange carries the TTL of the table it replaces (the shard table on a cluster) onto its copy,
    before the first insert into the copy."""
    target = Target(backend)
    for version in (5, 6, 7):
        statements = list(MIGRATIONS[version - 1].statements(target))
        exchanges = [i for i, st in enumerate(statements) if str(st).startswith("EXCHANGE TABLES")]
        assert exchanges, version
        for at in exchanges:
            table, copy = (name.split(".")[1].split()[0] for name in str(statements[at]).split(" AND "))
            keep = [
                i
                for i, st in enumerate(statements[:at])
                if isinstance(st, KeepTtl) and (st.source, st.dest) == (table, copy)
            ]
            into = copy.removesuffix("_local")  # on a cluster the copy fills through its Distributed table
            fills = [
                i
                for i, st in enumerate(statements[:at])
                if str(st).startswith(f"INSERT INTO {target.database}.{into} ")
            ]
            assert keep, (version, copy)
            assert fills, (version, copy)
            assert keep[-1] < fills[0], (version, copy, keep, fills)


def test_ttl_clause_reads_the_ttl_outside_quotes_and_brackets() -> None:
    assert ttl_clause("MergeTree ORDER BY x SETTINGS index_granularity = 8192") == ""
    assert (
        ttl_clause("MergeTree ORDER BY x TTL toDateTime(ts) + toIntervalDay(9)") == "toDateTime(ts) + toIntervalDay(9)"
    )
    query = (
        "CREATE TABLE d.t (`ts` DateTime, `TTL` String) ENGINE = MergeTree ORDER BY x TTL toDateTime(ts) + "
        "toIntervalDay(9), toDateTime(ts) + toIntervalDay(1) WHERE `TTL` = 'a SETTINGS b' SETTINGS a = 1 "
        "COMMENT 'TTL SETTINGS'"
    )
    assert (
        ttl_clause(query)
        == "toDateTime(ts) + toIntervalDay(9), toDateTime(ts) + toIntervalDay(1) WHERE `TTL` = 'a SETTINGS b'"
    )
