"""The committed DDL matches the models, and every statement of every backend parses in the engine."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime, timedelta

import polars as pl
import pyarrow as pa
import pytest

from inferensics.schema import RequestEvent
from inferensics.schema import columns as c
from inferensics.schema.ddl import (
    BACKENDS,
    DEDUP_WINDOW,
    SQL_DIR,
    WIDE_PART_MIN_BYTES,
    Backend,
    Target,
    iter_statements,
    render_rollup,
    render_schema,
    render_sql_file,
)
from inferensics.schema.dedup import seen_table_sql
from inferensics.schema.migrations import LATEST_VERSION, MIGRATIONS, Step, fresh_checksum, migrations_table_sql
from inferensics.schema.rollups import (
    REQUESTS_1D,
    REQUESTS_1H,
    REQUESTS_1M,
    ROLLUPS,
    Rollup,
    RollupColumn,
    hist_quantiles_sql,
    latency_code,
    latency_code_sql,
)
from inferensics.schema.store import Store


@pytest.mark.parametrize("backend", BACKENDS)
def test_committed_ddl_matches_the_models(backend: Backend) -> None:
    committed = (SQL_DIR / f"{backend}.sql").read_text(encoding="utf-8")
    assert committed == render_sql_file(backend), (
        f"schema/sql/{backend}.sql drifted from schema/events.py: run `python -m inferensics.schema.ddl`"
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_statement_parses_in_the_engine(store: Store, backend: Backend) -> None:
    # No cluster runs here: the cluster rendering (ReplicatedMergeTree, Distributed, ON CLUSTER) is checked
    # by the engine's own parser rather than executed.
    statements = list(iter_statements((SQL_DIR / f"{backend}.sql").read_text(encoding="utf-8")))
    statements.append(migrations_table_sql(Target(backend)))
    assert len(statements) > 20
    for stmt in statements:
        formatted = store.query_rows("SELECT formatQuery({q:String})", {"q": stmt})[0][0]
        assert formatted.split()[0] == "CREATE"


def test_cluster_rendering_is_replicated_and_distributed() -> None:
    text = (SQL_DIR / "cluster.sql").read_text(encoding="utf-8")
    statements = list(iter_statements(text))
    creates = [s for s in statements if s.startswith("CREATE TABLE")]
    assert all("ON CLUSTER '{cluster}'" in s for s in statements)
    assert sum("ENGINE = Distributed(" in s for s in creates) == sum("_local ON CLUSTER" in s for s in creates)
    assert "Distributed('{cluster}', inferensics, requests_local, cityHash64(request_id))" in text
    assert "ReplicatedMergeTree(" not in (SQL_DIR / "chdb.sql").read_text(encoding="utf-8")


def test_migrations_are_idempotent(store: Store) -> None:
    def snapshot() -> list[tuple[object, ...]]:
        return store.query_rows(
            "SELECT name, create_table_query FROM system.tables WHERE database = {db:String} ORDER BY name",
            {"db": store.database},
        )

    before = snapshot()
    assert store.migrate() == MIGRATIONS[-1].version
    assert store.migrate() == MIGRATIONS[-1].version
    assert snapshot() == before
    rows = store.query_rows(f"SELECT version, checksum FROM {store.database}.schema_migrations FINAL ORDER BY version")
    # A fresh store is created in one pass (migrator.create_fresh): every version records what ran.
    assert rows == [(m.version, fresh_checksum(store.target)) for m in MIGRATIONS]


def test_fresh_store_reports_version_zero_then_latest(store_dsn: str) -> None:
    s = Store.open(store_dsn)
    try:
        assert s.schema_version() == 0
        assert s.migrate() == MIGRATIONS[-1].version
        assert list(s.row_counts()) == [*s.table_names(), "schema_migrations"]
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")


_STATE = "AggregateFunction(quantilesTiming(0.5, 0.95, 0.99), UInt16)"
_OLD_LATENCY = RollupColumn(
    c.LATENCY_STATE,
    _STATE,
    f"quantilesTimingState(0.5, 0.95, 0.99)({latency_code_sql(c.LATENCY_MS)})",
    f"quantilesTimingMergeState(0.5, 0.95, 0.99)({c.LATENCY_STATE})",
)


def _before_version_8(rollup: Rollup) -> Rollup:
    """A rollup as versions 1-7 defined it: views fed from a finer rollup summed its histograms (sumMap)."""
    values = tuple(dataclasses.replace(v, feed=None) for v in rollup.values)
    return dataclasses.replace(rollup, values=values)


def _before_version_7(rollup: Rollup) -> Rollup:
    """A rollup as versions 1-6 defined it: the per-minute request rollup kept 7 days."""
    old = _before_version_8(rollup)
    if rollup is REQUESTS_1M:
        return dataclasses.replace(old, ttl_days=_MINUTE_TTL_BEFORE_7)
    return old


def _before_version_5(rollup: Rollup) -> Rollup:
    """A rollup as versions 1-4 defined it: ordered by its keys, the daily request rollup keyed by bundle."""
    keys = (*rollup.keys, c.BUNDLE_ID) if rollup is REQUESTS_1D else rollup.keys
    parent = _before_version_5(rollup.parent) if rollup.parent else None
    return dataclasses.replace(_before_version_7(rollup), keys=keys, order_prefix=None, parent=parent)


def _before_version_4(rollup: Rollup) -> Rollup:
    """A rollup as versions 1-3 defined it: a quantilesTiming state where the histogram is now."""
    values = tuple(_OLD_LATENCY if v.name == c.LATENCY_HIST else v for v in rollup.values)
    parent = _before_version_4(rollup.parent) if rollup.parent else None
    return _before_version_5(dataclasses.replace(rollup, values=values, parent=parent))


_OLD_ROLLUPS = {r.name: _before_version_4(r) for r in ROLLUPS}
_REQUEST_ROLLUPS = ("requests_1m", "requests_1h", "requests_1d")


_V6_ORDER = f"ORDER BY ({', '.join(RequestEvent.TABLE.order_by)})"
_OLD_REQUEST_ORDER = f"ORDER BY ({c.MODEL}, {c.HW_POOL}, {c.TRAFFIC_CLASS}, {c.TS})"
_MINUTE_TTL_BEFORE_7 = 7


def _version_7_statements(target: Target) -> list[str]:
    """The schema as versions 1-7 left it: the hourly and daily request views summed histograms."""
    out = []
    for stmt in render_schema(target):
        first = stmt.split("\n", 1)[0].split(" ON CLUSTER")[0]
        coarse = next((r for r in (REQUESTS_1H, REQUESTS_1D) if first.endswith(f".{r.view_name}")), None)
        out.append(render_rollup(_before_version_8(coarse), target)[1] if coarse else stmt)
    return out


def _version_6_statements(target: Target) -> list[str]:
    """The schema as versions 1-6 left it: the per-minute request rollup kept 7 days."""
    old = _before_version_7(REQUESTS_1M)
    out = []
    for stmt in _version_7_statements(target):
        first = stmt.split("\n", 1)[0].split(" ON CLUSTER")[0]
        minute_table = first.endswith(f".{target.local(REQUESTS_1M.name)}") and stmt.startswith("CREATE TABLE")
        out.append(render_rollup(old, target)[0] if minute_table else stmt)
    return out


def _version_5_statements(target: Target) -> list[str]:
    """The schema as versions 1-5 left it: raw requests ordered by model, pool, traffic class, time."""
    out = []
    for stmt in _version_6_statements(target):
        raw_requests = stmt.split("\n", 1)[0].split(" ON CLUSTER")[0].endswith(f".{target.local('requests')}")
        assert _V6_ORDER in stmt or not raw_requests
        out.append(stmt.replace(_V6_ORDER, _OLD_REQUEST_ORDER) if raw_requests else stmt)
    return out


def _version_3_statements(target: Target) -> list[str]:
    """The schema as versions 1-3 left it (request rollups with quantilesTiming states, keys first)."""
    out = []
    for stmt in _version_5_statements(target):
        first = stmt.split("\n", 1)[0]
        name = next((n for n in _OLD_ROLLUPS if first.endswith((f".{n}", f".{n}_mv"))), None)
        if name is None:
            out.append(stmt)
        elif stmt.startswith("CREATE TABLE"):
            out.extend(s for s in render_rollup(_OLD_ROLLUPS[name], target) if s.startswith("CREATE TABLE"))
        else:
            out.extend(s for s in render_rollup(_OLD_ROLLUPS[name], target) if s.startswith("CREATE MATERIALIZED"))
    return out


def _version_1_statements(target: Target) -> list[str]:
    """The schema as version 1 created it: wide parts from 10 MiB, rollups without a token window, requests
    without the fingerprint's status and rate (migration 16), which the request views read since 17."""
    out = []
    for stmt in _version_3_statements(target):
        old = stmt.replace(f", min_bytes_for_wide_part = {WIDE_PART_MIN_BYTES}", "")
        old = "\n".join(
            ln
            for ln in old.split("\n")
            if not ln.lstrip().startswith((f"`{c.FP_STATUS}`", f"`{c.FP_RATE}`")) and c.FINGERPRINTED not in ln
        )
        if "AggregatingMergeTree" in old:
            old = old.replace(f", non_replicated_deduplication_window = {DEDUP_WINDOW}", "")
        out.append(old)
    return out


