"""Tables and headline numbers as the pages show them: formatted columns, short empty notes."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import polars as pl
import streamlit as st

_PERCENT_SUFFIXES = ("_rate", "_ratio", "agreement")
_MS_SUFFIXES = ("_ms",)
_PER_SECOND_SUFFIXES = ("_per_s",)
_SECONDS_SUFFIXES = ("_seconds", "_s")
_MICROSECONDS_SUFFIXES = ("_us",)
_BYTES_SUFFIXES = ("bytes",)
_SIZE_UNITS = ("kB", "MB", "GB", "TB")
MISSING: Final = "–"
"""How a page shows a value that is not there: a headline number, and a table's null cell (which Streamlit
would otherwise show as "None")."""


def column_config(frame: pl.DataFrame, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Formats by naming convention: ``*_rate``/``*_ratio`` as percent, ``*_ms`` in ms, ``*_per_s`` per second
    (checked before ``*_s``, which it also ends with), ``*_s`` in s, ``*_us`` in µs, ``*bytes`` as a size.

    Sizes use Streamlit's ``bytes`` format: the cell shows "1.2MB" while the column stays a number, so it
    sorts by size. That format counts in powers of 1,000 (kB, MB, GB), as :func:`byte_size` does; Streamlit
    has no binary (KiB, MiB) number format.
    """
    config: dict[str, Any] = {}
    for name, dtype in frame.schema.items():
        if not dtype.is_numeric():
            continue
        if name.endswith(_PERCENT_SUFFIXES):
            config[name] = st.column_config.NumberColumn(name, format="percent")
        elif name.endswith(_MS_SUFFIXES):
            config[name] = st.column_config.NumberColumn(name, format="%.1f ms")
        elif name.endswith(_PER_SECOND_SUFFIXES):
            config[name] = st.column_config.NumberColumn(name, format="%.3g /s")
        elif name.endswith(_SECONDS_SUFFIXES):
            config[name] = st.column_config.NumberColumn(name, format="%.2f s")
        elif name.endswith(_MICROSECONDS_SUFFIXES):
            config[name] = st.column_config.NumberColumn(name, format="%.0f µs")
        elif name.endswith(_BYTES_SUFFIXES):
            config[name] = st.column_config.NumberColumn(name, format="bytes")
        elif dtype.is_float():
            config[name] = st.column_config.NumberColumn(name, format="%.3g")
    config.update(overrides or {})
    return config


def show_table(
    frame: pl.DataFrame,
    *,
    columns: Sequence[str] | None = None,
    empty: str = "Nothing in this range.",
    overrides: Mapping[str, Any] | None = None,
    key: str | None = None,
    selectable: bool = False,
    height: int | None = None,
) -> list[int]:
    """Show ``frame`` (optionally only ``columns`` that exist); return the selected row indexes."""
    if frame.is_empty():
        st.info(empty, icon=":material/info:")
        return []
    if columns is not None:
        frame = frame.select([c for c in columns if c in frame.columns])
    kwargs: dict[str, Any] = {"height": height} if height else {}
    config = column_config(frame, overrides)
    if selectable:
        event = st.dataframe(
            frame, hide_index=True, column_config=config, key=key, on_select="rerun", selection_mode="single-row",
            width="stretch", placeholder=MISSING, **kwargs,
        )  # fmt: skip
        return list(event.selection.rows)
    st.dataframe(frame, hide_index=True, column_config=config, key=key, width="stretch", placeholder=MISSING, **kwargs)
    return []


def total(frame: pl.DataFrame, column: str) -> float:
    """Sum of a column, 0 when the frame lacks it or is empty."""
    if column not in frame.columns or frame.is_empty():
        return 0.0
    return float(frame.get_column(column).sum() or 0)


def ratio(numerator: float, denominator: float) -> float | None:
    """``numerator / denominator``, ``None`` when the denominator is 0."""
    return numerator / denominator if denominator else None


def percent(value: float | None) -> str:
    """A ratio as a percent string, :data:`MISSING` for none."""
    return MISSING if value is None else f"{100 * value:.2f} %"


def duration_ms(value: float | None) -> str:
    """A duration in milliseconds, shown in ms below a second and in seconds above."""
    if value is None:
        return MISSING
    return f"{value:,.1f} ms" if value < 1000 else f"{value / 1000:,.2f} s"


def byte_size(value: float | None) -> str:
    """A size in bytes, readable: exact below 1 kB, else in kB, MB, GB or TB (powers of 1,000, as the tables
    show sizes; see :func:`column_config`), :data:`MISSING` for none."""
    if value is None:
        return MISSING
    if abs(value) < 1000:
        return f"{int(value):,} bytes"
    power = min(int(math.log10(abs(value))) // 3, len(_SIZE_UNITS))
    return f"{value / 1000**power:,.1f} {_SIZE_UNITS[power - 1]}"


def count(value: float) -> str:
    """An integer count with thousands separators."""
    return f"{int(value):,}"
