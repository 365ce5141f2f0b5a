"""Stores created by earlier releases (tests/schema/old_stores: their own code made each) migrate to the latest
schema: their tables, columns and views then equal a fresh store's, the rows they held are kept, and the rollups
fill from new rows. A migration that fails half-way leaves the store with the views that feed its rollups, and
running the migrations again completes it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from inferensics.schema import RequestEvent
from inferensics.schema import columns as c
from inferensics.schema.migrations import (
    LATEST_VERSION,
    MIGRATIONS,
    KeepTtl,
    Migration,
    Step,
    fresh_checksum,
)
from inferensics.schema.migrations import fresh_schema as fresh_statements
from inferensics.schema.migrator import apply_migrations
from inferensics.schema.rollups import ROLLUPS
from inferensics.schema.store import Store, StoreError
from tests.seeding import scratch_dsn

OLD_STORES = Path(__file__).parent / "old_stores"
VERSIONS = sorted(int(p.stem[1:]) for p in OLD_STORES.glob("v*.sql"))
LEFT_OVER = {("sdk_health", "attrs")}
"""Columns an old release's store keeps that a fresh one lacks: schema 10's release gave ``sdk_health`` an
``attrs`` map its model dropped without a migration; its rows' values stay (nothing reads them)."""

REQUEST_ROLLUPS = ("requests_1m", "requests_1h", "requests_1d")


def load_old_store(s: Store, version: int) -> None:
    """Make ``s``'s (empty) database the store release ``version``'s code created: its tables, views and
    ``schema_migrations`` rows."""
    text = (OLD_STORES / f"v{version}.sql").read_text()
    assert f"(schema version {version})" in text.splitlines()[0]
    body = "\n".join(line for line in text.splitlines() if not line.startswith("-- "))
    for statement in filter(None, (st.strip() for st in body.split(";\n\n"))):
        assert "\n" not in statement  # one statement a line, as record.py writes them
        s.client.command(statement.removesuffix(";").replace("__DB__.", f"{s.database}."))
    assert s.schema_version() == version


def _engine_parts(engine_full: str) -> tuple[str, frozenset[str], str]:
    """A table's engine clause, its settings as a set (a migration that adds one lists it last) and its comment."""
    comment = ""
    if " COMMENT '" in engine_full:
        engine_full, comment = engine_full.split(" COMMENT '", 1)
    head, _, settings = engine_full.partition(" SETTINGS ")
    return head, frozenset(settings.split(", ")), comment


def schema_of(s: Store) -> dict[str, object]:
    """What a migrated store must share with a fresh one: each table's engine (keys, TTL, settings) and comment
    (``engine_full`` no longer holds it), its columns in order (type, default, codec, comment) and each view's
    query, the database name written ``DB``."""
    out: dict[str, object] = {}
    tables = s.query_rows(
        "SELECT name, engine, engine_full, create_table_query, comment FROM system.tables WHERE database = {db:String} "
        "AND name != 'schema_migrations'",
        {"db": s.database},
    )
    for name, engine, engine_full, query, comment in tables:
        if engine == "MaterializedView":
            out[name] = query.replace(f"{s.database}.", "DB.")
        else:
            out[name] = (*_engine_parts(engine_full.replace(f"{s.database}.", "DB.")), comment)
    columns = s.query_rows(
        "SELECT table, name, type, default_kind, default_expression, compression_codec, comment FROM system.columns "
        "WHERE database = {db:String} AND table != 'schema_migrations' ORDER BY table, position",
        {"db": s.database},
    )
    columns_of: dict[str, list[tuple[object, ...]]] = {}
    for table, name, *rest in columns:
        if (table, name) not in LEFT_OVER:
            columns_of.setdefault(table, []).append((name, *rest))
    out.update({f"{table} columns": cols for table, cols in columns_of.items()})
    return out


@pytest.fixture(scope="module")
def fresh_schema(chdb_dir: Path) -> Iterator[dict[str, object]]:
    s = Store.open(scratch_dsn(chdb_dir, "fresh"))
    try:
        assert s.migrate() == LATEST_VERSION
        yield schema_of(s)
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()


