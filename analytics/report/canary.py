"""Rendering a canary verdict: a plain-text table for the terminal, Markdown, and an HTML page.

The page's modules (Altair) are imported only where a page or a chart is drawn: the terminal table and the
Markdown need none of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from inferensics.analytics import canary as canary_rules
from inferensics.analytics.report.evidence import SHOWN, evidence_table
from inferensics.analytics.report.tables import cell, markdown_table

if TYPE_CHECKING:
    import altair as alt

    from inferensics.analytics.report.page import Section

COLUMNS = [c for c in SHOWN if c != "rule"]
"""The terminal table's columns: the evidence with each value in its unit (:mod:`.evidence`), without the rule."""


def verdict_of(frame: pl.DataFrame) -> tuple[str, str]:
    """The verdict and its rule from a ``canary_compare`` frame (its last row)."""
    row = frame.filter(pl.col("check") == "verdict").row(0, named=True)
    return str(row["outcome"]), str(row["rule"])


def canary_title(label: str) -> str:
    """The page title."""
    return f"Canary comparison: {label}"


def render_canary_text(frame: pl.DataFrame) -> str:
    """A fixed-width verdict table for the terminal (what ``inferensics canary compare`` prints)."""
    shown = evidence_table(frame)
    rows = [COLUMNS] + [[cell(r[c]) for c in COLUMNS] for r in shown.iter_rows(named=True)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    verdict, rule = verdict_of(frame)
    return "\n".join([*lines, "", *rule_lines(frame), "", f"verdict: {verdict.upper()} ({rule})"]) + "\n"


def rule_lines(frame: pl.DataFrame) -> list[str]:
    """The rule each outcome above followed, once per rule with the metrics it decided (the table leaves the
    rule column out for width: a ``D ≤ 0.1`` threshold read alone hides that a larger D fails only with p < 0.01).
    """
    evidence = frame.filter(pl.col("check") != "verdict")
    if evidence.is_empty():
        return []
    by_rule = evidence.group_by("rule", maintain_order=True).agg(pl.col("metric"))
    return ["rules (each outcome above follows its metric's):"] + [
        f"  {', '.join(metrics)}: {rule}" for rule, metrics in by_rule.iter_rows()
    ]


def canary_sections(frame: pl.DataFrame) -> list[Section]:
    """The page's sections."""
    from inferensics.analytics.report import charts
    from inferensics.analytics.report.page import Section

    verdict, rule = verdict_of(frame)
    evidence = frame.filter(pl.col("check") != "verdict")
    rules = (canary_rules.__doc__ or "").split("\n\n")[1:4]
    return [
        Section("Verdict", [f"{verdict.upper()}: {rule}", *(" ".join(r.split()) for r in rules)]),
        Section("Latency", [], [charts.canary_latency(evidence)]),
        Section("Rates", [], [charts.canary_rates(evidence)]),
        Section("Evidence", [], [], [(evidence_table(frame), list(SHOWN))]),
    ]


def canary_charts(frame: pl.DataFrame) -> list[alt.TopLevelMixin]:
    """The page's charts in order."""
    return [c for s in canary_sections(frame) for c in s.charts]


def render_canary_markdown(frame: pl.DataFrame, label: str) -> str:
    """The verdict, its rule and the evidence table in Markdown."""
    verdict, rule = verdict_of(frame)
    return f"# {canary_title(label)}\n\n**Verdict: {verdict.upper()}** ({rule})\n\n" + markdown_table(
        evidence_table(frame), list(SHOWN), limit=100
    )


def write_canary_report(frame: pl.DataFrame, label: str, out_dir: Path, stem: str) -> tuple[Path, Path]:
    """Write ``<stem>.md`` and ``<stem>.html`` into ``out_dir``; return their paths."""
    from inferensics.analytics.report.page import render_page

    out_dir.mkdir(parents=True, exist_ok=True)
    md, page = out_dir / f"{stem}.md", out_dir / f"{stem}.html"
    md.write_text(render_canary_markdown(frame, label), encoding="utf-8")
    page.write_text(render_page(canary_title(label), canary_sections(frame)), encoding="utf-8")
    return md, page
