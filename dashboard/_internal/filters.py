"""The sidebar filters shared by the slice pages: time range, model, hardware pool, traffic class, host, bundle.

Widgets live in the app's entry script, so their values persist when the user moves between pages. The
end of every range is the current minute, so cached answers are reused within a minute. A link may set them
(``?host=h1&window=24h``, :func:`apply_linked_filters`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import polars as pl
import streamlit as st

from inferensics.analytics.filters import SliceParams
from inferensics.dashboard._internal.links import END_PARAM, FILTER_PARAMS, WINDOW_PARAM, parse_duration
from inferensics.schema.types import as_utc

ALL: Final = "All"
"""The option meaning "no filter"."""

TIME_RANGES: Final[dict[str, timedelta]] = {
    "Last 15 minutes": timedelta(minutes=15),
    "Last hour": timedelta(hours=1),
    "Last 6 hours": timedelta(hours=6),
    "Last 24 hours": timedelta(hours=24),
    "Last 7 days": timedelta(days=7),
    "Last 30 days": timedelta(days=30),
}
DEFAULT_TIME_RANGE: Final = "Last hour"

RANGE_KEY: Final = "filter.range"
MODEL_KEY: Final = "filter.model"
POOL_KEY: Final = "filter.hw_pool"
TRAFFIC_KEY: Final = "filter.traffic_class"
HOST_KEY: Final = "filter.host"
BUNDLE_KEY: Final = "filter.bundle_id"
PROCESS_LEVEL: Final = ("traffic_class", "bundle")
"""Filters that records of a serving process rather than of a request (SDK health, kernel-registry decisions) carry
no column for: pages over them leave these out and say so."""
NOW_KEY: Final = "filter.now"
"""Session State key that pins "now" (tests pin it to their data)."""


class Filters(SliceParams):
    """The selected slice: the analytics' :class:`~inferensics.analytics.filters.SliceParams` (one name per
    dimension, ``bundle`` included), with what the pages ask of it. ``None`` means all values."""

    def dimensions(self) -> dict[str, str]:
        """The dimension filters that are set, by the analytics parameter names."""
        return self.active()

    def params(self, *, without: Sequence[str] = ()) -> dict[str, object]:
        """The parameters of a slice query: range and set filters, less the filters named in ``without`` (those
        the queried events carry no column for, e.g. :data:`PROCESS_LEVEL`)."""
        dims = {k: v for k, v in self.dimensions().items() if k not in without}
        return {"start": self.start, "end": self.end, **dims}

    def any_set(self, names: Sequence[str]) -> bool:
        """Whether any of the filters ``names`` is set."""
        return any(getattr(self, name) is not None for name in names)

    def without_dimensions(self) -> Filters:
        """The same time range with every dimension filter cleared."""
        return Filters(start=self.start, end=self.end)


def _parse_end(text: str) -> datetime | None:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "+"))
    except ValueError:
        return None
    return as_utc(value)


def bucket_unit(filters: Filters) -> str:
    """Chart buckets for the range: minutes up to 6 hours, hours up to 7 days, days beyond."""
    span = filters.end - filters.start
    return "minute" if span <= timedelta(hours=6) else ("hour" if span <= timedelta(days=7) else "day")


UNIT_EVERY: Final[dict[str, str]] = {"minute": "1m", "hour": "1h", "day": "1d"}
"""A bucket unit (:func:`bucket_unit`) as a Polars interval."""


def with_quiet_buckets(counts: pl.DataFrame, bucket: str, unit: str) -> pl.DataFrame:
    """``counts`` (one row per bucket of ``unit`` in column ``bucket``, sorted) with a row of zeros for each bucket
    between its first and last that has none: a bucket without rows counted nothing. Drawn as lines, a gap joined
    one busy minute to the next, a ramp of trouble through minutes that had none."""
    if counts.height < 2:
        return counts
    return counts.upsample(bucket, every=UNIT_EVERY[unit]).fill_null(0)


def time_format(unit: str) -> str:
    """Axis label format for buckets of ``unit``."""
    return {"minute": "%H:%M", "hour": "%m-%d %H:%M"}.get(unit, "%Y-%m-%d")


def end_param_problem() -> str | None:
    """What is wrong with the link's ``?end=``, when it is there and is not a time (ranges then end now)."""
    raw = st.query_params.get(END_PARAM)
    if not raw or _parse_end(raw) is not None:
        return None
    shown = raw.replace("`", "'")[:80]
    return (
        f"The link's end time `?{END_PARAM}={shown}` is not an ISO-8601 time such as `2026-11-30T19:00Z`: "
        "every range ends now instead. Fix the link to see the hour it was meant to pin."
    )


def now() -> datetime:
    """The end of every range: ``?end=`` of the URL, else the session's pinned "now", else the next minute."""
    raw = st.query_params.get(END_PARAM)
    if raw and (pinned_end := _parse_end(raw)) is not None:
        return pinned_end
    pinned = st.session_state.get(NOW_KEY)
    if isinstance(pinned, datetime):
        return pinned
    return datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)


def time_range() -> tuple[datetime, datetime]:
    """The selected time range (``Last hour`` unless the user chose another)."""
    label = st.session_state.get(RANGE_KEY, DEFAULT_TIME_RANGE)
    end = now()
    return end - TIME_RANGES.get(label, TIME_RANGES[DEFAULT_TIME_RANGE]), end


