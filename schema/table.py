"""How an event model is laid out as a ClickHouse table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict

Engine = Literal["MergeTree", "ReplacingMergeTree"]


@dataclass(frozen=True, slots=True)
class Index:
    """A data-skipping index: ``INDEX name expr TYPE type GRANULARITY granularity``."""

    name: str
    expr: str
    type: str
    granularity: int = 1


@dataclass(frozen=True, slots=True)
class TableSpec:
    """Physical layout of one event table.

    Attributes:
        name: Table name (the cluster rendering adds ``_local`` for the shard tables).
        order_by: Sorting key columns, most selective filter first.
        time_column: The column that partitions the table by day and drives its TTL.
        ttl_days: Rows older than this many days are dropped, whole parts at a time; 0 keeps rows forever.
        engine: ``MergeTree`` for append-only events; ``ReplacingMergeTree`` for keyed records written
            more than once (bundles, blobs), deduplicated on merge.
        shard_key: Expression the cluster's ``Distributed`` table shards by.
        indexes: Data-skipping indexes.
        partition: Partition expression; by default the day of ``time_column``.
    """

    name: str
    order_by: tuple[str, ...]
    time_column: str = "ts"
    ttl_days: int = 90
    engine: Engine = "MergeTree"
    shard_key: str = "rand()"
    indexes: tuple[Index, ...] = field(default_factory=tuple)
    partition: str = ""

    @property
    def partition_expr(self) -> str:
        """The ``PARTITION BY`` expression."""
        return self.partition or f"toDate({self.time_column})"


class Event(BaseModel):
    """Base of every stored record: frozen, strict about unknown fields, documented field by field."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    TABLE: ClassVar[TableSpec]