def _requests(prefix: str, n: int, now: datetime) -> pa.Table:
    return pa.table(
        {
            c.REQUEST_ID: [f"{prefix}{i}" for i in range(n)],
            c.TS: pa.array([now - timedelta(minutes=37 * i) for i in range(n)], pa.timestamp("us", tz="UTC")),
            c.LATENCY_MS: pa.array([1.0 + (i * 13) % 300 for i in range(n)], pa.float32()),
            **{k: pa.array([f"{k}-{i % 3}" for i in range(n)]) for k in (c.HOST, c.MODEL, c.HW_POOL)},
            c.TRAFFIC_CLASS: pa.array(["online"] * n),
        }
    )


def _seed_old_rows(s: Store, n: int, now: datetime) -> None:
    """Rows an old release wrote: requests (over ~3 days), compiles and cache lookups, inserted through the old
    tables' own columns (those every release has), so that the old views fill the old rollups."""
    db, stamp = s.database, now.strftime("%Y-%m-%d %H:%M:%S")
    s.client.command(
        f"INSERT INTO {db}.requests (request_id, ts, host, model, hw_pool, traffic_class, latency_ms) "
        f"SELECT concat('old', toString(number)), toDateTime64('{stamp}', 6, 'UTC') - INTERVAL number * 37 MINUTE, "
        "'h', concat('m', toString(number % 3)), 'p', 'online', 1 + number % 300 FROM numbers({n:UInt32})",
        parameters={"n": n},
    )
    s.client.command(
        f"INSERT INTO {db}.compiles (ts, model, hw_pool, outcome) "
        f"SELECT toDateTime64('{stamp}', 6, 'UTC') - INTERVAL number HOUR, 'm0', 'p', 'ok' FROM numbers(7)"
    )
    s.client.command(
        f"INSERT INTO {db}.cache_events (ts, model, hw_pool, cache, result) "
        f"SELECT toDateTime64('{stamp}', 6, 'UTC') - INTERVAL number HOUR, 'm0', 'p', 'fx_graph', 'hit' "
        "FROM numbers(5)"
    )


def _rollup_sums(s: Store) -> dict[str, tuple[int, ...]]:
    db = s.database
    sums: dict[str, tuple[int, ...]] = {}
    for name in REQUEST_ROLLUPS:
        hist = f", sum(arraySum(mapValues({c.LATENCY_HIST})))" if s.schema_version() >= 4 else ""
        sums[name] = tuple(int(v) for v in s.query_rows(f"SELECT sum({c.REQUESTS}){hist} FROM {db}.{name}")[0])
    sums["compiles_1h"] = (int(s.query_rows(f"SELECT sum({c.COMPILES}) FROM {db}.compiles_1h")[0][0]),)
    sums["cache_events_1h"] = (int(s.query_rows(f"SELECT sum({c.REQUESTS}) FROM {db}.cache_events_1h")[0][0]),)
    return sums


def _views(s: Store) -> set[str]:
    rows = s.query_rows(
        "SELECT name FROM system.tables WHERE database = {db:String} AND engine = 'MaterializedView'",
        {"db": s.database},
    )
    return {str(name) for (name,) in rows}


