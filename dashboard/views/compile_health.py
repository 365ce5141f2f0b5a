"""Compile & cache health: recompile reasons, graph breaks, guard failures, caches, specializations."""

from __future__ import annotations

from typing import Final

import polars as pl
import streamlit as st

from inferensics.analytics.cache import not_priced, unpriced_misses
from inferensics.analytics.reasons import PATTERN_NOTE
from inferensics.dashboard._internal import charts, queries
from inferensics.dashboard._internal.filters import (
    PROCESS_LEVEL,
    Filters,
    bucket_unit,
    current_filters,
    describe,
    time_format,
)
from inferensics.dashboard._internal.service import section_query, service_errors
from inferensics.dashboard._internal.tables import MISSING, count, percent, ratio, show_table, total
from inferensics.schema import columns as col


def compile_params(filters: Filters, *, bundle: bool = True) -> dict[str, object]:
    """The slice parameters without traffic class, which compile-side events do not carry; with ``bundle``
    false also without the bundle (recompiles, graph breaks and guard failures carry none: the service
    rejects the filter)."""
    return filters.params(without=("traffic_class",) if bundle else PROCESS_LEVEL)


RECOMPILES_EVERYWHERE = (
    "Every recompile record, inside requests or not (warm-up, imported TORCH_TRACE logs) and whether its compile "
    "succeeded or failed, as the reasons table below and the storm highlights count them; recompile-limit hits "
    "(the frame ran eagerly) are apart. The overview's Request recompiles counts only recompiles that a request "
    "triggered and compiled."
)
RECOMPILES_OF_BUNDLE = (
    "Recompiles counted on the requests that triggered them (recompile events carry no bundle): a recompile whose "
    "compile failed (its request raised) counts none."
)
RECORDS_LABEL = "Recompile records"  # the headline's label without a bundle filter
REQUESTS_LABEL = "Request recompiles"  # ... and under one: the requests' count, as the overview's
COMPILE_SECONDS_EVERYWHERE = (
    "Every compile's whole-frame time, inside requests or not (warm-up, failed compiles, imported TORCH_TRACE "
    "logs), in the bucket it started in: the headline's compile seconds over time."
)


def named(column: str, missing: str) -> pl.Expr:
    """``column``, its empty values read ``missing`` (``(no model)``, ``(no pool)``, as the report names them)."""
    return pl.when(pl.col(column) != "").then(column).otherwise(pl.lit(missing))


def sum_by_model(series: pl.DataFrame, value: str) -> pl.DataFrame:
    """A series per bucket, model and pool (``recompile_timeseries``, ``compile_timeseries``) with its ``value``
    summed per bucket and model, an empty model named "(no model)"."""
    model = named(col.MODEL, "(no model)").alias(col.MODEL)
    return series.group_by(col.BUCKET, model).agg(pl.col(value).sum())


def recompiles_tab(filters: Filters) -> None:
    """Recompiles and compile time over time, and the reasons behind them."""
    unit = bucket_unit(filters)
    if filters.bundle is None:
        every = section_query(
            queries.RECOMPILE_TIMESERIES, "recompiles over time", unit=unit, **compile_params(filters)
        )
        recompiled, note = (sum_by_model(every, col.RECOMPILES) if every is not None else None), RECOMPILES_EVERYWHERE
    else:  # recompile events carry no bundle: the requests of the bundle count its recompiles
        series = section_query(
            queries.FLEET_TIMESERIES, "recompiles over time", unit=unit, by="model", **filters.params()
        )
        recompiled, note = (series.rename({"group": col.MODEL}) if series is not None else None), RECOMPILES_OF_BUNDLE
    # Compile events carry the bundle: compile time is charted from them under a bundle filter too.
    compiles = section_query(queries.COMPILE_TIMESERIES, "compile time over time", unit=unit, **compile_params(filters))
    compiled = sum_by_model(compiles, col.COMPILE_SECONDS) if compiles is not None else None
    left, right = st.columns(2)
    if recompiled is not None and recompiled.height:
        charts.draw(
            left,
            charts.stacked_bars_over_time(
                recompiled,
                col.BUCKET,
                col.RECOMPILES,
                col.MODEL,
                "Recompiles by model",
                value_title="recompiles",
                time_format=time_format(unit),
            ),
        )
        left.caption(note)
    if compiled is not None and compiled.height:
        charts.draw(
            right,
            charts.stacked_bars_over_time(
                compiled,
                col.BUCKET,
                col.COMPILE_SECONDS,
                col.MODEL,
                "Compile seconds by model",
                value_title="compile time (s)",
                time_format=time_format(unit),
            ),
        )
        right.caption(COMPILE_SECONDS_EVERYWHERE)
    reasons = section_query(queries.RECOMPILE_REASONS, "recompile reasons", **compile_params(filters, bundle=False))
    if reasons is not None:
        st.markdown("**Recompile reasons**")
        if filters.bundle is not None:
            st.caption("Recompile events carry no bundle: their reasons are shown for every bundle of the slice.")
        if reasons.height:
            st.caption(PATTERN_NOTE)
        if reasons.height and int(reasons.get_column("limit_hits").sum()):
            st.caption(
                "limit_hits: guard failures that found the recompile limit reached; those frames ran eagerly "
                "instead of recompiling, so they are not counted as recompiles."
            )
        show_table(reasons, empty="No recompiles in this range.", key="recompile_reasons")
        if reasons.height:
            charts.draw(
                st,
                charts.ranked_bars(
                    reasons, col.REASON, col.RECOMPILES, "Top recompile reasons", value_title="recompiles"
                ),
            )


