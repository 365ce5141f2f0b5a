"""Canary statistics and verdicts, checked against direct computations on the same rows."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from inferensics.analytics import CanaryParams, UnknownFilterValue, canary_compare, stats
from inferensics.schema import columns as col
from inferensics.schema.events import FP_OK, FP_UNSAMPLED
from inferensics.schema.rollups import LATENCY_CODE_MAX, latency_code, latency_decode
from inferensics.schema.store import Store
from tests.analytics.canary_requests import insert_requests, request_frame
from tests.analytics.fleet import BASELINE, CANDIDATE, T0, W10, Fleet
from tests.seeding import scratch_store

WEEK = dict(start=W10, end=W10 + timedelta(days=7))


def test_proportion_test_known_value() -> None:
    # z = 0.1 / sqrt(0.15 × 0.85 × 0.02) = 1.9803; one-sided p = 0.02384
    assert stats.proportion_test(10, 100, 20, 100) == pytest.approx(0.02384, abs=1e-4)
    assert stats.proportion_test(0, 100, 0, 100) == 1.0
    assert stats.proportion_test(0, 0, 5, 10) == 1.0


def test_ks_matches_brute_force() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(0, 1, 300), rng.normal(0.3, 1, 200)
    d, p = stats.ks_test(a, b)
    brute = max(abs((a <= x).mean() - (b <= x).mean()) for x in np.concatenate([a, b]))
    assert d == pytest.approx(brute)
    assert 0 < p < 0.05
    assert stats.ks_test(a, a) == (0.0, 1.0)


def test_bootstrap_is_seeded_and_brackets_the_ratio() -> None:
    rng = np.random.default_rng(2)
    hb, hc = stats.histogram(rng.lognormal(3, 0.4, 4000)), stats.histogram(rng.lognormal(3, 0.4, 4000) * 1.2)
    r1 = stats.bootstrap_quantile_ratio(hb, hc, 0.5, seed=5)
    assert r1 == stats.bootstrap_quantile_ratio(hb, hc, 0.5, seed=5)
    assert r1.low <= r1.ratio <= r1.high
    assert r1.low < 1.2 < r1.high * 1.02


NOT_COMPILED = (pl.col(col.COMPILE_MS) == 0) & ~pl.col(col.OUTCOME).is_in(["compile", "recompile"])
"""The requests the latency checks read: those that did not compile in the request."""


def _side(fleet: Fleet, bundle: str) -> pl.DataFrame:
    return fleet.requests.filter(
        (pl.col(col.MODEL) == "llama")
        & (pl.col(col.BUNDLE_ID) == bundle)
        & (pl.col(col.TS) >= WEEK["start"])
        & (pl.col(col.TS) < WEEK["end"])
    )


def _first_argmax(f: pl.DataFrame) -> dict[str, str]:
    """The argmax digest of the earliest request per input digest (ties: the smallest argmax digest; the
    engine breaks ties by the first 8 bytes, which decide every tie here)."""
    f = f.filter((pl.col(col.INPUT_DIGEST) != "") & (pl.col(col.FP_ARGMAX_DIGEST) != ""))
    f = f.sort([col.TS, col.FP_ARGMAX_DIGEST])
    return {
        d: a
        for d, a in f.group_by(col.INPUT_DIGEST, maintain_order=True)
        .agg(pl.col(col.FP_ARGMAX_DIGEST).first())
        .iter_rows()
    }


def _assert_agreement(ev: dict[str, dict[str, object]], base: pl.DataFrame, cand: pl.DataFrame) -> None:
    """Argmax agreement over the earliest request per input digest on each side, as Polars counts it."""
    fb, fc = _first_argmax(base), _first_argmax(cand)
    pairs = [d for d in fb if d in fc]
    assert pairs, "the fixture must give input-matched pairs"
    assert ev["argmax_agreement"]["baseline"] == len(pairs)
    assert ev["argmax_agreement"]["candidate"] == pytest.approx(sum(fb[d] == fc[d] for d in pairs) / len(pairs))


def test_failing_candidate_evidence_matches_polars(fleet_store: Store, fleet: Fleet) -> None:
    result = canary_compare(fleet_store, CanaryParams(model="llama", baseline=BASELINE, candidate=CANDIDATE, **WEEK))
    base, cand = _side(fleet, BASELINE), _side(fleet, CANDIDATE)
    assert (result.baseline_requests, result.candidate_requests) == (base.height, cand.height)
    ev = {r["metric"]: r for r in result.evidence.iter_rows(named=True)}
    for metric, expr in (
        ("error_rate", pl.col(col.STATUS) == "error"),
        ("fallback_rate", pl.col(col.OUTCOME) == "fallback"),
        ("nonfinite_rate", (pl.col(col.FP_NAN) + pl.col(col.FP_INF)) > 0),
    ):
        assert ev[metric]["baseline"] == pytest.approx(base.select(expr.mean()).item())
        assert ev[metric]["candidate"] == pytest.approx(cand.select(expr.mean()).item())
    for q, metric in ((0.5, "p50_ms"), (0.95, "p95_ms"), (0.99, "p99_ms")):
        codes = sorted(latency_code(x) for x in cand.filter(NOT_COMPILED).get_column(col.LATENCY_MS).to_list())
        assert ev[metric]["candidate"] == pytest.approx(latency_decode(codes[math.ceil(q * len(codes)) - 1]))

    _assert_agreement(ev, base, cand)
    d, _ = stats.ks_test(
        base.get_column(col.FP_MEAN).cast(pl.Float64).to_numpy(),
        cand.get_column(col.FP_MEAN).cast(pl.Float64).to_numpy(),
    )
    assert ev["fp_mean_ks"]["ci_low"] == pytest.approx(d)
    assert result.verdict == "fail"
    failed = set(result.evidence.filter(pl.col("outcome") == "fail").get_column("metric"))
    assert {"error_rate", "nonfinite_rate", "fp_mean_ks", "argmax_agreement", "p50_ms"} <= failed
    assert "fallback_rate" not in failed
    assert result.rule.startswith("failed: ")
    frame = result.to_frame()
    last = frame.row(-1, named=True)
    assert (last["check"], last["outcome"]) == ("verdict", "fail")


def test_the_latency_interval_is_the_ratios_not_the_candidates_latency(fleet_store: Store, fleet: Fleet) -> None:
    """Walk 39: the interval was the ratio's bounds times the baseline's quantile, read in ms as an interval of the
    candidate's (a p99 of 11,235 ms "between 202.9 and 829,708.6 ms" in a run whose longest request took 36 s).
    It is the bootstrap interval of candidate / baseline, the number the rule compares with the threshold."""
    result = canary_compare(fleet_store, CanaryParams(model="llama", baseline=BASELINE, candidate=CANDIDATE, **WEEK))
    sides = (_side(fleet, b).filter(NOT_COMPILED).get_column(col.LATENCY_MS).to_list() for b in (BASELINE, CANDIDATE))
    # Codes by the engine's rule in float64 (``stats.histogram`` rounds a float32 latency on a code boundary
    # the other way).
    hb, hc = (np.bincount([latency_code(x) for x in side], minlength=LATENCY_CODE_MAX + 1) for side in sides)
    expected = stats.bootstrap_quantile_ratios(hb, hc, (0.5, 0.95, 0.99), seed=0)
    rows = result.evidence.filter(pl.col("check") == "latency").iter_rows(named=True)
    for row, ratio in zip(rows, expected, strict=True):
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((ratio.low, ratio.high)), row
        assert row["ci_low"] <= row["candidate"] / row["baseline"] <= row["ci_high"], row
        outcome = "fail" if row["ci_low"] > row["threshold"] else "pass" if row["ci_high"] <= row["threshold"] else ""
        assert row["outcome"] == (outcome or "inconclusive"), row


def test_a_canary_drawn_from_the_baselines_distribution_passes_despite_compiles(store: Store) -> None:
    """Walk 42 (D6): about 1 % of requests carry a 20-90 s compile, so p99 sat on the gap between serving and
    compile latency and its interval straddled the threshold however much traffic there was: a canary drawn from
    the baseline's own distribution was INCONCLUSIVE (``undecided: p99_ms``) for ever. Latency is now compared
    over the requests that did not compile (the recompile and cache-miss rates judge compiles), and the rule
    says over how many."""
    rng = np.random.default_rng(42)
    t = datetime(2026, 3, 2, tzinfo=UTC)
    frames, compiled_per_side = [], {}
    for bundle, n in (("prod", 20_000), ("canary", 2_000)):
        compiled = rng.random(n) < 0.01
        compiled_per_side[bundle] = int(compiled.sum())
        serving = rng.lognormal(np.log(1000), 0.05, n)
        frames.append(
            request_frame(
                bundle,
                n,
                t,
                {
                    col.LATENCY_MS: np.where(compiled, rng.uniform(20_000, 90_000, n), serving).astype(np.float32),
                    col.COMPILE_MS: np.where(compiled, rng.uniform(19_000, 89_000, n), 0).astype(np.float32),
                    col.OUTCOME: np.where(compiled, "compile", "hit"),
                },
            )
        )
    insert_requests(store, *frames)
    window = dict(start=t, end=t + timedelta(days=1))
    params = CanaryParams(model="m", baseline="prod", candidate="canary", **window)
    scope = (
        f"latency over requests that did not compile: baseline {20_000 - compiled_per_side['prod']:,} of 20,000, "
        f"candidate {2_000 - compiled_per_side['canary']:,} of 2,000"
    )
    for p in (params, params.model_copy(update={"max_rows": 19_999})):  # the full scan and the truncated path
        result = canary_compare(store, p)
        latency = result.evidence.filter(pl.col("check") == "latency")
        assert latency.get_column("outcome").to_list() == ["pass"] * 3, latency
        assert result.verdict == "pass", result.evidence
        if p.max_rows > 20_000:
            assert set(latency.get_column("rule")) == {f"{scope}; ratio CI low > 1.1 fails; CI high <= 1.1 passes"}
        # Under a second for every request read: no compile's 20-90 s reached a quantile.
        assert latency.get_column("baseline").max() < 1500, latency  # type: ignore[operator]


def test_too_few_requests_is_inconclusive(fleet_store: Store) -> None:
    result = canary_compare(
        fleet_store, CanaryParams(model="llama", baseline=BASELINE, candidate=CANDIDATE, min_requests=5000, **WEEK)
    )
    assert (result.verdict, result.rule) == ("inconclusive", "fewer than 5000 requests on a side")


def test_empty_window_is_inconclusive(fleet_store: Store) -> None:
    result = canary_compare(
        fleet_store,
        CanaryParams(
            model="llama",
            baseline=BASELINE,
            candidate=CANDIDATE,
            start=T0 - timedelta(days=30),
            end=T0 - timedelta(days=29),
        ),
    )
    assert result.verdict == "inconclusive"
    assert result.baseline_requests == result.candidate_requests == 0
    assert result.rule == (
        "no requests of the baseline or the candidate in the window 2026-01-24 00:00 – 2026-01-25 00:00 UTC: widen "
        "the window, or check the bundle ids"
    )


def test_unknown_bundle_and_same_sides(fleet_store: Store) -> None:
    with pytest.raises(UnknownFilterValue, match="unknown bundle 'bundle-typo'"):
        canary_compare(fleet_store, CanaryParams(model="llama", baseline=BASELINE, candidate="bundle-typo", **WEEK))
    with pytest.raises(ValueError, match="same requests"):
        CanaryParams(model="llama", baseline=BASELINE, candidate=BASELINE, **WEEK)


@pytest.mark.parametrize(
    ("window", "message"),
    [
        (dict(start=WEEK["end"], end=WEEK["start"]), "end 2026-03-02T00:00:00+00:00 is not after start"),
        (dict(start=W10, end=W10), "end 2026-03-02T00:00:00+00:00 is not after start 2026-03-02T00:00:00+00:00"),
        (dict(**WEEK, baseline_start=W10, baseline_end=W10 - timedelta(days=7)), "baseline_end 2026-02-23"),
    ],
)
def test_an_inverted_or_empty_window_is_refused(window: dict[str, datetime], message: str) -> None:
    """Such a window holds no request: the comparison ran over nothing and recorded an inconclusive verdict."""
    with pytest.raises(ValueError, match=re.escape(message)):
        CanaryParams(model="llama", baseline=BASELINE, candidate=CANDIDATE, **window)


def test_an_unknown_bundle_names_only_bundles_that_exist(store: Store) -> None:
    """Requests served without a bundle carry an empty id, which the message listed as known: ''."""
    t = datetime(2026, 3, 2, tzinfo=UTC)
    window = dict(start=t, end=t + timedelta(days=1))
    for bundle, message in (("", "known: none"), ("b1", "known: 'b1'")):
        insert_requests(store, request_frame(bundle, 2, t, {col.LATENCY_MS: 1.0}))
        with pytest.raises(UnknownFilterValue) as info:
            canary_compare(store, CanaryParams(model="m", baseline="b-typo", candidate="b2", **window))
        assert str(info.value) == f"unknown bundle 'b-typo': it matches nothing in the store; {message}"


def test_equal_bundles_pass_and_two_windows(store: Store) -> None:
    rng = np.random.default_rng(11)
    n = 4000
    t = datetime(2026, 3, 2, tzinfo=UTC)
    lat = rng.lognormal(np.log(20), 0.3, n).astype(np.float32)
    digests = [f"d{i}" for i in range(n)]
    frames = []
    for bundle, offset in (("b1", timedelta(0)), ("b2", timedelta(hours=1))):
        frames.append(
            request_frame(
                bundle,
                n,
                t + offset,
                {
                    col.LATENCY_MS: lat,
                    col.INPUT_DIGEST: digests,
                    col.FP_ARGMAX_DIGEST: digests,
                    col.FP_MEAN: rng.normal(0, 1, n).astype(np.float32),
                },
            )
        )
    insert_requests(store, *frames)
    window = dict(start=t, end=t + timedelta(days=1))
    result = canary_compare(store, CanaryParams(model="m", traffic_class="t", baseline="b1", candidate="b2", **window))
    assert result.verdict == "pass", result.evidence
    assert result.rule == "every check passed"
    # Equal sides: exact zeros print as 0, not as summation noise such as -1.73e-18.
    values = result.evidence.select("baseline", "candidate", "ci_low", "ci_high").to_numpy().ravel()
    assert not [x for x in values if x is not None and 0 < abs(x) < 1e-12], result.evidence
    # two windows of the same fleet: the first 2 h against the rest of the day
    split = canary_compare(
        store,
        CanaryParams(
            model="m",
            start=t + timedelta(hours=2),
            end=t + timedelta(days=1),
            baseline_start=t,
            baseline_end=t + timedelta(hours=2),
        ),
    )
    in_first_two_hours = n + 3600  # all of b1 (0 .. 4000 s) and b2's first hour (3600 .. 7200 s)
    assert (split.baseline_requests, split.candidate_requests) == (in_first_two_hours, 2 * n - in_first_two_hours)


def test_max_rows_keeps_the_earliest_requests(fleet_store: Store, fleet: Fleet) -> None:
    params = CanaryParams(model="llama", baseline=BASELINE, candidate=CANDIDATE, max_rows=120, min_requests=10, **WEEK)
    result = canary_compare(fleet_store, params)
    assert result.truncated
    assert (result.baseline_requests, result.candidate_requests) == (120, 120)
    ev = {r["metric"]: r for r in result.evidence.iter_rows(named=True)}
    for bundle, side in ((BASELINE, "baseline"), (CANDIDATE, "candidate")):
        kept = _side(fleet, bundle).sort([col.TS, col.REQUEST_ID]).head(120)
        assert ev["error_rate"][side] == pytest.approx(kept.select((pl.col(col.STATUS) == "error").mean()).item())
        codes = sorted(latency_code(x) for x in kept.filter(NOT_COMPILED).get_column(col.LATENCY_MS).to_list())
        assert ev["p95_ms"][side] == pytest.approx(latency_decode(codes[math.ceil(0.95 * len(codes)) - 1]))
    assert canary_compare(fleet_store, params.model_copy(update={"max_rows": 10**6})).truncated is False
    assert "rows truncated at max_rows" in result.to_frame().row(-1, named=True)["rule"]


def test_overlapping_windows_put_shared_requests_on_both_sides(fleet_store: Store, fleet: Fleet) -> None:
    # Two windows of any bundle that overlap by a day: a request in the overlap is on both sides.
    b_lo, b_hi = W10, W10 + timedelta(days=4)
    c_lo, c_hi = W10 + timedelta(days=3), W10 + timedelta(days=7)
    params = CanaryParams(model="llama", start=c_lo, end=c_hi, baseline_start=b_lo, baseline_end=b_hi, min_requests=10)
    result = canary_compare(fleet_store, params)
    llama = fleet.requests.filter(pl.col(col.MODEL) == "llama")
    base = llama.filter((pl.col(col.TS) >= b_lo) & (pl.col(col.TS) < b_hi))
    cand = llama.filter((pl.col(col.TS) >= c_lo) & (pl.col(col.TS) < c_hi))
    shared = llama.filter((pl.col(col.TS) >= c_lo) & (pl.col(col.TS) < b_hi)).height
    assert shared > 0
    assert (result.baseline_requests, result.candidate_requests) == (base.height, cand.height)
    ev = {r["metric"]: r for r in result.evidence.iter_rows(named=True)}
    for side, rows in (("baseline", base), ("candidate", cand)):
        assert ev["error_rate"][side] == pytest.approx(rows.select((pl.col(col.STATUS) == "error").mean()).item())
    _assert_agreement(ev, base, cand)


def test_one_truncated_side_pairs_with_the_whole_other(fleet_store: Store, fleet: Fleet) -> None:
    base, cand = _side(fleet, BASELINE), _side(fleet, CANDIDATE)
    small, large = sorted((base.height, cand.height))
    assert small < large
    cap = (small + large) // 2
    params = CanaryParams(model="llama", baseline=BASELINE, candidate=CANDIDATE, max_rows=cap, min_requests=10, **WEEK)
    result = canary_compare(fleet_store, params)
    assert result.truncated
    kept = {side: rows.sort([col.TS, col.REQUEST_ID]).head(cap) for side, rows in (("b", base), ("c", cand))}
    assert (result.baseline_requests, result.candidate_requests) == (kept["b"].height, kept["c"].height)
    ev = {r["metric"]: r for r in result.evidence.iter_rows(named=True)}
    _assert_agreement(ev, kept["b"], kept["c"])


def test_output_checks_read_only_fingerprinted_requests(store: Store) -> None:
    """A CPU-sampled candidate (one request in 16 fingerprinted, the rest ``unsampled`` with empty ``fp_*``
    columns) against a fully fingerprinted baseline of the same outputs: the drift and non-finite checks
    compare fingerprints only (the unsampled zeros would fail drift: D near 0.94), the non-finite rate is over
    each side's fingerprinted requests, and unsampled requests form no agreement pairs (no mismatches)."""
    rng = np.random.default_rng(5)
    n = 3200
    t = datetime(2026, 3, 2, tzinfo=UTC)
    means = rng.normal(0, 1, n).astype(np.float32)
    nonfinite = rng.random(n) < 0.02
    digests = [f"d{i}" for i in range(n)]
    frames = []
    for bundle, every, rate in (("b1", 1, 1.0), ("b2", 16, 1 / 16)):
        chosen = np.arange(n) % every == 0
        frames.append(
            request_frame(
                bundle,
                n,
                t,
                {
                    col.LATENCY_MS: rng.lognormal(np.log(20), 0.3, n).astype(np.float32),
                    col.INPUT_DIGEST: digests,
                    col.FP_ARGMAX_DIGEST: [d if c else "" for d, c in zip(digests, chosen, strict=True)],
                    col.FP_MEAN: np.where(chosen, means, 0).astype(np.float32),
                    col.FP_STD: np.where(chosen, 1, 0).astype(np.float32),
                    col.FP_NAN: np.where(chosen & nonfinite, 3, 0).astype(np.uint32),
                    col.FP_STATUS: np.where(chosen, FP_OK, FP_UNSAMPLED),
                    col.FP_RATE: np.full(n, rate, dtype=np.float32),
                },
            )
        )
    insert_requests(store, *frames)
    window = dict(start=t, end=t + timedelta(days=1))
    params = CanaryParams(model="m", baseline="b1", candidate="b2", **window)
    for p in (params, params.model_copy(update={"max_rows": n - 1})):  # the full scan and the truncated path
        result = canary_compare(store, p)
        ev = {r["metric"]: r for r in result.evidence.iter_rows(named=True)}
        assert ev["fp_mean_ks"]["outcome"] == "pass", result.evidence
        assert ev["fp_std_ks"]["outcome"] == "pass", result.evidence
        assert ev["nonfinite_rate"]["outcome"] == "pass", result.evidence
        kept = slice(0, p.max_rows)
        base_rate = nonfinite[kept].mean()
        cand_rate = nonfinite[kept][::16].mean()
        assert ev["nonfinite_rate"]["baseline"] == pytest.approx(base_rate)
        assert ev["nonfinite_rate"]["candidate"] == pytest.approx(cand_rate)
        # Pairs only where both sides fingerprinted (the candidate's chosen requests), all agreeing.
        assert ev["argmax_agreement"]["baseline"] == len(range(0, min(n, p.max_rows), 16))
        assert ev["argmax_agreement"]["candidate"] == 1.0
        assert result.verdict == "pass", result.evidence


