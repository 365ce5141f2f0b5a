"""Which hardware pools a canary comparison compares: those where both bundles served, each alone.

A canary usually serves in one pool while its baseline serves in several; over every pool the baseline's
requests come partly from other hardware than the candidate's, and a latency or rate difference may then be
the hardware's, not the bundle's. The dashboard's canary page and ``inferensics canary compare`` both judge
each pool both bundles served on its own unless told otherwise, name what they left out, and give the worst
of the pools' verdicts (:func:`worst_verdict`). Judging only the candidate's busiest shared pool hid a
regression of one pool (walk 42: INCONCLUSIVE on h100-a while h200-b failed), and which pool was busiest
turned on a couple of requests.

Judging ``N`` pools is ``N`` tests of each metric, and the worst verdict wins: at ``alpha`` 0.01 a candidate
no worse than its baseline would fail some pool's error-rate test about ``N`` times in 100. So before the worst
verdict is taken, :func:`correct_for_pools` corrects the p-value checks (the rates' z-tests, the output
drift's KS tests) for the pools, per metric, by Holm–Bonferroni: the chance that any pool fails a metric by
chance stays at most ``alpha``. The latency checks (a bootstrap interval of the ratio against a tolerance) and
argmax agreement (a floor on a share) test no null hypothesis of no difference and are left as they are: a
false fail needs the interval to clear the tolerance, not merely to exclude no change.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import polars as pl
from pydantic import Field, model_validator

from inferensics.analytics.canary import (
    DEFAULT_ALPHA,
    TRUNCATED_NOTE,
    CanaryParams,
    canary_compare_pools,
    decide,
)
from inferensics.analytics.canary_shortfall import PARTLY_EXPIRED, short_of_requests
from inferensics.analytics.client import QueryClient
from inferensics.analytics.stats import holm_adjusted

VERDICT_RANK: Final = {"fail": 0, "inconclusive": 1, "pass": 2}
"""The verdicts from worst to best: the worst pool's verdict is the comparison's."""


@dataclass(frozen=True)
class PoolSplit:
    """Requests per hardware pool on each side of a comparison (its model, traffic class and window)."""

    baseline: dict[str, int]
    candidate: dict[str, int]

    def shared(self) -> list[str]:
        """The pools both bundles served, the candidate's busiest first."""
        both = [p for p, n in self.candidate.items() if n > 0 and self.baseline.get(p, 0) > 0]
        return sorted(both, key=lambda p: (-self.candidate[p], -self.baseline[p], p))

    def pools(self) -> list[str]:
        """Every pool either bundle served, busiest first."""
        total = {p: self.baseline.get(p, 0) + self.candidate.get(p, 0) for p in {*self.baseline, *self.candidate}}
        return sorted((p for p, n in total.items() if n > 0), key=lambda p: (-total[p], p))

    def describe(self, pool: str) -> str:
        """``pool`` and who served there, in words."""
        b, c = self.baseline.get(pool, 0), self.candidate.get(pool, 0)
        if not c:
            return f"{pool} (only the baseline served there: {b:,} requests)"
        if not b:
            return f"{pool} (only the candidate served there: {c:,} requests)"
        return f"{pool} (both served there, baseline {b:,} and candidate {c:,} requests: pick it to compare it)"

    def sides(self) -> str:
        """Each side's pools and requests, in words (``baseline: cpu-a (120), cpu-b (80); candidate: ...``)."""
        return "; ".join(
            f"{name}: " + (", ".join(f"{p} ({n:,})" for p, n in counts.items() if n) or "no requests")
            for name, counts in (("baseline", self.baseline), ("candidate", self.candidate))
        )


@dataclass(frozen=True)
class PoolVerdict:
    """One pool's verdict in a comparison of several pools."""

    pool: str
    verdict: str
    """``pass``, ``fail`` or ``inconclusive``."""
    rule: str
    """What decided it (the verdict row's rule)."""


def worst_verdict(verdicts: Sequence[PoolVerdict]) -> tuple[str, str]:
    """The comparison's verdict over ``verdicts`` (fail before inconclusive before pass) and its rule, naming the
    pool or pools that decided it (``on hardware pool h200-b (failed: p50_ms)``).

    >>> undecided, failed = PoolVerdict("a", "inconclusive", "undecided: p99_ms"), PoolVerdict("b", "fail", "failed: x")
    >>> worst_verdict([undecided, failed])
    ('fail', 'on hardware pool b (failed: x)')
    """
    if not verdicts:
        raise ValueError("no pool was judged")
    worst = min(verdicts, key=lambda v: VERDICT_RANK.get(v.verdict, len(VERDICT_RANK))).verdict
    deciding = [v for v in verdicts if v.verdict == worst]
    pools = "hardware pool" if len(deciding) == 1 else "hardware pools"
    return worst, f"on {pools} " + "; ".join(f"{v.pool} ({v.rule})" for v in deciding)


class CanaryPoolsParams(CanaryParams):
    """A comparison of several hardware pools, each judged alone: :class:`CanaryParams` and the pools."""

    hw_pools: list[str] = Field(min_length=1)
    """The pools compared, each alone (``hw_pool`` stays unset)."""

    @model_validator(mode="after")
    def _pools_not_pool(self) -> CanaryPoolsParams:
        if self.hw_pool is not None:
            raise ValueError("give the pools to compare as hw_pools, not hw_pool")
        return self


