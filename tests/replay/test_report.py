"""The printed verdict and the Markdown report show rung ratios rounded; the JSON keeps them whole."""

from __future__ import annotations

import json

from inferensics.replay._internal.report import render_markdown, render_text
from inferensics.replay._internal.tolerance import EAGER_LIMIT, RATIO_LIMIT
from inferensics.replay._internal.verdict import Verdict

RATIO = 1.0668769893945798


def _verdict() -> Verdict:
    return Verdict(
        category="lowering",
        op="aten.rsqrt",
        summary="compiled rsqrt diverges",
        evidence={
            "tolerance": {"rule": "candidate error vs fp64 over eager's own error", "ratio_limit": 4.0},
            "rungs": [
                {"rung": "eager", "rounding_units": 0.512, "passed": True, "seconds": 0.01},
                {"rung": "compiled", "ratio": RATIO, "passed": True, "seconds": 1.234},
                {"rung": "fusion off", "ratio": "inf", "passed": False, "seconds": 0.5},
            ],
        },
    )


def test_text_verdict_prints_rung_ratios_to_four_significant_figures() -> None:
    text = render_text(_verdict())
    assert "  rung compiled: pass (1.067 × eager's error, limit 4; 1.234 s)" in text
    assert "  rung eager: pass (0.512 rounding units from fp64, limit 1000; 0.01 s)" in text
    assert "  rung fusion off: FAIL (inf × eager's error, limit 4; 0.5 s)" in text
    assert str(RATIO) not in text


def test_each_rung_prints_its_own_unit_and_limit() -> None:
    """`replay` printed "rung eager: pass ratio 18.75" beside the README's "at most 10": eager's figure is in
    rounding units of its dtype from fp64, against a limit of 1000 (EAGER_LIMIT), not a ratio against 10. Each
    line now says what its number measures and the limit it passed or failed against (the real run's figures)."""
    verdict = Verdict(
        category="decomposition",
        op="aten.silu",
        summary="decomposition of aten.silu",
        evidence={
            "tolerance": {
                "rule": "candidate error vs fp64 over eager's own error vs fp64, RMSE and max-abs",
                "ratio_limit": RATIO_LIMIT,
                "eager_limit_rounding_units": EAGER_LIMIT,
            },
            "rungs": [
                {"rung": "eager", "rounding_units": 19.05, "nonfinite_new": 0, "passed": True, "seconds": 0.21},
                {"rung": "served (bundle)", "ratio": 259400.0, "nonfinite_new": 0, "passed": False, "seconds": 0.0},
                {"rung": "aot_eager", "ratio": 1.0, "nonfinite_new": 0, "passed": True, "seconds": 12.148},
                {"rung": "inductor", "ratio": "inf", "nonfinite_new": 3, "passed": False, "seconds": 2.5},
                {"rung": "eager, kernel registry: rms_norm forced to the reference provider", "rounding_units": "inf",
                 "nonfinite_new": 1, "passed": False, "seconds": 0.1},
                {"rung": "inductor max_fusion_size=1", "ratio": "inf", "nonfinite_new": 0, "passed": False,
                 "seconds": 0.3, "error": "RuntimeError: boom"},
            ],
        },
    )  # fmt: skip
    lines = [ln for ln in render_text(verdict).splitlines() if ln.startswith("  rung ")]
    assert lines == [
        "  rung eager: pass (19.05 rounding units from fp64, limit 1000; 0.21 s)",
        "  rung served (bundle): FAIL (2.594e+05 × eager's error, limit 10; 0.0 s)",
        "  rung aot_eager: pass (1 × eager's error, limit 10; 12.148 s)",
        "  rung inductor: FAIL (3 new non-finite values; inf × eager's error, limit 10; 2.5 s)",
        "  rung eager, kernel registry: rms_norm forced to the reference provider: FAIL (1 new non-finite value; inf "
        "rounding units from fp64, limit 1000; 0.1 s)",
        "  rung inductor max_fusion_size=1: FAIL (raised RuntimeError: boom; inf × eager's error, limit 10; 0.3 s)",
    ]
    md = render_markdown(verdict)
    assert "| rung | passed | error (limit) | seconds |" in md
    assert "| eager | True | 19.05 rounding units from fp64, limit 1000 | 0.21 |" in md
    assert "| served (bundle) | False | 2.594e+05 × eager's error, limit 10 | 0.0 |" in md
    assert "a compiled rung passes at most 10 × eager's error against fp64, eager at most 1000 rounding units" in md


def test_markdown_rungs_are_rounded_and_json_keeps_full_precision() -> None:
    verdict = _verdict()
    md = render_markdown(verdict)
    assert "| compiled | True | 1.067 × eager's error, limit 4 | 1.234 |" in md
    assert str(RATIO) not in md
    assert "a compiled rung passes at most 4 × eager's error against fp64" in md
    assert json.loads(verdict.to_json())["evidence"]["rungs"][1]["ratio"] == RATIO
