"""Non-finite output the model itself computes, against non-finite output a compiler path adds.

What it got wrong: a request whose output was NaN in every path, fp64 eager included (the model takes the square
root of a negative row sum), was judged ``verdict: none`` ("the served output is within tolerance of fp64"): the
comparison leaves out the elements fp64 has non-finite, so every rung passed and NaN was never mentioned, while the
request page showed the request's NaN right above that verdict. Now it is an ``inputs`` verdict naming the first op
that turned non-finite (op, FX node, the model's line) and each path's counts; a NaN the served path adds where
fp64 is finite keeps its compiler verdict.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from inferensics import bundle as b
from inferensics.replay import investigate, write_pack
from inferensics.replay._internal.next_steps import Replayed, next_steps
from inferensics.replay._internal.pack import write_safetensors
from inferensics.replay._internal.report import render_text
from tests.replay import nonfinite_models as nm
from tests.replay.faults import patched_lowering

ROOT = Path(__file__).resolve().parents[2]
MODELS = Path(nm.__file__)
SQRT_LINE = next(i for i, t in enumerate(MODELS.read_text().splitlines(), 1) if "torch.sqrt(" in t)
aten = torch.ops.aten


def _sqrt_of_negated(x: Any, *, original: Any) -> Any:
    """A planted lowering fault: sqrt lowered as sqrt(-x), NaN wherever fp64's is finite and positive."""
    from torch._inductor import lowering

    return original(lowering.lowerings[aten.neg.default](x))


@contextlib.contextmanager
def _sqrt_lowering_negates() -> Iterator[None]:
    with patched_lowering(aten.sqrt.default, _sqrt_of_negated):
        yield


@pytest.mark.usefixtures("no_compile_caches")
def test_nan_in_every_path_names_the_model_op_and_the_counts() -> None:
    verdict = investigate(nm.sqrt_row_scale(), (nm.one_negative_row(),))
    assert verdict.category == "inputs", verdict.summary
    assert verdict.op == "aten.sqrt", verdict.summary
    assert verdict.fx_node == "scale", verdict.summary
    assert (verdict.source_file, verdict.source_line) == (str(MODELS), SQRT_LINE), verdict.summary
    assert verdict.source_text == "scale = torch.sqrt(x.sum(dim=-1, keepdim=True))  # NaN where the row sum is negative"
    # Row 0 is NaN in all 4 outputs, in every path.
    one_row = {"nan": 4, "inf": 0, "total": 4}
    assert verdict.evidence["nonfinite"] == {"fp64": one_row, "eager float32": one_row, "served": one_row}
    assert verdict.summary.startswith(
        "non-finite output in every path, fp64 eager included (fp64 4 NaN, eager float32 4 NaN, served 4 NaN): "
        "not the compiler, the inputs and the model produce it; first non-finite value from aten.sqrt (node scale) "
        f"at {MODELS}:{SQRT_LINE}: scale = torch.sqrt("
    ), verdict.summary
    text = render_text(verdict)
    assert text.startswith(f"verdict: inputs · op aten.sqrt · node scale · at {MODELS}:{SQRT_LINE}\n"), text
    assert "rung eager: pass (4 non-finite values, only where fp64 has them too; " in text, text
    assert "rung served: pass (4 non-finite values, only where fp64 has them too; " in text, text
    assert "within tolerance" not in text
    # The guard fits the op: a sqrt wants its input clamped (it said "subtract the row max before exp" whatever the
    # op was).
    guard = next_steps(verdict, Replayed("req-1", {}))[0]
    assert f"node scale (aten.sqrt) at {MODELS}:{SQRT_LINE} is the first to; sqrt of a negative is NaN: clamp" in guard
    assert "row max" not in guard, guard


@pytest.mark.usefixtures("no_compile_caches")
def test_finite_output_is_still_none() -> None:
    verdict = investigate(nm.sqrt_row_scale(), nm.inputs((4, nm.WIDTH)))
    assert verdict.category == "none", verdict.summary
    assert "nonfinite" not in verdict.evidence


@pytest.mark.slow
@pytest.mark.usefixtures("no_compile_caches")
@pytest.mark.parametrize("request_", ["finite in fp64", "NaN in fp64 too, in another row"])
def test_a_nan_only_the_compiled_path_adds_keeps_its_compiler_verdict(request_: str) -> None:
    """The compiled sqrt (lowered as sqrt(-x)) gives NaN where fp64 is finite: a lowering fault, also when fp64 has a
    NaN row of its own (the NaN the compiler adds is not excused by the one the model computes)."""
    x = nm.inputs((4, nm.WIDTH))[0] if request_ == "finite in fp64" else nm.one_negative_row()
    with _sqrt_lowering_negates():
        verdict = investigate(nm.sqrt_row_scale(), (x,))
    assert verdict.category == "lowering", verdict.summary
    assert verdict.op == "aten.sqrt", verdict.summary
    assert verdict.culprit == "lowering of aten.sqrt"
    assert verdict.source_line == SQRT_LINE
    assert "nonfinite" not in verdict.evidence
    served = next(r for r in verdict.evidence["rungs"] if r["rung"] == "served")
    assert served["nonfinite_new"] == (16 if request_ == "finite in fp64" else 12)


@pytest.mark.slow
def test_a_bundle_replay_of_a_nan_request_names_it(tmp_path: Path) -> None:
    """Through a real signed bundle and a fresh replay process, as ``inferensics replay`` runs it."""
    priv, pub, _ = b.generate_key(tmp_path / "builder")
    here = "tests.replay.nonfinite_models"
    shapes = b.ShapeDistribution.of([(4, nm.WIDTH)])
    spec = b.BuildSpec(model=f"{here}:sqrt_row_scale", inputs=f"{here}:inputs", shapes=shapes, advise=False,
                       name="sqrt", repeats=1)  # fmt: skip
    result = b.build(spec, b.load_signing_key(priv), tmp_path / "bundle")
    request = {"request_id": "b-020", "bundle_id": result.bundle_id, "model": "sqrt", "graph_keys": []}
    tensors = write_safetensors({"x": nm.one_negative_row()})
    pack = write_pack(tmp_path / "pack", request=request, inputs=tensors, bundle_dir=result.directory)
    proc = subprocess.run(
        [sys.executable, "-m", "inferensics.replay", "--pack", str(pack), "--keyring", str(pub), "--json"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    verdict: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert verdict["category"] == "inputs", verdict["summary"]
    assert (verdict["op"], verdict["fx_node"], verdict["source_line"]) == ("aten.sqrt", "scale", SQRT_LINE)
    assert verdict["evidence"]["nonfinite"]["served (bundle)"] == {"nan": 4, "inf": 0, "total": 4}
    served = next(r for r in verdict["evidence"]["rungs"] if r["rung"] == "served (bundle)")
    assert served["nonfinite_as_fp64"] == 4
    assert "sqrt of a negative is NaN: clamp its input" in verdict["evidence"]["next_steps"][0]
