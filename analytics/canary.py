"""Canary comparison of two bundles (or two time windows) on one model and traffic class.

**Verdict rule** (applied in this order):

1. *inconclusive* when either side served fewer than ``min_requests`` requests (the rule says why: its raw
   requests expired, it had none in its window, or too few);
2. *fail* when any check fails;
3. *inconclusive* when any check is inconclusive;
4. *pass* otherwise.

**Checks.**

* Latency p50/p95/p99, over the requests that did not compile (``compile_ms`` 0 and ``outcome`` neither
  ``compile`` nor ``recompile``): the ratio candidate / baseline with a 95 % bootstrap interval (1,000
  resamples of the ±0.9 % latency code histogram per side, shared by the three quantiles). Fail when the
  interval's low end exceeds ``1 + latency_tolerance``; pass when its high end does not; inconclusive
  between. The interval is of the ratio, not of the candidate's latency. Requests that compiled are left
  out because about 1 % of requests carrying a 20-90 s compile put p99 on the gap between serving and
  compile latency, where its interval straddles the threshold however much traffic there is (a canary drawn
  from the baseline's own distribution stayed inconclusive); compile regressions are judged by the
  recompile and cache-miss rates. Each latency rule says how many requests it read of how many.
* Rates (error, eager fallback, requests that recompiled, requests whose compile missed the cache,
  requests with NaN/inf outputs): one-sided pooled two-proportion z-test that the candidate's rate is
  higher. Fail when ``p < alpha`` and the increase is at least ``min_rate_increase`` (0 for non-finite
  outputs: any significant increase fails); else pass.
* Argmax agreement over requests with equal ``input_digest`` on both sides (earliest request per digest
  and side): fail below ``min_agreement``, pass at or above it, skipped with fewer than ``min_pairs`` pairs.
  The check keeps the disagreeing pairs (:attr:`CanaryResult.disagreements`, at most
  :data:`DISAGREEMENTS_KEPT`): the worst first, by how many of the first argmax ids (``fp_argmax_head``)
  differ, then the earliest candidate request (rows without argmax ids are ordered by time alone), so that
  on-call can open one (``inferensics requests --id``, ``inferensics replay``).
* Output-statistic drift: two-sample Kolmogorov–Smirnov on ``fp_mean`` and on ``fp_std``. Fail when
  ``D > max_ks_distance`` and ``p < alpha``; else pass.

The output checks (non-finite rate, agreement, drift) read only requests whose output was fingerprinted
(``fp_status`` ``ok``, or empty in rows older than the column): a host SDK on a CPU server fingerprints
one request in 32 by default, chosen by request id, and an unsampled request's zeros are no measurement.
The non-finite rate is taken over each side's fingerprinted requests.

Per-request facts live only in raw rows, so the comparison reads ``requests`` narrowed by model (and
traffic class), which the table's primary key serves directly, in two scans that cover both sides at once
(each row tagged with its side): one counts, per side, the requests, the rate numerators and the latency
codes (the histogram the bootstrap resamples) and gathers the two output statistics the KS tests compare;
the other groups both sides' rows by input digest for the argmax pairs (and picks the worst disagreeing
pairs in the same query). Only those small results reach Python. A side over ``max_rows`` is read again,
ordered and limited, and then paired with a join.

Several hardware pools judged each alone (:func:`canary_compare_pools`) share those scans: each groups by
pool as well as by side, so ten pools cost the three queries one pool costs (the filter check, the sides, the
pairs), and every pool's numbers are those :func:`canary_compare` gives it alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
import polars as pl
from pydantic import Field, field_validator, model_validator

from inferensics.analytics import stats
from inferensics.analytics.canary_shortfall import (
    SIDES,
    may_have_expired,
    partly_expired_note,
    rollup_counts,
    shortfall_rule,
)
from inferensics.analytics.client import QueryClient
from inferensics.analytics.errors import UnknownFilterValue
from inferensics.analytics.filters import Filters as _Filters
from inferensics.analytics.filters import check_filter_values
from inferensics.analytics.request_list import ERRORED, FELL_BACK, NONFINITE
from inferensics.schema import columns as col
from inferensics.schema.events import CanaryVerdictEvent
from inferensics.schema.rollups import FINGERPRINTED_SQL, LATENCY_CODE_MAX, latency_code_sql
from inferensics.schema.types import as_utc

Outcome = Literal["pass", "fail", "inconclusive", "skipped"]
EVIDENCE_SCHEMA: dict[str, Any] = {
    "check": pl.String,
    "metric": pl.String,
    "baseline": pl.Float64,
    "candidate": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "p_value": pl.Float64,
    "threshold": pl.Float64,
    "outcome": pl.String,
    "rule": pl.String,
}
_RATE_SQL: tuple[tuple[str, str, bool], ...] = (
    ("error_rate", ERRORED, False),
    ("fallback_rate", FELL_BACK, False),
    ("recompile_rate", f"{col.RECOMPILES} > 0", False),
    ("cache_miss_rate", f"{col.CACHE_STATUS} IN ('miss', 'mixed')", False),
    ("nonfinite_rate", f"{FINGERPRINTED_SQL} AND {NONFINITE}", True),
)
"""Rate checks: metric, the SQL condition a request counts towards, and whether any increase fails."""
_OVER_FINGERPRINTED: Final = frozenset({"nonfinite_rate"})
"""Rates taken over the fingerprinted requests only (an unsampled request's output is unknown, not finite)."""
_DRIFT_COLUMNS = (col.FP_MEAN, col.FP_STD)
COMPILED_SQL: Final = f"({col.COMPILE_MS} > 0 OR {col.OUTCOME} IN ('compile', 'recompile'))"
"""A request that compiled in the request (its latency holds compile time): left out of the latency checks."""


DISAGREEMENTS_KEPT: Final = 10
"""Disagreeing input-matched pairs the agreement check keeps, the worst first."""
BASELINE_REQUEST: Final = "baseline_request_id"
CANDIDATE_REQUEST: Final = "candidate_request_id"
ARGMAX_DIFFERING: Final = "argmax_differing"
"""How many of the first argmax ids (``fp_argmax_head``, at most 16) of a disagreeing pair differ, a position
only one side has counting as differing: 0 when neither side recorded them (or they differ only further on)."""
CANDIDATE_REPLAYABLE: Final = "candidate_replayable"
"""Whether replay can take the candidate request of a disagreeing pair: served from a bundle, its inputs captured
(``inferensics replay`` refuses any other)."""
DISAGREEMENT_SCHEMA: dict[str, Any] = {
    BASELINE_REQUEST: pl.String,
    CANDIDATE_REQUEST: pl.String,
    col.INPUT_DIGEST: pl.String,
    ARGMAX_DIFFERING: pl.UInt32,
    CANDIDATE_REPLAYABLE: pl.Boolean,
}
"""Columns of :attr:`CanaryResult.disagreements`: one input-matched pair whose argmax digests differ."""
DISAGREEMENTS: Final = "disagreements"
"""The column of a :meth:`CanaryResult.to_frame` frame holding, in the ``argmax_agreement`` row, the disagreeing
pairs (a list of :data:`DISAGREEMENT_SCHEMA` structs; null in every other row)."""
AGREEMENT_METRIC: Final = "argmax_agreement"

DEFAULT_ALPHA: Final = 0.01
"""The significance level of the proportion and KS tests unless :attr:`CanaryParams.alpha` says otherwise."""
TRUNCATED_NOTE: Final = " (rows truncated at max_rows)"
"""Appended to the verdict row's rule when a side was truncated at ``max_rows``."""


class CanaryParams(_Filters):
    """What to compare: a model (and traffic class), two bundles, and the window(s).

    ``baseline``/``candidate`` are bundle ids; ``None`` means any bundle (to compare two windows of the
    same fleet). The candidate is read over ``[start, end)``; the baseline over ``[baseline_start,
    baseline_end)`` when given, else the same window.
    """

    model: str
    """Model compared (required)."""
    baseline: str | None = None
    """Baseline bundle id (``None``: any)."""
    candidate: str | None = None
    """Candidate bundle id (``None``: any)."""
    start: datetime
    """Candidate window start (and baseline's unless ``baseline_start`` is given)."""
    end: datetime
    """Candidate window end, exclusive."""
    baseline_start: datetime | None = None
    """Baseline window start when comparing two windows."""
    baseline_end: datetime | None = None
    """Baseline window end when comparing two windows."""
    latency_tolerance: float = Field(0.10, ge=0)
    """Relative latency regression tolerated (0.10: 10 %)."""
    alpha: float = Field(DEFAULT_ALPHA, gt=0, lt=1)
    """Significance level of the proportion and KS tests."""
    min_rate_increase: float = Field(0.005, ge=0)
    """Smallest absolute rate increase that can fail a rate check (0.005: half a percentage point)."""
    min_agreement: float = Field(0.99, ge=0, le=1)
    """Argmax agreement below which the candidate fails."""
    min_pairs: int = Field(30, ge=1)
    """Input-matched pairs needed for the agreement check."""
    max_ks_distance: float = Field(0.1, gt=0, le=1)
    """KS distance above which (when significant) output statistics have drifted."""
    min_requests: int = Field(100, ge=1)
    """Requests each side needs for any verdict but inconclusive."""
    max_rows: int = Field(500_000, ge=1)
    """Requests read per side at most (the latest beyond that are dropped; ``truncated`` says so)."""
    seed: int = 0
    """Bootstrap seed."""

    @field_validator("start", "end", "baseline_start", "baseline_end")
    @classmethod
    def _as_utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else as_utc(value)

    @model_validator(mode="after")
    def _sides_differ(self) -> CanaryParams:
        if (self.baseline_start is None) != (self.baseline_end is None):
            raise ValueError("give both baseline_start and baseline_end, or neither")
        # An empty or inverted window holds no request: its verdict would be an inconclusive one over nothing.
        windows = (
            ("start", "end", self.start, self.end),
            ("baseline_start", "baseline_end", self.baseline_start, self.baseline_end),
        )
        for first, last, lo, hi in windows:
            if lo is not None and hi is not None and hi <= lo:
                raise ValueError(
                    f"{last} {hi.isoformat()} is not after {first} {lo.isoformat()}: give a window whose {last} "
                    f"comes after its {first}"
                )
        if self.bundle is not None:
            raise ValueError("use baseline and candidate to pick bundles, not bundle")
        same_window = self.baseline_start in (None, self.start) and self.baseline_end in (None, self.end)
        if same_window and self.baseline == self.candidate:
            raise ValueError("baseline and candidate select the same requests: name two bundles or two windows")
        return self

    def window(self, side: str) -> tuple[datetime, datetime]:
        """The time window of ``side`` (``baseline`` or ``candidate``)."""
        if side == "baseline" and self.baseline_start is not None and self.baseline_end is not None:
            return self.baseline_start, self.baseline_end
        return self.start, self.end


@dataclass(frozen=True)
class CanaryResult:
    """A canary verdict, the rule that decided it, and the evidence table (columns: ``EVIDENCE_SCHEMA``)."""

    verdict: Literal["pass", "fail", "inconclusive"]
    rule: str
    evidence: pl.DataFrame
    baseline_requests: int
    candidate_requests: int
    truncated: bool
    disagreements: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=DISAGREEMENT_SCHEMA))
    """The agreement check's disagreeing pairs, the worst first (columns: :data:`DISAGREEMENT_SCHEMA`)."""

    def to_frame(self) -> pl.DataFrame:
        """The evidence with a final ``verdict`` row (what the ``canary_compare`` named query returns), and the
        :data:`DISAGREEMENTS` column (:func:`disagreements_of` reads it back)."""
        row = {k: None for k in EVIDENCE_SCHEMA} | {
            "check": "verdict",
            "metric": "requests",
            "baseline": float(self.baseline_requests),
            "candidate": float(self.candidate_requests),
            "outcome": self.verdict,
            "rule": self.rule + (TRUNCATED_NOTE if self.truncated else ""),
        }
        frame = pl.concat([self.evidence, pl.DataFrame([row], schema=EVIDENCE_SCHEMA)])
        pairs = self.disagreements.select(list(DISAGREEMENT_SCHEMA)).to_dicts()
        listed = [pairs if m == AGREEMENT_METRIC else None for m in frame.get_column("metric").to_list()]
        return frame.with_columns(pl.Series(DISAGREEMENTS, listed, dtype=pl.List(pl.Struct(DISAGREEMENT_SCHEMA))))