def breaks_tab(filters: Filters) -> None:
    """Graph breaks by registry id and site, and guard failures."""
    params = compile_params(filters, bundle=False)
    if filters.bundle is not None:
        st.caption("Graph breaks and guard failures carry no bundle: shown for every bundle of the slice.")
    breaks = section_query(queries.GRAPH_BREAKS, "graph breaks", **params)
    if breaks is not None:
        st.markdown("**Graph breaks**")
        show_table(breaks, empty="No graph breaks in this range.", key="graph_breaks")
    sites = section_query(queries.GRAPH_BREAK_SITES, "graph break sites", **params)
    if sites is not None and sites.height:
        st.markdown("**Where in user code**")
        show_table(sites, key="graph_break_sites")
    guards = section_query(queries.GUARD_FAILURES, "guard failures", **params)
    if guards is not None:
        st.markdown("**Guard failures**")
        reasons = section_query(queries.RECOMPILE_REASONS, "recompile reasons", **params) if guards.is_empty() else None
        failed = (
            int(reasons.get_column("recompiles").sum()) + int(reasons.get_column("limit_hits").sum())
            if reasons is not None and reasons.height
            else 0
        )
        empty = (
            f"No guard failures recorded besides the {failed:,} that made a frame recompile or hit the recompile "
            "limit: their reasons are on the Recompiles tab."
            if failed
            else "No guard failures in this range."
        )
        if guards.height:
            st.caption(PATTERN_NOTE)
        show_table(guards, empty=empty, key="guard_failures")


def caches_tab(filters: Filters) -> None:
    """Hit ratios, reasons for misses and bypasses, cold-miss cost and growth per cache."""
    params = compile_params(filters)
    health = section_query(queries.CACHE_HEALTH, "cache health", **params)
    if health is not None:
        show_table(health, empty="No cache lookups in this range.", key="cache_health")
        if health.height:
            per_cache = (
                health.group_by(col.CACHE)
                .agg(pl.col("hits", "lookups").sum())
                .with_columns((pl.col("hits") / pl.col("lookups")).alias("hit_ratio"))
            )
            left, right = st.columns(2)
            charts.draw(
                left,
                charts.ranked_bars(
                    per_cache, col.CACHE, "hit_ratio", "Hit ratio per cache", value_title="hit ratio", value_format="%"
                ),
            )
            priced, unpriced = priced_misses(health)
            if priced.height:
                charts.draw(
                    right,
                    charts.ranked_bars(
                        priced,
                        "slice",
                        "cold_miss_cost_s",
                        "Cold-miss cost (compile s a warm cache would save)",
                        value_title="compile time (s)",
                    ),
                )
            if unpriced:
                right.caption(
                    f"{not_priced(unpriced)}: no hit of the same model and cache in this range "
                    "(cold_miss_cost_s is empty)."
                )
    trend = section_query(queries.CACHE_TREND, "cache trend", **params)
    if trend is not None and trend.height:
        wide = trend.pivot(col.CACHE, index=col.BUCKET, values="hit_ratio")
        caches = sorted(set(trend.get_column(col.CACHE).to_list()))
        charts.draw(
            st,
            charts.time_series(
                wide,
                col.BUCKET,
                caches,
                "Daily hit ratio per cache",
                value_title="hit ratio",
                value_format="%",
                time_format="%Y-%m-%d",
            ),
        )
    reasons = section_query(queries.CACHE_REASONS, "miss and bypass reasons", **params)
    if reasons is not None:
        st.markdown("**Misses and bypasses by reason**")
        show_table(reasons, empty="No misses or bypasses in this range.", key="cache_reasons")
    growth = section_query(queries.CACHE_GROWTH, "cache growth", **params)
    if growth is not None:
        st.markdown("**Cache growth per bundle and pool**")
        st.caption(
            "A miss writes one entry. Bytes are what the host SDK measured on the cache's disk; empty for "
            "entries known only from an imported TORCH_TRACE log, which does not say."
        )
        show_table(growth, empty="No cache entries written in this range.", key="cache_growth")


