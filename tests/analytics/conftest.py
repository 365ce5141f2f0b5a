"""Fixtures of the analytics tests: one store per module holding the seeded fleet (read-only tests)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferensics.schema.store import Store
from tests.analytics.fleet import Fleet, load_fleet, make_fleet


@pytest.fixture(scope="session")
def fleet() -> Fleet:
    """The seeded fleet's frames."""
    return make_fleet()


@pytest.fixture(scope="session")
def fleet_store(chdb_dir: Path, fleet: Fleet) -> Iterator[Store]:
    """A migrated store holding the fleet, shared by the read-only tests of the session."""
    store = Store.open(f"chdb://{chdb_dir}?database=fleet_{uuid.uuid4().hex[:8]}")
    store.migrate()
    load_fleet(store, fleet)
    try:
        yield store
    finally:
        store.client.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")
        store.close()