def disagreements_of(frame: pl.DataFrame) -> pl.DataFrame:
    """The disagreeing pairs of a ``canary_compare`` frame (:meth:`CanaryResult.to_frame`), the worst first; empty
    when it has none or predates the :data:`DISAGREEMENTS` column."""
    if DISAGREEMENTS not in frame.columns:
        return pl.DataFrame(schema=DISAGREEMENT_SCHEMA)
    pairs = frame.filter(pl.col("metric") == AGREEMENT_METRIC).get_column(DISAGREEMENTS).drop_nulls()
    if pairs.is_empty():
        return pl.DataFrame(schema=DISAGREEMENT_SCHEMA)
    unnested = pairs.explode().drop_nulls().struct.unnest()
    # A frame of a service older than a column lacks it: null, not known.
    missing = [pl.lit(None, dtype=t).alias(c) for c, t in DISAGREEMENT_SCHEMA.items() if c not in unnested.columns]
    return unnested.with_columns(missing).select(list(DISAGREEMENT_SCHEMA))


@dataclass(frozen=True)
class _Side:
    """What the checks need of one side, computed by the engine."""

    requests: int
    """Requests compared (at most ``max_rows``)."""
    truncated: bool
    hist: npt.NDArray[np.int64]
    """Requests that did not compile (:data:`COMPILED_SQL`) per latency code."""
    rates: dict[str, int]
    """Requests counting towards each rate metric."""
    fingerprinted: int
    """Compared requests whose output was fingerprinted (:data:`FINGERPRINTED_SQL`)."""
    drift: dict[str, npt.NDArray[np.float64]]
    """The output statistics (``fp_mean``, ``fp_std``) of every compared request that was fingerprinted."""
    rows_sql: str
    """SQL of the side's compared requests (every column), for the cross-side agreement query."""
    values: dict[str, Any]
    """Parameters of ``rows_sql`` (named apart from the other side's)."""


