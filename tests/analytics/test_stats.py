"""The canary's statistics: the latency bootstrap's resamples and the Holm–Bonferroni correction."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from inferensics.analytics import stats

QS = (0.5, 0.95, 0.99)
DEFAULT_RNG = np.random.default_rng


def _histogram(rng: np.random.Generator, n: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """``n`` log-normal latencies over a few hundred codes (σ 0.45, as the benchmark's fleet)."""
    return stats.histogram(rng.lognormal(3, 0.45, n))


class _CountingRng:
    """A NumPy generator that counts the random numbers it hands out."""

    def __init__(self, seed: int) -> None:
        self.rng, self.drawn = DEFAULT_RNG(seed), 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.rng, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            out = method(*args, **kwargs)
            self.drawn += np.size(out)
            return out

        return counted


def test_the_bootstrap_draws_a_number_per_resample_and_quantile_not_per_latency_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Canary compare spent most of its Python time here: a multinomial resample drew one binomial per
    occurring latency code (a few hundred) per resample, per side, per pool judged. A resample's quantile is an
    order statistic, drawn directly: one number per resample and quantile."""
    rng = np.random.default_rng(4)
    baseline, candidate = _histogram(rng, 50_000), _histogram(rng, 5_000)
    assert np.count_nonzero(baseline) > 150
    made: list[_CountingRng] = []

    def counting(seed: int) -> _CountingRng:
        made.append(_CountingRng(seed))
        return made[-1]

    monkeypatch.setattr(np.random, "default_rng", counting)
    stats.bootstrap_quantile_ratios(baseline, candidate, QS, resamples=1000, seed=1)
    assert [r.drawn for r in made] == [2 * 1000 * len(QS)]


def test_resampled_quantiles_follow_resampling_with_replacement() -> None:
    """The order-statistic draw gives each resample's quantiles the distribution (and the joint one) that
    drawing ``n`` requests with replacement gives them: compared here with that brute force on a small
    histogram whose quantiles move between codes."""
    hist = np.zeros(64, dtype=np.int64)
    hist[[10, 11, 12, 15, 20, 40]] = [5, 9, 3, 14, 7, 2]
    n, resamples = int(hist.sum()), 40_000
    fast = stats._resampled_codes(hist, QS, resamples, np.random.default_rng(7))
    draws = np.random.default_rng(8).choice(np.repeat(np.arange(64), hist), size=(resamples, n))
    brute = [np.sort(draws, axis=1)[:, int(max(np.ceil(q * n), 1)) - 1].astype(np.float64) for q in QS]
    for q, a, b in zip(QS, fast, brute, strict=True):
        for code in np.flatnonzero(hist):
            assert (a == code).mean() == pytest.approx((b == code).mean(), abs=0.01), (q, code)
    # The quantiles of one resample move together (read from one resample), as they do in the brute force.
    assert np.corrcoef(fast[0], fast[1])[0, 1] == pytest.approx(np.corrcoef(brute[0], brute[1])[0, 1], abs=0.03)
    assert np.corrcoef(fast[0], fast[1])[0, 1] > 0.1


def test_holm_adjusted_p_values() -> None:
    # R: p.adjust(c(0.01, 0.04, 0.002, 0.5), "holm") = 0.03 0.08 0.008 0.5
    assert stats.holm_adjusted([0.01, 0.04, 0.002, 0.5]) == pytest.approx([0.03, 0.08, 0.008, 0.5])
    # Never below an earlier one's, never above 1; one test is left as it is.
    assert stats.holm_adjusted([0.02, 0.019, 0.9]) == pytest.approx([0.057, 0.057, 0.9])
    assert stats.holm_adjusted([0.6, 0.5]) == [1.0, 1.0]
    assert stats.holm_adjusted([0.03]) == [0.03]
    assert stats.holm_adjusted([]) == []
