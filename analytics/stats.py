"""The statistics behind canary verdicts: histogram bootstrap, proportion test, Kolmogorov–Smirnov.

Latency quantiles are bootstrapped on the rollups' log-scaled latency code (1024 bins, ±0.9 % relative):
a quantile of ``n`` requests resampled with replacement is an order statistic of ``n`` draws from the
histogram, drawn directly (a Beta draw and a look-up in the cumulative counts), so 1,000 resamples of a
million requests cost 1,000 numbers per quantile, not a billion draws nor a multinomial over the bins.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from inferensics.schema.rollups import LATENCY_CODE_MAX, LATENCY_CODE_MIN_MS, LATENCY_CODE_STEP

Floats = npt.NDArray[np.float64]


def latency_codes(latency_ms: Floats) -> npt.NDArray[np.int64]:
    """Vectorised :func:`inferensics.schema.rollups.latency_code`."""
    raw = (np.log(np.maximum(latency_ms, 1e-9)) - math.log(LATENCY_CODE_MIN_MS)) / LATENCY_CODE_STEP
    return np.clip(np.round(raw), 0, LATENCY_CODE_MAX).astype(np.int64)


def decode(codes: Floats) -> Floats:
    """Latency in milliseconds at the centre of each code's bin."""
    return np.exp(codes * LATENCY_CODE_STEP + math.log(LATENCY_CODE_MIN_MS))


def histogram(latency_ms: Floats) -> npt.NDArray[np.int64]:
    """Counts per latency code (length ``LATENCY_CODE_MAX + 1``)."""
    return np.bincount(latency_codes(latency_ms), minlength=LATENCY_CODE_MAX + 1)


def _quantile_codes(cum: npt.NDArray[np.int64], q: float) -> npt.NDArray[np.int64]:
    """Lowest code whose cumulative count reaches ``ceil(q × n)`` (the nearest-rank quantile), per row."""
    n = cum[..., -1]
    rank = np.maximum(np.ceil(q * n), 1)
    codes: npt.NDArray[np.int64] = np.argmax(cum >= rank[..., None], axis=-1)
    return codes


def quantile_ms(hist: npt.NDArray[np.int64], q: float) -> float:
    """Nearest-rank ``q`` quantile of a code histogram, in milliseconds (NaN when empty)."""
    if hist.sum() == 0:
        return math.nan
    return float(decode(np.asarray(_quantile_codes(np.cumsum(hist), q), dtype=np.float64)))


@dataclass(frozen=True)
class RatioInterval:
    """A quantile on each side, their ratio (candidate / baseline) and its bootstrap interval."""

    baseline: float
    candidate: float
    ratio: float
    low: float
    high: float


def _resampled_codes(
    hist: npt.NDArray[np.int64], qs: Sequence[float], resamples: int, rng: np.random.Generator
) -> list[npt.NDArray[np.float64]]:
    """The ``qs`` quantile codes of ``resamples`` resamples of ``hist`` (``n`` draws with replacement), one array
    per quantile.

    A resample's nearest-rank quantile is its ``k``-th smallest draw. The ``k``-th smallest of ``n`` draws from
    the histogram is the histogram's inverse CDF at the ``k``-th smallest of ``n`` uniform draws, which is
    ``Beta(k, n - k + 1)``; given it, the ``k'``-th smallest (``k' > k``) lies above it at the ``(k' - k)``-th
    smallest of the ``n - k`` uniforms left, ``Beta(k' - k, n - k' + 1)`` of the rest of the interval. So each
    resample costs one Beta draw per quantile, whatever the number of codes that occur, and the quantiles of one
    resample are drawn jointly, as from one multinomial resample (whose draw cost one binomial per occurring
    code and resample).
    """
    n = int(hist.sum())
    cum = np.cumsum(hist)
    ranks = [int(max(math.ceil(q * n), 1)) for q in qs]  # as _quantile_codes ranks them
    out: list[npt.NDArray[np.float64]] = [np.empty(0)] * len(qs)
    u, below = np.zeros(resamples), 0
    for i in sorted(range(len(qs)), key=ranks.__getitem__):
        k = ranks[i]
        if k > below:
            u = u + (1 - u) * rng.beta(k - below, n - k + 1, size=resamples)
            below = k
        out[i] = np.searchsorted(cum, u * n, side="left").astype(np.float64)
    return out