def _tables(s: Store) -> dict[str, str]:
    return dict(
        s.query_rows(
            "SELECT name, create_table_query FROM system.tables WHERE database = {db:String} "
            "AND name != 'schema_migrations'",
            {"db": s.database},
        )
    )


def _old_store(s: Store, statements: list[str], version: int) -> None:
    """Make ``s`` a store as schema version ``version`` left it: ``statements`` run, versions recorded."""
    s.client.command(migrations_table_sql(s.target))
    for stmt in statements:
        s.client.command(stmt)
    s.client.insert(
        f"{s.database}.schema_migrations",
        [[m.version, m.name, m.checksum(s.target), datetime.now(UTC)] for m in MIGRATIONS[:version]],
        column_names=["version", "name", "checksum", "applied_at"],
    )


def test_migrations_bring_a_version_1_store_up_to_date(store_dsn: str) -> None:
    s = Store.open(store_dsn)
    try:
        _old_store(s, _version_1_statements(s.target), 1)
        assert s.schema_version() == 1
        assert s.migrate() == LATEST_VERSION
        assert s.migrate() == LATEST_VERSION
        tables = dict(
            s.query_rows(
                "SELECT name, create_table_query FROM system.tables WHERE database = {db:String} "
                "AND engine LIKE '%MergeTree' AND name NOT IN ('schema_migrations', 'ingest_seen')",
                {"db": s.database},
            )
        )
        assert set(tables) == set(s.table_names())
        for name, query in tables.items():
            assert f"min_bytes_for_wide_part = {WIDE_PART_MIN_BYTES}" in query, name
            assert f"non_replicated_deduplication_window = {DEDUP_WINDOW}" in query, name
        now = datetime.now(UTC)  # inside the tables' TTL, which drops an expired insert at once
        # The version-3 store answers like a fresh one: a replayed batch reaches neither table nor rollup.
        batch = pa.table(
            {
                c.REQUEST_ID: ["r1", "r2"],
                c.TS: pa.array([now] * 2, pa.timestamp("us", tz="UTC")),
                **{name: ["x", "x"] for name in (c.HOST, c.MODEL, c.HW_POOL, c.TRAFFIC_CLASS)},
            }
        )
        for _ in range(2):
            s.insert_arrow(RequestEvent, batch, dedup_token="spool-1")
        assert s.query_rows(f"SELECT count() FROM {s.database}.requests")[0][0] == 2
        for rollup in ("requests_1m", "requests_1h", "requests_1d"):
            got = s.query_rows(f"SELECT sum(requests), sum({c.FINGERPRINTED}) FROM {s.database}.{rollup}")
            assert [tuple(r) for r in got] == [(2, 2)], rollup  # rows without fp_status count as fingerprinted
        # An insert-sized part past the old 10 MiB limit (100k rows of 128-byte ids, ~16 MB) is compact.
        n = 100_000
        batch = pa.table(
            {
                c.REQUEST_ID: [f"req-{i:08d}-{'x' * 115}" for i in range(n)],
                c.TS: pa.array([now] * n, pa.timestamp("us", tz="UTC")),
                **{name: pa.array(["x"] * n) for name in (c.HOST, c.MODEL, c.HW_POOL, c.TRAFFIC_CLASS)},
            }
        )
        assert s.insert_arrow(RequestEvent, batch) == n
        types = s.query_rows(
            "SELECT part_type, data_uncompressed_bytes > 10485760 FROM system.parts "
            "WHERE database = {db:String} AND table = 'requests' AND active AND rows >= {n:UInt64}",
            {"db": s.database, "n": n},
        )
        assert types == [("Compact", True)]
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")


