"""A canary judged pool by pool: the p-value checks corrected for the number of pools (Holm–Bonferroni).

Ten pools where the candidate errs a little more than the baseline by chance (1,000 requests a side per pool,
20 baseline errors against 24 to 40 candidate errors: one-sided p-values from 0.26 down to 0.0044, the three
smallest under ``alpha`` 0.01), and an eleventh pool where it errs three times as often (p 2.5e-6).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from inferensics.analytics import CanaryParams, canary_compare, stats
from inferensics.analytics.canary import POOLS_CORRECTED_FOR, verdict_event
from inferensics.analytics.canary_pools import PoolVerdict, correct_for_pools, worst_verdict
from inferensics.analytics.report.canary import verdict_of
from inferensics.schema import columns as col
from inferensics.schema.store import Store
from tests.analytics.canary_requests import MODEL, insert_requests, request_frame
from tests.seeding import scratch_store

T = datetime(2026, 3, 2, tzinfo=UTC)
WINDOW = dict(start=T, end=T + timedelta(days=1))
N = 1000
BASELINE_ERRORS = 20
MILD = {f"noise-{i}": errors for i, errors in enumerate((24, 26, 28, 30, 31, 33, 35, 38, 39, 40))}
"""Candidate errors per pool: chance-sized increases (the three largest fail one test at alpha 0.01)."""
REAL = {"regressed": 60}
"""A pool where the candidate really errs more."""
NOTE = "p Holm–Bonferroni-adjusted for the {} hardware pools judged"


def _side(bundle: str, pool: str, errors: int, start: datetime) -> pl.DataFrame:
    # The same latencies on both sides (the latency checks pass), no fingerprint differences: only errors differ.
    return request_frame(
        bundle,
        N,
        start,
        {
            col.LATENCY_MS: (20 + (np.arange(N) % 50) * 0.1).astype(np.float32),
            col.STATUS: np.where(np.arange(N) < errors, "error", "ok"),
        },
        pool=pool,
    )


@pytest.fixture(scope="module")
def pools_store(chdb_dir: Path) -> Iterator[Store]:
    with scratch_store(chdb_dir, "pools") as store:
        frames = []
        for i, (pool, errors) in enumerate({**MILD, **REAL}.items()):
            start = T + timedelta(hours=i)
            frames += [_side("base", pool, BASELINE_ERRORS, start), _side("cand", pool, errors, start)]
        insert_requests(store, *frames)
        yield store


def _judged(store: Store, pools: list[str]) -> dict[str, pl.DataFrame]:
    """Each pool's ``canary_compare`` frame, judged alone (as ``canary compare`` and the canary page judge them)."""
    return {
        pool: canary_compare(
            store, CanaryParams(model=MODEL, baseline="base", candidate="cand", hw_pool=pool, **WINDOW)
        ).to_frame()
        for pool in pools
    }


def _worst(frames: dict[str, pl.DataFrame]) -> tuple[str, str]:
    return worst_verdict([PoolVerdict(pool, *verdict_of(frame)) for pool, frame in frames.items()])


def _error_rate(frame: pl.DataFrame) -> dict[str, object]:
    return frame.filter(pl.col("metric") == "error_rate").row(0, named=True)


def test_chance_increases_over_many_pools_do_not_fail_once_corrected(pools_store: Store) -> None:
    frames = _judged(pools_store, list(MILD))
    # Uncorrected, the worst of ten tests fails: the three largest chance increases have p < 0.01.
    verdict, rule = _worst(frames)
    assert verdict == "fail", rule
    assert [p for p, f in frames.items() if verdict_of(f)[0] == "fail"] == ["noise-7", "noise-8", "noise-9"]

    corrected = correct_for_pools(frames)
    assert _worst(corrected)[0] == "pass"
    raw = [float(_error_rate(f)["p_value"]) for f in frames.values()]  # type: ignore[arg-type]
    for (pool, frame), adjusted in zip(corrected.items(), stats.holm_adjusted(raw), strict=True):
        row = _error_rate(frame)
        assert row["outcome"] == "pass", (pool, row)
        assert row["p_value"] == pytest.approx(adjusted)
        assert str(row["rule"]).endswith(NOTE.format(10))
        verdict, rule = verdict_of(frame)
        assert (verdict, rule) == ("pass", f"every check passed; {NOTE.format(10)}")
    # Latency is no p-value check: left as it was.
    latency = [f.filter(pl.col("check") == "latency") for f in (frames["noise-0"], corrected["noise-0"])]
    assert latency[0].equals(latency[1])
    # The recorded verdict says what it was corrected for.
    params = CanaryParams(model=MODEL, baseline="base", candidate="cand", hw_pool="noise-9", **WINDOW)
    event = verdict_event(corrected["noise-9"], params, now=T, pools_judged=len(corrected))
    assert event.attrs[POOLS_CORRECTED_FOR] == "10"
    assert event.rule.endswith(f"; {NOTE.format(10)}")
    assert POOLS_CORRECTED_FOR not in verdict_event(frames["noise-9"], params, now=T).attrs


def test_a_real_regression_of_one_pool_still_fails_and_is_named(pools_store: Store) -> None:
    corrected = correct_for_pools(_judged(pools_store, [*MILD, *REAL]))
    verdict, rule = _worst(corrected)
    assert verdict == "fail"
    assert rule == f"on hardware pool regressed (failed: error_rate; {NOTE.format(11)})"
    assert _error_rate(corrected["regressed"])["p_value"] < 0.01 / 11  # type: ignore[operator]


def test_one_pool_is_left_as_it_is(pools_store: Store) -> None:
    frames = _judged(pools_store, ["noise-9"])
    assert correct_for_pools(frames)["noise-9"].equals(frames["noise-9"])
    assert verdict_of(frames["noise-9"])[0] == "fail"