def test_a_fresh_store_made_in_one_pass_equals_one_made_by_every_migration_in_turn(
    chdb_dir: Path, fresh_schema: dict[str, object]
) -> None:
    """A database with no table gets the current schema in one pass (migration 1's statements, every later version
    recorded): the same tables, columns, codecs, comments, TTLs, settings and views as running every migration in
    turn over an empty database, and nothing a later migration checks for is left to do. ``fresh_schema`` is the
    one-pass store (``Store.migrate``)."""
    client_store = Store.open(scratch_dsn(chdb_dir, "turn"))
    try:
        assert apply_migrations(client_store.client, client_store.target, fresh_in_one_pass=False) == LATEST_VERSION
        assert schema_of(client_store) == fresh_schema
        rows = client_store.query_rows(
            f"SELECT version FROM {client_store.database}.schema_migrations ORDER BY version"
        )
        assert [r[0] for r in rows] == [m.version for m in MIGRATIONS]
    finally:
        client_store.client.command(f"DROP DATABASE IF EXISTS {client_store.database} SYNC")
        client_store.close()
    one_pass = Store.open(scratch_dsn(chdb_dir, "pass"))
    try:
        assert one_pass.migrate() == LATEST_VERSION
        rows = one_pass.query_rows(
            f"SELECT version, checksum FROM {one_pass.database}.schema_migrations ORDER BY version"
        )
        assert rows == [(m.version, fresh_checksum(one_pass.target)) for m in MIGRATIONS]
        for m in MIGRATIONS:  # nothing conditional is left to do
            for step in m.statements(one_pass.target):
                if isinstance(step, Step):
                    assert one_pass.query_rows(step.when) == [(0,)], (m.version, step.sql[:120])
    finally:
        one_pass.client.command(f"DROP DATABASE IF EXISTS {one_pass.database} SYNC")
        one_pass.close()


def test_a_one_pass_creation_that_fails_half_way_is_completed_by_the_migrations_in_turn(
    chdb_dir: Path, fresh_schema: dict[str, object]
) -> None:
    """The one pass fails after some of its tables (a statement the engine refuses): nothing is recorded, the error
    names migration 1, and the next ``migrate`` (the database no longer empty) applies every migration in turn over
    what was created, reaching the same schema."""
    s = Store.open(scratch_dsn(chdb_dir, "half"))
    statements = fresh_statements(s.target)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(
                "inferensics.schema.migrator.fresh_schema", lambda target: [*statements[:5], "CREATE TABLE broken (x"]
            )
            with pytest.raises(StoreError) as failed:
                s.migrate()
        line = str(failed.value)
        assert "\n" not in line
        assert line.startswith(f"cannot create the schema of store {s.dsn} (version {LATEST_VERSION}): migration 1 (")
        assert "nothing was recorded: fix the cause and run `inferensics init` again" in line
        assert "previous release" not in line  # no release ever wrote to an empty database
        assert s.schema_version() == 0
        assert len(s.query_rows("SELECT name FROM system.tables WHERE database = {db:String}", {"db": s.database})) > 2
        assert s.migrate() == LATEST_VERSION
        assert schema_of(s) == fresh_schema
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_an_old_release_store_migrates_to_the_latest_schema(
    version: int, store_dsn: str, fresh_schema: dict[str, object]
) -> None:
    s = Store.open(store_dsn)
    try:
        load_old_store(s, version)
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        n = 120
        _seed_old_rows(s, n, now)
        assert s.migrate() == LATEST_VERSION
        assert s.migrate() == LATEST_VERSION  # nothing left to do
        assert schema_of(s) == fresh_schema
        for m in MIGRATIONS:  # nothing conditional is left to do
            for step in m.statements(s.target):
                if isinstance(step, Step):
                    assert s.query_rows(step.when) == [(0,)], (m.version, step.sql[:120])
        assert s.query_rows(f"SELECT count() FROM {s.database}.requests") == [(n,)]
        # The old rows are all in every rollup (the daily one of version 1, which had none, filled from the hourly).
        old = _rollup_sums(s)
        assert old == {**{r: (n, n) for r in REQUEST_ROLLUPS}, "compiles_1h": (7,), "cache_events_1h": (5,)}
        # New rows reach every rollup once.
        k = 90
        s.insert_arrow(RequestEvent, _requests("new", k, now))
        s.client.command(
            f"INSERT INTO {s.database}.compiles (ts, model, hw_pool, outcome) VALUES (now64(6), 'm1', 'p', 'ok')"
        )
        new = {**{r: (n + k, n + k) for r in REQUEST_ROLLUPS}, "compiles_1h": (8,), "cache_events_1h": (5,)}
        assert _rollup_sums(s) == new
        fingerprinted = f"SELECT sum({c.FINGERPRINTED}) FROM {s.database}.requests_1h"
        assert s.query_rows(fingerprinted) == [(n + k,)]  # no fingerprint status: each counts as fingerprinted
        left = s.query_rows(
            "SELECT name FROM system.tables WHERE database = {db:String} AND match(name, '__v[0-9]+')",
            {"db": s.database},
        )
        assert left == []
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()


