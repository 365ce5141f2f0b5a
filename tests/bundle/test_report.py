"""The qualification report inside a built bundle: Markdown, offline HTML and JSON, with the shape-policy
advice measured for static, dynamic and bucketed policies."""

from __future__ import annotations

import json

import pytest

from inferensics import bundle as b
from inferensics.bundle import advice
from inferensics.bundle.report import advice_line

pytestmark = pytest.mark.slow


def test_report_covers_the_distribution_and_advises_a_policy(built: b.BuildResult) -> None:
    report = built.directory / "report"
    q = json.loads((report / "qualification.json").read_text())
    assert [s["shape"] for s in q["shapes"]] == [[2, 8], [3, 8]]
    assert q["shapes"][0]["share"] == pytest.approx(0.75)
    assert q["graph_coverage"] == pytest.approx(1.0)
    assert q["specializations"] == 2  # static: one graph per shape
    assert q["eager_fallbacks"] == []
    assert q["warm_start"]["graphs"] == 2
    assert q["warm_start"]["cache_hits"] == 2  # with the bundle, every graph came from its cache
    assert all(s["first_request_bundle_s"] is not None for s in q["shapes"])
    assert q["cache_bytes"]["total"] == sum(a["bytes"] for a in q["cache_bytes"]["artifacts"])
    assert any("size mismatch" in r for r in q["guard_failures"])  # (3, 8) failed the (2, 8) graph's guards
    policies = {p["name"]: p for p in q["policies"]}
    assert set(policies) == {"static", "dynamic", "bucketed"}
    assert policies["static"]["specializations"] == 2
    assert policies["dynamic"]["specializations"] == 1
    assert policies["bucketed"]["padding_waste"] == pytest.approx(0.25 * (1 - 3 / 4))  # (3, 8) padded to (4, 8)
    assert all(p["compile_s"] > 0 and p["cache_bytes"] > 0 and p["latency_ms"] > 0 for p in policies.values())
    for p in policies.values():  # timed interleaved, each with the interval of its median
        assert p["latency_samples"] == advice.ADVICE_ROUNDS
        assert 0 < p["latency_low_ms"] <= p["latency_ms"] <= p["latency_high_ms"]
        assert p["cost_low_s"] <= p["cost_s"] <= p["cost_high_s"]
    if q["recommendation"]:
        assert q["recommendation"] in policies
        assert q["recommendation_reason"].startswith("lowest window cost, ")
    else:
        assert q["recommendation_reason"].startswith("no clear winner: ")
    assert q["bucket_edges"] == [[2, 4], [8]]
    md = (report / "qualification.md").read_text()
    assert f"**{advice_line(q)}** (" in md
    html = (report / "qualification.html").read_text()
    assert "<script" not in html
    assert "http://" not in html
    assert "https://" not in html  # offline: nothing fetched
    assert "Shape-policy advice" in html