Pools = tuple[str | None, ...]
"""The hardware pools compared, each alone: ``(None,)`` is one comparison of the requests of every pool (or of
``hw_pool``'s when it is set), named pools one comparison each."""


def _every_pool(pools: Pools) -> bool:
    return pools == (None,)


def _pool_key(pools: Pools) -> str:
    """The SQL of the pool a row is judged in: its hardware pool, or ``''`` when one comparison takes every row."""
    return "''" if _every_pool(pools) else col.HW_POOL


def _common_where(params: CanaryParams, values: dict[str, Any], pools: Pools = (None,)) -> str:
    """What both sides share: the model and the optional traffic class, pool and host (``pools`` named: the rows
    of those pools)."""
    where = [f"{col.MODEL} = {{m:String}}"]
    values["m"] = params.model
    if not _every_pool(pools):
        where.append(f"{col.HW_POOL} IN {{hps:Array(String)}}")
        values["hps"] = list(pools)
    for key, column, value in (
        ("tc", col.TRAFFIC_CLASS, params.traffic_class),
        ("hp", col.HW_POOL, params.hw_pool),
        ("h", col.HOST, params.host),
    ):
        if value is not None:
            where.append(f"{column} = {{{key}:String}}")
            values[key] = value
    return " AND ".join(where)


