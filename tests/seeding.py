"""Writing a test's known events into a store: the one seeder behind the analytics fleet
(tests/analytics/fleet.py, Polars frames) and the dashboard's scenario (tests/dashboard/seed.py, events).

Both build their data and their expected answers from the same values; this module only puts the data in
the store, the same way for both: migrated, TTL merges stopped (test events may lie in the past), each
event kind in one insert, blobs through the store's blob API.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from inferensics.schema.table import Event

if TYPE_CHECKING:
    import polars as pl

    from inferensics.schema.store import Store


def scratch_dsn(chdb_dir: Path, prefix: str = "t") -> str:
    """A DSN naming a new database (``<prefix>_<random>``) in the session's chDB directory."""
    return f"chdb://{chdb_dir}?database={prefix}_{uuid.uuid4().hex[:12]}"


@contextmanager
def migrated_store(dsn: str) -> Iterator[Store]:
    """The store at ``dsn``, migrated, its database dropped and the store closed afterwards."""
    from inferensics.schema.store import Store

    store = Store.open(dsn)
    store.migrate()
    try:
        yield store
    finally:
        store.client.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")
        store.close()


@contextmanager
def scratch_store(chdb_dir: Path, prefix: str = "t") -> Iterator[Store]:
    """A migrated store in a new database of the session's chDB directory (:func:`scratch_dsn`), dropped and closed
    afterwards."""
    with migrated_store(scratch_dsn(chdb_dir, prefix)) as store:
        yield store


def stop_ttl(store: Store) -> None:
    """Stop TTL merges on every table of ``store``: events in the past would expire under the test."""
    for name in store.table_names():
        store.client.command(f"SYSTEM STOP TTL MERGES {store.database}.{name}")


def seed(
    store: Store,
    *,
    events: Iterable[Event] = (),
    frames: Mapping[type[Event], pl.DataFrame] | None = None,
    blobs: Iterable[tuple[bytes, str, str]] = (),
) -> None:
    """Migrate ``store``, stop its TTL merges and insert ``frames`` (by event model), ``events`` (one insert
    per kind, in first-seen order) and ``blobs`` (data, kind, media type)."""
    store.migrate()
    stop_ttl(store)
    for model, frame in (frames or {}).items():
        store.insert_frame(model, frame)
    by_kind: dict[type[Event], list[Event]] = {}
    for e in events:
        by_kind.setdefault(type(e), []).append(e)
    for batch in by_kind.values():
        store.insert_events(batch)
    for data, kind, media_type in blobs:
        store.put_blob(data, kind, media_type=media_type)
