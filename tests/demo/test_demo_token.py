"""``inferensics demo --service URL`` with a token the run cannot use says so before it builds anything."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferensics.demo.runner import DemoError, DemoOptions, run_demo
from tests.collector.service.harness import INGEST, RunningService, new_service

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    with new_service(tmp_path_factory.mktemp("svc"), via_cli=True) as svc:
        yield svc


def test_an_ingest_token_is_refused_before_the_bundles_are_built(service: RunningService, tmp_path: Path) -> None:
    """It built both release bundles (about a minute), pushed them, then stopped on
    ``GET /api/v1/status: 403 token lacks the 'read' role``; the run needs the admin SQL API too."""
    opts = DemoOptions(
        duration_s=5, rate=1, dashboard=False, data_dir=tmp_path / "run", service_url=service.url, token=INGEST,
        exit_when_done=True, bundle_cache=tmp_path / "bundles",
    )  # fmt: skip
    started = time.monotonic()
    with pytest.raises(DemoError, match=r"lacks the 'admin' role.*pass --token \(or \$INFERENSICS_TOKEN\)"):
        run_demo(opts)
    assert time.monotonic() - started < 30
    assert not (tmp_path / "bundles").exists()
