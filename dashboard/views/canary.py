"""Canary comparison: pick a model, a baseline and a candidate bundle; see the verdict, evidence, charts."""

from __future__ import annotations

from typing import Any

import polars as pl
import streamlit as st

from inferensics.analytics import canary as canary_rules
from inferensics.analytics.report import charts as report_charts
from inferensics.analytics.report.canary import render_canary_markdown, verdict_of
from inferensics.analytics.report.evidence import evidence_table
from inferensics.dashboard._internal import charts, queries
from inferensics.dashboard._internal.filters import ALL, TIME_RANGES, now
from inferensics.dashboard._internal.options import filter_options
from inferensics.dashboard._internal.service import run_query, section_query, service_errors
from inferensics.dashboard._internal.tables import show_table
from inferensics.schema import columns as col

DEFAULT_WINDOW = "Last 6 hours"
RECORDED_SHOWN = 20
VERDICT_STYLE = {
    "pass": (st.success, ":material/check_circle:"),
    "fail": (st.error, ":material/cancel:"),
    "inconclusive": (st.warning, ":material/help:"),
}


def bundle_label(bundles: pl.DataFrame) -> dict[str, str]:
    """Bundle id → ``name (id prefix)`` for the pickers."""
    return {
        str(r[col.BUNDLE_ID]): f"{r[col.BUNDLE_NAME] or 'unnamed'} ({str(r[col.BUNDLE_ID])[:12]})"
        for r in bundles.iter_rows(named=True)
    }


def bundle_choices(model: str, bundles: pl.DataFrame, served: list[str]) -> tuple[dict[str, str], int, int]:
    """The bundles to offer for ``model``: its registered ones, newest registration first, then the bundle
    ids requests were served with that no registration names (``served``, busiest first), each labelled
    ``unregistered``. Returns the labels and the default candidate and baseline positions: the newest
    registration against the next bundle offered; among unregistered bundles only, the least busy (a
    canary serves a share of the traffic) against the busiest."""
    own = bundles.filter(pl.col(col.MODEL) == model) if bundles.height else bundles
    labels = bundle_label(own)
    known = set(bundles.get_column(col.BUNDLE_ID).to_list()) if bundles.height else set()
    extra = [b for b in served if b and b not in known]
    labels.update({b: f"unregistered ({b[:24]})" for b in extra})
    if own.height or len(labels) < 2:
        return labels, 0, 1
    return labels, len(labels) - 1, 0


def pickers(
    models: list[str], traffic: list[str], bundles: pl.DataFrame, served: list[str], pools: list[str]
) -> dict[str, Any] | None:
    """The model picker and the comparison form; the parameters to compare (defaults until submitted)."""
    if not models:
        st.info("No model has served requests yet, so there is nothing to compare.")
        return None
    model = st.selectbox("Model", models, key="canary.model")
    labels, cand_at, base_at = bundle_choices(model, bundles, served)
    ids = list(labels)
    if len(ids) < 2:
        st.info(f"{model} has {len(ids)} bundle(s), registered or seen in requests; a comparison needs two.")
        return None
    with st.form("canary.form"):
        one, two = st.columns(2)
        candidate = one.selectbox(
            "Candidate", ids, index=cand_at, format_func=labels.__getitem__, key="canary.candidate"
        )
        baseline = two.selectbox("Baseline", ids, index=base_at, format_func=labels.__getitem__, key="canary.baseline")
        three, four, five = st.columns(3)
        traffic_class = three.selectbox("Traffic class", [ALL, *traffic], key="canary.traffic_class")
        windows = list(TIME_RANGES)
        window = four.selectbox("Window", windows, index=windows.index(DEFAULT_WINDOW), key="canary.window")
        # The analytics defaults (CanaryParams); a short run (the demo's) serves fewer, and its summary names what
        # it used.
        default = canary_rules.CanaryParams.model_fields
        tolerance = five.number_input(
            "Latency tolerance", 0.0, 2.0, default["latency_tolerance"].default, 0.05, format="%.2f",
            key="canary.tolerance",
        )  # fmt: skip
        six, seven, eight = st.columns(3)
        min_requests = six.number_input(
            "Min requests per side", 1, None, default["min_requests"].default, key="canary.min_requests"
        )
        min_pairs = seven.number_input(
            "Min input-matched pairs", 1, None, default["min_pairs"].default, key="canary.min_pairs"
        )
        hw_pool = eight.selectbox("Hardware pool", [ALL, *pools], key="canary.hw_pool")
        st.form_submit_button("Compare", type="primary")
    end = now()
    return {
        "model": model, "baseline": baseline, "candidate": candidate,
        "traffic_class": None if traffic_class == ALL else traffic_class,
        "hw_pool": None if hw_pool == ALL else hw_pool,
        "start": end - TIME_RANGES[window], "end": end, "latency_tolerance": tolerance,
        "min_requests": int(min_requests), "min_pairs": int(min_pairs),
    }  # fmt: skip


