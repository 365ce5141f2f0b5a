"""Rendering a canary verdict: a plain-text table for the terminal, Markdown, and an HTML page.

The page's modules (Altair) are imported only where a page or a chart is drawn: the terminal table and the
Markdown need none of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

import polars as pl

from inferensics.analytics import canary as canary_rules
from inferensics.analytics.report.evidence import SHOWN, evidence_table
from inferensics.analytics.report.tables import cell, markdown_table
from inferensics.schema import columns as col

if TYPE_CHECKING:
    import altair as alt

    from inferensics.analytics.report.page import Section

DISAGREEING: Final = "Disagreeing input-matched pairs"
"""The report's section of the argmax-agreement check's disagreeing pairs."""
OPEN_ONE: Final = "Open one with `inferensics requests --id REQUEST_ID` (or the dashboard's request page)."
NOT_REPLAYABLE: Final = "served without a bundle or without its inputs captured, which replay needs"
"""Why replay cannot take a candidate request (``candidate_replayable`` false: it tells the two apart no further)."""


def open_one(frame: pl.DataFrame) -> str:
    """How to open the listed pairs' requests, and which of their candidate requests replay can take
    (``candidate_replayable``; a service that predates it: not known, replay offered as before)."""
    pairs = canary_rules.disagreements_of(frame)
    ids = pairs.get_column(canary_rules.CANDIDATE_REQUEST).cast(pl.String).to_list()
    replayable = pairs.get_column(canary_rules.CANDIDATE_REPLAYABLE).to_list()
    if all(ok is None for ok in replayable):
        return f"{OPEN_ONE[:-1]}, and name its fault with `inferensics replay REQUEST_ID`."
    can = [i for i, ok in zip(ids, replayable, strict=True) if ok]
    if not can:
        return f"{OPEN_ONE} None of their candidate requests can be replayed: each was {NOT_REPLAYABLE}."
    rest = len(ids) - len(can)
    others = f"; the other {rest:,} {'was' if rest == 1 else 'were'} {NOT_REPLAYABLE}" if rest else ""
    named = ", ".join(f"`{i}`" for i in can)
    return f"{OPEN_ONE} Name a fault with `inferensics replay REQUEST_ID` for the candidate requests {named}{others}."


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


PAIRS_SHOWN: Final = 5
"""Disagreeing pairs ``inferensics canary compare`` prints under an argmax-agreement check it did not pass."""
PAIR_COLUMNS: Final = ["candidate request", "baseline request", "input digest", "first argmax ids differing"]
"""The columns of :func:`disagreement_table`."""
WORST: Final = "worst (most of their first argmax ids differing, then the earliest)"
"""Which disagreeing pairs are listed, in words (:data:`~inferensics.analytics.canary.DISAGREEMENTS_KEPT` at most)."""
DIGEST_SHOWN: Final = 16
"""Hex digits of an input digest the terminal shows (the report shows it whole)."""
_AGREEMENT_UNDECIDED: Final = ("fail", "inconclusive", "skipped")


def disagreement_summary(frame: pl.DataFrame) -> str:
    """How many input-matched pairs of a ``canary_compare`` frame disagree, in words (``""`` when it names none)."""
    pairs = canary_rules.disagreements_of(frame)
    agreement = frame.filter(pl.col("metric") == canary_rules.AGREEMENT_METRIC)
    if pairs.is_empty() or agreement.is_empty():
        return ""
    row = agreement.row(0, named=True)
    n = int(row["baseline"] or 0)
    disagree = n - round(n * float(row["candidate"] or 0))
    return f"argmax agreement {str(row['outcome']).upper()}: {disagree:,} of {n:,} input-matched pairs disagree"


def disagreement_table(frame: pl.DataFrame) -> pl.DataFrame:
    """The disagreeing pairs of a ``canary_compare`` frame as shown (columns :data:`PAIR_COLUMNS`), the worst first."""
    pairs = canary_rules.disagreements_of(frame)
    return pairs.select(
        pl.col(canary_rules.CANDIDATE_REQUEST).alias(PAIR_COLUMNS[0]),
        pl.col(canary_rules.BASELINE_REQUEST).alias(PAIR_COLUMNS[1]),
        pl.col(col.INPUT_DIGEST).alias(PAIR_COLUMNS[2]),
        pl.col(canary_rules.ARGMAX_DIFFERING).cast(pl.String).alias(PAIR_COLUMNS[3]),
    )


def disagreement_lines(frame: pl.DataFrame, shown: int = PAIRS_SHOWN) -> list[str]:
    """Under an argmax-agreement check that did not pass (failed, or skipped for too few pairs): how many pairs
    disagree and the worst ``shown``, one line each (``[]`` when the check passed or no pair disagrees)."""
    summary = disagreement_summary(frame)  # "" unless the agreement row and a disagreeing pair are there
    outcome = frame.filter(pl.col("metric") == canary_rules.AGREEMENT_METRIC).get_column("outcome")
    if not summary or outcome.item(0) not in _AGREEMENT_UNDECIDED:
        return []
    pairs = canary_rules.disagreements_of(frame).head(shown)
    lines = [f"{summary}; the {pairs.height:,} {WORST}:"]
    for r in pairs.iter_rows(named=True):
        differing = int(r[canary_rules.ARGMAX_DIFFERING])
        how = (
            f"{differing} of its first argmax ids differ"
            if differing
            else "no first argmax id differs or none recorded"
        )
        lines.append(
            f"  candidate {r[canary_rules.CANDIDATE_REQUEST]} · baseline {r[canary_rules.BASELINE_REQUEST]} · input "
            f"{str(r[col.INPUT_DIGEST])[:DIGEST_SHOWN]} · {how}"
        )
    return lines


def canary_sections(frame: pl.DataFrame) -> list[Section]:
    """The page's sections."""
    from inferensics.analytics.report import charts
    from inferensics.analytics.report.page import Section

    verdict, rule = verdict_of(frame)
    evidence = frame.filter(pl.col("check") != "verdict")
    rules = (canary_rules.__doc__ or "").split("\n\n")[1:4]
    sections = [
        Section("Verdict", [f"{verdict.upper()}: {rule}", *(" ".join(r.split()) for r in rules)]),
        Section("Latency", [], [charts.canary_latency(evidence)]),
        Section("Rates", [], [charts.canary_rates(evidence)]),
        Section("Evidence", [], [], [(evidence_table(frame), list(SHOWN))]),
    ]
    summary = disagreement_summary(frame)
    if summary:
        kept = f"{summary}; the {disagreement_table(frame).height:,} {WORST}."
        sections.append(Section(DISAGREEING, [kept, open_one(frame)], [], [(disagreement_table(frame), PAIR_COLUMNS)]))
    return sections