@pytest.mark.parametrize("backend", BACKENDS)
def test_migration_statements_parse_in_the_engine(store: Store, backend: Backend) -> None:
    for m in MIGRATIONS[1:]:
        for stmt in m.statements(Target(backend)):
            formatted = store.query_rows("SELECT formatQuery({q:String})", {"q": str(stmt)})[0][0]
            assert formatted.split()[:2] == str(stmt).split()[:2], formatted


def _raw_quantile_codes(batch: pa.Table, keys: str) -> pl.DataFrame:
    """Nearest-rank p50/p95/p99 latency codes of raw request rows per minute and ``keys``' other columns."""
    frame = pl.from_arrow(batch)
    assert isinstance(frame, pl.DataFrame)
    by = [k.strip() for k in keys.split(",") if k.strip() != c.BUCKET]
    frame = frame.with_columns(
        pl.col(c.TS).dt.truncate("1m").alias(c.BUCKET),
        pl.col(c.LATENCY_MS).map_elements(latency_code, return_dtype=pl.Int64).alias("code"),
    )
    rows: list[tuple[tuple[object, ...], list[int]]] = []
    for key, group in frame.group_by([c.BUCKET, *by], maintain_order=False):
        codes = sorted(group.get_column("code").to_list())
        rows.append((key, [codes[math.ceil(p * len(codes)) - 1] for p in (0.5, 0.95, 0.99)]))
    rows.sort(key=lambda r: tuple(map(str, r[0])))
    return pl.DataFrame({"q": [q for _, q in rows]}, schema={"q": pl.List(pl.UInt16)})


