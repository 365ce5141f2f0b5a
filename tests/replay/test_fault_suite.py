"""Every planted fault gets the right category, op and source line; the controls are not blamed."""

from __future__ import annotations

import json
import os

import pytest

from inferensics.replay import CATEGORIES, Verdict, investigate
from inferensics.replay._internal.report import render_markdown, render_text
from tests.replay.faults import HERE, build_suite, expected_input, fault_line, on_device, suite_names

DEVICE = os.environ.get("INFERENSICS_REPLAY_DEVICE", "cpu")
"""Where the suite runs: ``cpu`` in CI (C++ kernels); ``cuda`` on a GPU host (Triton kernels)."""
SUITE = {f.name: f for f in build_suite()}
pytestmark = pytest.mark.usefixtures("no_compile_caches")


@pytest.mark.slow
@pytest.mark.parametrize("name", suite_names())
def test_planted_fault_is_named(name: str) -> None:
    fault = on_device(SUITE[name], DEVICE)
    with fault.planted():
        verdict = investigate(
            fault.model, fault.inputs, compile_kwargs=fault.compile_kwargs, warmup_inputs=fault.warmup, device=DEVICE
        )
    assert verdict.category == fault.category, verdict.summary
    assert verdict.op == fault.op, verdict.summary
    if fault.category == "none":
        assert not verdict.fx_node
        assert all(r["passed"] for r in verdict.evidence["rungs"])
        return
    assert verdict.source_file == str(HERE)
    assert verdict.source_line == fault.line, verdict.summary
    assert verdict.source_text == HERE.read_text().splitlines()[fault.line - 1].strip()
    if fault.category in (
        "lowering",
        "schedule",
        "graph_pass",
        "shape_specialization",
        "artifact_mismatch",
        "decomposition",
    ):
        assert verdict.kernel, "a compiled fault names the kernel"
        assert verdict.evidence["output_code_line"] > 0 or fault.category == "artifact_mismatch"
    if fault.category == "kernel_provider":
        served = verdict.evidence["provider"]
        assert served["provider"] == fault.provider, verdict.summary
        assert served["provider_file"] == str(HERE)
        assert served["provider_line"] == fault_line(fault.provider_marker)
        assert verdict.kernel == served["provider_function"] == f"tests.replay.faults.{fault.provider_marker}"
        assert not served["alone"]["passed"], "the provider alone is wrong at this call"
        assert f"provider: {fault.provider} (vendor)" in render_text(verdict)
        assert f"| provider | `{fault.provider}` (vendor)" in render_markdown(verdict)
        assert any("forced to the reference provider" in r["rung"] and r["passed"] for r in verdict.evidence["rungs"])
    if fault.name == "stale entry from a fused-kernel constant":  # located by the constant that differs
        assert verdict.evidence["differing_constants"]["fresh"] == [0.625]
        assert verdict.evidence["differing_constants"]["served"] == [0.125]
    if fault.category == "inputs":
        assert verdict.evidence["bad_inputs"][0]["tensor"] == expected_input(fault)
        assert verdict.evidence["bad_inputs"][0]["positions"]
    failing = [r for r in verdict.evidence["rungs"] if not r.get("passed", True)]
    if fault.category not in ("source_op", "inputs"):
        ratio = failing[0].get("ratio", failing[0].get("rounding_units"))
        assert ratio == "inf" or float(ratio) > 10
    assert json.loads(verdict.to_json())["category"] == fault.category


def test_suite_covers_every_category_twice() -> None:
    counts = {c: sum(1 for f in SUITE.values() if f.category == c) for c in CATEGORIES}
    assert all(n >= 2 for n in counts.values()), counts


def test_verdict_rejects_unknown_category() -> None:
    with pytest.raises(ValueError, match="unknown verdict category"):
        Verdict("wrong")


def test_verdict_round_trips_json() -> None:
    v = Verdict(
        "lowering", op="aten.cos", fx_node="cos", source_file="m.py", source_line=3, source_text="c = torch.cos(h)"
    )
    assert Verdict.from_dict(json.loads(v.to_json())) == v
    assert v.headline() == "lowering · op aten.cos · node cos · at m.py:3"
