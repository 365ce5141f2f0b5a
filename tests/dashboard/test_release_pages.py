"""The canary comparison and bundles pages against the seeded service."""

from __future__ import annotations

from datetime import timedelta

import pytest

from inferensics.analytics.canary import CanaryParams
from inferensics.analytics.report.evidence import evidence_kind
from inferensics.schema import BundleEvent
from tests.dashboard.apptest import assert_clean, metric, open_page
from tests.dashboard.conftest import SeededService
from tests.dashboard.seed import BASELINE, CANDIDATE, LLAMA

pytestmark = pytest.mark.slow


def test_canary_defaults_to_newest_against_previous_bundle_and_fails(seeded: SeededService) -> None:
    at = open_page(seeded, "views/canary.py")
    assert_clean(at)
    assert at.selectbox(key="canary.model").value == LLAMA
    assert at.selectbox(key="canary.candidate").value == CANDIDATE  # registered last
    assert at.selectbox(key="canary.baseline").value == BASELINE
    rules = CanaryParams.model_fields  # the form starts at the analytics defaults, as `canary compare` does
    assert at.number_input(key="canary.tolerance").value == rules["latency_tolerance"].default
    assert at.number_input(key="canary.min_requests").value == rules["min_requests"].default
    assert at.number_input(key="canary.min_pairs").value == rules["min_pairs"].default
    end = seeded.facts.now + timedelta(minutes=1)
    window = [r for r in seeded.facts.requests if r.model == LLAMA and end - timedelta(hours=6) <= r.ts < end]
    assert metric(at, "Baseline requests") == f"{sum(r.bundle_id == BASELINE for r in window):,}"
    assert metric(at, "Candidate requests") == f"{sum(r.bundle_id == CANDIDATE for r in window):,}"
    banner = at.error[0].value
    assert banner.startswith("**Verdict: FAIL**")
    # The candidate fails on its error rate (24/132 vs 2/161) and on argmax agreement (a fifth drifted).
    assert "error_rate" in banner
    assert "argmax_agreement" in banner
    evidence = next(d.value for d in at.dataframe if "p_value" in d.value.columns)
    assert evidence["outcome"].iloc[-1] == "fail"
    assert set(evidence["check"]) >= {"latency", "rate", "verdict"}
    assert len(at.get("vega_lite_chart")) == 2
    # What `canary compare` recorded for the model, newest first.
    recorded = next(d.value for d in at.dataframe if "rule" in d.value.columns and "window_end" in d.value.columns)
    assert recorded["verdict"].tolist() == ["fail", "inconclusive"]
    assert recorded["rule"].tolist() == ["failed: error_rate", "too few requests"]
    assert set(recorded["candidate"]) == {CANDIDATE[:12]}


def test_canary_form_swaps_the_sides(seeded: SeededService) -> None:
    at = open_page(seeded, "views/canary.py")
    at.selectbox(key="canary.candidate").select(BASELINE)
    at.selectbox(key="canary.baseline").select(CANDIDATE)
    at.button[0].click().run()  # the form's Compare button
    assert_clean(at)
    llama = [r for r in seeded.facts.requests if r.model == LLAMA]
    assert metric(at, "Candidate requests") == f"{sum(r.bundle_id == BASELINE for r in llama):,}"
    # The old bundle is faster and fails less, so only the symmetric check still fails: argmax agreement.
    assert at.error[0].value == "**Verdict: FAIL** — failed: argmax_agreement"


def test_bundles_page_lists_hosts_pools_and_traffic(seeded: SeededService) -> None:
    at = open_page(seeded, "views/bundles.py")
    assert_clean(at)
    registrations = [e for e in seeded.facts.others if isinstance(e, BundleEvent)]
    assert metric(at, "Bundles seen") == "2"
    assert metric(at, "Hosts registered") == str(len({e.host for e in registrations}))
    assert metric(at, "Pools") == str(len({e.hw_pool for e in registrations}))
    assert metric(at, "Requests served") == f"{len(seeded.facts.requests):,}"
    table = next(d.value for d in at.dataframe if "hosts" in d.value.columns)
    assert table["bundle_id"].tolist() == [BASELINE, CANDIDATE]
    for row in table.itertuples():
        assert sorted(row.hosts) == sorted({e.host for e in registrations if e.bundle_id == row.bundle_id})
        assert row.requests == sum(r.bundle_id == row.bundle_id for r in seeded.facts.requests)
    assert table["bundle_name"].tolist() == ["baseline", "canary-2026-11-30"]
    assert len(at.get("vega_lite_chart")) == 1


def test_canary_evidence_says_the_unit_of_every_value(seeded: SeededService) -> None:
    at = open_page(seeded, "views/canary.py")
    assert_clean(at)
    evidence = next(d.value for d in at.dataframe if "p_value" in d.value.columns)
    # Every check the analytics emitted (each comparison emits all of them) has a known unit, none the fallback.
    assert [(r.check, r.metric) for r in evidence.itertuples() if evidence_kind(r.check, r.metric) is None] == []
    rows = {r.metric: r for r in evidence.itertuples()}
    end = seeded.facts.now + timedelta(minutes=1)
    window = [r for r in seeded.facts.requests if r.model == LLAMA and end - timedelta(hours=6) <= r.ts < end]
    sides = {b: [r for r in window if r.bundle_id == b] for b in (BASELINE, CANDIDATE)}
    for quantile in ("p50_ms", "p95_ms", "p99_ms"):
        row = rows[quantile]
        assert all(v.endswith(" ms") for v in (row.baseline, row.candidate, row.interval)), row
    errors = {b: 100 * sum(r.status == "error" for r in rs) / len(rs) for b, rs in sides.items()}
    assert (rows["error_rate"].baseline, rows["error_rate"].candidate) == (
        f"{errors[BASELINE]:.2f} %", f"{errors[CANDIDATE]:.2f} %",
    )  # fmt: skip
    assert rows["fallback_rate"].interval.endswith(" %")
    assert rows["argmax_agreement"].baseline.endswith(" pairs")
    assert rows["argmax_agreement"].candidate.endswith(" %")
    assert rows["fp_mean_ks"].interval.startswith("D = ")
    assert (rows["requests"].baseline, rows["requests"].candidate) == (
        f"{len(sides[BASELINE]):,} requests", f"{len(sides[CANDIDATE]):,} requests",
    )  # fmt: skip
