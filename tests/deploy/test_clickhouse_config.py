"""The ClickHouse server files read back: XML that parses, settings and grants the engine knows, TTLs that
build a table, the format schema the collector names, and one cluster layout across Keeper and servers."""

from __future__ import annotations

import re
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferensics.collector.service import engine_decoder
from inferensics.collector.service.engine_decoder import delimited
from inferensics.collector.service.otlp_proto import PROTO_FILE, format_schema, render_proto, structure
from inferensics.collector.service.testing import build_request
from inferensics.schema.store import Store
from tests.collector.service.otel import request
from tests.deploy.layout import (
    CLUSTER_CONFIG,
    FORMAT_SCHEMAS,
    KEEPER_CONFIG,
    SERVER_CONFIG,
    USERS_CONFIG,
    cluster_hosts,
    keeper_hosts,
    xml_root,
)

SYSTEM_LOGS = (
    "query_log",
    "query_thread_log",
    "query_views_log",
    "part_log",
    "trace_log",
    "text_log",
    "metric_log",
    "asynchronous_metric_log",
    "error_log",
    "processors_profile_log",
    "asynchronous_insert_log",
    "opentelemetry_span_log",
    "session_log",
)
"""The system log tables the server config bounds (each must carry a TTL)."""


@pytest.fixture(scope="module")
def engine(chdb_dir: Path) -> Iterator[Store]:
    """The embedded engine, in a database of this module's own (nothing here needs the schema)."""
    s = Store.open(f"chdb://{chdb_dir}?database=deploy_{uuid.uuid4().hex[:8]}")
    try:
        yield s
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _known_settings(store: Store) -> set[str]:
    return {str(r[0]) for r in store.query_rows("SELECT name FROM system.settings")}


def _parses(store: Store, sql: str) -> str:
    return str(store.query_rows("SELECT formatQuery({q:String})", {"q": sql})[0][0])


def test_every_file_is_well_formed_xml() -> None:
    for path in (SERVER_CONFIG, CLUSTER_CONFIG, USERS_CONFIG, KEEPER_CONFIG):
        xml_root(path)


def test_profile_settings_and_constraints_are_settings_the_engine_knows(engine: Store) -> None:
    known = _known_settings(engine)
    profiles = xml_root(USERS_CONFIG).find("profiles")
    assert profiles is not None
    assert {p.tag for p in profiles} == {"inferensics_admin", "inferensics_ingest", "inferensics_reader"}
    for profile in profiles:
        settings = {s.tag for s in profile if s.tag != "constraints"}
        unknown = settings - known
        assert not unknown, f"profile {profile.tag}: settings the engine does not know: {sorted(unknown)}"
        for constraint in profile.findall("constraints/*"):
            assert constraint.tag in settings, f"{profile.tag}: constraint on {constraint.tag}, which it does not set"
            ceiling = constraint.findtext("max")
            if ceiling is not None:
                # the profile's value is the ceiling: deploy/README.md states these as limits the user cannot raise
                assert int(profile.findtext(constraint.tag, "")) == int(ceiling), constraint.tag


def test_the_reader_is_read_only_and_bounded() -> None:
    reader = xml_root(USERS_CONFIG).find("profiles/inferensics_reader")
    assert reader is not None
    assert reader.findtext("readonly") in {"1", "2"}
    assert reader.find("constraints/readonly/readonly") is not None, "the reader must not be able to lift readonly"
    for limit in ("max_execution_time", "max_memory_usage", "max_rows_to_read", "max_result_rows"):
        assert int(reader.findtext(limit, "0")) > 0, limit
        assert reader.find(f"constraints/{limit}/max") is not None, f"the reader could raise {limit}"
    users = xml_root(USERS_CONFIG).find("users")
    assert users is not None
    grants = [q.text or "" for q in users.findall("inferensics_reader/grants/query")]
    assert grants == ["GRANT SELECT ON inferensics.*"]