def priced_misses(health: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """The cache-health rows whose misses have a cost, labelled ``model / pool / cache``, and how many misses
    have none: a miss is priced by the hits of its model and cache, and without one its cost is unknown, not 0."""
    priced = health.filter(pl.col("cold_miss_cost_s").is_not_null()).with_columns(
        pl.concat_str(
            named(col.MODEL, "(no model)"),
            named(col.HW_POOL, "(no pool)"),
            col.CACHE,
            separator=" / ",
        ).alias("slice")
    )
    return priced, unpriced_misses(health)


SPECIALIZATION_RECORDS: Final = {"compiles": "compile_records", col.RECOMPILES: "recompile_records"}
"""The Specializations table's counts of compile and recompile records, named as the weekly report names the
same counts (its compiling_requests and recompiles count requests instead)."""
RECORDS_NOTE: Final = (
    "compile_records: every compile record in the range, one per frame compiled (a request that compiles two "
    "frames has two), failed ones and those outside requests (warm-up, imported TORCH_TRACE logs) too; "
    "recompile_records: every recompile record but the recompile limit's hits. The weekly report counts them "
    "the same way under the same names; its compiling_requests counts requests that compiled, once each."
)


def specializations_tab(filters: Filters) -> None:
    """Distinct graph keys per pool, and the ones first seen in the range."""
    params = compile_params(filters)
    specs = section_query(queries.SPECIALIZATIONS, "specializations", **params)
    if specs is not None:
        show_table(specs.rename(SPECIALIZATION_RECORDS), empty="No compiles in this range.", key="specializations")
        if specs.height:
            st.caption(RECORDS_NOTE)
    new = section_query(queries.NEW_GRAPH_KEYS, "new graph keys", **params)
    if new is not None and new.height:
        unit = bucket_unit(filters)
        per_bucket = new.select(
            pl.col("first_seen").dt.truncate({"minute": "1m", "hour": "1h"}.get(unit, "1d")).alias(col.BUCKET),
            col.HW_POOL,
            pl.lit(1).alias("new_graph_keys"),
        )
        charts.draw(
            st,
            charts.stacked_bars_over_time(
                per_bucket,
                col.BUCKET,
                "new_graph_keys",
                col.HW_POOL,
                "New specializations (graph keys first seen)",
                value_title="new graph keys",
                time_format=time_format(unit),
            ),
        )
        st.markdown("**Graph keys first seen in this range**")
        show_table(new, key="new_graph_keys")


def headline(filters: Filters) -> None:
    """The range's compile-side totals as metrics (each from the same queries as the tabs, cached)."""
    params = compile_params(filters)
    breaks = section_query(queries.GRAPH_BREAKS, "graph breaks", **compile_params(filters, bundle=False))
    health = section_query(queries.CACHE_HEALTH, "cache health", **params)
    new = section_query(queries.NEW_GRAPH_KEYS, "new graph keys", **params)
    specs = section_query(queries.SPECIALIZATIONS, "specializations", **params)
    cells = st.columns(5)
    if filters.bundle is None:
        recompiles, recompiles_help, label = specs, RECOMPILES_EVERYWHERE, RECORDS_LABEL
    else:  # recompile events carry no bundle: the requests of the bundle count its recompiles
        recompiles = section_query(queries.FLEET, "fleet totals", **filters.params())
        recompiles_help, label = RECOMPILES_OF_BUNDLE, REQUESTS_LABEL
    cells[0].metric(
        label,
        count(total(recompiles, col.RECOMPILES)) if recompiles is not None else MISSING,
        help=recompiles_help,
    )
    cells[1].metric(
        "Compile seconds",
        f"{total(specs, 'compile_seconds'):,.1f} s" if specs is not None else MISSING,
        help="Whole-frame time of every compile in the range: warm-up, failed compiles and imported TORCH_TRACE "
        "logs too, as the Recompiles tab charts it over time.",
    )
    cells[2].metric(
        "Graph breaks",
        count(total(breaks, "events")) if breaks is not None else MISSING,
        help="Every bundle of the slice: graph breaks carry no bundle." if filters.bundle is not None else None,
    )
    hit_ratio = ratio(total(health, "hits"), total(health, "lookups")) if health is not None else None
    cells[3].metric("Cache hit ratio", percent(hit_ratio))
    cells[4].metric(
        "New graph keys",
        count(new.height) if new is not None else MISSING,
        help="Graph keys first seen in this range, counted per model and hardware pool (a key new to two pools "
        "counts twice), as in the Specializations tab.",
    )


def render() -> None:
    """Draw the page."""
    st.title("Compile & cache health")
    filters = current_filters()
    st.caption(describe(filters) + " · compile-side events carry no traffic class")
    with service_errors():
        headline(filters)
        tabs = st.tabs(["Recompiles", "Graph breaks & guards", "Caches", "Specializations"])
        with tabs[0]:
            recompiles_tab(filters)
        with tabs[1]:
            breaks_tab(filters)
        with tabs[2]:
            caches_tab(filters)
        with tabs[3]:
            specializations_tab(filters)


if __name__ == "__main__":
    render()
