"""Error and fallback spikes, found in a per-bucket series of :func:`~inferensics.analytics.fleet_timeseries`.

**Spike rule.** Per model, the series is summed into windows: 5 minutes when the series is per minute
(ranges up to 6 hours), else one bucket (an hour or a day). A window is an error spike when it has at least
``MIN_EVENTS`` errors and its error rate is at least ``max(FLOOR_RATE, FACTOR × the model's error rate over
the whole range)``; the same for fallbacks. Recompile storms follow the hourly storm rule of
:mod:`inferensics.analytics.storms`. The dashboard's overview page shows both.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Final

import polars as pl

from inferensics.schema import columns as col

WINDOW: Final = timedelta(minutes=5)
"""The window of a per-minute series."""
WINDOWS: Final = {"minute": WINDOW, "hour": timedelta(hours=1), "day": timedelta(days=1)}
MIN_EVENTS: Final = 5
FLOOR_RATE: Final = 0.05
FACTOR: Final = 3.0


def rule(window: timedelta) -> str:
    """The spike rule in words, shown on the page."""
    minutes = int(window.total_seconds() // 60)
    span = f"{minutes}-minute" if minutes < 60 else (f"{minutes // 60}-hour" if minutes < 1440 else "1-day")
    return (
        f"a {span} window of one model with at least {MIN_EVENTS} events and a rate of at least "
        f"max({FLOOR_RATE:.0%}, {FACTOR:g} × the model's rate over the range)"
    )


@dataclass(frozen=True, slots=True)
class SpikeKind:
    """Which count makes a spike."""

    column: str
    label: str


ERRORS: Final = SpikeKind(col.ERRORS, "error")
FALLBACKS: Final = SpikeKind(col.FALLBACKS, "fallback")


def find_spikes(series: pl.DataFrame, kind: SpikeKind, window: timedelta = WINDOW) -> pl.DataFrame:
    """Spike windows of ``window`` in a series grouped by model (``fleet_timeseries(by=model)``).

    Columns: window_start, model, requests, <count column>, rate, model_rate; newest first.
    """
    schema = pl.Schema(
        {
            "window_start": pl.Datetime("us", "UTC"),
            col.MODEL: pl.String(),
            col.REQUESTS: pl.UInt64(),
            kind.column: pl.UInt64(),
            "rate": pl.Float64(),
            "model_rate": pl.Float64(),
        }
    )
    if series.is_empty() or kind.column not in series.columns:
        return pl.DataFrame(schema=schema)
    frame = series.select(
        pl.col(col.BUCKET).cast(pl.Datetime("us", "UTC")),
        pl.col("group").cast(pl.String).alias(col.MODEL),
        pl.col(col.REQUESTS).cast(pl.UInt64),
        pl.col(kind.column).cast(pl.UInt64),
    )
    overall = frame.group_by(col.MODEL).agg(
        (pl.col(kind.column).sum() / pl.col(col.REQUESTS).sum()).alias("model_rate")
    )
    windows = (
        frame.with_columns(
            pl.col(col.BUCKET).dt.truncate(f"{int(window.total_seconds() // 60)}m").alias("window_start")
        )
        .group_by("window_start", col.MODEL)
        .agg(pl.col(col.REQUESTS).sum(), pl.col(kind.column).sum())
        .with_columns((pl.col(kind.column) / pl.col(col.REQUESTS)).alias("rate"))
        .join(overall, on=col.MODEL)
    )
    threshold = pl.max_horizontal(pl.lit(FLOOR_RATE), FACTOR * pl.col("model_rate"))
    spikes = windows.filter((pl.col(kind.column) >= MIN_EVENTS) & (pl.col("rate") >= threshold))
    return spikes.select(list(schema)).cast(schema).sort(["window_start", col.MODEL], descending=[True, False])
