"""Fixtures of the analytics tests: one store per module holding the seeded fleet (read-only tests)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inferensics.schema.store import Store
from tests.analytics.fleet import Fleet, load_fleet, make_fleet
from tests.seeding import scratch_store


@pytest.fixture(scope="session")
def fleet() -> Fleet:
    """The seeded fleet's frames."""
    return make_fleet()


@pytest.fixture(scope="session")
def fleet_store(chdb_dir: Path, fleet: Fleet) -> Iterator[Store]:
    """A migrated store holding the fleet, shared by the read-only tests of the session."""
    with scratch_store(chdb_dir, "fleet") as store:
        load_fleet(store, fleet)
        yield store