def _own_where(params: CanaryParams, side: str, values: dict[str, Any]) -> str:
    """What sets ``side`` apart: its window and its bundle."""
    lo, hi = params.window(side)
    bundle = params.baseline if side == "baseline" else params.candidate
    k = side[0]
    where = [f"{col.TS} >= {{{k}_lo:DateTime64(6, 'UTC')}}", f"{col.TS} < {{{k}_hi:DateTime64(6, 'UTC')}}"]
    values.update({f"{k}_lo": lo, f"{k}_hi": hi, f"{k}_n": params.max_rows})
    if bundle is not None:
        where.append(f"{col.BUNDLE_ID} = {{{k}_b:String}}")
        values[f"{k}_b"] = bundle
    return " AND ".join(where)


def _side_rows(client: QueryClient, params: CanaryParams, side: str, values: dict[str, Any]) -> str:
    """SQL of all the side's requests (``values`` receives its parameters)."""
    own = _own_where(params, side, values)
    return f"SELECT * FROM {client.database}.requests WHERE {_common_where(params, values)} AND {own}"


def _disjoint(params: CanaryParams) -> bool:
    """Whether no request can be on both sides (two different bundles, or two windows that do not meet)."""
    if params.baseline is not None and params.candidate is not None and params.baseline != params.candidate:
        return True
    (b_lo, b_hi), (c_lo, c_hi) = params.window("baseline"), params.window("candidate")
    return b_hi <= c_lo or c_hi <= b_lo


def _both_rows(client: QueryClient, params: CanaryParams, values: dict[str, Any], pools: Pools) -> str:
    """SQL of both sides' requests in one scan, each row with ``side`` ``'b'`` or ``'c'`` (a request on
    both sides, possible only when the windows overlap and a bundle is shared, appears once per side) and the
    ``pool`` it is judged in (:func:`_pool_key`)."""
    b, c = _own_where(params, "baseline", values), _own_where(params, "candidate", values)
    side = (
        f"if({b}, 'b', 'c')"
        if _disjoint(params)
        else f"arrayJoin(arrayFilter(s -> s != '', [if({b}, 'b', ''), if({c}, 'c', '')]))"
    )
    return (
        f"SELECT *, {side} AS side, {_pool_key(pools)} AS pool FROM {client.database}.requests "
        f"WHERE {_common_where(params, values, pools)} AND (({b}) OR ({c}))"
    )


_COUNTS = ", ".join(
    [*(f"countIf({cond}) AS r{i}" for i, (_, cond, _) in enumerate(_RATE_SQL)), f"countIf({FINGERPRINTED_SQL}) AS fp_n"]
)


def _sides(
    client: QueryClient, params: CanaryParams, pools: Pools
) -> tuple[dict[str | None, tuple[_Side, _Side]], str, dict[str, Any]]:
    """Every pool's two sides from one scan of the raw rows: per pool and side the request count, the rate
    numerators, and (at most ``max_rows`` + 1 of each) the latency codes and the output statistics. A side with
    more than ``max_rows`` requests is read again by :func:`_truncated_side`. Also returns the both-sides SQL and
    its parameters (for the agreement check)."""
    values: dict[str, Any] = {}
    both = _both_rows(client, params, values, pools)
    cap = params.max_rows + 1
    code = latency_code_sql(col.LATENCY_MS)
    arrays = ", ".join(f"groupArrayIf({cap})({c}, {FINGERPRINTED_SQL}) AS {c}" for c in _DRIFT_COLUMNS)
    frame = client.query_frame(
        f"SELECT pool, side, count() AS n, {_COUNTS}, groupArrayIf({cap})({code}, NOT {COMPILED_SQL}) AS codes, "
        f"{arrays} FROM ({both}) GROUP BY pool, side",
        values,
    )
    at = {(str(p), str(s)): i for i, (p, s) in enumerate(frame.select("pool", "side").iter_rows())}
    out: dict[str | None, tuple[_Side, _Side]] = {}
    for pool in pools:
        alone = _alone(params, pool)
        sides = []
        for side in ("baseline", "candidate"):
            i = at.get((pool or "", side[0]))
            n = int(frame.item(i, "n")) if i is not None else 0
            if n > params.max_rows:
                sides.append(_truncated_side(client, alone, side))
                continue
            hist = np.zeros(LATENCY_CODE_MAX + 1, dtype=np.int64)
            drift = {c: np.zeros(0, dtype=np.float64) for c in _DRIFT_COLUMNS}
            rates = dict.fromkeys((m for m, _, _ in _RATE_SQL), 0)
            fingerprinted = 0
            if i is not None:
                # The gathered arrays go to NumPy straight from Arrow (no Python lists).
                codes = frame.get_column("codes")[i].to_numpy().astype(np.int64)
                hist += np.bincount(codes, minlength=LATENCY_CODE_MAX + 1)
                drift = {c: frame.get_column(c)[i].cast(pl.Float64).to_numpy() for c in _DRIFT_COLUMNS}
                rates = {m: int(frame.item(i, f"r{j}")) for j, (m, _, _) in enumerate(_RATE_SQL)}
                fingerprinted = int(frame.item(i, "fp_n"))
            own: dict[str, Any] = {}
            rows = _side_rows(client, alone, side, own)
            sides.append(_Side(n, False, hist, rates, fingerprinted, drift, rows, own))
        out[pool] = (sides[0], sides[1])
    return out, both, values


def _alone(params: CanaryParams, pool: str | None) -> CanaryParams:
    """``params`` narrowed to ``pool`` (``None``: as they are)."""
    return params if pool is None else params.model_copy(update={"hw_pool": pool})


