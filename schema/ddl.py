"""ClickHouse DDL rendered from the event models, for three backends.

* ``chdb`` — the embedded engine (the default store): plain ``MergeTree`` tables.
* ``server`` — one ClickHouse server: the same tables.
* ``cluster`` — ``ReplicatedMergeTree`` shard tables (``<name>_local``) created ``ON CLUSTER``, with a
  ``Distributed`` table under the plain name sharded by request id (or the table's own shard key), and the
  rollups and their views on every shard.

The committed renderings live in ``schema/sql/<backend>.sql``; ``tests/schema/test_ddl.py`` fails when they
drift from the models (regenerate with ``python -m inferensics.schema.ddl``).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from pydantic.fields import FieldInfo

from inferensics.schema.events import EVENT_MODELS
from inferensics.schema.rollups import ROLLUPS, Rollup
from inferensics.schema.table import Event, TableSpec
from inferensics.schema.types import ChType

Backend = Literal["chdb", "server", "cluster"]
BACKENDS: tuple[Backend, ...] = get_args(Backend)
DEFAULT_DATABASE = "inferensics"
DEFAULT_CLUSTER = "{cluster}"
SQL_DIR = Path(__file__).parent / "sql"

DEDUP_WINDOW = 10000
"""Insert blocks whose tokens a table remembers. Non-replicated MergeTree keeps none unless asked: the
collector's deduplication tokens (a replayed spool batch is never counted twice) need it, on the event
tables and on the rollups, whose view-fed blocks carry tokens derived from the insert's. A replicated
table keeps its block ids in Keeper, per shard, whichever node or collector inserted them; every collector
of a cluster adds about one block per table, shard and sealed segment, so its window is the same size (the
engine's default, 1000, covers under two minutes of ten collectors sealing a segment a second)."""

WIDE_PART_MIN_BYTES = 128 * 1024 * 1024
"""Parts below this many uncompressed bytes are written compact (one data file, not two per stream).

An insert of 100k request rows (about 19 MB) written wide opens and compresses more than 100 streams;
compact it costs about a third less engine time (measured by benchmarks/bench_store_insert.py). Merged
parts past this size become wide, so long-lived data keeps the per-column layout."""


@dataclass(frozen=True, slots=True)
class Column:
    """A column derived from a model field."""

    name: str
    type: ChType
    comment: str


def ch_type_of(field: FieldInfo) -> ChType:
    """The :class:`ChType` annotation of a model field (every stored field must have one)."""
    for meta in field.metadata:
        if isinstance(meta, ChType):
            return meta
    raise TypeError(f"field has no ChType annotation: {field!r}; use a type from inferensics.schema.types")


def columns_of(model: type[Event]) -> list[Column]:
    """The columns of ``model``'s table, in field order."""
    out: list[Column] = []
    for name, field in model.model_fields.items():
        out.append(Column(name, ch_type_of(field), (field.description or "").strip()))
    return out


def table_comment(model: type[Event]) -> str:
    """The comment of ``model``'s table: the first paragraph of its docstring, its lines joined into one (a first
    line alone can stop mid-sentence)."""
    paragraph = inspect.cleandoc(model.__doc__ or "").split("\n\n", 1)[0]
    return " ".join(line.strip() for line in paragraph.splitlines())


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", " ") + "'"


def _column_sql(c: Column) -> str:
    codec = f" CODEC({c.type.codec})" if c.type.codec else ""
    return f"    `{c.name}` {c.type.sql}{codec} COMMENT {_quote(c.comment)}"


@dataclass(frozen=True, slots=True)
class Target:
    """Where statements go: database, cluster, and whether tables are sharded."""

    backend: Backend
    database: str = DEFAULT_DATABASE
    cluster: str = DEFAULT_CLUSTER

    @property
    def on_cluster(self) -> str:
        return f" ON CLUSTER '{self.cluster}'" if self.backend == "cluster" else ""

    def local(self, name: str) -> str:
        """Name of the physical (shard-local on a cluster) table."""
        return f"{name}_local" if self.backend == "cluster" else name

    def engine(self, kind: str, table: str) -> str:
        if self.backend != "cluster":
            return f"{kind}()" if kind != "ReplacingMergeTree" else "ReplacingMergeTree(ts)"
        path = f"'/clickhouse/tables/{{shard}}/{self.database}/{table}'"
        args = f"{path}, '{{replica}}'"
        if kind == "ReplacingMergeTree":
            return f"ReplicatedReplacingMergeTree({args}, ts)"
        return f"Replicated{kind}({args})"


def dedup_window_setting(target: Target) -> str:
    """The setting that sizes ``target``'s deduplication window (replicated or not) to :data:`DEDUP_WINDOW`."""
    kind = "replicated" if target.backend == "cluster" else "non_replicated"
    return f"{kind}_deduplication_window = {DEDUP_WINDOW}"


def _settings(target: Target) -> str:
    parts = ["index_granularity = 8192", "ttl_only_drop_parts = 1", f"min_bytes_for_wide_part = {WIDE_PART_MIN_BYTES}"]
    return "SETTINGS " + ", ".join([*parts, dedup_window_setting(target)])


def _rollup_settings(target: Target) -> str:
    parts = ["ttl_only_drop_parts = 1", f"min_bytes_for_wide_part = {WIDE_PART_MIN_BYTES}"]
    return "SETTINGS " + ", ".join([*parts, dedup_window_setting(target)])


def _ttl(column: str, days: int) -> str:
    return f"\nTTL toDateTime({column}) + toIntervalDay({days})" if days > 0 else ""


def render_event_table(model: type[Event], target: Target) -> list[str]:
    """``CREATE TABLE`` statements for one event model (two on a cluster: local + Distributed)."""
    spec: TableSpec = model.TABLE
    db = target.database
    local = target.local(spec.name)
    cols = ",\n".join(_column_sql(c) for c in columns_of(model))
    indexes = "".join(f",\n    INDEX {i.name} {i.expr} TYPE {i.type} GRANULARITY {i.granularity}" for i in spec.indexes)
    stmt = (
        f"CREATE TABLE IF NOT EXISTS {db}.{local}{target.on_cluster}\n(\n{cols}{indexes}\n)\n"
        f"ENGINE = {target.engine(spec.engine, local)}\n"
        f"PARTITION BY {spec.partition_expr}\n"
        f"ORDER BY ({', '.join(spec.order_by)})"
        f"{_ttl(spec.time_column, spec.ttl_days)}\n"
        f"{_settings(target)}\n"
        f"COMMENT {_quote(table_comment(model))}"
    )
    out = [stmt]
    if target.backend == "cluster":
        out.append(distributed_sql(spec.name, local, spec.shard_key, target))
    return out


def distributed_sql(name: str, local: str, shard_key: str, target: Target) -> str:
    db = target.database
    return (
        f"CREATE TABLE IF NOT EXISTS {db}.{name}{target.on_cluster} AS {db}.{local}\n"
        f"ENGINE = Distributed('{target.cluster}', {db}, {local}, {shard_key})"
    )


def render_rollup(rollup: Rollup, target: Target) -> list[str]:
    """The rollup table and the materialized view that feeds it from its source's physical table."""
    db = target.database
    local = target.local(rollup.name)
    key_cols = [f"    `{k}` LowCardinality(String)" for k in rollup.keys]
    val_cols = [f"    {v.definition}" for v in rollup.values]
    cols = ",\n".join(["    `bucket` DateTime64(0, 'UTC') CODEC(Delta(8), ZSTD(1))", *key_cols, *val_cols])
    table = (
        f"CREATE TABLE IF NOT EXISTS {db}.{local}{target.on_cluster}\n(\n{cols}\n)\n"
        f"ENGINE = {target.engine('AggregatingMergeTree', local)}\n"
        f"PARTITION BY toYYYYMM(bucket)\n"
        f"ORDER BY ({', '.join(rollup.sorting_key)})"
        f"{_ttl('bucket', rollup.ttl_days)}\n"
        f"{_rollup_settings(target)}"
    )
    parent = rollup.parent
    time_expr = "bucket" if parent else "ts"
    selects = ",\n".join(
        [f"    {rollup.bucket_fn}({time_expr}) AS bucket", *[f"    {k}" for k in rollup.keys]]
        + [f"    {v.child_select if parent else v.select} AS {v.name}" for v in rollup.values]
    )
    source = target.local(parent.name if parent else rollup.source)
    view = (
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.{rollup.view_name}{target.on_cluster}\n"
        f"TO {db}.{local}\nAS SELECT\n{selects}\n"
        f"FROM {db}.{source}\n"
        f"GROUP BY bucket, {', '.join(rollup.keys)}"
    )
    out = [table, view]
    if target.backend == "cluster":
        out.append(distributed_sql(rollup.name, local, "rand()", target))
    return out


def render_schema(target: Target) -> list[str]:
    """Every statement that creates the current schema on ``target``, in order."""
    stmts = [f"CREATE DATABASE IF NOT EXISTS {target.database}{target.on_cluster}"]
    for model in EVENT_MODELS:
        stmts.extend(render_event_table(model, target))
    for rollup in ROLLUPS:
        stmts.extend(render_rollup(rollup, target))
    return stmts


def render_sql_file(backend: Backend) -> str:
    """The committed text of ``schema/sql/<backend>.sql``."""
    header = (
        f"-- Generated from the inferensics event models for the '{backend}' backend.\n"
        "-- Do not edit: run `python -m inferensics.schema.ddl` after changing schema/events.py.\n\n"
    )
    return header + ";\n\n".join(render_schema(Target(backend))) + ";\n"


def iter_statements(sql: str) -> Iterator[str]:
    """Split a rendered file back into statements (no statement holds ``;`` inside a literal)."""
    for chunk in sql.split(";\n"):
        body = "\n".join(line for line in chunk.splitlines() if not line.startswith("--")).strip()
        if body:
            yield body


def write_sql_files(directory: Path = SQL_DIR) -> list[Path]:
    """Regenerate the committed renderings."""
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for backend in BACKENDS:
        path = directory / f"{backend}.sql"
        path.write_text(render_sql_file(backend), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for p in write_sql_files():
        sys.stdout.write(f"wrote {p}\n")
