"""A request whose fp64 reference cannot run while eager in the serving dtype runs it.

What it got wrong: the model's custom op has kernels for float32 and bfloat16 only, so replay's float64 copy raised
at it, and the verdict was ``inputs`` ("fix the caller", "eager in fp64 fails the same way on these inputs"), though
eager in float32 ran the very same inputs. Now the fp64 reference is said to have no float64 path (with its error
and the op it raised at), the served output is judged against eager float32, and the steps follow from that.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from inferensics.replay import investigate
from inferensics.replay._internal import verdict_text as vt
from inferensics.replay._internal.next_steps import Replayed, next_steps
from inferensics.replay._internal.report import render_markdown, render_text
from tests.replay import no_fp64_models as nm
from tests.replay.test_nonfinite_verdict import _sqrt_lowering_negates

MODELS = Path(nm.__file__)
OP_LINE = next(i for i, t in enumerate(MODELS.read_text().splitlines(), 1) if "# no float64 kernel" in t)
FP64_ERROR = 'RuntimeError: "gelu_no_fp64" not implemented for torch.float64'


@pytest.mark.usefixtures("no_compile_caches")
def test_an_op_without_float64_is_not_blamed_on_the_caller() -> None:
    verdict = investigate(nm.gelu_no_fp64_model(), nm.inputs())
    assert verdict.category == "none", verdict.summary
    assert verdict.culprit == vt.NO_FP64_CULPRIT
    assert (verdict.op, verdict.fx_node) == ("replaytest::gelu_no_fp64", "h"), verdict.summary
    assert (verdict.source_file, verdict.source_line) == (str(MODELS), OP_LINE)
    assert verdict.evidence["fp64_error"] == FP64_ERROR
    assert verdict.summary.startswith(
        f"the fp64 reference could not run: eager fp64 raised {FP64_ERROR} at replaytest::gelu_no_fp64 (node h, "
        f"{MODELS}:{OP_LINE}), while eager float32 ran the request: the model has no float64 path there, and the "
        "inputs are not at fault; judged against eager float32 instead, the served output agrees with it ("
    ), verdict.summary
    assert verdict.summary.endswith("no compiler fault found; eager float32's own accuracy is not checked")
    steps = next_steps(verdict, Replayed("req-1", {}))
    assert steps[0].startswith(
        f"replaytest::gelu_no_fp64 (node h) at {MODELS}:{OP_LINE} has no float64 path (eager fp64 raised "
        f"{FP64_ERROR}): give it one"
    ), steps
    said = " ".join(steps)
    assert "fix the caller" not in said, steps
    assert "fails the same way" not in said, steps
    assert "the served output agrees with eager float32 (rung served)" in said, steps
    text = render_text(replace(verdict, evidence={**verdict.evidence, "next_steps": steps}))
    assert f"  rung eager fp64: FAIL (raised {FP64_ERROR}; " in text, text
    assert "  rung served: pass (" in text, text
    assert " × float32 rounding of eager float32, limit 10; " in text, text
    md = render_markdown(verdict)
    assert f"| eager fp64 | False | raised {FP64_ERROR} | " in md, md
    assert "a compiled rung passes at most 10 × float32 rounding of eager float32." in md, md
    assert "against fp64" not in md, md


@pytest.mark.slow
@pytest.mark.usefixtures("no_compile_caches")
def test_without_fp64_a_compiled_fault_is_found_against_eager() -> None:
    """The compiled sqrt (lowered as sqrt(-x)) gives NaN where eager float32 is finite: still a lowering fault when
    the rungs are judged against eager float32, and the verdict says fp64 could not run."""
    with _sqrt_lowering_negates():
        verdict = investigate(nm.gelu_no_fp64_model(), nm.inputs())
    assert verdict.category == "lowering", verdict.summary
    assert verdict.culprit == "lowering of aten.sqrt", verdict.summary
    assert verdict.summary.startswith(
        f"[no fp64 reference: eager fp64 raised {FP64_ERROR}; every rung was judged "
        "against eager float32, whose own accuracy is unchecked] "
    ), verdict.summary
    assert verdict.evidence["fp64_raised_at"] == {"op": "replaytest::gelu_no_fp64", "fx_node": "h"}
    steps = next_steps(verdict, Replayed("req-1", {}))
    assert steps[0].startswith(
        "every rung was judged against eager float32, not fp64, which could not run; the compiled path diverges "
        "from eager float32, which the steps below follow. replaytest::gelu_no_fp64 (node h) has no float64 path"
    ), steps
    assert any("make_fallback(torch.ops.aten.sqrt" in s for s in steps), steps
    assert not torch.isnan(nm.gelu_no_fp64_model()(*nm.inputs())).any()