def _truncated_side(client: QueryClient, params: CanaryParams, side: str) -> _Side:
    """A side with more than ``max_rows`` requests: only its earliest ``max_rows`` are compared."""
    values: dict[str, Any] = {}
    rows = (
        f"{_side_rows(client, params, side, values)} ORDER BY {col.TS}, {col.REQUEST_ID} LIMIT {{{side[0]}_n:UInt64}}"
    )
    code = latency_code_sql(col.LATENCY_MS)
    per_code = client.query_frame(
        f"SELECT {code} AS code, count() AS n, countIf(NOT {COMPILED_SQL}) AS warm, {_COUNTS} FROM ({rows}) "
        "GROUP BY code",
        values,
    )
    hist = np.zeros(LATENCY_CODE_MAX + 1, dtype=np.int64)
    if per_code.height:
        hist[per_code.get_column("code").to_numpy().astype(np.int64)] = per_code.get_column("warm").to_numpy()
    rates = {m: int(per_code.get_column(f"r{i}").sum() or 0) for i, (m, _, _) in enumerate(_RATE_SQL)}
    fingerprinted = int(per_code.get_column("fp_n").sum() or 0)
    outputs = client.query_frame(f"SELECT {', '.join(_DRIFT_COLUMNS)} FROM ({rows}) WHERE {FINGERPRINTED_SQL}", values)
    drift = {c: outputs.get_column(c).cast(pl.Float64).to_numpy() for c in _DRIFT_COLUMNS}
    return _Side(params.max_rows, True, hist, rates, fingerprinted, drift, rows, values)


SNAP_TO_ZERO: Final = 1e-12
"""Evidence values (not p-values) of smaller magnitude are written as 0."""


def _row(  # noqa: PLR0917 (one evidence row: positional in table order)
    check: str,
    metric: str,
    b: float,
    c: float,
    lo: float,
    hi: float,
    p: float,
    threshold: float,
    outcome: Outcome,
    rule: str,
) -> dict[str, Any]:
    def f(x: float) -> float | None:
        return None if x is None or math.isnan(x) else float(x)

    def v(x: float) -> float | None:
        # Values, differences and their bounds (ms, rates, ratios): a magnitude under 1e-12 is summation
        # noise of an exact zero (a rate difference's bound printed as -1.73e-18). p-values keep theirs.
        out = f(x)
        return 0.0 if out is not None and abs(out) < SNAP_TO_ZERO else out

    return {
        "check": check,
        "metric": metric,
        "baseline": v(b),
        "candidate": v(c),
        "ci_low": v(lo),
        "ci_high": v(hi),
        "p_value": f(p),
        "threshold": threshold,
        "outcome": outcome,
        "rule": rule,
    }


def _latency_scope(base: _Side, cand: _Side) -> str:
    """What the latency checks read, in words (``latency over requests that did not compile: baseline 990 of
    1,000, candidate 99 of 100``)."""
    return "latency over requests that did not compile: " + ", ".join(
        f"{name} {int(side.hist.sum()):,} of {side.requests:,}"
        for name, side in (("baseline", base), ("candidate", cand))
    )


def _latency_rows(base: _Side, cand: _Side, params: CanaryParams) -> list[dict[str, Any]]:
    hb, hc = base.hist, cand.hist
    limit = 1 + params.latency_tolerance
    rows = []
    quantiles = (0.5, 0.95, 0.99)
    for q, r in zip(quantiles, stats.bootstrap_quantile_ratios(hb, hc, quantiles, seed=params.seed), strict=True):
        outcome: Outcome = "fail" if r.low > limit else ("pass" if r.high <= limit else "inconclusive")
        if math.isnan(r.ratio):
            outcome = "inconclusive"
        rule = f"{_latency_scope(base, cand)}; ratio CI low > {limit:g} fails; CI high <= {limit:g} passes"
        rows.append(
            _row(
                "latency",
                f"p{round(q * 100)}_ms",
                r.baseline,
                r.candidate,
                r.low,
                r.high,
                math.nan,
                limit,
                outcome,
                rule,
            )
        )
    return rows


def _rate_rows(base: _Side, cand: _Side, params: CanaryParams) -> list[dict[str, Any]]:
    rows = []
    for metric, _, strict in _RATE_SQL:
        xb, xc = base.rates[metric], cand.rates[metric]
        nb, nc = base.requests, cand.requests
        if metric in _OVER_FINGERPRINTED:
            nb, nc = base.fingerprinted, cand.fingerprinted
        p = stats.proportion_test(xb, nb, xc, nc)
        rb, rc = (xb / nb if nb else math.nan), (xc / nc if nc else math.nan)
        lo, hi = stats.wilson_interval(xc, nc)
        min_inc = 0.0 if strict else params.min_rate_increase
        failed = p < params.alpha and (rc - rb) > 0 and (rc - rb) >= min_inc
        rule = f"one-sided z-test p < {params.alpha:g} and increase >= {min_inc:g} fails"
        rows.append(_row("rate", metric, rb, rc, lo, hi, p, params.alpha, "fail" if failed else "pass", rule))
    return rows


_TS_OFFSET_US = 1 << 62
"""Added to a timestamp in microseconds so that every DateTime64 (1900 on) is positive in the sort key."""


