"""Weekly report: the latest weekly recompilation and cache report, and a button that produces a new one.

Reports are built through the service (the analytics report takes any named-query runner, and the
service client is one) and written as ``weekly-<week>.md`` and ``.html`` into the dashboard's report folder
(``$INFERENSICS_REPORT_DIR``), the same files ``inferensics report weekly`` writes. The storm rule's two
floors are inputs beside the week, as they are options of the command (``--min-recompiles``,
``--min-compile-seconds``): a small fleet or a short demo lowers them to find its storm, and the report
states the rule it applied.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, cast

import streamlit as st
from annotated_types import Ge, Gt
from pydantic import ValidationError

from inferensics.analytics.report import write_weekly_report
from inferensics.analytics.storms import StormRule
from inferensics.analytics.weekly import build_weekly_report
from inferensics.dashboard._internal.filters import now
from inferensics.dashboard._internal.service import client, service_errors
from inferensics.dashboard._internal.settings import current_settings

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator

SHOWN_KEY = "weekly.shown"
WEEK_KEY = "weekly.week"
REPORT_KEY = "weekly.report"
PRODUCE_KEY = "weekly.produce"
WEEKS_OFFERED = 9
# The storm rule's floors the page offers (the command's options), by StormRule field, with their labels.
# (A comment, not a docstring: Streamlit runs this file as a page script and would draw a bare string.)
FLOORS = {"min_recompiles": "Min recompiles an hour", "min_compile_seconds": "Min compile seconds an hour"}


def reports(folder: Path) -> list[Path]:
    """The HTML reports in ``folder``, newest first."""
    if not folder.is_dir():
        return []
    return sorted(folder.glob("weekly-*.html"), key=lambda p: (p.stat().st_mtime, p.name), reverse=True)


def weeks(at: datetime) -> list[str]:
    """The current ISO week (so far) and the weeks before it, newest first."""
    out = []
    for back in range(WEEKS_OFFERED):
        year, week, _ = (at - timedelta(days=7 * back)).isocalendar()
        out.append(f"{year}-W{week:02d}")
    return out


def floor_key(name: str) -> str:
    """The Session State key of the input for the storm rule's field ``name``."""
    return f"weekly.{name}"


def floor_minimum(name: str) -> float | None:
    """The least value the storm rule's field ``name`` allows, from its constraints, as a number input's
    inclusive minimum of the field's type (Streamlit refuses an int default with a float minimum): ``gt=0`` is
    1 for an int field, and 0.0 for a float field, which the input cannot exclude (:func:`storm_rule` refuses
    it)."""
    field = StormRule.model_fields[name]
    for c in field.metadata:
        if isinstance(c, Ge):
            low, exclusive = cast(float, c.ge), False
        elif isinstance(c, Gt):
            low, exclusive = cast(float, c.gt), True
        else:
            continue
        return int(low) + exclusive if isinstance(field.default, int) else float(low)
    return None


def floor_input(where: DeltaGenerator, name: str) -> float:
    """A number input for the storm rule's field ``name``, with the rule's default and minimum, stepping by
    one (a float's hundredths are Streamlit's default step, and no floor is tuned that finely)."""
    default: float = StormRule.model_fields[name].default
    whole = isinstance(default, int)
    return where.number_input(
        FLOORS[name],
        min_value=floor_minimum(name),
        value=default,
        step=1 if whole else 1.0,
        format=None if whole else "%g",
        key=floor_key(name),
        help="The storm rule's floor: an hour of one model and pool needs at least this many to be a storm. "
        "A small fleet or a short demo lowers it (as the command's option does); the report states the rule it "
        "applied.",
    )


def storm_rule(floors: dict[str, float]) -> StormRule | None:
    """The storm rule with ``floors`` (by field); ``None`` after showing what to change when the rule refuses
    one."""
    try:
        return StormRule.model_validate(floors)
    except ValidationError as exc:
        for error in exc.errors():
            name = str(error["loc"][0])
            st.error(f"{FLOORS.get(name, name)}: {error['msg'].lower()}. Change it and press **Produce report**.")
        return None


def produce(week: str, folder: Path, rule: StormRule | None = None) -> Path:
    """Build the report for ``week`` with the storm ``rule`` (default: the analytics defaults) through the
    service and write it; return the HTML path (the current week ends at the dashboard's "now": the week so
    far)."""
    report = build_weekly_report(client(), week, now(), rule)
    _, html = write_weekly_report(report, folder)
    return html


def show(html: Path) -> None:
    """The report: its page with charts, its Markdown summary, and downloads."""
    markdown = html.with_suffix(".md")
    produced = datetime.fromtimestamp(html.stat().st_mtime, UTC)
    st.caption(f"`{html}` · produced {produced:%Y-%m-%d %H:%M} UTC")
    page, summary = st.tabs(["Report", "Markdown summary"])
    with page:
        st.iframe(html, height=1100)
    with summary:
        if markdown.exists():
            st.markdown(markdown.read_text(encoding="utf-8"))
    row = st.container(horizontal=True)
    row.download_button("Download HTML", html.read_bytes(), file_name=html.name, mime="text/html")
    if markdown.exists():
        row.download_button("Download Markdown", markdown.read_bytes(), file_name=markdown.name, mime="text/markdown")


def render() -> None:
    """Draw the page."""
    st.title("Weekly report")
    folder = current_settings().report_dir
    offered = weeks(now())
    # Widths that keep every label on one line at a laptop's width: a wrapped label misaligns the row.
    left, *middle, right = st.columns([5, 2, 2.6, 1.6], vertical_alignment="bottom")
    week = left.selectbox(
        "Week (ISO, Monday to Monday UTC; the current week so far is first)", offered, index=0, key=WEEK_KEY
    )
    floors = {name: floor_input(where, name) for where, name in zip(middle, FLOORS, strict=True)}
    if right.button("Produce report", type="primary", key=PRODUCE_KEY) and (rule := storm_rule(floors)) is not None:
        with service_errors(), st.spinner(f"Building the weekly report for {week} through the service…"):
            st.session_state[SHOWN_KEY] = produce(week, folder, rule).name
        st.toast(f"Weekly report {week} written to {folder}")
    existing = reports(folder)
    if not existing:
        st.info(f"No weekly report in `{folder}` yet: pick a week and press **Produce report**.")
        return
    names = [p.name for p in existing]
    produced = st.session_state.pop(SHOWN_KEY, None)
    if produced in names:
        st.session_state[REPORT_KEY] = produced
    elif st.session_state.get(REPORT_KEY) not in names:
        st.session_state[REPORT_KEY] = names[0]  # the latest
    choice = st.selectbox("Report", names, key=REPORT_KEY)
    show(folder / choice)


if __name__ == "__main__":
    render()
