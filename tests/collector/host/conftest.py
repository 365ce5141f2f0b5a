"""Fixtures for host-SDK tests: a clean Dynamo state, an isolated Inductor cache and a tracker on a store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch._dynamo

from inferensics.collector.host import SdkConfig, Tracker, instrument
from inferensics.schema.store import Store


@pytest.fixture(scope="session")
def inductor_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Inductor cache directory for the session (never the user's default cache)."""
    return tmp_path_factory.mktemp("inductor-cache")


@pytest.fixture(autouse=True)
def _clean_dynamo(inductor_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(inductor_cache))
    torch._dynamo.reset()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()


@pytest.fixture
def tracker(store: Store) -> Iterator[Tracker]:
    """A tracker exporting straight into the test's store, fingerprinting every request (the tests read each
    one's fingerprint); shut down (and flushed) afterwards."""
    t = instrument(
        store=store,
        host="test-host",
        hw_pool="cpu-pool",
        model="m",
        config=SdkConfig(batch_rows=1000, fingerprint_rate=1.0),
    )
    try:
        yield t
    finally:
        t.shutdown()


TORCH_INTERNAL_WARNINGS = (
    # Raised inside Inductor's own imports on torch 2.13; not ours to fix, and fatal under filterwarnings=error.
    "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning",
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Let torch's own deprecation warnings through for the tests that run real compiles."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            for spec in TORCH_INTERNAL_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(spec))
