"""Frames as Markdown and HTML tables, with one formatting rule for both."""

from __future__ import annotations

import html
import math
from datetime import datetime

import polars as pl

MAX_ROWS = 20
RATIO_COLUMNS = frozenset(
    {"recompile_rate", "cache_hit_ratio", "hit_ratio", "error_rate", "fallback_rate", "change", "growth"}
)
"""Columns that hold a share (0.0182): shown as a percentage (1.8 %), never as the raw ratio."""


def cell(value: object, *, ratio: bool = False, signed: bool = False) -> str:
    """One cell's text: a ``ratio`` as a percentage with one decimal (``signed``: with its sign, + too); other
    floats get 4 significant digits."""
    if value is None:
        return "–"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if ratio:
            return f"{value * 100:+.1f} %" if value < 0 or signed else f"{value * 100:.1f} %"
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value) if str(value) != "" else "(none)"


def _rows(frame: pl.DataFrame, columns: list[str], limit: int) -> list[list[str]]:
    return [
        [cell(row[c], ratio=c in RATIO_COLUMNS) for c in columns] for row in frame.head(limit).iter_rows(named=True)
    ]


def markdown_table(frame: pl.DataFrame, columns: list[str], limit: int = MAX_ROWS) -> str:
    """A GitHub-flavoured Markdown table of the first ``limit`` rows (``_none_`` when empty)."""
    if frame.is_empty():
        return "_none_\n"
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in _rows(frame, columns, limit):
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    if frame.height > limit:
        lines.append(f"\n_{frame.height - limit} more rows not shown_")
    return "\n".join(lines) + "\n"


def html_table(frame: pl.DataFrame, columns: list[str], limit: int = MAX_ROWS) -> str:
    """An HTML table of the first ``limit`` rows (a paragraph saying none when empty)."""
    if frame.is_empty():
        return "<p class='none'>none</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in _rows(frame, columns, limit)
    )
    more = f"<p class='more'>{frame.height - limit} more rows not shown</p>" if frame.height > limit else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"