def test_migrations_4_to_7_convert_a_version_3_store(store_dsn: str) -> None:
    """A version-3 store with traffic: after migrations 4 (latency states into histograms), 5 (rollups
    ordered by time, daily rollup without bundle) and 6 (requests ordered by model, traffic class, pool)
    its schema equals a fresh store's, every request row is still there, each old rollup row
    answers its own p50/p95/p99 exactly as its state did, the request counts are unchanged, nothing
    conditional is left to do, and new traffic lands in the histograms. Re-applying after an interruption
    (state column already gone, version not recorded) completes it."""
    s = Store.open(store_dsn)
    fresh = Store.open(store_dsn.replace("database=", "database=fresh_"))
    try:
        _old_store(s, _version_3_statements(s.target), 3)
        now = datetime.now(UTC).replace(minute=30, second=0, microsecond=0)
        n = 600
        batch = pa.table(
            {
                c.REQUEST_ID: [f"r{i}" for i in range(n)],
                c.TS: pa.array([now - timedelta(hours=i % 3) for i in range(n)], pa.timestamp("us", tz="UTC")),
                c.LATENCY_MS: pa.array([1.0 + (i * 37 % 200) for i in range(n)], pa.float32()),
                **{name: pa.array([f"{name}-{i % 2}" for i in range(n)]) for name in (c.HOST, c.MODEL)},
                **{name: pa.array(["x"] * n) for name in (c.HW_POOL, c.TRAFFIC_CLASS)},
            }
        )
        s.insert_arrow(RequestEvent, batch)
        keys = f"{c.BUCKET}, {c.MODEL}"
        before = {
            name: s.query_frame(
                f"SELECT {keys}, sum({c.REQUESTS}) AS n, quantilesTimingMerge(0.5, 0.95, 0.99)({c.LATENCY_STATE}) "
                f"AS q FROM {s.database}.{name} GROUP BY {keys} ORDER BY {keys}"
            ).with_columns(pl.col("q").cast(pl.List(pl.UInt16)))
            for name in _REQUEST_ROLLUPS
        }
        assert all(f.height > 0 for f in before.values())
        # Interrupted after the first table lost its state column, before the version was recorded.
        steps = [str(stmt) for stmt in MIGRATIONS[3].statements(s.target)]
        cut = steps.index(f"ALTER TABLE {s.database}.requests_1m DROP COLUMN IF EXISTS `{c.LATENCY_STATE}`")
        for stmt in steps[: cut + 1]:
            s.client.command(stmt)
        assert s.schema_version() == 3
        assert s.migrate() == LATEST_VERSION
        assert s.migrate() == LATEST_VERSION
        fresh.migrate()
        got_tables = {k: v.replace(s.database, "DB") for k, v in _tables(s).items()}
        want_tables = {k: v.replace(fresh.database, "DB") for k, v in _tables(fresh).items()}
        assert got_tables == want_tables
        for m in MIGRATIONS:  # nothing conditional is left to do
            for step in m.statements(s.target):
                if isinstance(step, Step):
                    assert s.query_rows(step.when) == [(0,)], step.sql[:80]
        keys_of = dict(s.query_rows(f"SELECT name, sorting_key FROM system.tables WHERE database = '{s.database}'"))
        assert {r.name: keys_of[r.name] for r in ROLLUPS} == {r.name: ", ".join(r.sorting_key) for r in ROLLUPS}
        for name, want in before.items():
            got = s.query_frame(
                f"SELECT {keys}, sum({c.REQUESTS}) AS n, "
                f"{hist_quantiles_sql(f'mapKeys({c.LATENCY_HIST})', f'mapValues({c.LATENCY_HIST})')} AS q "
                f"FROM {s.database}.{name} GROUP BY {keys} ORDER BY {keys}"
            ).with_columns(pl.col("q").cast(pl.List(pl.UInt16)))
            assert got.get_column("n").to_list() == want.get_column("n").to_list(), name
            # requests_1m is rebuilt from the raw rows by migration 7: it holds their exact histograms.
            quantiles = _raw_quantile_codes(batch, keys) if name == "requests_1m" else want
            assert got.get_column("q").to_list() == quantiles.get_column("q").to_list(), name
        assert s.query_rows(f"SELECT count(), uniqExact({c.REQUEST_ID}) FROM {s.database}.requests") == [(n, n)]
        s.insert_arrow(RequestEvent, batch.set_column(0, c.REQUEST_ID, pa.array([f"s{i}" for i in range(n)])))
        for name in _REQUEST_ROLLUPS:
            total = s.query_rows(
                f"SELECT sum({c.REQUESTS}), sum(arraySum(mapValues({c.LATENCY_HIST}))) FROM {s.database}.{name}"
            )
            assert total == [(2 * n, 2 * n)], name
    finally:
        for st in (s, fresh):
            st.client.command(f"DROP DATABASE IF EXISTS {st.database} SYNC")


