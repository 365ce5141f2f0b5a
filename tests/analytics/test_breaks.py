"""Graph breaks, guard failures and recompile reasons against Polars over the same rows."""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pytest

from inferensics.analytics import (
    SliceParams,
    UnknownFilterValue,
    graph_break_sites,
    graph_breaks,
    guard_failures,
    recompile_reasons,
)
from inferensics.schema import columns as col
from inferensics.schema.store import Store
from tests.analytics.fleet import T0, W10, Fleet

WEEK = SliceParams(start=W10, end=W10 + timedelta(days=7))
TWO_WEEKS = SliceParams(start=T0, end=T0 + timedelta(days=14))


def _in(frame: pl.DataFrame, p: SliceParams) -> pl.DataFrame:
    return frame.filter((pl.col(col.TS) >= p.start) & (pl.col(col.TS) < p.end))


def _touched() -> pl.Expr:
    return pl.col(col.REQUEST_ID).filter(pl.col(col.REQUEST_ID) != "").n_unique().cast(pl.UInt64).alias("requests")


@pytest.mark.parametrize("params", [WEEK, TWO_WEEKS, WEEK.model_copy(update={"model": "qwen"})])
def test_graph_breaks(fleet_store: Store, fleet: Fleet, params: SliceParams) -> None:
    rows = _in(fleet.graph_breaks, params)
    if params.model:
        rows = rows.filter(pl.col(col.MODEL) == params.model)
    want = rows.group_by(col.REGISTRY_ID, col.BREAK_TYPE).agg(
        pl.len().cast(pl.UInt64).alias("events"), _touched(), pl.col(col.MODEL).unique().sort().alias("models")
    )
    got = graph_breaks(fleet_store, params)
    keys = [col.REGISTRY_ID, col.BREAK_TYPE]
    assert got.select(want.columns).sort(keys).to_dicts() == want.sort(keys).to_dicts()
    assert got.get_column("events").is_sorted(descending=True)
    assert "" in got.get_column(col.REGISTRY_ID).to_list() or params.model  # breaks without a registry id are kept
    sites = graph_break_sites(fleet_store, params)
    want_sites = rows.group_by(col.REGISTRY_ID, col.USER_FRAME).agg(
        pl.len().cast(pl.UInt64).alias("events"), _touched()
    )
    keys = [col.REGISTRY_ID, col.USER_FRAME]
    assert sites.select(want_sites.columns).sort(keys).to_dicts() == want_sites.sort(keys).to_dicts()


def test_guard_failures(fleet_store: Store, fleet: Fleet) -> None:
    rows = _in(fleet.guard_failures, WEEK)
    want = rows.group_by(col.REASON, col.CODE_LOCATION).agg(
        pl.len().cast(pl.UInt64).alias("failures"),
        _touched(),
        pl.col(col.HOST).n_unique().cast(pl.UInt64).alias("hosts"),
    )
    got = guard_failures(fleet_store, WEEK)
    assert got.select(want.columns).sort(col.REASON).to_dicts() == want.sort(col.REASON).to_dicts()


def test_recompile_reasons_with_traffic_class(fleet_store: Store, fleet: Fleet) -> None:
    params = WEEK.model_copy(update={"traffic_class": "batch"})
    rows = _in(fleet.recompiles, params).filter(pl.col(col.TRAFFIC_CLASS) == "batch")
    want = rows.group_by(col.MODEL, col.HW_POOL, col.REASON).agg(
        pl.len().cast(pl.UInt64).alias("recompiles"), _touched()
    )
    got = recompile_reasons(fleet_store, params)
    keys = [col.MODEL, col.HW_POOL, col.REASON]
    assert got.select(want.columns).sort(keys).to_dicts() == want.sort(keys).to_dicts()


def test_unknown_model_and_empty_range(fleet_store: Store) -> None:
    with pytest.raises(UnknownFilterValue, match="unknown model 'gpt'"):
        graph_breaks(fleet_store, WEEK.model_copy(update={"model": "gpt"}))
    empty = WEEK.model_copy(update={"start": W10 - timedelta(days=400), "end": W10 - timedelta(days=399)})
    assert graph_breaks(fleet_store, empty).is_empty()
    assert guard_failures(fleet_store, empty).is_empty()


def test_a_named_break_shows_what_it_said_as_its_reason(store: Store) -> None:
    """newuser note: the graph-break tables' ``reason`` read empty (the query blanked it for a break with a registry
    id or type, though the store holds its text); a named break now shows its latest text's first line as a pattern,
    an unnamed one is still grouped by its own."""
    from inferensics.schema.events import GraphBreakEvent
    from tests.seeding import seed

    said = "Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False."
    brk = {"host": "h1", "model": "m", "hw_pool": "p1"}
    seed(store, events=[
        GraphBreakEvent(ts=W10, registry_id="GB0124", break_type="Unsupported Tensor.item() call",
                        reason="old text 1\n  detail", **brk),
        GraphBreakEvent(ts=W10 + timedelta(hours=1), registry_id="GB0124", break_type="Unsupported Tensor.item() call",
                        reason=f"{said}\n  Hint: set capture_scalar_outputs", **brk),
        GraphBreakEvent(ts=W10, reason="data-dependent branching at 12\nmore", **brk),
    ])  # fmt: skip
    got = graph_breaks(store, WEEK)
    rows = {r[col.REGISTRY_ID]: (r[col.REASON], r["events"]) for r in got.iter_rows(named=True)}
    assert rows == {"GB0124": (said, 2), "": ("data-dependent branching at N", 1)}
