"""The pages over a store of imported TORCH_TRACE logs alone: a tlparse user's first hour, no host SDK.

The log's recompile storm is a storm on the on-call overview, its slice named though the import gave no
pool, and Compile & cache health counts its recompiles in the headline as in the reasons table, one cause
grouped as one reason.

Real parts: a fresh Python process under ``TORCH_TRACE`` recompiling one frame per new input size (Inductor on
CPU, matrix products only: no C++ build), ``inferensics import-trace`` in a child process (the service owns
the store once started), ``inferensics serve`` and the Streamlit pages in AppTest.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime

import polars as pl
import pytest

from inferensics.dashboard._internal import charts
from tests.collector.service.harness import READ, new_service
from tests.collector.trace.traced_run import RECOMPILE_REASON, run_recompiling
from tests.dashboard.apptest import assert_clean, metric, open_page
from tests.dashboard.conftest import REPO, SeededService
from tests.dashboard.seed import SeedFacts

SIZES = tuple(range(2, 14))
"""Twelve sizes: a compile and 11 recompiles in one hour, above the storm rule's default floor of 10."""
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededService]:
    """A service over a store holding one imported log and nothing else."""
    root = tmp_path_factory.mktemp("imported-only")
    trace = run_recompiling(root, SIZES)
    service = new_service(root / "service")
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    subprocess.run(
        [sys.executable, "-m", "inferensics.cli", "import-trace", str(trace), "--dsn", service.dsn, "--model", "m"],
        cwd=REPO, env=env, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    service.start()
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    try:
        yield SeededService(service=service, token=READ, facts=SeedFacts(now=now, requests=[], others=[]))
    finally:
        service.stop()


def test_the_overview_shows_the_imported_storm(imported: SeededService) -> None:
    at = open_page(imported)
    assert_clean(at)
    storms = [e.value for e in at.error if "Recompile storm" in e.value]
    assert len(storms) == 1, [e.value for e in at.error]
    assert storms[0].startswith("**Recompile storm** · m / (no pool) · hour of ")
    assert f": {len(SIZES) - 1} recompiles (records, failed compiles too), " in storms[0]
    assert f"Top reason: `{RECOMPILE_REASON}`." in storms[0]


def test_compile_health_counts_the_imported_recompiles(imported: SeededService) -> None:
    at = open_page(imported, "views/compile_health.py")
    assert_clean(at)
    assert metric(at, "Recompile records") == str(len(SIZES) - 1)
    reasons = next(d.value for d in at.dataframe if "code_locations" in d.value.columns)
    assert reasons["reason"].tolist() == [RECOMPILE_REASON]
    assert reasons["recompiles"].tolist() == [len(SIZES) - 1]
    assert reasons["variants"].tolist() == [len(SIZES) - 1]  # expected 2, actual 3; expected 3, actual 4; ...


def test_compile_health_charts_the_imported_recompiles_over_time(imported: SeededService) -> None:
    # The chart counted what requests paid: an imported log alone had a reasons table of 11 recompiles above
    # no chart. It now counts the recompiles the headline and the reasons table count.
    at = open_page(imported, "views/compile_health.py")
    assert_clean(at)
    drawn = {json.loads(c.proto.spec)["title"]: c.proto for c in at.get("vega_lite_chart")}
    assert "Recompiles by model" in drawn, list(drawn)
    chart = drawn["Recompiles by model"]
    (records,) = [pl.read_ipc_stream(io.BytesIO(d.data.data)) for d in chart.datasets if d.name == charts.DATASET]
    assert records.group_by("model").agg(pl.col("recompiles").sum()).rows() == [("m", len(SIZES) - 1)]
    assert any("inside requests or not" in c.value for c in at.caption)
    # Compile time likewise: charted from the compile events, which no request paid here (there was no chart).
    assert "Compile seconds by model" in drawn, list(drawn)
    chart = drawn["Compile seconds by model"]
    (records,) = [pl.read_ipc_stream(io.BytesIO(d.data.data)) for d in chart.datasets if d.name == charts.DATASET]
    assert metric(at, "Compile seconds") == f"{records['compile_seconds'].sum():,.1f} s" != "0.0 s"
