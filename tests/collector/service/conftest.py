"""Fixtures: a running collector service per test, stopped afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from inferensics.collector.service import ServiceState, build_state, create_app, load_config
from inferensics.schema.store import Store
from tests.collector.service.harness import TOKENS, RunningService, new_service
from tests.collector.service.named import TEST_QUERIES
from tests.collector.service.test_engine_decoder_fuzz import Pair


@pytest.fixture
def service(tmp_path: Path) -> Iterator[RunningService]:
    """A started service with its own data and spool directories."""
    svc = new_service(tmp_path).start()
    try:
        yield svc
    finally:
        svc.stop()


@pytest.fixture
def app_state(store_dsn: str, tmp_path: Path) -> Iterator[ServiceState]:
    """The service's parts in this process, over the test's own database, with a tiny named query."""
    config = load_config(
        {"dsn": store_dsn, "spool_dir": str(tmp_path / "spool"), "batch_max_age_s": 0.05, "tokens": TOKENS},
        environ={},
    )
    state = build_state(config, open_store=lambda: Store.open(store_dsn), named_queries=TEST_QUERIES)
    try:
        yield state
    finally:
        state.close()
        store = Store.open(store_dsn)
        store.client.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")
        store.close()


@pytest.fixture
def api(app_state: ServiceState) -> Iterator[TestClient]:
    """A Starlette test client over the in-process app (no token set; tests pass headers)."""
    with TestClient(create_app(app_state)) as client:
        yield client


@pytest.fixture
def pair(store_dsn: str, tmp_path: Path) -> Iterator[Pair]:
    """The engine decoder and the Python decoder over one store, for comparing what each stores."""
    p = Pair(store_dsn, tmp_path / "engine")
    try:
        yield p
    finally:
        p.close()
