"""Kernels: which kernel-registry provider serves each op across the fleet, why the others were skipped, and what
``inferensics kernels qualify`` measured (rules: ``inferensics.analytics.kernel_fleet``).

A warning per op whose provider raised (each failure took its provider out for that signature), the op signatures
served per op and provider, the providers serving each op per model and pool (with a request whose compile chose
them), the reasons providers were skipped, then the newest qualification evidence per device, op, shape bucket and
shape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import altair as alt
import polars as pl
import streamlit as st

from inferensics.dashboard._internal import charts, queries
from inferensics.dashboard._internal.filters import PROCESS_LEVEL, Filters, current_filters, describe
from inferensics.dashboard._internal.links import REQUEST_ID_PARAM, REQUEST_PATH
from inferensics.dashboard._internal.service import section_query, service_errors
from inferensics.dashboard._internal.tables import count, show_table, total
from inferensics.schema import columns as col

RAISED: Final = "raised "
"""How a skip reason of a provider that raised begins (``inferensics.kernels.op``)."""
FALLBACK_HELP: Final = (
    "Decisions where no provider but the reference (or, inside a compiled graph, Inductor's own code) could "
    "serve the call. A CPU host falls back on every op signature by design: the Triton providers need a GPU."
)
PROVIDER_COLUMNS: Final = (
    "drill_down", col.MODEL, col.HW_POOL, col.OP, col.PROVIDER, col.COMPILED, "decisions", "fallbacks", "signatures",
    "hosts", "graphs", "skipped_before", "example_signature", "first_seen", "last_seen",
)  # fmt: skip
QUALIFICATION_HINT: Final = (
    "No qualification recorded in this range. `inferensics kernels qualify --store` (with `--service URL` while "
    "a service owns the store) measures every provider per shape bucket on its host and records the evidence here."
)


def with_links(providers: pl.DataFrame) -> pl.DataFrame:
    """``drill_down``: the drill-down of a request whose compile made such a decision (null when none did)."""
    link = pl.when(pl.col("example_request") != "").then(
        f"{REQUEST_PATH}?{REQUEST_ID_PARAM}=" + pl.col("example_request")
    )
    return providers.with_columns(link.alias("drill_down"))


def failures(skips: pl.DataFrame) -> list[Mapping[str, Any]]:
    """The skip rows whose provider raised: a failure took it out for that signature."""
    return list(skips.filter(pl.col("reason").str.starts_with(RAISED)).iter_rows(named=True))


def headline(providers: pl.DataFrame, raised: list[Mapping[str, Any]]) -> None:
    """Ops served, providers serving, signatures, fallback decisions and provider failures."""
    cells = st.columns(5)
    cells[0].metric("Ops served", count(providers.get_column(col.OP).n_unique()))
    cells[1].metric("Providers serving", count(providers.get_column(col.PROVIDER).n_unique()))
    cells[2].metric("Signatures", count(total(providers, "signatures")))
    cells[3].metric("Fallback decisions", count(total(providers, "fallbacks")), help=FALLBACK_HELP)
    cells[4].metric("Provider failures", count(sum(int(r["decisions"]) for r in raised)))


SIGNATURES_TITLE: Final = "Op signatures served, by the provider chosen"


def signatures_chart(providers: pl.DataFrame) -> alt.Chart:
    """Op signatures served per op, stacked by the provider chosen: the sum of the table's ``signatures``, as the
    headline's *Signatures* is. (It plotted ``decisions``, one per signature and process, under the axis title
    "op signatures served": 9 per op beside a table of 7 and a headline of 21.)"""
    data = providers.group_by(col.OP, col.PROVIDER).agg(pl.col("signatures").sum()).sort(col.OP, col.PROVIDER)
    return charts.stacked_ranked_bars(
        data, col.OP, col.PROVIDER, "signatures", SIGNATURES_TITLE, value_title="op signatures served"
    )


def alerts(raised: list[Mapping[str, Any]]) -> None:
    """A warning per op and provider that raised, with what it raised."""
    for row in raised:
        st.warning(
            f"**{row['skipped_provider']}** for `{row[col.OP]}` raised and was taken out for that signature "
            f"({row['decisions']:,} decision{'s' if row['decisions'] != 1 else ''} skipped it; "
            f"{', '.join(row['chosen'])} served instead; "
            f"models {', '.join(row['models']) or '(none)'}): `{row['reason'].removeprefix(RAISED)}`",
            icon=":material/warning:",
        )


def qualification_section(filters: Filters) -> None:
    """The newest evidence per device, op, bucket, dtype, shape and provider in the range, of the selected host (no
    model or pool filter: qualification records name only their host)."""
    st.subheader("Qualification evidence")
    if filters.model is not None or filters.hw_pool is not None:
        st.caption("Qualification records name the host they ran on, no model or pool: the whole fleet is shown.")
    evidence = section_query(
        queries.KERNEL_QUALIFICATIONS, "qualification evidence", start=filters.start, end=filters.end, host=filters.host
    )
    if evidence is None:
        return
    show_table(
        evidence,
        empty=QUALIFICATION_HINT,
        key="kernel_qualifications",
        overrides={
            "vs_best": st.column_config.NumberColumn("vs best", format="%.2fx"),
            # A decode-sized kernel takes a few microseconds: whole microseconds would hide a 20 % difference.
            **{
                c: st.column_config.NumberColumn(c, format="%.2f µs")
                for c in (col.MEDIAN_US, col.CI_LOW_US, col.CI_HIGH_US)
            },
        },
    )


def render() -> None:
    """Draw the page."""
    st.title("Kernels")
    filters = current_filters()
    st.caption(
        describe(filters) + " · which kernel-registry provider served each op signature, compiled or eager, and "
        "why the providers before it were skipped; a host records each signature once per process"
    )
    if filters.any_set(PROCESS_LEVEL):
        st.caption("Kernel decisions carry no traffic class or bundle: those filters are not applied here.")
    with service_errors():
        params = filters.params(without=PROCESS_LEVEL)
        providers = section_query(queries.KERNEL_PROVIDERS, "kernel providers", **params)
        skips = section_query(queries.KERNEL_SKIPS, "skipped providers", **params)
        if providers is not None and skips is not None:
            if providers.is_empty():
                st.info(
                    "No kernel-registry decision in this range. A serving process records one per op signature "
                    "when it calls an op of `inferensics.kernels` (eager or traced into a compiled graph).",
                    icon=":material/info:",
                )
            else:
                raised = failures(skips)
                headline(providers, raised)
                alerts(raised)
                charts.draw(st, signatures_chart(providers))
                st.subheader("Providers serving each op")
                show_table(
                    with_links(providers),
                    columns=PROVIDER_COLUMNS,
                    key="kernel_providers",
                    overrides={
                        "drill_down": st.column_config.LinkColumn("drill-down", display_text="open ›", width="small")
                    },
                )
                st.subheader("Why providers were skipped")
                show_table(skips, key="kernel_skips")
        qualification_section(filters)


if __name__ == "__main__":
    render()
