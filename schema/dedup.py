"""The collector's per-span dedup keys: which spans the store already holds, for a bounded window.

Every span that carries rows is keyed by ``sipHash128(trace id, span id, name, start time)`` (the OTLP
identity of a span, with what a retry repeats byte for byte). The collector inserts a segment's keys after
its rows and skips the spans whose key is already here, so a request re-sent after a lost answer (a crash, a
timeout) is stored once. Keys are kept :data:`SEEN_WINDOW_HOURS` after they arrive, sorted by the span's
start second first, so a lookup reads only the seconds its spans started in.
"""

from __future__ import annotations

from typing import Final

from inferensics.schema.ddl import DEDUP_WINDOW, Target, distributed_sql

SEEN_TABLE: Final = "ingest_seen"
SEEN_WINDOW_HOURS: Final = 6
"""Hours a span's key is kept after it arrived: a retry later than this is stored again."""
SECOND: Final = "b"
"""Column: the span's start, whole seconds since the epoch (UInt32)."""
KEY: Final = "k"
"""Column: the span's key, 16 bytes."""
ARRIVED: Final = "at"
"""Column: when the key was inserted (drives the TTL)."""


def seen_table_sql(target: Target) -> list[str]:
    """DDL of the key table (and its ``Distributed`` table on a cluster, sharded by key)."""
    db, local = target.database, target.local(SEEN_TABLE)
    engine = target.engine("MergeTree", SEEN_TABLE)
    settings = "ttl_only_drop_parts = 1"
    if target.backend != "cluster":
        settings += f", non_replicated_deduplication_window = {DEDUP_WINDOW}"
    stmts = [
        f"CREATE TABLE IF NOT EXISTS {db}.{local}{target.on_cluster}\n"
        f"(\n    `{SECOND}` UInt32,\n    `{KEY}` FixedString(16),\n    `{ARRIVED}` DateTime DEFAULT now()\n)\n"
        f"ENGINE = {engine}\nPARTITION BY toStartOfHour({ARRIVED})\nORDER BY ({SECOND}, {KEY})\n"
        f"TTL {ARRIVED} + INTERVAL {SEEN_WINDOW_HOURS} HOUR\nSETTINGS {settings}"
    ]
    if target.backend == "cluster":
        stmts.append(distributed_sql(SEEN_TABLE, local, f"cityHash64({KEY})", target))
    return stmts
