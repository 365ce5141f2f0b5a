"""The printed verdict and the Markdown report show rung ratios rounded; the JSON keeps them whole."""

from __future__ import annotations

import json

from inferensics.replay._internal.report import render_markdown, render_text
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
    assert "  rung compiled: pass ratio 1.067 (1.234 s)" in text
    assert "  rung eager: pass ratio 0.512 (0.01 s)" in text
    assert "  rung fusion off: FAIL ratio inf (0.5 s)" in text
    assert str(RATIO) not in text


def test_markdown_rungs_are_rounded_and_json_keeps_full_precision() -> None:
    verdict = _verdict()
    md = render_markdown(verdict)
    assert "| compiled | True | 1.067 | 1.234 |" in md
    assert str(RATIO) not in md
    assert "limit 4.\n" in md
    assert json.loads(verdict.to_json())["evidence"]["rungs"][1]["ratio"] == RATIO
