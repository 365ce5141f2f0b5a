"""A store of imported TORCH_TRACE logs alone shows its recompile storms.

Recompiles outside any request (a server's warm-up, a log imported with ``import-trace``) count in the
storm rule beside what requests paid. The store here holds no request at all: a tlparse user's first hour.

Real parts: a fresh Python process under ``TORCH_TRACE`` recompiling one frame for each new input size
(Inductor on CPU with matrix products only: extern kernels, no C++ build), imported by the CLI into an
embedded chDB store.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.analytics import (
    LocalRunner,
    SliceParams,
    StormParams,
    build_weekly_report,
    recompile_storms,
    specializations,
)
from inferensics.analytics.weekly import current_week
from inferensics.cli.app import app
from inferensics.schema import columns as col
from inferensics.schema.store import Store
from tests.collector.trace.traced_run import RECOMPILE_REASON, run_recompiling

SIZES = (2, 3, 4, 5, 6)


@pytest.mark.slow
def test_an_imported_log_alone_shows_its_storm(tmp_path: Path, store_dsn: str) -> None:
    trace = run_recompiling(tmp_path, SIZES)
    dsn = store_dsn
    imported = CliRunner().invoke(app, ["import-trace", str(trace), "--dsn", dsn, "--model", "m", "--host", "h"])
    assert imported.exit_code == 0, imported.output

    now = datetime.now(UTC)
    with Store.open(dsn) as store:
        assert store.client.query(f"SELECT count() FROM {store.database}.requests").result_rows[0][0] == 0
        storms = recompile_storms(store, StormParams(start=now - timedelta(hours=2), end=now, min_recompiles=3))
        quiet = recompile_storms(store, StormParams(start=now - timedelta(hours=2), end=now, min_recompiles=5))
        specs = specializations(store, SliceParams(start=now - timedelta(hours=2), end=now))
        weekly = build_weekly_report(LocalRunner(store), current_week(now), now=now)

    assert storms.height == 1
    storm = storms.row(0, named=True)
    assert (storm[col.MODEL], storm[col.REQUESTS], storm[col.RECOMPILES]) == ("m", 0, len(SIZES) - 1)
    assert storm["trigger"] == "recompiles"
    assert storm[col.COMPILE_SECONDS] > 0  # every compile of the hour, the first one included
    assert storm["request_ids"] == []
    # One cause, four texts (expected 2, actual 3; expected 3, actual 4; ...): one reason, counted four times.
    assert storm["top_reasons"] == [RECOMPILE_REASON]
    assert storm["top_reason_counts"] == [len(SIZES) - 1]
    assert quiet.is_empty()  # 4 recompiles do not reach a floor of 5
    assert specs.select(col.MODEL, "compiles", col.RECOMPILES).rows() == [("m", len(SIZES), len(SIZES) - 1)]
    # The weekly report's per-model table has the model, though no request paid for its compiles.
    per = weekly.by_model_pool.select(
        col.MODEL, col.REQUESTS, "compiling_requests", "compile_records", "recompile_records"
    )
    assert per.rows() == [("m", 0, 0, len(SIZES), len(SIZES) - 1)]