def test_migration_6_interrupted_after_the_copy_completes_once(store_dsn: str) -> None:
    """Migration 6 cut after its copy was filled, before the exchange: applied again, it empties and refills
    the copy, so every request is there once, in the new order, and the view feeds the rollups again."""
    s = Store.open(store_dsn)
    try:
        _old_store(s, _version_5_statements(s.target), 5)
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        n = 500
        batch = pa.table(
            {
                c.REQUEST_ID: [f"r{i}" for i in range(n)],
                c.TS: pa.array([now - timedelta(minutes=i % 50) for i in range(n)], pa.timestamp("us", tz="UTC")),
                c.LATENCY_MS: pa.array([1.0 + i % 90 for i in range(n)], pa.float32()),
                **{name: pa.array([f"{name}-{i % 3}" for i in range(n)]) for name in (c.HOST, c.MODEL, c.HW_POOL)},
                c.TRAFFIC_CLASS: pa.array([f"tc-{i % 2}" for i in range(n)]),
            }
        )
        s.insert_arrow(RequestEvent, batch)
        key = "SELECT sorting_key FROM system.tables WHERE database = {db:String} AND name = 'requests'"
        assert s.query_rows(key, {"db": s.database}) == [(_OLD_REQUEST_ORDER[10:-1],)]
        steps = [str(stmt) for stmt in MIGRATIONS[5].statements(s.target)]
        cut = next(i for i, stmt in enumerate(steps) if stmt.startswith("INSERT INTO"))
        for stmt in steps[: cut + 1]:
            s.client.command(stmt)
        assert s.schema_version() == 5
        assert s.migrate() == LATEST_VERSION
        assert s.query_rows(key, {"db": s.database}) == [(", ".join(RequestEvent.TABLE.order_by),)]
        assert s.query_rows(f"SELECT count(), uniqExact({c.REQUEST_ID}) FROM {s.database}.requests") == [(n, n)]
        s.insert_arrow(RequestEvent, batch.set_column(0, c.REQUEST_ID, pa.array([f"s{i}" for i in range(n)])))
        assert s.query_rows(f"SELECT count() FROM {s.database}.requests") == [(2 * n,)]
        for name in _REQUEST_ROLLUPS:
            assert s.query_rows(f"SELECT sum({c.REQUESTS}) FROM {s.database}.{name}") == [(2 * n,)], name
        left = s.query_rows(
            "SELECT count() FROM system.tables WHERE database = {db:String} AND name LIKE '%\\_\\_v6'",
            {"db": s.database},
        )
        assert left == [(0,)]
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")


