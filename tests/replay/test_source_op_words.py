"""A ``source_op`` verdict says in words that the model's own math is at fault, with each path's non-finite counts.

What it got wrong: "eager in float32 is inf rounding units from fp64", "culprit: eager" (read as the eager runtime
at fault), and nothing said that fp64 itself was non-finite on many of the same outputs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from inferensics.replay import investigate
from inferensics.replay._internal.next_steps import Replayed, next_steps

HERE = Path(__file__)
EXP_LINE = next(i for i, t in enumerate(HERE.read_text().splitlines(), 1) if t.rstrip().endswith("# overflows"))


class ExpSoftmax(nn.Module):
    """Softmax without the row max subtracted, its logits scaled by 40."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = torch.exp(x * 40.0)  # overflows
        return e / e.sum(-1, keepdim=True)


@pytest.mark.usefixtures("no_compile_caches")
def test_overflow_in_the_model_is_said_with_every_paths_counts() -> None:
    # Row 0 overflows fp64 too (exp(800)); row 1 overflows float32 only (exp(120)).
    x = torch.tensor([[20.0, 20.0, 20.0, 20.0], [3.0, 3.0, 3.0, 3.0]])
    verdict = investigate(ExpSoftmax().eval(), (x,))
    assert verdict.category == "source_op", verdict.summary
    assert verdict.op == "aten.exp"
    assert verdict.culprit == "model code"
    assert verdict.summary.startswith(
        f"your model's own math overflows at {HERE}:{EXP_LINE} (`e = torch.exp(x * 40.0)  # overflows`): eager "
        "float32 gives NaN in 8/8 outputs and fp64 in 4/8 — not a compiler fault"
    ), verdict.summary
    assert "rounding units" not in verdict.summary
    assert verdict.evidence["nonfinite"] == {
        "fp64": {"nan": 4, "inf": 0, "total": 4},
        "eager float32": {"nan": 8, "inf": 0, "total": 8},
    }
    # The fix fits the op and the dtype: the row max subtracted before exp; float32 is the dtype that overflows, so
    # "compute that line in float32" (what it said) changes nothing.
    fix = next_steps(verdict, Replayed("req-1", {}))[0]
    assert fix.startswith(
        f"fix the model's code at {HERE}:{EXP_LINE} (`e = torch.exp(x * 40.0)  # overflows`): aten.exp overflows in "
        "float32; subtract the row max before exp"
    ), fix
    assert "in float32 (" not in fix, fix
