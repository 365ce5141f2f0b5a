"""``status`` lists every table whose bytes it sums: the rows per table and the bytes on disk name the same tables.

What it got wrong: the rows per table were the event and rollup tables only, while the bytes on disk were every
table's active parts, ``schema_migrations`` and the collector's span keys (``ingest_seen``, the second largest
table of a busy store, deploy/SIZING.md) included; so ``status`` printed a total on disk ("the sum of the table")
that no row of its table added up to, and an empty store showed 4.8 KiB on disk beside a table of zeros.
"""

from __future__ import annotations

from inferensics.schema.dedup import KEY, SECOND, SEEN_TABLE
from inferensics.schema.store import Store


def test_the_rows_per_table_name_every_table_the_bytes_on_disk_sum(store: Store) -> None:
    assert set(store.disk_bytes()) <= set(store.row_counts())
    store.client.command(
        f"INSERT INTO {store.database}.{SEEN_TABLE} ({SECOND}, {KEY}) VALUES (1, 'sixteen-bytes-k1'), (2, 'k2')"
    )
    counts, disk = store.row_counts(), store.disk_bytes()
    assert set(disk) <= set(counts)
    assert list(counts)[: len(store.table_names())] == store.table_names()  # the event and rollup tables first
    assert counts[SEEN_TABLE] == 2
    assert counts["schema_migrations"] >= 1
    assert disk[SEEN_TABLE] > 0