def _first(value: str, side: str = "") -> str:
    """``value`` of the earliest request per input digest, of the rows whose ``side`` is ``side`` when given. Ties
    in time go to the argmax digest whose first 8 bytes are smallest.

    The order is one UInt128 (the time in microseconds, then those 8 bytes read big-endian): ``argMin``
    compares it as a number, where a (time, digest) tuple is compared field by field as generic values
    (pairs of a 7-day canary on the 10^8-row store: 127 against 217 ms of engine time). Every value taken
    with this order is of the same request."""
    if_ = "If" if side else ""
    cond = f", side = '{side}'" if side else ""
    prefix = f"reinterpretAsUInt64(reverse(substring(rightPad({col.FP_ARGMAX_DIGEST}, 8, '\\0'), 1, 8)))"
    key = f"bitShiftLeft(toUInt128(toUnixTimestamp64Micro({col.TS}) + {_TS_OFFSET_US}), 64) + {prefix}"
    return f"argMin{if_}({value}, {key}{cond})"


def _first_argmax(side: str = "") -> str:
    """The argmax digest of the earliest request per input digest (:func:`_first`)."""
    return _first(col.FP_ARGMAX_DIGEST, side)


_FIRST_FACTS: Final = (
    (col.REQUEST_ID, "r"),
    (col.FP_ARGMAX_HEAD, "h"),
    (f"toUnixTimestamp64Micro({col.TS})", "t"),
    (f"toBool({col.CAPTURE_BLOB} != '' AND {col.BUNDLE_ID} != '')", "k"),
)
"""What :func:`_first_request` takes of a request (its id, first argmax ids, time, whether replay can take it), and
the column name of each."""


def _first_request(side: str = "", suffix: str = "") -> str:
    """The earliest request per input digest (:func:`_first`): its id ``r``, its first argmax ids ``h``, its time in
    microseconds ``t`` and whether replay can take it ``k``, each name followed by ``suffix``. Each is an ``argMin``
    of its own: one of a tuple holding the array is compared and copied as a generic value, slower than these."""
    return ", ".join(f"{_first(value, side)} AS {name}{suffix}" for value, name in _FIRST_FACTS)


def _differing(head_b: str, head_c: str) -> str:
    """SQL of :data:`ARGMAX_DIFFERING`: the positions of two argmax-id heads that differ, or that one lacks."""
    return (
        f"arrayCount(i -> i > length({head_b}) OR i > length({head_c}) OR {head_b}[i] != {head_c}[i], "
        f"range(1, greatest(length({head_b}), length({head_c})) + 1))"
    )


def _worst(agree: str, b: Callable[[str], str], c: Callable[[str], str], digest: str) -> str:
    """The aggregates of the :data:`DISAGREEMENTS_KEPT` worst disagreeing pairs (the pairs where ``agree`` is false;
    ``b``/``c`` name a :func:`_first_request` column of each side): most argmax ids differing first, then the
    earliest candidate request; one array per :data:`DISAGREEMENT_SCHEMA` column."""
    order = f"(-toInt64({_differing(b('h'), c('h'))}), {c('t')}, {b('r')}, {c('r')}, {digest}, {c('k')})"
    return (
        f"groupArraySortedIf({DISAGREEMENTS_KEPT})({order}, NOT ({agree})) AS worst, "
        f"arrayMap(t -> t.3, worst) AS {BASELINE_REQUEST}, arrayMap(t -> t.4, worst) AS {CANDIDATE_REQUEST}, "
        f"arrayMap(t -> t.5, worst) AS {col.INPUT_DIGEST}, arrayMap(t -> toUInt32(-t.1), worst) AS {ARGMAX_DIFFERING}, "
        f"arrayMap(t -> t.6, worst) AS {CANDIDATE_REPLAYABLE}"
    )


def _disagreeing(frame: pl.DataFrame, i: int) -> pl.DataFrame:
    """Row ``i``'s disagreeing pairs (the arrays of :func:`_worst`) as a frame of :data:`DISAGREEMENT_SCHEMA`."""
    return pl.DataFrame({c: frame.get_column(c)[i] for c in DISAGREEMENT_SCHEMA}, schema=DISAGREEMENT_SCHEMA)


Paired = tuple[int, int, pl.DataFrame]
"""A pool's input-matched pairs, how many agree, and the worst disagreeing ones (:data:`DISAGREEMENT_SCHEMA`)."""


