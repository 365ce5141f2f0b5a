"""Request drill-down: every table's facts about one request id."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl
import pytest
import torch
import torch._dynamo

from inferensics.analytics import NotFound, RequestParams, drill_down, request_detail
from inferensics.collector.host import SdkConfig, instrument
from inferensics.schema import columns as col
from inferensics.schema.events import CompileEvent, KernelTimingEvent, RequestEvent
from inferensics.schema.store import Store
from tests.analytics.fleet import Fleet
from tests.seeding import stop_ttl


def _sampled(fleet: Fleet) -> dict[str, Any]:
    rid = fleet.kernel_timings.get_column(col.REQUEST_ID)[0]
    return fleet.requests.filter(pl.col(col.REQUEST_ID) == rid).row(0, named=True)


def test_drill_down_of_a_sampled_request(fleet_store: Store, fleet: Fleet) -> None:
    req = _sampled(fleet)
    got = drill_down(fleet_store, str(req[col.REQUEST_ID]))
    detail = got.detail.row(0, named=True)
    for name in (col.MODEL, col.HW_POOL, col.BUNDLE_ID, col.OUTCOME, col.GUARD_OUTCOME, col.FALLBACK_REASON, col.TS):
        assert detail[name] == req[name]
    assert detail["kernel_timings_sampled"] == 3
    bundle = fleet.bundles.filter(pl.col(col.BUNDLE_ID) == req[col.BUNDLE_ID])
    assert detail["bundle_name"] == (bundle.get_column(col.BUNDLE_NAME)[0] if bundle.height else "")
    guards = fleet.guard_failures.filter(pl.col(col.REQUEST_ID) == req[col.REQUEST_ID]).sort(col.TS)
    assert detail["guard_failure_reasons"] == guards.get_column(col.REASON).to_list()
    # graphs: the request's parallel arrays, with each artifact's compile for this model: its own host's latest
    # before the request ended, else that host's later one, else another host's latest
    assert got.graphs.get_column(col.GRAPH_KEY).to_list() == req[col.GRAPH_KEYS]
    assert got.graphs.get_column(col.ARTIFACT_ID).to_list() == req[col.GRAPH_ARTIFACTS]
    ended = req[col.TS] + timedelta(milliseconds=req[col.LATENCY_MS])
    own = pl.col(col.HOST) == req[col.HOST]
    chosen = (
        fleet.compiles.filter(
            (pl.col(col.MODEL) == req[col.MODEL]) & pl.col(col.ARTIFACT_ID).is_in(req[col.GRAPH_ARTIFACTS])
        )
        .with_columns((own & (pl.col(col.TS) <= ended)).alias("before"), own.alias("own"))
        .sort(["before", "own", col.TS])
        .group_by(col.ARTIFACT_ID)
        .agg(pl.col(col.TS).last(), pl.col(col.HOST).last())
    )
    by_artifact = dict(chosen.select(col.ARTIFACT_ID, col.TS).iter_rows())
    assert got.graphs.get_column("compile_ts").to_list() == [by_artifact.get(a) for a in req[col.GRAPH_ARTIFACTS]]
    hosts = dict(chosen.select(col.ARTIFACT_ID, col.HOST).iter_rows())
    assert got.graphs.get_column("compile_host").to_list() == [hosts.get(a) for a in req[col.GRAPH_ARTIFACTS]]
    # kernels: inventory of the artifact joined with the summed timings; an unattributed timing is kept
    kernels = {r[col.KERNEL_NAME]: r for r in got.kernels.iter_rows(named=True)}
    assert set(kernels) == {"triton_poi_fused_add_0", "triton_red_fused_sum_1", "aten::copy_"}
    assert (kernels["triton_poi_fused_add_0"][col.CALLS], kernels["triton_poi_fused_add_0"][col.TOTAL_US]) == (3, 14.5)
    assert kernels["triton_poi_fused_add_0"][col.SOURCE_LINES] == ["model.py:20"]
    assert kernels["triton_red_fused_sum_1"][col.CALLS] is None  # in the artifact, not launched in the sample
    assert (kernels["aten::copy_"][col.ARTIFACT_ID], kernels["aten::copy_"][col.SOURCE_LINES]) == ("", [])
    assert got.kernels.get_column(col.TOTAL_US).to_list()[:2] == [14.5, 7.0]


def test_captured_inputs_and_missing_bundle(fleet_store: Store, fleet: Fleet) -> None:
    detail = request_detail(fleet_store, RequestParams(request_id="req-00000")).row(0, named=True)
    assert (detail["inputs_captured"], detail["capture_bytes"]) == (True, 4096)
    other = fleet.requests.filter((pl.col(col.BUNDLE_ID) == "") & (pl.col(col.CAPTURE_BLOB) == "")).row(0, named=True)
    detail = request_detail(fleet_store, RequestParams(request_id=other[col.REQUEST_ID])).row(0, named=True)
    assert (detail["inputs_captured"], detail["capture_bytes"], detail["bundle_name"]) == (False, None, "")


def test_eager_request_has_no_graphs_or_kernels(fleet_store: Store, fleet: Fleet) -> None:
    eager = fleet.requests.filter(pl.col(col.OUTCOME) == "eager").get_column(col.REQUEST_ID)[0]
    got = drill_down(fleet_store, eager)
    assert got.graphs.is_empty()
    assert got.kernels.is_empty()
    assert got.detail.height == 1


def test_unknown_request_id(fleet_store: Store) -> None:
    with pytest.raises(NotFound, match="no request 'req-nope'"):
        drill_down(fleet_store, "req-nope")
    with pytest.raises(ValueError, match="at least 1 character"):
        RequestParams(request_id="")


def test_single_request_store(store: Store) -> None:
    stop_ttl(store)
    store.insert_events(
        [
            RequestEvent(
                request_id="r1",
                ts=datetime(2026, 3, 3, tzinfo=UTC),
                host="h",
                model="m",
                hw_pool="p",
                traffic_class="t",
                graph_keys=("g",),
                graph_artifacts=("a",),
                graph_calls=(1,),
                graph_us=(5,),
            )
        ]
    )
    got = drill_down(store, "r1")
    assert got.detail.get_column("guard_failure_reasons").to_list() == [[]]
    row = got.graphs.row(0, named=True)
    assert (row[col.GRAPH_KEY], row[col.ARTIFACT_ID], row["calls"], row["compile_ts"]) == ("g", "a", 1, None)
    assert got.kernels.is_empty()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_whole_graph_calls_of_a_profiled_request_are_not_kernels(store: Store) -> None:
    """Real compiles, profiled requests: Inductor's ``## Call CompiledFxGraph <key> ##`` ranges are each graph's
    whole-call time, tied to its artifact, never rows of the kernels table (they have no backend or source
    line). ``early`` calls a graph compiled before the host was instrumented, so the host stores its range
    untied; the store ties it by its FX-graph-cache key to the compile the host records later."""

    def scale(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 3 + 1

    torch._dynamo.reset()
    plain = torch.compile(scale)  # the SDK's compile below (provenance off) has the same FX-graph-cache key
    plain(torch.randn(32))
    tracker = instrument(store=store, host="h", model="m", config=SdkConfig(sample_rate=1.0, provenance_level=0))
    try:
        with tracker.request("early") as req:
            req.set_output(plain(torch.randn(32)))
        compiled = tracker.compile(scale)
        for rid in ("first", "second"):
            with tracker.request(rid) as req:
                req.set_output(compiled(torch.randn(32)))
    finally:
        tracker.shutdown()
        torch._dynamo.reset()
    (compile_row,) = store.select_events(CompileEvent)
    assert compile_row.fx_cache_key
    assert compile_row.artifact_id
    stored = {(t.request_id, t.artifact_id) for t in store.select_events(KernelTimingEvent)}
    assert ("early", "") in stored  # the host had not seen the compile: the store ties it

    for rid, position, kernels in (("second", 0, 1), ("early", None, 0)):
        got = drill_down(store, rid)
        # The artifact's one C++ kernel, from the inventory; "early" served no graph the SDK saw compile.
        assert got.kernels.get_column(col.KERNEL_NAME).to_list() == ["cpp_fused_add_mul_relu_0"][:kernels], rid
        assert got.kernels.get_column(col.KERNEL_BACKEND).to_list() == ["cpp"][:kernels], rid
        (call,) = got.graph_calls.rows(named=True)
        assert call["position"] == position
        assert (call[col.ARTIFACT_ID], call[col.FX_CACHE_KEY]) == (compile_row.artifact_id, compile_row.fx_cache_key)
        assert call[col.GRAPH_KEY] == compile_row.graph_key
        assert (call[col.CALLS], call[col.DEVICE]) == (1, "cpu")
        assert call[col.TOTAL_US] > 0
    assert drill_down(store, "first").graph_calls.get_column(col.CALLS).to_list() == [1]


def test_a_graphs_compile_is_its_own_hosts_and_another_hosts_is_named(store: Store) -> None:
    """The graphs table showed the latest compile of each artifact from any host, under a ``compile_host`` column
    past the screen's edge: a request served on ``h-a`` read ``h-b``'s compile. It shows the compile its own host
    did (the latest it started before the request ended, one inside the request too); only where that host has
    none stored, that host's later one, else another host's, and ``compile_origin`` says which."""
    stop_ttl(store)
    t0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    served = t0 + timedelta(minutes=5)

    def compiled(host: str, artifact: str, at: datetime, seconds: float) -> CompileEvent:
        return CompileEvent(ts=at, host=host, model="m", hw_pool="p", graph_key=f"k-{artifact}", artifact_id=artifact,
                            entire_frame_s=seconds, compile_id=f"{host}:{artifact}")  # fmt: skip

    store.insert_events(
        [
            compiled("h-a", "a1", t0, 1.0),  # its own host's, the one to show
            compiled("h-b", "a1", t0 + timedelta(minutes=2), 2.0),  # later, on another host (shown before)
            compiled("h-a", "a1", served + timedelta(minutes=30), 3.0),  # a later process of its host
            compiled("h-b", "a2", t0 + timedelta(minutes=1), 4.0),  # its host never compiled a2
            compiled("h-c", "a2", t0, 5.0),
            compiled("h-b", "a3", t0 + timedelta(minutes=1), 6.0),
            compiled("h-a", "a3", served + timedelta(minutes=10), 7.0),  # its host's only one came after it
            compiled("h-a", "a4", served + timedelta(milliseconds=40), 8.0),  # compiled inside the request
            compiled("h-b", "a4", served + timedelta(seconds=1), 9.0),
            CompileEvent(ts=served, host="h-a", model="other", artifact_id="a2", entire_frame_s=10.0),  # not m
        ]
    )  # fmt: skip
    store.insert_events(
        [
            RequestEvent(request_id="r", ts=served, host="h-a", model="m", hw_pool="p", traffic_class="t",
                         latency_ms=100.0, graph_keys=("k-a1", "k-a2", "k-a3", "k-a4", "k-a5"),
                         graph_artifacts=("a1", "a2", "a3", "a4", "a5"), graph_calls=(1,) * 5, graph_us=(5,) * 5),
        ]
    )  # fmt: skip
    graphs = drill_down(store, "r").graphs
    assert graphs.get_column("compile_host").to_list() == ["h-a", "h-b", "h-a", "h-a", None]
    from inferensics.analytics.drilldown import COMPILE_ORIGIN_ELSEWHERE, COMPILE_ORIGIN_HERE, COMPILE_ORIGIN_LATER

    shown = graphs.select(col.ARTIFACT_ID, "compile_host", "compile_origin", "compile_seconds", col.COMPILE_ID).rows()
    assert shown == [
        ("a1", "h-a", COMPILE_ORIGIN_HERE, 1.0, "h-a:a1"),
        ("a2", "h-b", COMPILE_ORIGIN_ELSEWHERE, 4.0, "h-b:a2"),
        ("a3", "h-a", COMPILE_ORIGIN_LATER, 7.0, "h-a:a3"),
        ("a4", "h-a", COMPILE_ORIGIN_HERE, 8.0, "h-a:a4"),
        ("a5", None, None, None, None),  # no compile of it stored: nulls, as before
    ]
    assert graphs.get_column("compile_ts").to_list()[0] == t0


def test_a_request_whose_replay_named_a_fault_is_notable(store: Store) -> None:
    """The drill-down's picker and the overview read ``notable_requests``, which left out a request whose output was
    wrong though finite and whose replay verdict named the fault (the request list counts it: ``replayed fault``)."""
    from inferensics.analytics import SliceParams, notable_requests
    from inferensics.schema.events import ReplayResultEvent
    from tests.seeding import seed

    t = datetime(2026, 3, 3, 12, tzinfo=UTC)
    base = {"host": "h1", "model": "m", "hw_pool": "p1", "traffic_class": "interactive"}
    wrong = RequestEvent(request_id="r-wrong", ts=t + timedelta(minutes=2), **base)
    fine = RequestEvent(request_id="r-fine", ts=t + timedelta(minutes=1), **base)
    seed(store, events=[
        wrong, fine, RequestEvent(request_id="r-plain", ts=t, **base),
        ReplayResultEvent(ts=t + timedelta(minutes=5), replay_id="rp-1", request_id="r-wrong",
                          attribution="decomposition", op="aten.silu", request_host="h1", request_ts=wrong.ts),
        ReplayResultEvent(ts=t + timedelta(minutes=5), replay_id="rp-2", request_id="r-fine", attribution="none",
                          request_host="h1", request_ts=fine.ts),
    ])  # fmt: skip
    notable = notable_requests(store, SliceParams(start=t, end=t + timedelta(hours=1)))
    assert list(notable.select(col.REQUEST_ID, "why").iter_rows()) == [("r-wrong", "replayed fault")]