def _choice(key: str) -> str | None:
    value = st.session_state.get(key, ALL)
    return None if value in (ALL, None) else str(value)


def current_filters() -> Filters:
    """The filters as the sidebar holds them now."""
    start, end = time_range()
    return Filters(
        start=start,
        end=end,
        model=_choice(MODEL_KEY),
        hw_pool=_choice(POOL_KEY),
        traffic_class=_choice(TRAFFIC_KEY),
        host=_choice(HOST_KEY),
        bundle=_choice(BUNDLE_KEY),
    )


PENDING_KEY: Final = "filter.pending"
_KEYS_BY_DIMENSION: Final = {
    "model": MODEL_KEY,
    "hw_pool": POOL_KEY,
    "traffic_class": TRAFFIC_KEY,
    "host": HOST_KEY,
    "bundle": BUNDLE_KEY,
}
LINKED_KEY: Final = "filter.linked"
"""Session State key holding the filters of the link last applied (so a later change in the sidebar sticks)."""


def request_filters(**dimensions: str | None) -> None:
    """Ask for these filter values on the next run (a widget's value cannot change after it is drawn).

    Keys are ``model``, ``hw_pool``, ``traffic_class``, ``host``, ``bundle``; ``None`` means all.
    """
    st.session_state[PENDING_KEY] = {k: v for k, v in dimensions.items() if k in _KEYS_BY_DIMENSION}


def apply_pending_filters() -> None:
    """Move filter values asked for by :func:`request_filters` into the widgets, before they are drawn."""
    pending = st.session_state.pop(PENDING_KEY, None)
    if not pending:
        return
    for name, value in pending.items():
        st.session_state[_KEYS_BY_DIMENSION[name]] = value if value is not None else ALL


def linked_range(window: timedelta) -> str:
    """The shortest sidebar range that holds a link's ``window`` (the longest when none does).

    >>> linked_range(timedelta(hours=1)), linked_range(timedelta(hours=2)), linked_range(timedelta(days=90))
    ('Last hour', 'Last 6 hours', 'Last 30 days')
    """
    return next((label for label, span in TIME_RANGES.items() if span >= window), list(TIME_RANGES)[-1])


def apply_linked_filters() -> None:
    """Set the filters a link names (``?host=h1``, ``?window=24h``: :data:`FILTER_PARAMS`, :data:`WINDOW_PARAM`)
    before the widgets are drawn, once per link: what the reader then picks in the sidebar stays picked. A filter
    the link leaves out keeps its value."""
    linked = {name: st.query_params[name] for name in (*FILTER_PARAMS, WINDOW_PARAM) if st.query_params.get(name)}
    if not linked or st.session_state.get(LINKED_KEY) == linked:
        return
    st.session_state[LINKED_KEY] = linked
    for name, value in linked.items():
        if name in _KEYS_BY_DIMENSION:
            st.session_state[_KEYS_BY_DIMENSION[name]] = value
        elif (window := parse_duration(value)) is not None:
            st.session_state[RANGE_KEY] = linked_range(window)


def describe(filters: Filters) -> str:
    """One line naming the range and the set filters, for page captions."""
    span = f"{filters.start:%Y-%m-%d %H:%M} – {filters.end:%H:%M} UTC"
    if filters.end - filters.start >= timedelta(days=1):
        span = f"{filters.start:%Y-%m-%d %H:%M} – {filters.end:%Y-%m-%d %H:%M} UTC"
    dims = filters.dimensions()
    shown = " · ".join(f"{k.replace('_', ' ')} **{v}**" for k, v in dims.items()) or "all models, pools and traffic"
    return f"{span} · {shown}"


HOST_HELP: Final = (
    "The serving host. Offered: the hosts whose SDK sent health records in the range or the week before (the Hosts "
    "page's); type another to pick it."
)


def _select(label: str, key: str, values: Sequence[str], **kwargs: Any) -> None:
    options = [ALL, *dict.fromkeys(v for v in values if v)]
    if st.session_state.get(key, ALL) not in options:
        # A value from another time range stays selectable, so the filter never silently drops.
        options.append(str(st.session_state[key]))
    st.selectbox(label, options, key=key, **kwargs)


def filter_sidebar(
    models: Sequence[str],
    pools: Sequence[str],
    traffic_classes: Sequence[str],
    bundles: Sequence[str],
    hosts: Sequence[str] = (),
) -> None:
    """Draw the filter widgets in the sidebar with the values the store knows; the host box also takes a host
    typed in (``hosts`` are those with health records, a host may serve without them)."""
    with st.sidebar:
        st.subheader("Filters")
        if RANGE_KEY not in st.session_state:
            st.session_state[RANGE_KEY] = DEFAULT_TIME_RANGE
        st.selectbox("Time range", list(TIME_RANGES), key=RANGE_KEY)
        _select("Model", MODEL_KEY, models)
        _select("Hardware pool", POOL_KEY, pools)
        _select("Traffic class", TRAFFIC_KEY, traffic_classes)
        _select("Host", HOST_KEY, sorted(hosts), accept_new_options=True, help=HOST_HELP)
        _select("Bundle", BUNDLE_KEY, bundles)