def _failing_after_first_copy(m: Migration) -> Migration:
    """``m`` with a statement that fails right after its first ``INSERT INTO`` a copy (views dropped, the copy
    half-filled): what a full disk or a killed server does to it."""

    def statements(target: object) -> list[str | Step | KeepTtl]:
        out: list[str | Step | KeepTtl] = []
        failed = False
        for stmt in m.statements(target):  # type: ignore[arg-type]
            out.append(stmt)
            if not failed and str(stmt).startswith("INSERT INTO") and "__v" in str(stmt):
                out.append("SELECT throwIf(1, 'disk full (injected)')")
                failed = True
        assert failed
        return out

    return Migration(m.version, m.name, statements)


@pytest.mark.parametrize("version", [4, 6])
def test_a_migration_that_fails_leaves_the_views_and_resumes(
    version: int, store_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 5 (rollups copied into time-first tables) or 7 (per-minute rollup rebuilt from raw rows) fails
    after dropping the views and half-filling a copy: the error is one line saying what to do, the version is not
    recorded, the views the store had are back and feed its rollups (the previous release keeps writing), no copy
    is left; run again, it completes."""
    from inferensics.schema import migrator

    s = Store.open(store_dsn)
    try:
        load_old_store(s, version)
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        _seed_old_rows(s, 100, now)
        views = _views(s)
        assert {r.view_name for r in ROLLUPS} <= views
        broken = list(migrator.MIGRATIONS)
        broken[version] = _failing_after_first_copy(broken[version])  # migration version + 1
        monkeypatch.setattr(migrator, "MIGRATIONS", tuple(broken))
        with pytest.raises(StoreError) as err:
            s.migrate()
        text = str(err.value)
        assert "\n" not in text
        assert f"migration {version + 1} (" in text
        assert "disk full (injected)" in text
        assert f"the store stays at version {version} with the views that feed its rollups in place" in text
        assert "run `inferensics init` again" in text
        assert s.schema_version() == version
        assert _views(s) == views
        left = s.query_rows(
            "SELECT name FROM system.tables WHERE database = {db:String} AND match(name, '__v[0-9]+')",
            {"db": s.database},
        )
        assert left == []
        # The previous release keeps writing, and its rollups keep filling.
        s.client.command(
            f"INSERT INTO {s.database}.requests (request_id, ts, host, model, hw_pool, traffic_class, latency_ms) "
            "SELECT concat('after', toString(number)), now64(6), 'h', 'm0', 'p', 'online', 5 FROM numbers(40)"
        )
        for name in REQUEST_ROLLUPS:
            assert s.query_rows(f"SELECT sum({c.REQUESTS}) FROM {s.database}.{name}") == [(140,)], name
        monkeypatch.undo()
        assert s.migrate() == LATEST_VERSION
        for name in REQUEST_ROLLUPS:
            assert s.query_rows(f"SELECT sum({c.REQUESTS}) FROM {s.database}.{name}") == [(140,)], name
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()


def test_the_fixtures_are_what_record_py_writes() -> None:
    """Each fixture names the release that wrote it and holds that release's migrations, one to a row."""
    for version in VERSIONS:
        text = (OLD_STORES / f"v{version}.sql").read_text()
        assert re.match(rf"-- A store created by release [0-9a-f]{{7,}} \(schema version {version}\)", text)
        recorded = [int(v) for v in re.findall(r"schema_migrations .* VALUES \((\d+),", text)]
        assert recorded == [m.version for m in MIGRATIONS if m.version <= version]
    assert {1, 4, 6, 8} <= set(VERSIONS)