def _pairs(
    client: QueryClient, sides: dict[str | None, tuple[_Side, _Side]], both: str, values: dict[str, Any]
) -> dict[str | None, Paired]:
    """Per pool, the input-matched pairs, how many of them agree on the argmax digest, and the worst that do not."""
    matched = f"WHERE {col.INPUT_DIGEST} != '' AND {col.FP_ARGMAX_DIGEST} != '' AND {FINGERPRINTED_SQL} "
    out: dict[str | None, Paired] = {}

    def by(suffix: str) -> Callable[[str], str]:
        return lambda name: f"{name}{suffix}"

    whole = [pool for pool, (base, cand) in sides.items() if not (base.truncated or cand.truncated)]
    if whole:
        # One scan of both sides, one GROUP BY over the pools and the input digests of either.
        pairs = client.query_frame(
            f"SELECT pool, count() AS n, countIf(ab = ac) AS agree, {_worst('ab = ac', by('b'), by('c'), 'digest')} "
            f"FROM (SELECT pool, {_first_argmax('b')} AS ab, {_first_argmax('c')} AS ac, {_first_request('b', 'b')}, "
            f"{_first_request('c', 'c')}, {col.INPUT_DIGEST} AS digest FROM ({both}) {matched}"
            f"GROUP BY pool, {col.INPUT_DIGEST} HAVING countIf(side = 'b') > 0 AND countIf(side = 'c') > 0) "
            "GROUP BY pool",
            values,
        )
        found = {
            str(p): (int(n), int(a), _disagreeing(pairs, i))
            for i, (p, n, a) in enumerate(pairs.select("pool", "n", "agree").iter_rows())
        }
        none = (0, 0, pl.DataFrame(schema=DISAGREEMENT_SCHEMA))
        out |= {pool: found.get(pool or "", none) for pool in whole}

    def first(rows: str, also: str = "") -> str:
        digest = col.INPUT_DIGEST
        return (
            f"SELECT {digest}, {_first_argmax()} AS a, {_first_request()} FROM ({rows}) {matched}{also}"
            f"GROUP BY {digest}"
        )

    for pool in (p for p in sides if p not in out):
        base, cand = sides[pool]
        narrowed = f"AND {col.INPUT_DIGEST} IN (SELECT {col.INPUT_DIGEST} FROM ({cand.rows_sql})) "
        worst = _worst("b.a = c.a", lambda name: f"b.{name}", lambda name: f"c.{name}", f"b.{col.INPUT_DIGEST}")
        joined = client.query_frame(
            # The baseline side is narrowed to the candidate's digests first: only rows that can pair are grouped.
            f"SELECT count() AS n, countIf(b.a = c.a) AS agree, {worst} FROM ({first(base.rows_sql, also=narrowed)}) "
            f"AS b INNER JOIN ({first(cand.rows_sql)}) AS c ON b.{col.INPUT_DIGEST} = c.{col.INPUT_DIGEST}",
            base.values | cand.values,
        )
        out[pool] = int(joined.item(0, "n")), int(joined.item(0, "agree")), _disagreeing(joined, 0)
    return out


def _agreement_row(n: int, agree: int, params: CanaryParams) -> dict[str, Any]:
    lo, hi = stats.wilson_interval(agree, n)
    rule = f"agreement < {params.min_agreement:g} over >= {params.min_pairs} input-matched pairs fails"
    outcome: Outcome = "skipped" if n < params.min_pairs else ("fail" if agree / n < params.min_agreement else "pass")
    return _row(
        "output",
        AGREEMENT_METRIC,
        float(n),
        agree / n if n else math.nan,
        lo,
        hi,
        math.nan,
        params.min_agreement,
        outcome,
        rule,
    )


def _drift_rows(base: _Side, cand: _Side, params: CanaryParams) -> list[dict[str, Any]]:
    rows = []
    for column in _DRIFT_COLUMNS:
        a, b = base.drift[column], cand.drift[column]
        d, p = stats.ks_test(a, b)
        failed = not math.isnan(d) and d > params.max_ks_distance and p < params.alpha
        rule = f"KS D > {params.max_ks_distance:g} with p < {params.alpha:g} fails"
        mb, mc = (float(np.nanmedian(a)) if a.size else math.nan), (float(np.nanmedian(b)) if b.size else math.nan)
        rows.append(
            _row(
                "output",
                f"{column}_ks",
                mb,
                mc,
                d,
                d,
                p,
                params.max_ks_distance,
                "fail" if failed else ("inconclusive" if math.isnan(d) else "pass"),
                rule,
            )
        )
    return rows


def canary_compare(client: QueryClient, params: CanaryParams, *, now: datetime | None = None) -> CanaryResult:
    """Compare the candidate with the baseline and decide (rules in the module docstring).

    ``baseline``/``candidate`` values of the evidence are the two sides' values (for latency the quantile
    in ms, and ``ci_low``/``ci_high`` the 95 % interval of the ratio candidate / baseline, the number the rule
    compares with ``1 + latency_tolerance``; for argmax agreement ``baseline`` holds the number of pairs).
    ``now`` (default: the clock) dates the raw requests the store still keeps, for the rule of a side short of
    requests (:mod:`~inferensics.analytics.canary_shortfall`).
    """
    return _compare(client, params, (None,), now)[None]


def canary_compare_pools(
    client: QueryClient, params: CanaryParams, pools: Sequence[str], *, now: datetime | None = None
) -> dict[str, CanaryResult]:
    """:func:`canary_compare` of each of ``pools`` alone (``params`` with its ``hw_pool``), from the queries that
    one comparison runs (each groups by pool): the results, by pool in the order given, are those
    :func:`canary_compare` gives each pool. ``params.hw_pool`` must be unset; an unknown pool raises
    :class:`~inferensics.analytics.errors.UnknownFilterValue` as it does there."""
    if params.hw_pool is not None:
        raise ValueError("give the pools to compare as pools, not hw_pool")
    if not pools:
        raise ValueError("no hardware pool to compare: give at least one")
    named = tuple(dict.fromkeys(pools))
    return {str(pool): result for pool, result in _compare(client, params, named, now).items()}


def _counted(
    client: QueryClient, params: CanaryParams, sides: dict[str | None, tuple[_Side, _Side]], now: datetime | None
) -> dict[str | None, dict[str, int]]:
    """Per pool, the rollups' count of each side whose window reaches back past the raw requests kept (one query per
    such side, every pool's count at once): what tells expired rows from no requests, and a side judged over the
    rows left from one judged whole."""
    out: dict[str | None, dict[str, int]] = {pool: {} for pool in sides}
    for side in SIDES:
        if may_have_expired(params, side, now):
            for pool, n in rollup_counts(client, params, side, list(sides), now=now).items():
                out[pool][side] = n
    return out


