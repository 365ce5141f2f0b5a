"""The rollups equal what Polars computes on the same raw rows (quantiles within the stated error)."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from inferensics.schema import REQUESTS_1D, REQUESTS_1H, REQUESTS_1M, RequestEvent, Rollup
from inferensics.schema import columns as c
from inferensics.schema.rollups import (
    LATENCY_RELATIVE_ERROR,
    QUANTILES,
    hist_quantiles_sql,
    latency_code,
    latency_decode,
    latency_decode_sql,
)
from inferensics.schema.store import Store

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _events(n: int, seed: int) -> list[RequestEvent]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        outcome = rng.choices(["hit", "compile", "recompile", "fallback"], [90, 3, 4, 3])[0]
        out.append(
            RequestEvent(
                request_id=f"r{seed}-{i}",
                ts=T0 + timedelta(seconds=rng.uniform(0, 3 * 3600)),
                host=f"h{rng.randrange(3)}",
                model=rng.choice(["llama", "gpt2"]),
                hw_pool=rng.choice(["h200-a", "cpu-b"]),
                traffic_class=rng.choice(["interactive", "batch", "shadow"]),
                bundle_id=rng.choice(["base", "cand"]),
                latency_ms=rng.lognormvariate(3, 1.2),
                status="error" if rng.random() < 0.02 else "ok",
                outcome=outcome,
                cache_status={"hit": "none", "fallback": "none"}.get(outcome, rng.choice(["hit", "miss"])),
                compile_ms=rng.uniform(100, 3000) if outcome in ("compile", "recompile") else 0.0,
                recompiles=1 if outcome == "recompile" else 0,
                fp_nan=1 if rng.random() < 0.01 else 0,
            )
        )
    return out


def _expected(events: list[RequestEvent], every: str, keys: tuple[str, ...]) -> pl.DataFrame:
    rows = pl.DataFrame([e.model_dump() for e in events])
    return (
        rows.with_columns(pl.col(c.TS).dt.truncate(every).alias(c.BUCKET))
        .group_by(c.BUCKET, *keys)
        .agg(
            pl.len().cast(pl.UInt64).alias(c.REQUESTS),
            (pl.col(c.STATUS) == "error").sum().cast(pl.UInt64).alias(c.ERRORS),
            (pl.col(c.OUTCOME) == "fallback").sum().cast(pl.UInt64).alias(c.FALLBACKS),
            pl.col(c.RECOMPILES).sum().cast(pl.UInt64).alias(c.RECOMPILES),
            pl.col(c.OUTCOME).is_in(["compile", "recompile"]).sum().cast(pl.UInt64).alias(c.COMPILES),
            (pl.col(c.COMPILE_MS).cast(pl.Float64).sum() / 1000).alias(c.COMPILE_SECONDS),
            (pl.col(c.CACHE_STATUS) == "hit").sum().cast(pl.UInt64).alias(c.CACHE_HITS),
            pl.col(c.CACHE_STATUS).is_in(["miss", "mixed"]).sum().cast(pl.UInt64).alias(c.CACHE_MISSES),
            ((pl.col(c.FP_NAN) + pl.col(c.FP_INF)) > 0).sum().cast(pl.UInt64).alias(c.NONFINITE),
            pl.col(c.LATENCY_MS).cast(pl.Float64).sum().alias(c.LATENCY_SUM_MS),
            pl.col(c.LATENCY_MS).alias("latencies"),
        )
    )


def _read(store: Store, rollup: Rollup) -> pl.DataFrame:
    sums = ", ".join(f"sum({v.name}) AS {v.name}" for v in rollup.values if v.name != c.LATENCY_HIST)
    keys = ", ".join(rollup.keys)
    return store.query_frame(
        f"SELECT {c.BUCKET}, {keys}, {sums}, "
        f"arrayMap(q -> {latency_decode_sql('q')}, "
        f"{hist_quantiles_sql(f'mapKeys({c.LATENCY_HIST})', f'mapValues({c.LATENCY_HIST})')}) AS quantiles "
        f"FROM {store.database}.{rollup.name} GROUP BY {c.BUCKET}, {keys}"
    )


@pytest.mark.parametrize(
    ("rollup", "every"), [(REQUESTS_1M, "1m"), (REQUESTS_1H, "1h"), (REQUESTS_1D, "1d")], ids=["1m", "1h", "1d"]
)
def test_request_rollup_equals_polars(store: Store, rollup: Rollup, every: str) -> None:
    events = _events(3000, seed=7)
    for k in range(3):  # three inserts: the rollup must merge partial states across blocks
        store.insert_events(events[k::3])
    got = _read(store, rollup)
    want = _expected(events, every, rollup.keys)
    keys = [c.BUCKET, *rollup.keys]
    joined = want.join(got.with_columns(pl.col(c.BUCKET).cast(pl.Datetime("us", "UTC"))), on=keys, how="full")
    assert joined.height == want.height == got.height
    for name in (
        c.REQUESTS,
        c.ERRORS,
        c.FALLBACKS,
        c.RECOMPILES,
        c.COMPILES,
        c.CACHE_HITS,
        c.CACHE_MISSES,
        c.NONFINITE,
    ):
        assert (joined[name] == joined[f"{name}_right"]).all(), name
    for name in (c.COMPILE_SECONDS, c.LATENCY_SUM_MS):
        diff = (joined[name] - joined[f"{name}_right"]).abs() / joined[name].abs().clip(lower_bound=1e-9)
        assert diff.max() < 1e-9, name  # type: ignore[operator]
    tol = LATENCY_RELATIVE_ERROR + 1e-6
    for lat, qs in zip(joined["latencies"].to_list(), joined["quantiles"].to_list(), strict=True):
        s = pl.Series(lat, dtype=pl.Float64)
        for q, got_q in zip(QUANTILES, qs, strict=True):
            lo = s.quantile(q, interpolation="lower")
            hi = s.quantile(q, interpolation="higher")
            assert lo is not None
            assert hi is not None
            assert lo * (1 - tol) <= got_q <= hi * (1 + tol), (q, lo, hi, got_q)


def _nearest_rank(hist: dict[int, int], q: float) -> int:
    total, cum = sum(hist.values()), 0
    for code in sorted(hist):
        cum += hist[code]
        if cum >= q * total:
            return code
    raise AssertionError("empty histogram")


def test_histogram_quantile_is_the_smallest_code_reaching_the_level(store: Store) -> None:
    # Histograms split over rows (repeated codes too), from one request to past quantileTiming's
    # small-count modes: every level answers the smallest code whose cumulative count reaches p × total.
    rng = random.Random(11)
    cases: list[list[tuple[list[int], list[int]]]] = [[([3, 7], [1, 1])], [([7], [1]), ([3], [1])], [([5], [1])]]
    cases.append([([3, 7], [5000, 5000])])  # p × total whole in the counter-array mode
    for size in (2, 4, 10, 20, 31, 32, 100, 5000, 6000, 40000):
        codes = [rng.randrange(1024) for _ in range(rng.randint(1, 300))]
        counts = [rng.randint(1, max(1, size // len(codes) + 1)) for _ in codes]
        cut = sorted(rng.sample(range(1, len(codes)), min(5, len(codes) - 1))) if len(codes) > 1 else []
        bounds = [0, *cut, len(codes)]
        cases.append([(codes[a:b], counts[a:b]) for a, b in itertools.pairwise(bounds)])
    for rows in cases:
        union = " UNION ALL ".join(
            f"SELECT CAST({k}, 'Array(UInt16)') AS k, CAST({v}, 'Array(UInt64)') AS v" for k, v in rows
        )
        got = store.query_rows(f"SELECT {hist_quantiles_sql('k', 'v')} FROM ({union})")[0][0]
        hist: dict[int, int] = {}
        for k, v in rows:
            for code, n in zip(k, v, strict=True):
                hist[code] = hist.get(code, 0) + n
        assert [int(x) for x in got] == [_nearest_rank(hist, q) for q in QUANTILES], rows


def test_latency_code_round_trip_is_within_stated_error() -> None:
    for ms in (0.01, 0.0137, 0.5, 1.0, 12.3456, 999.9, 1e5, 1e6 * 0.99):
        assert abs(latency_decode(latency_code(ms)) - ms) / ms <= LATENCY_RELATIVE_ERROR + 1e-12
