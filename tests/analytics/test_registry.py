"""The named-query interface the collector service and the dashboard code against, and the service path."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from pydantic import BaseModel, ValidationError
from starlette.testclient import TestClient

from inferensics import analytics
from inferensics.analytics import AnalyticsError, LocalRunner, build_weekly_report
from inferensics.analytics.registry import NAMED_QUERIES, NamedQuery
from inferensics.analytics.report import render_weekly_markdown
from inferensics.collector.client import ServiceClient, ServiceError
from inferensics.collector.service import build_state, create_app, load_config
from inferensics.collector.service.queries import to_ipc
from inferensics.schema.store import Store
from tests.analytics.fleet import BASELINE, CANDIDATE, W10
from tests.collector.service.harness import READ, TOKENS

WEEK = {"start": W10.isoformat(), "end": (W10 + timedelta(days=7)).isoformat()}
PARAMS: dict[str, dict[str, Any]] = {
    "dimension_values": {},
    "bundles": {},
    "request_detail": {"request_id": "req-00000"},
    "request_graphs": {"request_id": "req-00000"},
    "request_kernels": {"request_id": "req-00000"},
    "request_graph_calls": {"request_id": "req-00000"},
    "request_replays": {"request_id": "req-00000"},
    "request_kernel_decisions": {"request_id": "req-00000"},
    "canary_compare": {**WEEK, "model": "llama", "baseline": BASELINE, "candidate": CANDIDATE},
    "canary_compare_pools": {
        **WEEK,
        "model": "llama",
        "baseline": BASELINE,
        "candidate": CANDIDATE,
        "hw_pools": ["h200-a", "h200-b"],
    },
    "fleet_timeseries": {**WEEK, "unit": "day", "by": "model"},
    "recompile_timeseries": {**WEEK, "unit": "day"},
    "compile_timeseries": {**WEEK, "unit": "day"},
    "recorded_compiles": {"processes": ["h1 pid 1 at 2026-03-02T00:00:00+00:00"]},
}


def test_named_query_names_are_pinned() -> None:
    assert sorted(NAMED_QUERIES) == sorted(
        [
            "bundle_misses",
            "bundle_unqualified_sizes",
            "bundle_release",
            "bundles",
            "bundles_seen",
            "cache_growth",
            "cache_health",
            "cache_reasons",
            "cache_trend",
            "canary_compare",
            "canary_compare_pools",
            "canary_verdicts",
            "compile_failures",
            "compile_timeseries",
            "dimension_values",
            "fallback_reasons",
            "fleet_overview",
            "fleet_timeseries",
            "graph_break_sites",
            "graph_breaks",
            "guard_failures",
            "host_health",
            "kernel_providers",
            "kernel_qualifications",
            "kernel_skips",
            "new_graph_keys",
            "notable_requests",
            "recompile_reasons",
            "recompile_storms",
            "recompile_timeseries",
            "recorded_compiles",
            "request_detail",
            "request_graph_calls",
            "request_graphs",
            "request_kernels",
            "request_kernel_decisions",
            "request_kinds",
            "request_list",
            "slow_compiles",
            "request_replays",
            "specializations",
        ]
    )


def test_public_api_is_pinned() -> None:
    assert sorted(analytics.__all__) == sorted(n for n in analytics.__all__ if hasattr(analytics, n))
    assert {"fleet_overview", "canary_compare", "drill_down", "build_weekly_report", "UnknownFilterValue"} <= set(
        analytics.__all__
    )


@pytest.mark.parametrize("name", sorted(NAMED_QUERIES))
def test_each_named_query_runs_from_json_params(fleet_store: Store, name: str) -> None:
    query = NAMED_QUERIES[name]
    assert isinstance(query, NamedQuery)
    assert query.name == name
    assert query.description
    assert issubclass(query.params, BaseModel)
    query.params.model_json_schema()
    params = query.params.model_validate(PARAMS.get(name, WEEK))
    frame = query.run(fleet_store, params)
    assert isinstance(frame, pl.DataFrame)
    assert frame.width > 0
    assert to_ipc(frame.to_arrow())  # what the service sends must serialise
    with pytest.raises(ValidationError):
        query.params.model_validate({**PARAMS.get(name, WEEK), "no_such_param": 1})


def test_local_runner_errors_are_value_errors(fleet_store: Store) -> None:
    runner = LocalRunner(fleet_store)
    with pytest.raises(AnalyticsError, match="unknown query 'nope'"):
        runner.query("nope")
    with pytest.raises(ValueError, match="unknown traffic_class 'bulk'"):
        runner.query("fleet_overview", **WEEK, traffic_class="bulk")


@pytest.fixture
def service_client(fleet_store: Store, chdb_dir: Path, tmp_path: Path) -> Iterator[ServiceClient]:
    """A ServiceClient talking to the real service app in this process, over the fleet's store."""
    dsn = f"chdb://{chdb_dir}?database={fleet_store.database}"
    config = load_config({"dsn": dsn, "spool_dir": str(tmp_path / "spool"), "tokens": TOKENS}, environ={})
    state = build_state(
        config, open_store=lambda: Store.open(dsn), named_queries=NAMED_QUERIES
    )  # as `inferensics serve`
    client = ServiceClient("http://testserver", token=READ)
    try:
        with TestClient(create_app(state), headers={"Authorization": f"Bearer {READ}"}) as http:
            client._http = http  # type: ignore[assignment]  # the real client code over the in-process app
            yield client
    finally:
        state.close()


def test_weekly_report_through_the_service_equals_local(fleet_store: Store, service_client: ServiceClient) -> None:
    remote = build_weekly_report(service_client, "2026-W10")
    local = build_weekly_report(LocalRunner(fleet_store), "2026-W10")
    assert render_weekly_markdown(remote) == render_weekly_markdown(local)


def test_service_reports_unknown_filter_as_400(service_client: ServiceClient) -> None:
    with pytest.raises(ServiceError, match="unknown model 'lama'") as info:
        service_client.query("fleet_overview", **WEEK, model="lama")
    assert info.value.status == 400


def test_a_lone_surrogate_in_any_string_parameter_is_a_400(service_client: ServiceClient) -> None:
    """JSON ``"\\udcff"`` is valid JSON but no UTF-8 text: every named query answered it with a 500 naming a
    pybind11 cast (93 cases of a fuzz walk); each string parameter of each query must be a one-line 400."""
    http: TestClient = service_client._http  # type: ignore[assignment]
    checked = 0
    for name, query in sorted(NAMED_QUERIES.items()):
        for field, schema in query.params.model_json_schema().get("properties", {}).items():
            kinds = {schema.get("type")} | {s.get("type") for s in schema.get("anyOf", [])}
            if "string" not in kinds or schema.get("format") in ("date-time", "date"):
                continue
            params = {**PARAMS.get(name, WEEK), field: "\udcff"}
            r = http.post(f"/api/v1/query/{name}", content=json.dumps(params).encode())  # \udcff escaped
            assert (r.status_code, r.json()["error"]) == (
                400,
                f"bad parameters for {name}: {field} is not valid UTF-8 text (a lone surrogate)",
            ), (name, field)
            checked += 1
    assert checked > 20
