"""Weekly report: the latest weekly recompilation and cache report of the service's store, and a button that
produces a new one.

Reports are built through the service (the analytics report takes any named-query runner, and the
service client is one) and written as ``weekly-<week>.md`` and ``.html``, the same files ``inferensics report
weekly`` writes, into the folder of the service's store inside the dashboard's report folder
(``$INFERENSICS_REPORT_DIR``): :func:`store_folder`. Two stores reported into one folder both wrote
``weekly-<week>.html``, and the page over one store showed the other's; it lists its own store's reports only,
and names that store. The storm rule's two
floors are inputs beside the week, as they are options of the command (``--min-recompiles``,
``--min-compile-seconds``): a small fleet or a short demo lowers them to find its storm, and the report
states the rule it applied. They are the session's storm rule, which the on-call overview's storm alerts
apply too (:mod:`~inferensics.dashboard._internal.storm_rule`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import streamlit as st

from inferensics.analytics.report import name_store, store_folder, write_weekly_report
from inferensics.analytics.storms import StormRule
from inferensics.analytics.weekly import build_weekly_report
from inferensics.dashboard._internal.filters import now
from inferensics.dashboard._internal.service import client, service_errors, store_dsn
from inferensics.dashboard._internal.settings import current_settings
from inferensics.dashboard._internal.storm_rule import floor_inputs, storm_rule

SHOWN_KEY = "weekly.shown"
WEEK_KEY = "weekly.week"
REPORT_KEY = "weekly.report"
PRODUCE_KEY = "weekly.produce"
FLOORS_PAGE = "weekly"  # the page's storm-rule inputs are keyed weekly.min_recompiles, weekly.min_compile_seconds
WEEKS_OFFERED = 9


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


def produce(week: str, folder: Path, dsn: str, rule: StormRule | None = None) -> Path:
    """Build the report for ``week`` with the storm ``rule`` (default: the analytics defaults) through the
    service and write it into ``folder``, the folder of the store at ``dsn`` (named in its ``store.txt``);
    return the HTML path (the current week ends at the dashboard's "now": the week so far). That "now" is the
    minute after the clock unless a page pinned it: the report would claim the minute to come (its title's end
    after the time it was produced), so it is never later than the clock."""
    report = build_weekly_report(client(), week, min(now(), datetime.now(UTC)), rule)
    _, html = write_weekly_report(report, folder)
    name_store(folder, dsn)
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
    settings = current_settings()
    with service_errors():
        dsn = store_dsn()
    folder = store_folder(settings.report_dir, dsn)
    st.caption(
        f"Reports of the store `{dsn}`, kept in `{folder}` (where `inferensics report weekly` without `--out` "
        "writes that store's reports, given the same `$INFERENSICS_REPORT_DIR`)."
    )
    unkeyed = reports(settings.report_dir)
    if unkeyed:
        st.caption(
            f"{len(unkeyed)} report{'s' if len(unkeyed) > 1 else ''} directly in `{settings.report_dir}` "
            "name no store (written before reports were kept per store, or by `inferensics report weekly --out` "
            "that folder): not listed here."
        )
    offered = weeks(now())
    # Widths that keep every label on one line at a laptop's width: a wrapped label misaligns the row.
    left, *middle, right = st.columns([5, 2, 2.6, 1.6], vertical_alignment="bottom")
    week = left.selectbox(
        "Week (ISO, Monday to Sunday UTC; the current week so far is first)", offered, index=0, key=WEEK_KEY
    )
    floors = floor_inputs(FLOORS_PAGE, middle)
    if (
        right.button("Produce report", type="primary", key=PRODUCE_KEY)
        and (rule := storm_rule(floors, "Change it and press **Produce report**.")) is not None
    ):
        with service_errors(), st.spinner(f"Building the weekly report for {week} through the service…"):
            st.session_state[SHOWN_KEY] = produce(week, folder, dsn, rule).name
        st.toast(f"Weekly report {week} written to {folder}")
    existing = reports(folder)
    if not existing:
        st.info(f"No weekly report of the store `{dsn}` yet: pick a week and press **Produce report**.")
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