def test_migration_7_rebuilds_the_minute_rollup_from_raw_rows(store_dsn: str) -> None:
    """A version-6 store whose per-minute rollup kept only its last 7 days: after migration 7 (cut once
    after its first day's insert and applied again) that rollup holds every minute of the raw rows, equal
    to Polars' per-minute sums of them, the hourly and daily rollups are untouched, and new traffic reaches
    all three once."""
    s = Store.open(store_dsn)
    try:
        _old_store(s, _version_6_statements(s.target), 6)
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        n = 1200
        ts = [now - timedelta(days=i % 20, minutes=i % 7) for i in range(n)]
        batch = pa.table(
            {
                c.REQUEST_ID: [f"r{i}" for i in range(n)],
                c.TS: pa.array(ts, pa.timestamp("us", tz="UTC")),
                c.LATENCY_MS: pa.array([1.0 + i % 90 for i in range(n)], pa.float32()),
                c.STATUS: pa.array(["error" if i % 9 == 0 else "ok" for i in range(n)]),
                **{name: pa.array([f"{name}-{i % 3}" for i in range(n)]) for name in (c.HOST, c.MODEL, c.HW_POOL)},
                **{name: pa.array(["x"] * n) for name in (c.TRAFFIC_CLASS, c.BUNDLE_ID)},
            }
        )
        s.insert_arrow(RequestEvent, batch)
        db = s.database
        s.client.command(
            f"ALTER TABLE {db}.requests_1m DELETE WHERE bucket < now() - INTERVAL 7 DAY SETTINGS mutations_sync = 2"
        )
        coarse = {
            name: s.query_rows(f"SELECT sum({c.REQUESTS}), sum({c.ERRORS}) FROM {db}.{name}")
            for name in ("requests_1h", "requests_1d")
        }
        assert s.query_rows(f"SELECT sum({c.REQUESTS}) FROM {db}.requests_1m")[0][0] < n
        steps = [str(stmt) for stmt in MIGRATIONS[6].statements(s.target)]
        cut = next(i for i, stmt in enumerate(steps) if stmt.startswith("INSERT INTO"))
        for stmt in steps[: cut + 1]:
            s.client.command(stmt)
        assert s.migrate() == LATEST_VERSION
        keys = f"{c.BUCKET}, {c.MODEL}, {c.HW_POOL}"
        got = s.query_frame(
            f"SELECT {keys}, sum({c.REQUESTS}) AS n, sum({c.ERRORS}) AS e, "
            f"sum(arraySum(mapValues({c.LATENCY_HIST}))) AS h FROM {db}.requests_1m GROUP BY {keys} ORDER BY {keys}"
        )
        frame = pl.from_arrow(batch)
        assert isinstance(frame, pl.DataFrame)
        want = (
            frame.with_columns(pl.col(c.TS).dt.truncate("1m").alias(c.BUCKET))
            .group_by(c.BUCKET, c.MODEL, c.HW_POOL)
            .agg(pl.len().alias("n"), (pl.col(c.STATUS) == "error").sum().alias("e"))
            .sort(c.BUCKET, c.MODEL, c.HW_POOL)
        )
        assert got.get_column("n").to_list() == want.get_column("n").to_list()
        assert got.get_column("e").to_list() == want.get_column("e").to_list()
        assert got.get_column("h").to_list() == want.get_column("n").to_list()
        assert got.get_column(c.BUCKET).dt.replace_time_zone(None).to_list() == (
            want.get_column(c.BUCKET).dt.replace_time_zone(None).to_list()
        )
        for name, before in coarse.items():
            assert s.query_rows(f"SELECT sum({c.REQUESTS}), sum({c.ERRORS}) FROM {db}.{name}") == before, name
        ttl = "SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = 'requests_1m'"
        assert f"toIntervalDay({REQUESTS_1M.ttl_days})" in s.query_rows(ttl, {"db": db})[0][0]
        s.insert_arrow(RequestEvent, batch.set_column(0, c.REQUEST_ID, pa.array([f"s{i}" for i in range(n)])))
        for name in _REQUEST_ROLLUPS:
            total = s.query_rows(f"SELECT sum({c.REQUESTS}) FROM {db}.{name}")[0][0]
            assert total == (2 * n if name == "requests_1m" else coarse[name][0][0] + n), name
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")