def test_every_grant_parses_and_every_user_has_a_profile_quota_and_password(engine: Store) -> None:
    root = xml_root(USERS_CONFIG)
    profiles = {p.tag for p in root.findall("profiles/*")}
    quotas = {q.tag for q in root.findall("quotas/*")} | {"default"}
    users = [u for u in root.findall("users/*") if u.tag != "default"]
    assert {u.tag for u in users} == {"inferensics_migrator", "inferensics_ingest", "inferensics_reader"}
    for user in users:
        assert user.findtext("profile") in profiles, user.tag
        assert user.findtext("quota") in quotas, user.tag
        password = user.find("password")
        assert password is not None, user.tag
        assert password.get("from_env"), f"{user.tag}: password must come from the environment"
        for query in user.findall("grants/query"):
            # users.xml grants name no grantee (the server parses them without one): the engine's parser
            # checks them here with the user as the grantee
            assert _parses(engine, f"{query.text} TO {user.tag}").startswith("GRANT "), query.text
    # the built-in user is reachable from the node itself only
    nets = [ip.text for ip in root.findall("users/default/networks/ip")]
    assert nets == ["::1", "127.0.0.1"]
    assert root.find("users/default/networks").get("replace") == "replace"  # type: ignore[union-attr]


def _staging_tables() -> set[str]:
    """The tables the engine decoder creates in the store's database, read from its own source: every
    ``CREATE ... TABLE {db}.{NAME}`` resolved through the module's constants, and every ``_ingest_*`` constant."""
    source = Path(engine_decoder.__file__).read_text(encoding="utf-8")
    created = re.findall(r"CREATE (?:OR REPLACE )?TABLE \{db\}\.\{(\w+)\}", source)
    assert created, "engine_decoder.py creates no table any more: update this test"
    names = {str(getattr(engine_decoder, constant)) for constant in created}
    names |= {v for v in vars(engine_decoder).values() if isinstance(v, str) and v.startswith("_ingest_")}
    return names


def _ingest_grants() -> dict[str, set[str]]:
    """The ingest user's privileges per object (``inferensics.X``)."""
    out: dict[str, set[str]] = {}
    for query in xml_root(USERS_CONFIG).findall("users/inferensics_ingest/grants/query"):
        match = re.fullmatch(r"GRANT (.+) ON (\S+)", query.text or "")
        assert match, query.text
        out.setdefault(match[2], set()).update(p.strip() for p in match[1].split(","))
    return out


def test_the_ingest_user_may_do_what_the_collector_does_and_no_ddl() -> None:
    grants = _ingest_grants()
    assert {"SELECT", "INSERT"} <= grants["inferensics.*"]
    staging = _staging_tables()
    assert {engine_decoder.RECORDS, engine_decoder.UNIQUE, engine_decoder.ROWS} <= staging
    for table in sorted(staging):
        assert {"CREATE TABLE", "DROP TABLE"} <= grants.get(f"inferensics.{table}", set()), (
            f"engine_decoder.py creates {table}, which the ingest user may not create or drop: grant it in "
            f"{USERS_CONFIG.name}"
        )
    # no DDL beyond its own tables
    text = " ; ".join(" ".join(sorted(p)) for p in grants.values())
    assert "ALTER" not in text
    assert "ALL" not in text
    ddl = {obj for obj, privileges in grants.items() if {"CREATE TABLE", "DROP TABLE"} & privileges}
    assert ddl == {f"inferensics.{t}" for t in staging} | {"inferensics._tmp_replace_*"}


