"""The canary evidence as people read it (the dashboard's canary page, ``inferensics canary compare`` and its
Markdown and HTML reports): every value with its unit, read off what its check measures.

One evidence row of ``canary_compare`` (``inferensics.analytics.canary``) holds numbers whose unit depends on
the check, and within a row on the column (see ``canary_compare``):

* ``latency`` (metrics ``p50_ms`` …): baseline and candidate in ms; the threshold (the ratio tolerated) and
  the interval (the 95 % interval of the ratio candidate / baseline, not of the candidate's latency) in
  multiples of the baseline;
* ``rate`` (``error_rate`` …): shares of requests; the threshold is the test's significance level;
* ``output`` ``argmax_agreement``: the baseline holds the number of input-matched pairs, the candidate and
  the interval the share of them that agree, the threshold the least share that passes;
* ``output`` ``*_ks`` (output-statistic drift): the medians of the statistic on each side (the output's own
  scale), the interval its Kolmogorov–Smirnov distance D, the threshold the largest D that passes;
* ``verdict``: the requests compared on each side.

A row this module does not know (a check added to the analytics) shows its numbers plain, each followed by
the metric's name, rather than a guessed unit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Final

import polars as pl

SHOWN: Final = ("check", "metric", "baseline", "candidate", "interval", "threshold", "p_value", "outcome", "rule")
"""The columns of :func:`evidence_table`: the values as text with their units, the p-value as a number."""

_TEXT_COLUMNS: Final = ("baseline", "candidate", "interval", "threshold")
_Row = Mapping[str, Any]
_Cells = tuple[str, str, str, str]
"""baseline, candidate, interval, threshold."""


def _number(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


def _text(value: float | None, template: str) -> str:
    """``template`` (a ``str.format`` pattern of one value) with ``value``, ``–`` for none or NaN."""
    v = _number(value)
    return "–" if v is None else template.format(v)


def _ms(value: float | None) -> str:
    return _text(value, "{:,.1f} ms")


def _share(value: float | None) -> str:
    v = _number(value)
    return "–" if v is None else f"{100 * v:.2f} %"


def _ratio(value: float) -> str:
    """A ratio to three significant digits, whole past 100 (``0.0174``, ``2.85``, ``1,234``: never ``1.23e+03``)."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _latency(row: _Row) -> _Cells:
    # The interval is the ratio's (candidate / baseline), the number the rule compares with the threshold: in
    # ms it read as an interval of the candidate's quantile (a p99 "202.9 – 829,708.6 ms" of a 36 s run).
    lo, hi = _number(row["ci_low"]), _number(row["ci_high"])
    interval = "–" if lo is None or hi is None else f"{_ratio(lo)} – {_ratio(hi)} × baseline"
    return _ms(row["baseline"]), _ms(row["candidate"]), interval, _text(row["threshold"], "{:g} × baseline")


def _shares(row: _Row) -> str:
    lo, hi = _number(row["ci_low"]), _number(row["ci_high"])
    return "–" if lo is None or hi is None else f"{100 * lo:.2f} – {100 * hi:.2f} %"


def _rate(row: _Row) -> _Cells:
    return _share(row["baseline"]), _share(row["candidate"]), _shares(row), _text(row["threshold"], "p < {:g}")


def _agreement(row: _Row) -> _Cells:
    return (
        _text(row["baseline"], "{:,.0f} pairs"),
        _share(row["candidate"]),
        _shares(row),
        "≥ " + _share(row["threshold"]),
    )


def _drift(row: _Row) -> _Cells:
    return (
        _text(row["baseline"], "median {:.4g}"),
        _text(row["candidate"], "median {:.4g}"),
        _text(row["ci_low"], "D = {:.3g}"),
        _text(row["threshold"], "D ≤ {:g}"),
    )


def _requests(row: _Row) -> _Cells:
    return _text(row["baseline"], "{:,.0f} requests"), _text(row["candidate"], "{:,.0f} requests"), "–", "–"


UNITS: Final[Mapping[str, Callable[[_Row], _Cells]]] = {
    "latency": _latency,
    "rate": _rate,
    "agreement": _agreement,
    "drift": _drift,
    "requests": _requests,
}
"""How each kind of evidence row shows its values (kinds from :func:`evidence_kind`)."""


def evidence_kind(check: str, metric: str) -> str | None:
    """The kind of unit an evidence row of ``check`` and ``metric`` is in, ``None`` when unknown.

    By the check where it alone decides (every latency row is in ms, every rate row a share of requests,
    whatever quantile or rate the analytics add); the ``output`` check holds two kinds, told by the metric.
    """
    if check in ("latency", "rate"):
        return check
    if check == "verdict":
        return "requests"
    if check == "output" and metric == "argmax_agreement":
        return "agreement"
    if check == "output" and metric.endswith("_ks"):
        return "drift"
    return None


def _unknown(row: _Row) -> _Cells:
    # The metric's own name where a unit would be: a reader sees what the number is of, not a guessed unit.
    plain = "{:.4g} " + f"({row['metric']})".replace("{", "{{").replace("}", "}}")
    lo, hi = _text(row["ci_low"], plain), _text(row["ci_high"], plain)
    return _text(row["baseline"], plain), _text(row["candidate"], plain), f"{lo} – {hi}", _text(row["threshold"], plain)


def shown_values(row: _Row) -> _Cells:
    """An evidence row's baseline, candidate, interval and threshold as text with their units."""
    kind = evidence_kind(str(row["check"]), str(row["metric"]))
    return (UNITS[kind] if kind is not None else _unknown)(row)


def evidence_table(frame: pl.DataFrame) -> pl.DataFrame:
    """A ``canary_compare`` frame as it is shown (columns :data:`SHOWN`): the values as text in their
    units, so that a rate of 0.02 reads "2.00 %" and cannot pass for 0.02 ms."""
    cells = [shown_values(r) for r in frame.iter_rows(named=True)]
    values = pl.DataFrame(cells, schema=dict.fromkeys(_TEXT_COLUMNS, pl.String), orient="row")
    return frame.drop("baseline", "candidate", "ci_low", "ci_high", "threshold").hstack(values).select(SHOWN)


LATENCY_RATIO_COLUMNS: Final = ("metric", "ratio", "ci_low", "ci_high", "threshold", "baseline", "candidate", "outcome")
"""The columns of :func:`latency_ratios`."""


def latency_ratios(frame: pl.DataFrame) -> pl.DataFrame:
    """The latency rows of a ``canary_compare`` frame as the rule reads them: per quantile the ratio candidate /
    baseline, its 95 % interval (``ci_low``, ``ci_high``) and the ratio tolerated (``threshold``), with the two
    sides' quantiles in ms (``baseline``, ``candidate``) and the outcome; a quantile without a ratio (an empty
    side) is left out. Columns: :data:`LATENCY_RATIO_COLUMNS`."""
    rows = frame.filter(pl.col("check") == "latency").with_columns(
        (pl.col("candidate") / pl.col("baseline")).alias("ratio")
    )
    drawable = pl.all_horizontal(pl.col(c).is_not_null() & pl.col(c).is_finite() & (pl.col(c) > 0) for c in (
        "ratio", "ci_low", "ci_high"
    ))  # fmt: skip
    return rows.filter(drawable).select(LATENCY_RATIO_COLUMNS)