def bootstrap_quantile_ratios(
    baseline: npt.NDArray[np.int64],
    candidate: npt.NDArray[np.int64],
    qs: Sequence[float],
    *,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> list[RatioInterval]:
    """Percentile-bootstrap intervals of ``quantile(candidate) / quantile(baseline)`` for each of ``qs``.

    Each side is resampled independently ``resamples`` times (:func:`_resampled_codes`: ``n`` draws with
    replacement from its histogram), and every quantile is read from the same resamples; an interval is the
    ``(1 ± confidence) / 2`` percentiles of the resampled ratios. Deterministic for a given ``seed``.
    """
    b_n, c_n = int(baseline.sum()), int(candidate.sum())
    quantiles = [(quantile_ms(baseline, q), quantile_ms(candidate, q)) for q in qs]
    if b_n == 0 or c_n == 0:
        return [RatioInterval(b_q, c_q, math.nan, math.nan, math.nan) for b_q, c_q in quantiles]
    rng = np.random.default_rng(seed)
    b_codes = _resampled_codes(baseline, qs, resamples, rng)
    c_codes = _resampled_codes(candidate, qs, resamples, rng)
    alpha = (1 - confidence) / 2
    out = []
    for (b_q, c_q), b, c in zip(quantiles, b_codes, c_codes, strict=True):
        low, high = np.quantile(np.exp((c - b) * LATENCY_CODE_STEP), [alpha, 1 - alpha])
        out.append(RatioInterval(b_q, c_q, c_q / b_q, float(low), float(high)))
    return out


def bootstrap_quantile_ratio(
    baseline: npt.NDArray[np.int64],
    candidate: npt.NDArray[np.int64],
    q: float,
    *,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> RatioInterval:
    """:func:`bootstrap_quantile_ratios` for one quantile."""
    return bootstrap_quantile_ratios(baseline, candidate, (q,), resamples=resamples, confidence=confidence, seed=seed)[
        0
    ]


def proportion_test(x_base: int, n_base: int, x_cand: int, n_cand: int) -> float:
    """One-sided p-value of the pooled two-proportion z-test that the candidate's rate is higher.

    1.0 when either side is empty or both rates are 0 or 1 (no variance: nothing to reject).
    """
    if n_base == 0 or n_cand == 0:
        return 1.0
    pooled = (x_base + x_cand) / (n_base + n_cand)
    var = pooled * (1 - pooled) * (1 / n_base + 1 / n_cand)
    if var <= 0:
        return 1.0
    z = (x_cand / n_cand - x_base / n_base) / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2))


def wilson_interval(x: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a proportion (NaNs when ``n`` is 0)."""
    if n == 0:
        return math.nan, math.nan
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def ks_test(a: Floats, b: Floats) -> tuple[float, float]:
    """Two-sample Kolmogorov–Smirnov statistic ``D`` and its asymptotic p-value (NaNs when a side is empty).

    One merge of the two sorted samples: walking the merged order, the gap between the two empirical CDFs
    (kept in integers, scaled by ``|a| × |b|``) is read after the last of each run of equal values. About
    half the time of looking every value up in both samples (22 against 39 ms for 210k and 23k values).
    """
    a, b = np.sort(a[np.isfinite(a)]), np.sort(b[np.isfinite(b)])
    if a.size == 0 or b.size == 0:
        return math.nan, math.nan
    values = np.concatenate([a, b])
    order = np.argsort(values, kind="stable")  # merges the two sorted runs
    gap = np.cumsum(np.where(order < a.size, b.size, -a.size))
    merged = values[order]
    last = np.ones(merged.size, dtype=bool)
    last[:-1] = merged[1:] != merged[:-1]
    d = float(np.max(np.abs(gap[last]))) / (a.size * b.size)
    ne = a.size * b.size / (a.size + b.size)
    lam = (math.sqrt(ne) + 0.12 + 0.11 / math.sqrt(ne)) * d
    if lam < 1e-3:
        return d, 1.0
    p = 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam) for k in range(1, 101))
    return d, float(min(1.0, max(0.0, p)))


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the order given: rejecting every hypothesis whose adjusted p-value is
    below ``alpha`` keeps the chance of any false rejection in the family at most ``alpha``, however the tests
    depend on each other. The ``k``-th smallest p-value of ``m`` is multiplied by ``m - k + 1`` (capped at 1) and
    made no smaller than the one before it.

    >>> holm_adjusted([0.01, 0.04, 0.002])
    [0.02, 0.04, 0.006]
    """
    m = len(p_values)
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
