"""The error/fallback spike rule on hand-made per-minute series."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from inferensics.analytics import spikes
from inferensics.schema import columns as col

T0 = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)


def series(rows: list[tuple[int, str, int, int]]) -> pl.DataFrame:
    """A per-minute ``fleet_timeseries(by=model)`` frame from (minute, model, requests, errors)."""
    return pl.DataFrame(
        {
            col.BUCKET: [T0 + timedelta(minutes=m) for m, *_ in rows],
            "group": [g for _, g, _, _ in rows],
            col.REQUESTS: [r for *_, r, _ in rows],
            col.ERRORS: [e for *_, e in rows],
            col.FALLBACKS: [0 for _ in rows],
        }
    )


def test_spike_needs_enough_events_and_a_rate_above_the_model_rate() -> None:
    quiet = [(m, "a", 10, 0) for m in range(30)]
    spike = series([*quiet, (12, "a", 10, 6)])  # 6 errors in the 10:00 window of a model erring rarely
    found = spikes.find_spikes(spike, spikes.ERRORS)
    assert found.select("window_start", col.MODEL, col.ERRORS).rows() == [(T0 + timedelta(minutes=10), "a", 6)]
    assert found.item(0, col.REQUESTS) == 60  # the five minutes 10..14 of model a
    too_few = series([*quiet, (12, "a", 10, 4)])
    assert spikes.find_spikes(too_few, spikes.ERRORS).is_empty()
    everywhere = series([(m, "b", 10, 3) for m in range(30)])  # a steady 30 % is the model's normal
    assert spikes.find_spikes(everywhere, spikes.ERRORS).is_empty()


def test_spike_of_an_empty_series_is_an_empty_frame() -> None:
    empty = spikes.find_spikes(pl.DataFrame(), spikes.FALLBACKS)
    assert empty.is_empty()
    assert empty.columns == ["window_start", col.MODEL, col.REQUESTS, col.FALLBACKS, "rate", "model_rate"]
    assert "5-minute window" in spikes.rule(spikes.WINDOW)
    assert "1-hour window" in spikes.rule(timedelta(hours=1))
