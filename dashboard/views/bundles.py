"""Bundles: every bundle the fleet has seen, where it is registered, and the traffic it served."""

from __future__ import annotations

import polars as pl
import streamlit as st

from inferensics.dashboard._internal import charts, queries
from inferensics.dashboard._internal.filters import (
    bucket_unit,
    current_filters,
    describe,
    request_filters,
    time_format,
)
from inferensics.dashboard._internal.service import run_query, section_query, service_errors
from inferensics.dashboard._internal.tables import count, show_table, total
from inferensics.schema import columns as col

COLUMNS = (
    col.BUNDLE_NAME, col.BUNDLE_ID, "models", "hosts", "hw_pools", col.REQUESTS, "error_rate", "fallback_rate",
    col.RECOMPILES, "traffic_classes", "serving_pools", col.TORCH_VERSION, col.DEVICE_NAME, "first_registered",
    "last_registered",
)  # fmt: skip


def headline(bundles: pl.DataFrame) -> None:
    """How many bundles, hosts and requests."""
    hosts = {h for hs in bundles.get_column("hosts").to_list() for h in hs} if bundles.height else set()
    pools = {p for ps in bundles.get_column("hw_pools").to_list() for p in ps} if bundles.height else set()
    cells = st.columns(4)
    cells[0].metric("Bundles seen", count(bundles.height))
    cells[1].metric("Hosts registered", count(len(hosts)))
    cells[2].metric("Pools", count(len(pools)))
    cells[3].metric("Requests served", count(total(bundles, col.REQUESTS)))


def traffic_chart(series: pl.DataFrame, names: dict[str, str], unit: str) -> None:
    """Requests per bundle over time."""
    if series.is_empty():
        return
    labelled = series.with_columns(
        pl.col("group").replace_strict(names, default=pl.col("group")).alias(col.BUNDLE_NAME)
    )
    charts.draw(
        st,
        charts.stacked_bars_over_time(
            labelled,
            col.BUCKET,
            col.REQUESTS,
            col.BUNDLE_NAME,
            "Requests per bundle",
            value_title="requests",
            time_format=time_format(unit),
        ),
    )


def render() -> None:
    """Draw the page."""
    st.title("Bundles")
    filters = current_filters()
    st.caption(describe(filters) + " · a bundle is listed when registered before the range end or serving in it")
    with service_errors():
        bundles = run_query(queries.BUNDLES_SEEN, "bundles", **filters.params())
        headline(bundles)
        selected = show_table(
            bundles,
            columns=COLUMNS,
            key="bundles_table",
            selectable=True,
            empty="No bundle registered or serving in this range.",
        )
        if selected:
            row = bundles.row(selected[0], named=True)
            if st.button(f"Filter the dashboard to {row[col.BUNDLE_NAME] or row[col.BUNDLE_ID]}", key="filter_bundle"):
                request_filters(bundle=row[col.BUNDLE_ID])
                st.switch_page("views/overview.py")
        names = {
            str(r[col.BUNDLE_ID]): f"{r[col.BUNDLE_NAME] or 'unnamed'} ({str(r[col.BUNDLE_ID])[:8]})"
            for r in bundles.iter_rows(named=True)
        }
        series = section_query(queries.FLEET_TIMESERIES, "traffic per bundle", unit=bucket_unit(filters), by="bundle",
                               **filters.params())  # fmt: skip
        if series is not None:
            traffic_chart(series.filter(pl.col("group") != ""), names, bucket_unit(filters))


if __name__ == "__main__":
    render()
