"""Several hardware pools judged each alone share the comparison's queries and get the numbers each gets alone.

A store of four pools that differ in size, latency, errors, compiles, cache misses, fingerprints and argmax
agreement (one pool without candidate requests): :func:`canary_compare_pools` over them is compared, pool by
pool and exactly, with the comparison as it ran before the grouping (``tests/analytics/canary_per_pool.py``,
one pool's own scans): two bundles read whole and truncated at ``max_rows`` (some pools then truncated, some
not), and two overlapping windows of every bundle.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from inferensics.analytics import CanaryParams, UnknownFilterValue, canary_compare
from inferensics.analytics.canary import canary_compare_pools
from inferensics.analytics.canary_pools import CanaryPoolsParams, canary_compare_pools_frame, pool_frames
from inferensics.schema import columns as col
from inferensics.schema.events import FP_OK, FP_UNSAMPLED
from inferensics.schema.store import Store
from tests.analytics.canary_per_pool import canary_compare_alone
from tests.analytics.canary_requests import MODEL, insert_requests, request_frame
from tests.analytics.counting_store import CountingStore
from tests.seeding import scratch_store

T = datetime(2026, 3, 2, tzinfo=UTC)
DAY = dict(start=T, end=T + timedelta(days=1))
SIZES = {"pool-a": (3000, 600), "pool-b": (2000, 400), "pool-c": (500, 80), "pool-d": (300, 0)}
"""Requests per pool: baseline, candidate (pool-c's candidate is under ``min_requests``; pool-d has none)."""
POOLS = list(SIZES)
NOW = T + timedelta(days=2)
"""The comparisons' clock: every seeded request is within the raw requests the store keeps."""


def _side(rng: np.random.Generator, bundle: str, pool: str, n: int, *, slow: float, worse: float) -> pl.DataFrame:
    """``n`` requests one every 20 s from ``T``: ``slow`` scales latency, ``worse`` the error and miss rates."""
    compiled = rng.random(n) < 0.02
    digests = [f"in-{pool}-{i}" for i in rng.integers(0, n // 2 + 1, n)]
    argmax = [d if rng.random() >= 0.03 * (worse - 1) else f"x-{d}" for d in digests]
    return request_frame(
        bundle,
        n,
        T,
        {
            col.TS: [T + timedelta(seconds=20 * i) for i in range(n)],
            col.LATENCY_MS: np.where(compiled, 30_000, rng.lognormal(np.log(20 * slow), 0.3, n)).astype(np.float32),
            col.COMPILE_MS: np.where(compiled, 29_000, 0).astype(np.float32),
            col.OUTCOME: np.where(compiled, "compile", np.where(rng.random(n) < 0.01 * worse, "fallback", "hit")),
            col.STATUS: np.where(rng.random(n) < 0.01 * worse, "error", "ok"),
            col.RECOMPILES: (rng.random(n) < 0.01 * worse).astype(np.uint32),
            col.CACHE_STATUS: np.where(rng.random(n) < 0.02 * worse, "miss", "hit"),
            col.FP_STATUS: np.where(rng.random(n) < 0.7, FP_OK, FP_UNSAMPLED),
            col.FP_NAN: (rng.random(n) < 0.002 * worse).astype(np.uint32),
            col.FP_MEAN: rng.normal(0.1 * (worse - 1), 1, n).astype(np.float32),
            col.FP_STD: rng.lognormal(0, 0.2, n).astype(np.float32),
            col.INPUT_DIGEST: digests,
            col.FP_ARGMAX_DIGEST: argmax,
        },
        pool=pool,
    )


@pytest.fixture(scope="module")
def pools_store(chdb_dir: Path) -> Iterator[Store]:
    rng = np.random.default_rng(43)
    slow = {"pool-a": 1.0, "pool-b": 1.3, "pool-c": 1.0, "pool-d": 1.0}
    worse = {"pool-a": 1.0, "pool-b": 4.0, "pool-c": 2.0, "pool-d": 1.0}
    with scratch_store(chdb_dir, "canary_grouped") as store:
        frames = []
        for pool, (nb, nc) in SIZES.items():
            frames.append(_side(rng, "base", pool, nb, slow=1.0, worse=1.0))
            if nc:
                frames.append(_side(rng, "cand", pool, nc, slow=slow[pool], worse=worse[pool]))
        insert_requests(store, *frames)
        yield store


CASES = {
    "two bundles": dict(model=MODEL, baseline="base", candidate="cand", **DAY),
    "two bundles truncated": dict(model=MODEL, baseline="base", candidate="cand", max_rows=1000, **DAY),
    "two overlapping windows": dict(
        model=MODEL, start=T + timedelta(hours=4), end=T + timedelta(days=1), baseline_start=T,
        baseline_end=T + timedelta(hours=12),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_grouped_pools_equal_each_pool_alone(pools_store: Store, case: str) -> None:
    params = CanaryParams(**CASES[case])
    counting = CountingStore(pools_store)
    grouped = canary_compare_pools(counting, params, POOLS, now=NOW)
    assert list(grouped) == POOLS
    for pool in POOLS:
        alone = canary_compare_alone(pools_store, params.model_copy(update={"hw_pool": pool}))
        got = grouped[pool]
        assert (got.verdict, got.rule, got.baseline_requests, got.candidate_requests, got.truncated) == (
            alone.verdict,
            alone.rule,
            alone.baseline_requests,
            alone.candidate_requests,
            alone.truncated,
        ), pool
        assert_frame_equal(got.evidence, alone.evidence)
    truncated = [p for p in POOLS if grouped[p].truncated]
    if case == "two bundles truncated":
        assert truncated == ["pool-a", "pool-b"]  # the baseline's 3,000 and 2,000 over 1,000; pool-c's 500 whole
    else:
        # The filter check, one scan for every pool's sides, one for every pool's pairs.
        assert (truncated, counting.queries) == ([], 3)
    # Every pool at once, as one comparison, also as before.
    every = canary_compare(pools_store, params)
    alone = canary_compare_alone(pools_store, params)
    assert (every.verdict, every.rule, every.baseline_requests, every.candidate_requests) == (
        alone.verdict,
        alone.rule,
        alone.baseline_requests,
        alone.candidate_requests,
    )
    assert_frame_equal(every.evidence, alone.evidence)


def test_the_store_gives_each_verdict(pools_store: Store) -> None:
    """The seeded pools cover a pass, a fail and an inconclusive (so the equality above covers each)."""
    grouped = canary_compare_pools(pools_store, CanaryParams(**CASES["two bundles"]), POOLS)
    verdicts = {pool: (r.verdict, r.rule.split(":")[0]) for pool, r in grouped.items()}
    assert verdicts["pool-b"][0] == "fail", grouped["pool-b"].evidence
    assert verdicts["pool-c"] == ("inconclusive", "fewer than 100 requests on a side")
    assert grouped["pool-d"].verdict == "inconclusive"
    assert grouped["pool-d"].rule == (
        "no requests of the candidate in the window 2026-03-02 00:00 – 2026-03-03 00:00 UTC (baseline 300): widen "
        "the window, or check the candidate bundle id"
    )
    assert verdicts["pool-a"] == ("pass", "every check passed"), grouped["pool-a"].evidence


def test_short_sides_past_the_kept_raw_requests_are_counted_in_the_rollups_in_one_query(pools_store: Store) -> None:
    """Whether a side's raw requests expired (all of them for a short side, some for one judged) is asked of the
    rollups only where its window reaches back past the kept days, once per side for every pool: here the candidate
    is short in pool-c and pool-d, and every row is kept, so the rules stay those of the raw rows."""
    params = CanaryParams(**CASES["two bundles"])
    recent, late = CountingStore(pools_store), CountingStore(pools_store)
    kept = canary_compare_pools(recent, params, POOLS, now=NOW)
    later = canary_compare_pools(late, params, POOLS, now=T + timedelta(days=60))
    assert (recent.queries, late.queries) == (3, 5)
    assert {p: r.rule for p, r in later.items()} == {p: r.rule for p, r in kept.items()}


def test_unknown_pool_is_refused_as_alone(pools_store: Store) -> None:
    params = CanaryParams(**CASES["two bundles"])
    with pytest.raises(UnknownFilterValue) as grouped:
        canary_compare_pools(pools_store, params, ["pool-a", "pool-x"])
    with pytest.raises(UnknownFilterValue) as alone:
        canary_compare(pools_store, params.model_copy(update={"hw_pool": "pool-x"}))
    assert str(grouped.value) == str(alone.value)
    assert "unknown hw_pool 'pool-x'" in str(grouped.value)
    with pytest.raises(ValueError, match="not hw_pool"):
        canary_compare_pools(pools_store, params.model_copy(update={"hw_pool": "pool-a"}), POOLS)


def test_pools_frame_splits_into_each_pools_frame(pools_store: Store) -> None:
    """The frame a named query can return for several pools splits into the frames ``canary_compare`` returns."""
    frame = canary_compare_pools_frame(pools_store, CanaryPoolsParams(**CASES["two bundles"], hw_pools=POOLS))
    assert frame.columns[0] == "hw_pool"
    split = pool_frames(frame)
    assert list(split) == POOLS
    for pool in POOLS:
        alone = canary_compare(pools_store, CanaryParams(**CASES["two bundles"], hw_pool=pool)).to_frame()
        assert_frame_equal(split[pool], alone)
    with pytest.raises(ValueError, match="hw_pools, not hw_pool"):
        CanaryPoolsParams(**CASES["two bundles"], hw_pools=POOLS, hw_pool="pool-a")