def canary_charts(frame: pl.DataFrame) -> list[alt.TopLevelMixin]:
    """The page's charts in order."""
    return [c for s in canary_sections(frame) for c in s.charts]


def render_canary_markdown(frame: pl.DataFrame, label: str) -> str:
    """The verdict, its rule and the evidence table in Markdown."""
    verdict, rule = verdict_of(frame)
    text = f"# {canary_title(label)}\n\n**Verdict: {verdict.upper()}** ({rule})\n\n" + markdown_table(
        evidence_table(frame), list(SHOWN), limit=100
    )
    summary = disagreement_summary(frame)
    if summary:
        kept = f"{summary}; the {disagreement_table(frame).height:,} {WORST}."
        text += f"\n## {DISAGREEING}\n\n{kept} {open_one(frame)}\n\n" + markdown_table(
            disagreement_table(frame), PAIR_COLUMNS
        )
    return text


def write_canary_report(frame: pl.DataFrame, label: str, out_dir: Path, stem: str) -> tuple[Path, Path]:
    """Write ``<stem>.md`` and ``<stem>.html`` into ``out_dir``; return their paths."""
    from inferensics.analytics.report.page import render_page

    out_dir.mkdir(parents=True, exist_ok=True)
    md, page = out_dir / f"{stem}.md", out_dir / f"{stem}.html"
    md.write_text(render_canary_markdown(frame, label), encoding="utf-8")
    page.write_text(render_page(canary_title(label), canary_sections(frame)), encoding="utf-8")
    return md, page