@pytest.mark.parametrize("log", SYSTEM_LOGS)
def test_system_log_ttls_build_a_table(engine: Store, log: str) -> None:
    element = xml_root(SERVER_CONFIG).find(log)
    assert element is not None, f"{log} has no TTL in {SERVER_CONFIG.name}"
    ttl = element.findtext("ttl", "")
    assert ttl.endswith("DELETE"), ttl
    # The engine builds a table with this TTL (the system tables have these date columns).
    name = f"ttl_{log}"
    engine.client.command(
        f"CREATE TABLE {engine.database}.{name} (event_date Date, finish_date Date) "
        f"ENGINE = MergeTree ORDER BY tuple() TTL {ttl}"
    )
    created = engine.query_rows(
        "SELECT create_table_query FROM system.tables WHERE database = {db:String} AND name = {n:String}",
        {"db": engine.database, "n": name},
    )[0][0]
    assert "TTL" in str(created)


def test_format_schema_is_the_rendered_one_where_the_server_looks() -> None:
    committed = FORMAT_SCHEMAS / PROTO_FILE
    assert committed.read_text(encoding="utf-8") == render_proto(), (
        "deploy/clickhouse/format_schemas drifted from opentelemetry-proto: "
        "run `python -m inferensics.collector.service --write-proto deploy/clickhouse/format_schemas`"
    )
    assert [p.name for p in FORMAT_SCHEMAS.iterdir()] == [PROTO_FILE]
    assert xml_root(SERVER_CONFIG).findtext("format_schema_path") == "/var/lib/clickhouse/format_schemas/"


def test_the_engine_reads_otlp_with_the_committed_schema(engine: Store, tmp_path: Path) -> None:
    # What a server does with the collector's INSERT ... FORMAT Protobuf: read delimited OTLP requests with the
    # format schema from its format_schema_path (here the committed file itself, by its absolute path).
    records = [request(i, run="proto") for i in range(3)]
    body = tmp_path / "segment.pb"
    body.write_bytes(
        delimited([build_request(records).SerializeToString(), build_request(records[:1]).SerializeToString()])
    )
    rows = engine.client.query(
        f"SELECT length(resource_spans[1].scope_spans[1].spans), resource_spans[1].scope_spans[1].spans[1].name "
        f"FROM file('{body}', 'Protobuf', '{_quoted(structure())}')",
        settings={
            "format_schema": format_schema(FORMAT_SCHEMAS / PROTO_FILE),
            "input_format_protobuf_oneof_presence": 1,
        },
    ).result_rows
    assert [(int(n), str(name)) for n, name in rows] == [(3, "inferensics.requests"), (1, "inferensics.requests")]


def test_cluster_layout_is_one_across_keeper_macros_and_shards() -> None:
    root = xml_root(CLUSTER_CONFIG)
    hosts = cluster_hosts()
    assert hosts == [["ch-s1-0.ch-s1", "ch-s1-1.ch-s1"], ["ch-s2-0.ch-s2", "ch-s2-1.ch-s2"]]
    for shard in root.findall("remote_servers/inferensics/shard"):
        assert shard.findtext("internal_replication") == "true"  # replicated tables copy, not the Distributed
    assert root.find("remote_servers/inferensics/secret").get("from_env")  # type: ignore[union-attr]
    assert root.findtext("macros/cluster") == "inferensics"
    assert {m.tag: m.get("from_env") for m in root.findall("macros/*") if m.tag != "cluster"} == {
        "shard": "CH_SHARD",
        "replica": "CH_REPLICA",
    }
    raft = xml_root(KEEPER_CONFIG).findall("keeper_server/raft_configuration/server")
    assert [s.findtext("hostname") for s in raft] == keeper_hosts() == [f"keeper-{i}.keeper" for i in range(3)]
    assert [s.findtext("id") for s in raft] == ["1", "2", "3"]
    port = xml_root(KEEPER_CONFIG).findtext("keeper_server/tcp_port")
    assert {n.findtext("port") for n in root.findall("zookeeper/node")} == {port}


def test_a_broken_file_is_caught() -> None:
    with pytest.raises(ET.ParseError):
        ET.fromstring("<clickhouse><profiles></clickhouse>")