def _compare(
    client: QueryClient, params: CanaryParams, pools: Pools, now: datetime | None
) -> dict[str | None, CanaryResult]:
    bundles = [("bundle", b) for b in (params.baseline, params.candidate) if b is not None]
    also = bundles if _every_pool(pools) else [*(("hw_pool", str(p)) for p in pools), *bundles]
    try:
        check_filter_values(client, params, ("requests_1h", "requests"), also=also)
    except UnknownFilterValue as exc:
        if exc.dimension != "bundle" or "" not in exc.known:
            raise
        # Requests served without a bundle carry an empty id: not a bundle the message can offer.
        raise UnknownFilterValue(exc.dimension, exc.value, [k for k in exc.known if k]) from None
    sides, both, values = _sides(client, params, pools)
    # The engine pairs the sides while this thread resamples and runs the KS tests (the engine releases
    # the GIL; only one query is in flight at a time, so the client is never used concurrently).
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="canary-pairs") as pool_:
        pairs = pool_.submit(_pairs, client, sides, both, values)
        checks = {
            pool: (_latency_rows(base, cand, params), _rate_rows(base, cand, params), _drift_rows(base, cand, params))
            for pool, (base, cand) in sides.items()
        }
        paired = pairs.result()
    counted = _counted(client, params, sides, now)
    results = {}
    for pool, (latency, rates, drift) in checks.items():
        base, cand = sides[pool]
        n, agree, disagreeing = paired[pool]
        rows = [*latency, *rates, _agreement_row(n, agree, params), *drift]
        evidence = pl.DataFrame(rows, schema=EVIDENCE_SCHEMA)
        served = {"baseline": base.requests, "candidate": cand.requests}
        if min(base.requests, cand.requests) < params.min_requests:
            verdict, rule = "inconclusive", shortfall_rule(params, served, counted[pool])
        else:
            verdict, rule = decide(evidence)
            # A side truncated at max_rows was not read whole: fewer rows than the rollups count is not expiry.
            read = {"baseline": base, "candidate": cand}
            whole = {side: n for side, n in counted[pool].items() if not read[side].truncated}
            rule += partly_expired_note(params, served, whole)
        truncated = base.truncated or cand.truncated
        results[pool] = CanaryResult(
            verdict,  # type: ignore[arg-type]
            rule,
            evidence,
            base.requests,
            cand.requests,
            truncated,
            disagreeing,
        )
    return results


def decide(evidence: pl.DataFrame) -> tuple[str, str]:
    """The verdict and its rule from the checks' outcomes (rules 2 to 4 of the module docstring: both sides
    served enough requests)."""
    outcomes = evidence.get_column("outcome").to_list()
    if "fail" in outcomes:
        failed = evidence.filter(pl.col("outcome") == "fail").get_column("metric").to_list()
        return "fail", "failed: " + ", ".join(failed)
    if "inconclusive" in outcomes:
        open_ = evidence.filter(pl.col("outcome") == "inconclusive").get_column("metric").to_list()
        return "inconclusive", "undecided: " + ", ".join(open_)
    return "pass", "every check passed"


POOLS_CORRECTED_FOR: Final = "pools_corrected_for"
"""The ``attrs`` key of a recorded verdict whose p-value checks were corrected for the hardware pools judged with
it (:func:`~inferensics.analytics.canary_pools.correct_for_pools`): how many pools, as text."""


def verdict_event(
    frame: pl.DataFrame, params: CanaryParams, *, now: datetime, pools_judged: int = 1
) -> CanaryVerdictEvent:
    """The verdict of a :func:`canary_compare` frame as the row ``canary_verdicts`` stores.

    ``baseline``/``candidate`` are the bundle ids (``any`` when a side is not narrowed to a bundle); in
    two-window mode ``attrs`` holds the baseline window. ``evidence`` is the evidence rows as JSON.
    ``pools_judged`` above 1 says the frame is one of that many pools' frames judged together, its p-value checks
    corrected for them (:func:`~inferensics.analytics.canary_pools.correct_for_pools`): ``attrs`` then holds that
    number under :data:`POOLS_CORRECTED_FOR`.
    """
    verdicts = frame.filter(pl.col("check") == "verdict")
    if verdicts.height != 1:
        raise ValueError(f"a canary_compare frame has one verdict row; this one has {verdicts.height}")
    row = verdicts.row(0, named=True)
    attrs = {}
    if params.baseline_start is not None and params.baseline_end is not None:
        attrs["baseline_window"] = f"{params.baseline_start.isoformat()}/{params.baseline_end.isoformat()}"
    if params.hw_pool is not None:
        attrs["hw_pool"] = params.hw_pool
    if pools_judged > 1:
        attrs[POOLS_CORRECTED_FOR] = str(pools_judged)
    return CanaryVerdictEvent(
        ts=now,
        model=params.model,
        traffic_class=params.traffic_class or "",
        baseline=params.baseline or "any",
        candidate=params.candidate or "any",
        window_start=params.start,
        window_end=params.end,
        verdict=str(row["outcome"]),
        rule=str(row["rule"]),
        evidence=frame.filter(pl.col("check") != "verdict").write_json(),
        attrs=attrs,
    )