QUERY_NAME: Final = "canary_compare_pools"
"""The named query of :func:`canary_compare_pools_frame` (what ``inferensics canary compare`` and the dashboard's
canary page ask the service for when they judge several pools)."""
POOL: Final = "hw_pool"
"""The column of :func:`canary_compare_pools_frame` that names each row's pool."""


def canary_compare_pools_frame(client: QueryClient, params: CanaryPoolsParams) -> pl.DataFrame:
    """Each pool's ``canary_compare`` frame (its evidence and its verdict row), one after the other in the order of
    ``hw_pools``, with a first column ``hw_pool`` naming it: the ``canary_compare_pools`` named query. The pools share
    the comparison's queries (:func:`~inferensics.analytics.canary.canary_compare_pools`); :func:`pool_frames` splits
    the frame again. Not corrected for the pools: :func:`correct_for_pools` does that."""
    alone = CanaryParams(**params.model_dump(exclude={"hw_pools"}))
    results = canary_compare_pools(client, alone, params.hw_pools)
    return pl.concat([result.to_frame().select(pl.lit(pool).alias(POOL), pl.all()) for pool, result in results.items()])


def pool_frames(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """A :func:`canary_compare_pools_frame` frame as each pool's ``canary_compare`` frame, by pool in its order."""
    pools = frame.get_column(POOL).unique(maintain_order=True).to_list()
    return {str(pool): frame.filter(pl.col(POOL) == pool).drop(POOL) for pool in pools}


def correction_note(pools: int) -> str:
    """What :func:`correct_for_pools` appends to the rules it corrected, for ``pools`` pools."""
    return f"p Holm–Bonferroni-adjusted for the {pools} hardware pools judged"


def correct_for_pools(frames: Mapping[str, pl.DataFrame], *, alpha: float = DEFAULT_ALPHA) -> dict[str, pl.DataFrame]:
    """The ``canary_compare`` frames of the pools judged together, each with its p-value checks corrected for the
    pools (see the module docstring); ``alpha`` is the level the frames were computed with.

    Per metric with a p-value (rows whose ``p_value`` is set), the pools' p-values are Holm-adjusted
    (:func:`~inferensics.analytics.stats.holm_adjusted`) and ``p_value`` holds the adjusted one; a check that
    failed passes when its adjusted p-value is no longer below ``alpha`` (its other condition, the size of the
    increase or of the distance, held already). Each corrected row's rule, and every verdict row's, says so
    (:func:`correction_note`); a verdict that was ``fail`` is decided again from the corrected outcomes. One
    frame, or none, is returned as given.
    """
    if len(frames) < 2:
        return dict(frames)
    tested: dict[str, dict[str, float]] = {}  # metric -> pool -> p-value
    for pool, frame in frames.items():
        rows = frame.filter((pl.col("check") != "verdict") & pl.col("p_value").is_not_null())
        for metric, p in rows.select("metric", "p_value").iter_rows():
            if not math.isnan(p):
                tested.setdefault(metric, {})[pool] = p
    adjusted = {
        metric: dict(zip(by_pool, holm_adjusted(list(by_pool.values())), strict=True))
        for metric, by_pool in tested.items()
    }
    note = correction_note(len(frames))
    return {pool: _corrected(frame, {m: a[pool] for m, a in adjusted.items() if pool in a}, alpha, note)
            for pool, frame in frames.items()}  # fmt: skip


def _corrected(frame: pl.DataFrame, adjusted: dict[str, float], alpha: float, note: str) -> pl.DataFrame:
    """One pool's frame with its p-values replaced by ``adjusted`` (by metric), its failed checks decided again
    and its verdict row redone."""
    p_adj = pl.col("metric").replace_strict(adjusted, default=None, return_dtype=pl.Float64)
    is_check = (pl.col("check") != "verdict") & pl.col("metric").is_in(list(adjusted))
    evidence = frame.filter(pl.col("check") != "verdict").with_columns(
        pl.when(is_check & (pl.col("outcome") == "fail") & (p_adj >= alpha))
        .then(pl.lit("pass"))
        .otherwise(pl.col("outcome"))
        .alias("outcome"),
        pl.when(is_check).then(p_adj).otherwise(pl.col("p_value")).alias("p_value"),
        pl.when(is_check).then(pl.col("rule") + f"; {note}").otherwise(pl.col("rule")).alias("rule"),
    )
    verdict = frame.filter(pl.col("check") == "verdict").row(0, named=True)
    rule = str(verdict["rule"])
    truncated = rule.endswith(TRUNCATED_NOTE)
    rule, expired, left = rule.removesuffix(TRUNCATED_NOTE).partition(PARTLY_EXPIRED)  # kept past a new decision
    if verdict["outcome"] == "fail":  # only a failed check can change, and only to pass
        verdict["outcome"], rule = decide(evidence)
    decided_by_checks = not short_of_requests(rule)  # too few requests: no check, corrected or not, decided it
    verdict["rule"] = ((f"{rule}; {note}" if decided_by_checks else rule) + expired + left
                       + (TRUNCATED_NOTE if truncated else ""))  # fmt: skip
    return pl.concat([evidence, pl.DataFrame([verdict], schema=frame.schema)])
