"""Requests: the slice's newest requests with what failed (failing ones unless the reader asks for all), each opening
its drill-down; the Hosts page links here for one host (``/requests?host=h1``). What failing means and which replay
verdict is a request's: ``inferensics.analytics.request_list`` (the same list as ``inferensics requests``)."""

from __future__ import annotations

from typing import Final

import polars as pl
import streamlit as st

from inferensics.analytics.request_list import KIND_OK, KINDS, VERDICT
from inferensics.dashboard._internal import queries
from inferensics.dashboard._internal.filters import Filters, current_filters, describe
from inferensics.dashboard._internal.links import REQUEST_ID_PARAM, REQUEST_PATH
from inferensics.dashboard._internal.service import QueryCall, fetch_queries, service_errors
from inferensics.dashboard._internal.tables import count, show_table
from inferensics.schema import columns as col

FAILING_KEY: Final = "requests.failing"
LIMIT: Final = 200
"""Requests listed at most (the newest); the counts above the table cover the whole slice."""
DRILL_DOWN: Final = "drill_down"
COLUMNS: Final = (
    DRILL_DOWN, col.TS, col.REQUEST_ID, col.HOST, col.MODEL, col.HW_POOL, col.TRAFFIC_CLASS, "kind", col.OUTCOME,
    col.LATENCY_MS, "detail", VERDICT,
)  # fmt: skip
FAILING_HELP: Final = (
    "Requests that errored, produced NaN or inf (counted by their output fingerprint), fell back to eager, or "
    "whose replay verdict (`inferensics replay`) named a fault: an output that was wrong though finite. Each is "
    "listed under the first that applies, in that order; a request's replay verdict is shown beside it whatever "
    "its kind."
)


def page_queries(filters: Filters, *, failing: bool) -> dict[str, QueryCall]:
    """The list (newest :data:`LIMIT`) and the counts per kind over the whole slice."""
    params = {**filters.params(), "failing": failing}
    return {
        "list": (queries.REQUEST_LIST, {**params, "limit": LIMIT}),
        "kinds": (queries.REQUEST_KINDS, params),
    }


def with_links(listed: pl.DataFrame) -> pl.DataFrame:
    """``listed`` with the drill-down link of each request first (where the reader looks for it)."""
    link = pl.lit(f"{REQUEST_PATH}?{REQUEST_ID_PARAM}=") + pl.col(col.REQUEST_ID)
    return listed.with_columns(link.alias(DRILL_DOWN))


def headline(kinds: pl.DataFrame, *, failing: bool) -> None:
    """The slice's requests (failing ones, with ``failing``) and how many of each kind."""
    by_kind = {str(k): int(n) for k, n in kinds.iter_rows()}
    shown = [k for k in KINDS if not (failing and k == KIND_OK)]
    cells = st.columns(len(shown) + 1)
    cells[0].metric("Failing requests" if failing else "Requests", count(sum(by_kind.values())))
    for cell, kind in zip(cells[1:], shown, strict=True):
        cell.metric(kind.capitalize(), count(by_kind.get(kind, 0)))


def render() -> None:
    """Draw the page."""
    st.title("Requests")
    filters = current_filters()
    st.caption(describe(filters) + f" · newest first, at most {LIMIT:,} listed; the counts cover the whole range")
    failing = st.toggle("Failing only", value=True, key=FAILING_KEY, help=FAILING_HELP)
    with service_errors():
        answers = fetch_queries("requests", page_queries(filters, failing=failing))
    listed, kinds = answers["list"], answers["kinds"]
    headline(kinds, failing=failing)
    what = "failing request" if failing else "request"
    hint = " Turn off *Failing only* to list every request." if failing else ""
    show_table(
        with_links(listed),
        columns=COLUMNS,
        key="requests_table",
        empty=f"No {what} in this range.{hint}",
        overrides={DRILL_DOWN: st.column_config.LinkColumn("drill-down", display_text="open ›", width="small")},
    )


if __name__ == "__main__":
    render()