def test_migration_8_coarse_request_views_gather_histograms(store_dsn: str) -> None:
    """A version-7 store whose hourly and daily views summed histograms per code: after migration 8 they
    gather entries instead, the rows already stored are unchanged, and new traffic reaches every request
    rollup once, each answering the raw rows' exact quantile codes and counts."""
    s = Store.open(store_dsn)
    try:
        _old_store(s, _version_7_statements(s.target), 7)
        db = s.database
        views = {r.name: r.view_name for r in (REQUESTS_1H, REQUESTS_1D)}
        view_sql = "SELECT create_table_query FROM system.tables WHERE database = {db:String} AND name = {v:String}"
        for view in views.values():
            assert "sumMap" in s.query_rows(view_sql, {"db": db, "v": view})[0][0]
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        n = 900

        def batch(prefix: str) -> pa.Table:
            return pa.table(
                {
                    c.REQUEST_ID: [f"{prefix}{i}" for i in range(n)],
                    c.TS: pa.array([now - timedelta(minutes=i % 5) for i in range(n)], pa.timestamp("us", tz="UTC")),
                    c.LATENCY_MS: pa.array([0.5 + (i * 37) % 400 for i in range(n)], pa.float32()),
                    c.HOST: pa.array(["h"] * n),
                    c.MODEL: pa.array([f"m{i % 3}" for i in range(n)]),
                    **{name: pa.array(["x"] * n) for name in (c.HW_POOL, c.TRAFFIC_CLASS, c.BUNDLE_ID)},
                }
            )

        first = batch("a")
        s.insert_arrow(RequestEvent, first)
        before = {
            name: s.query_rows(f"SELECT {c.MODEL}, toString({c.LATENCY_HIST}) FROM {db}.{name} ORDER BY ALL")
            for name in views
        }
        assert s.migrate() == LATEST_VERSION
        for view in views.values():
            query = s.query_rows(view_sql, {"db": db, "v": view})[0][0]
            assert "groupArrayArray" in query, query
            assert "sumMap" not in query, query
        for name, rows in before.items():
            assert s.query_rows(f"SELECT {c.MODEL}, toString({c.LATENCY_HIST}) FROM {db}.{name} ORDER BY ALL") == rows
        second = batch("b")
        s.insert_arrow(RequestEvent, second)
        both = pa.concat_tables([first, second])
        frame = pl.from_arrow(both)
        assert isinstance(frame, pl.DataFrame)
        want: dict[str, list[object]] = {}
        for model, group in sorted(frame.group_by(c.MODEL), key=lambda kv: str(kv[0][0])):
            codes = sorted(latency_code(v) for v in group.get_column(c.LATENCY_MS).to_list())
            want[str(model[0])] = [len(codes), [codes[math.ceil(p * len(codes)) - 1] for p in (0.5, 0.95, 0.99)]]
        for name in (REQUESTS_1M.name, *views):
            rows = s.query_rows(
                f"SELECT {c.MODEL}, sum({c.REQUESTS}), "
                f"{hist_quantiles_sql(f'mapKeys({c.LATENCY_HIST})', f'mapValues({c.LATENCY_HIST})')} "
                f"FROM {db}.{name} GROUP BY {c.MODEL} ORDER BY {c.MODEL}"
            )
            got = {m: [total, [int(q) for q in qs]] for m, total, qs in rows}
            assert got == want, name
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")


