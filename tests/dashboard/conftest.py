"""Fixtures: one collector service per test session over a data directory seeded with known events.

The store is seeded in a subprocess before the service starts: chDB lets one process open one data
directory, and the service must own it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.collector.service.harness import READ, RunningService, new_service
from tests.dashboard.seed import SeedFacts, build
from tests.dashboard.small_storm import build_small_storm

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class SeededService:
    """A running service, the token the dashboard uses and the facts of its seeded data."""

    service: RunningService
    token: str
    facts: SeedFacts

    @property
    def url(self) -> str:
        """The service's base URL."""
        return self.service.url


@pytest.fixture(autouse=True)
def _keep_main_module() -> Iterator[None]:
    """Put back ``sys.modules["__main__"]`` after each test: Streamlit's script runner leaves the page
    script there, and a later test that spawns processes (the collector's decode workers) would make each
    child run the dashboard's app file as its main module."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


def seed_store(dsn: str, now: datetime, module: str = "tests.dashboard.seed") -> None:
    """Write the seed events of ``module`` (run as ``python -m MODULE DSN NOW_ISO``) into ``dsn`` from a child
    process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    subprocess.run(
        [sys.executable, "-m", module, dsn, now.isoformat()],
        cwd=REPO, env=env, check=True, capture_output=True, timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededService]:
    """The seeded, running service for the whole session."""
    root = tmp_path_factory.mktemp("dashboard-service")
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    service = new_service(root)
    seed_store(service.dsn, now)
    service.start()
    try:
        yield SeededService(service=service, token=READ, facts=build(now))
    finally:
        service.stop()


@pytest.fixture(scope="session")
def small_storm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededService]:
    """A service over the seed with its storm cut below the storm rule's default floors (the demo's case), for
    the pages that find storms (the on-call overview, the Weekly report)."""
    root = tmp_path_factory.mktemp("small-storm-service")
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    service = new_service(root)
    seed_store(service.dsn, now, "tests.dashboard.small_storm")
    service.start()
    try:
        yield SeededService(service=service, token=READ, facts=build_small_storm(now))
    finally:
        service.stop()