def test_recorded_verdicts_newest_first_by_model_and_candidate(chdb_dir: Path) -> None:
    """What ``canary compare`` recorded, read back by the ``canary_verdicts`` named query (the canary page's
    "Recorded verdicts"): filtered by model, candidate and when recorded, newest first, limited."""
    from inferensics.analytics.canary_history import VerdictHistoryParams, recorded_verdicts
    from inferensics.schema.events import CanaryVerdictEvent

    with scratch_store(chdb_dir, "verdicts") as store:
        rows = [
            CanaryVerdictEvent(ts=T0 + timedelta(hours=h), model=model, baseline="base", candidate=cand,
                               window_start=T0, window_end=T0 + timedelta(hours=h), verdict=verdict, rule=rule)
            for h, model, cand, verdict, rule in [
                (1, "llama", "c1", "inconclusive", "too few requests"),
                (2, "llama", "c1", "fail", "failed: error_rate"),
                (3, "llama", "c2", "pass", "all checks passed"),
                (4, "qwen", "c9", "pass", "all checks passed"),
            ]
        ]  # fmt: skip
        rows[1] = rows[1].model_copy(update={"attrs": {"hw_pool": "cpu-b"}})  # `canary compare --hw-pool cpu-b`
        store.insert_events(rows)

        def read(**params: Any) -> list[tuple[str, str, str]]:
            frame = recorded_verdicts(store, VerdictHistoryParams(**params))
            return list(zip(frame[col.MODEL], frame[col.CANDIDATE], frame[col.VERDICT], strict=True))

        assert read(model="llama") == [
            ("llama", "c2", "pass"),
            ("llama", "c1", "fail"),
            ("llama", "c1", "inconclusive"),
        ]
        assert read(model="llama", candidate="c1", limit=1) == [("llama", "c1", "fail")]
        assert read(start=T0 + timedelta(hours=2), end=T0 + timedelta(hours=4)) == [
            ("llama", "c2", "pass"),
            ("llama", "c1", "fail"),
        ]
        assert read(model="mistral") == []
        assert recorded_verdicts(store, VerdictHistoryParams(model="llama"))[col.RULE][1] == "failed: error_rate"
        # Which pool each compared (walk 39: a recorded FAIL of one pool beside the page's verdict over all).
        assert recorded_verdicts(store, VerdictHistoryParams(model="llama"))[col.HW_POOL].to_list() == ["", "cpu-b", ""]