def _before_version_17(rollup: Rollup) -> Rollup:
    """A rollup as versions 1-16 defined it: no count of fingerprinted requests."""
    return dataclasses.replace(rollup, values=tuple(v for v in rollup.values if v.name != c.FINGERPRINTED))


def _version_16_statements(target: Target) -> list[str]:
    """The schema as versions 1-16 left it: request rollups (tables and views) without ``fingerprinted``."""
    old = {r.name: render_rollup(_before_version_17(r), target) for r in (REQUESTS_1M, REQUESTS_1H, REQUESTS_1D)}
    out = []
    for stmt in render_schema(target):
        first = stmt.split("\n", 1)[0].split(" ON CLUSTER")[0]
        name = next((n for n in old if first.endswith((f".{target.local(n)}", f".{n}_mv", f".{n}"))), None)
        if name is None:
            out.append(stmt)
        else:
            out.append(next(s for s in old[name] if s.split("\n", 1)[0] == stmt.split("\n", 1)[0]))
    return [*out, *seen_table_sql(target)]  # migration 14's table, not one of the models'


def test_migration_17_request_rollups_count_fingerprinted_requests(store_dsn: str) -> None:
    """A version-16 store with traffic: after migration 17 its schema equals a fresh store's, its old rollup
    rows read ``fingerprinted`` as their ``requests`` (every request with an output was fingerprinted before
    the host SDK sampled), and new traffic counts only the requests whose output was fingerprinted."""
    s = Store.open(store_dsn)
    fresh = Store.open(store_dsn.replace("database=", "database=fresh_"))
    try:
        _old_store(s, _version_16_statements(s.target), 16)
        db = s.database
        columns = f"SELECT count() FROM system.columns WHERE database = '{db}' AND name = '{c.FINGERPRINTED}'"
        assert s.query_rows(columns) == [(0,)]
        now = datetime.now(UTC).replace(second=0, microsecond=0)

        def batch(prefix: str, statuses: list[str]) -> pa.Table:
            n = len(statuses)
            return pa.table(
                {
                    c.REQUEST_ID: [f"{prefix}{i}" for i in range(n)],
                    c.TS: pa.array([now - timedelta(minutes=i % 3) for i in range(n)], pa.timestamp("us", tz="UTC")),
                    c.FP_STATUS: pa.array(statuses),
                    **{name: pa.array(["x"] * n) for name in (c.HOST, c.MODEL, c.HW_POOL, c.TRAFFIC_CLASS)},
                }
            )

        s.insert_arrow(RequestEvent, batch("a", [""] * 40))
        assert s.migrate() == LATEST_VERSION
        assert s.migrate() == LATEST_VERSION
        fresh.migrate()
        got_tables = {k: v.replace(db, "DB") for k, v in _tables(s).items()}
        assert got_tables == {k: v.replace(fresh.database, "DB") for k, v in _tables(fresh).items()}
        for step in MIGRATIONS[-1].statements(s.target):  # nothing conditional is left to do
            if isinstance(step, Step):
                assert s.query_rows(step.when) == [(0,)], step.sql[:80]
        sums = f"SELECT sum({c.REQUESTS}), sum({c.FINGERPRINTED}) FROM {db}.{{}}"
        for r in (REQUESTS_1M, REQUESTS_1H, REQUESTS_1D):
            assert s.query_rows(sums.format(r.name)) == [(40, 40)], r.name
        # A sampled CPU host: 2 of 64 outputs fingerprinted, the others unsampled, failed or absent.
        s.insert_arrow(RequestEvent, batch("b", ["ok", "ok", "failed", "none", *["unsampled"] * 60]))
        for r in (REQUESTS_1M, REQUESTS_1H, REQUESTS_1D):
            assert s.query_rows(sums.format(r.name)) == [(104, 42)], r.name
            s.client.command(f"OPTIMIZE TABLE {db}.{r.name} FINAL")  # old rows merged with new ones
            assert s.query_rows(sums.format(r.name)) == [(104, 42)], r.name
    finally:
        for st in (s, fresh):
            st.client.command(f"DROP DATABASE IF EXISTS {st.database} SYNC")