def verdict_banner(frame: pl.DataFrame) -> None:
    """The verdict, the rule that decided it, and the two sides' sizes."""
    verdict, rule = verdict_of(frame)
    show, icon = VERDICT_STYLE.get(verdict, (st.info, ":material/info:"))
    show(f"**Verdict: {verdict.upper()}** — {rule}", icon=icon)
    row = frame.filter(pl.col("check") == "verdict").row(0, named=True)
    evidence = frame.filter(pl.col("check") != "verdict")
    outcomes = evidence.get_column("outcome").to_list()
    cells = st.columns(4)
    cells[0].metric("Baseline requests", f"{int(row['baseline'] or 0):,}")
    cells[1].metric("Candidate requests", f"{int(row['candidate'] or 0):,}")
    cells[2].metric("Checks failed", str(outcomes.count("fail")))
    cells[3].metric("Checks passed", str(outcomes.count("pass")))


def render() -> None:
    """Draw the page."""
    st.title("Canary comparison")
    with service_errors():
        options = filter_options()
        bundles = run_query(queries.BUNDLES, "bundles")
        params = pickers(options.models, options.traffic_classes, bundles, options.bundles, options.pools)
        if params is None:
            return
        frame = section_query(queries.CANARY, "canary comparison", **params)
        if frame is None:
            return
        st.caption(
            f"{params['model']} · candidate `{params['candidate'][:12]}` vs baseline `{params['baseline'][:12]}` · "
            f"{params['start']:%Y-%m-%d %H:%M} – {params['end']:%H:%M} UTC · pool {params['hw_pool'] or 'all'}"
        )
        verdict_banner(frame)
        evidence = frame.filter(pl.col("check") != "verdict")
        left, right = st.columns(2)
        charts.draw(left, charts.latency_quantiles(evidence))
        charts.draw(right, report_charts.canary_rates(evidence))
        st.subheader("Evidence")
        st.caption(
            "Each value in its unit: latency in ms, rates and agreement as a share, argmax agreement's baseline "
            "in input-matched pairs, output drift as medians and the KS distance D. The Markdown download has "
            "the numbers as computed."
        )
        show_table(evidence_table(frame), key="canary_evidence")
        with st.expander("How the verdict is decided"):
            st.markdown("\n\n".join((canary_rules.__doc__ or "").split("\n\n")[1:4]))
        label = f"{params['model']}: {params['candidate'][:12]} vs {params['baseline'][:12]}"
        st.download_button(
            "Download Markdown", render_canary_markdown(frame, label), file_name="canary.md", mime="text/markdown"
        )
        recorded_verdicts(params["model"])


def recorded_verdicts(model: str) -> None:
    """The verdicts ``inferensics canary compare`` recorded for ``model`` (any candidate), newest first."""
    st.subheader("Recorded verdicts")
    frame = section_query(queries.CANARY_VERDICTS, "recorded verdicts", model=model, limit=RECORDED_SHOWN)
    if frame is None:
        return
    st.caption(
        f"What `inferensics canary compare` said about {model}'s candidates, newest first (it records each "
        f"verdict it gives; the last {RECORDED_SHOWN})."
    )
    shown = frame.with_columns(pl.col(col.BASELINE, col.CANDIDATE).str.slice(0, 12))
    order = (col.TS, col.CANDIDATE, col.BASELINE, col.TRAFFIC_CLASS, col.WINDOW_START, col.WINDOW_END, col.VERDICT)
    show_table(
        shown,
        columns=[*order, col.RULE],
        empty=f"No verdict recorded for {model} yet: run `inferensics canary compare` to record one.",
        key="canary_recorded",
    )


if __name__ == "__main__":
    render()
