"""Qualification checks numerics: a bundle whose compiled output is wrong is not signed.

A new user's walk built and signed a bundle compiled with a "fast GELU" (the tanh approximation) registered
into Inductor's decomposition table: every qualification figure was healthy, and only replay, after a host
served it, found the fault. The build now compares each shape's compiled output with eager and fp64 by
replay's error-ratio rule and refuses to sign outside tolerance, in one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from inferensics import bundle as b
from inferensics.bundle import accuracy
from inferensics.bundle.tolerance import RATIO_LIMIT, compare
from inferensics.cli.app import app
from tests.bundle import models
from tests.bundle.conftest import Keys, spec, without_progress

pytestmark = pytest.mark.slow
runner = CliRunner()
FAST_GELU = "aten.gelu.default=tests.bundle.models:fast_gelu"


def _build_args(tmp_path: Path, out: str) -> list[str]:
    priv = tmp_path / "keys" / "builder"
    if not priv.exists():
        b.generate_key(priv)
    shapes = tmp_path / "shapes.json"
    shapes.write_text('{"shapes": [{"shape": [2, 8], "weight": 3}, {"shape": [3, 8], "weight": 1}]}')
    return ["bundle", "build", "--model", "tests.bundle.models:tiny_mlp", "--inputs", "tests.bundle.models:inputs",
            "--shapes", str(shapes), "--key", str(priv), "--out", str(tmp_path / out), "--no-advise"]  # fmt: skip


def test_a_wrong_gelu_decomposition_is_refused_in_one_line(tmp_path: Path) -> None:
    from torch._inductor import decomposition

    tag = torch.compiler.config.cache_key_tag
    refused = runner.invoke(app, [*_build_args(tmp_path, "bad"), "--decomposition", FAST_GELU])
    assert refused.exit_code != 0, refused.output
    text = without_progress(refused.output).strip()
    assert "Traceback" not in text
    assert len(text.splitlines()) == 1, text
    assert text.startswith("error: compiled output of shape [")
    assert "is numerically wrong: error ratio " in text
    assert f"against eager's own error vs fp64, limit {RATIO_LIMIT:g} " in text
    assert "2 of 2 shapes fail; nothing was signed" in text
    assert f"check the customisations ({FAST_GELU})" in text
    assert "inferensics.replay.investigate(model, inputs)" in text
    assert text.endswith("--allow-inaccurate to sign it anyway [inaccurate]")
    ratio = float(text.split("error ratio ")[1].split()[0])
    assert ratio > 100 * RATIO_LIMIT  # the tanh approximation is ~1e-4 off where fp32 eager is ~1e-8
    assert not (tmp_path / "bad").exists()
    assert not list(tmp_path.glob(".bundle-*"))  # nothing half-made left beside it

    # Signed on purpose: the report carries the failing figures and the command says so.
    signed = runner.invoke(app, [*_build_args(tmp_path, "signed"), "--decomposition", FAST_GELU, "--allow-inaccurate"])
    assert signed.exit_code == 0, signed.output
    assert "warning: signed with compiled output outside tolerance at 2x8, 3x8 (--allow-inaccurate" in signed.output
    q = json.loads((tmp_path / "signed" / "report" / "qualification.json").read_text())
    assert q["accuracy"]["failed"] == [[2, 8], [3, 8]]
    assert q["accuracy"]["allow_inaccurate"] is True
    assert q["accuracy"]["worst_ratio"] > 100 * RATIO_LIMIT
    assert all(not s["accuracy"]["passed"] for s in q["shapes"])
    md = (tmp_path / "signed" / "report" / "qualification.md").read_text()
    assert "Accuracy: OUTSIDE tolerance at 2x8, 3x8" in md
    assert "signed anyway (--allow-inaccurate)" in md

    # The customisation was those builds' alone (it stayed installed in the process, so the next build compiled
    # with it and recorded none, and was refused here as inaccurate): this process's compiler is as it was.
    assert decomposition.decompositions.get(torch.ops.aten.gelu.default) is not models.fast_gelu
    assert torch.compiler.config.cache_key_tag == tag
    clean = runner.invoke(app, _build_args(tmp_path, "clean"))
    assert clean.exit_code == 0, clean.output


def test_a_correct_bundle_carries_its_accuracy_figures(built: b.BuildResult) -> None:
    q = json.loads((built.directory / "report" / "qualification.json").read_text())
    acc = q["accuracy"]
    assert acc["checked"] == 2
    assert acc["failed"] == []
    assert acc["unchecked"] == []
    assert acc["eager_wrong"] == []
    assert acc["ratio_limit"] == RATIO_LIMIT
    assert acc["rule"] == accuracy.RULE
    for s in q["shapes"]:
        figures = s["accuracy"]
        assert figures["checked"] is True
        assert figures["passed"] is True
        assert 0 <= figures["ratio"] <= RATIO_LIMIT
        assert figures["nonfinite_new"] == 0
        assert 0 < figures["anchor_max_abs"] < 1e-5  # eager in fp32 against fp64: rounding, not zero
        assert figures["max_abs"] < 1e-5
        assert figures["eager_wrong"] is False  # eager in fp32 is a few rounding units from fp64
        assert figures["eager_rounding_units"] < figures["eager_limit"]
    worst = max(q["shapes"], key=lambda s: s["accuracy"]["ratio"])
    assert acc["worst_shape"] == worst["shape"]
    assert acc["worst_ratio"] == worst["accuracy"]["ratio"]
    md = (built.directory / "report" / "qualification.md").read_text()
    assert "Accuracy: every checked shape within tolerance against eager and fp64 (worst error ratio " in md
    assert "## Accuracy against eager and fp64" in md
    assert "| 2x8 | " in md.split("## Accuracy against eager and fp64")[1]
    assert "Accuracy against eager and fp64" in (built.directory / "report" / "qualification.html").read_text()
    shown = runner.invoke(app, ["bundle", "show", str(built.directory)])
    assert shown.exit_code == 0, shown.output
    assert "  accuracy: every checked shape within tolerance against eager and fp64 (worst error ratio " in shown.output


def _eager_and_fp64(shape: tuple[int, ...]) -> tuple[torch.nn.Module, tuple[torch.Tensor], torch.Tensor]:
    model = models.tiny_mlp().eval()
    inputs = models.inputs(shape)
    with torch.inference_mode():
        return model, inputs, model(*inputs)


def test_new_non_finite_values_are_refused_and_named() -> None:
    model, inputs, eager = _eager_and_fp64((2, 8))
    served = eager.clone()
    served[1, 2] = float("nan")
    with torch.inference_mode():
        judged = accuracy.Reference(model).check(served, inputs)
    assert judged.failed
    refused = accuracy.refusal([((2, 8), judged)], [])
    assert refused is not None
    assert refused.cause == "inaccurate"
    assert str(refused).startswith(
        "compiled output of shape [2, 8] is numerically wrong: 1 non-finite value(s) where eager and fp64 are finite"
    )
    assert "check the customisations" not in str(refused)  # none were installed: replay is the next step


def test_a_model_that_cannot_run_in_fp64_is_left_unchecked_and_said() -> None:
    class Fp32Only(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.randn(8, 4)  # a plain attribute: .double() leaves it float32

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.proj

    model = Fp32Only()
    x = torch.randn(2, 8)
    with torch.inference_mode():
        judged = accuracy.Reference(model).check(model(x), (x,))
    assert judged.comparison is None
    assert judged.unchecked.startswith("the model does not run in float64: RuntimeError: ")
    assert accuracy.refusal([((2, 8), judged)], []) is None  # unchecked never refuses; the report says why


def test_the_replay_rule_is_the_bundle_rule() -> None:
    """One definition: replay judges rungs by the very functions qualification uses."""
    from inferensics.replay._internal import tolerance as replay_tolerance

    assert replay_tolerance.compare is compare
    assert replay_tolerance.RATIO_LIMIT == RATIO_LIMIT


def test_eager_far_from_fp64_is_recorded_not_refused() -> None:
    """A model whose own arithmetic loses its digits in float32 (a source op, or a kernel provider eager uses
    too): the compiled code follows eager, so the ratio passes; eager's distance from fp64 is recorded."""

    class Cancelling(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x + 1e6) - 1e6

    model = Cancelling()
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        judged = accuracy.Reference(model).check(model(x), (x,))
    assert judged.comparison is not None
    assert judged.comparison.passed
    assert judged.eager is not None
    assert judged.eager.wrong
    figures = judged.to_dict()
    assert figures["eager_wrong"] is True
    assert figures["eager_rounding_units"] > figures["eager_limit"]
    assert accuracy.refusal([((4, 8), judged)], []) is None


def test_a_model_without_floating_output_is_left_unchecked_and_said(tmp_path: Path, keys: Keys) -> None:
    """A model that serves token ids (an argmax): the rule compares floating tensors only, so there is nothing to
    judge. The build said "every checked shape within tolerance (worst error ratio 0)", a check that never ran."""
    shapes = b.ShapeDistribution.of([(2, 8)], [1])
    built = b.build(spec(model="tests.bundle.models:tiny_argmax", shapes=shapes), keys.key, tmp_path / "argmax")
    q = json.loads((built.directory / "report" / "qualification.json").read_text())
    figures = q["shapes"][0]["accuracy"]
    assert figures["checked"] is False
    assert figures["unchecked"] == "the output holds no floating-point tensor to compare, only integer or bool ones"
    assert q["accuracy"]["checked"] == 0
    shown = runner.invoke(app, ["bundle", "show", str(built.directory)])
    assert shown.exit_code == 0, shown.output
    assert f"  accuracy: not checked: 2x8 ({figures['unchecked']})." in shown.output
    assert "within tolerance" not in shown.output


def test_a_model_that_changes_its_inputs_in_place_is_judged_on_the_inputs_it_was_given(
    tmp_path: Path, keys: Keys
) -> None:
    """The references ran on the inputs the compiled call had already scaled (and eager scaled them again): a
    correct model was refused as "numerically wrong, error ratio 2e+06"."""
    shapes = b.ShapeDistribution.of([(2, 8)], [1])
    built = b.build(spec(model="tests.bundle.models:tiny_mlp_in_place", shapes=shapes), keys.key, tmp_path / "ip")
    q = json.loads((built.directory / "report" / "qualification.json").read_text())
    figures = q["shapes"][0]["accuracy"]
    assert figures["checked"] is True
    assert figures["passed"] is True
    assert figures["ratio"] <= RATIO_LIMIT
    assert figures["max_abs"] < 1e-5


def test_verify_and_show_say_a_bundle_was_signed_outside_tolerance_and_what_its_customisation_replaces(
    keys: Keys, tmp_path: Path
) -> None:
    """``verify`` of a bundle built with --allow-inaccurate said only "verified ... compatible with this host",
    and ``show`` listed ``customisations: ['tests.bundle.models:fast_gelu']`` without the op it replaces."""
    custom = b.describe_customisation("decomposition", "aten.gelu.default", models.fast_gelu)
    result = b.build(spec(customisations=(custom,), allow_inaccurate=True), keys.key, tmp_path / "signed")
    replaces = (
        "tests.bundle.models:fast_gelu replaces Inductor's decomposition of aten.gelu.default "
        f"(code {custom.code_digest[:12]})"
    )
    verified = runner.invoke(app, ["bundle", "verify", str(result.directory), "--keyring", str(keys.public)])
    assert verified.exit_code == 0, verified.output
    lines = verified.output.splitlines()
    assert lines[0].startswith(f"verified tiny {result.bundle_id}")
    assert lines[1].startswith("warning: signed with compiled output outside tolerance at 2x8, 3x8 "
                               "(--allow-inaccurate; worst error ratio ")  # fmt: skip
    assert lines[2] == "qualified: input shapes 2x8, 3x8"
    assert lines[3] == f"customisation: {replaces}"
    shown = runner.invoke(app, ["bundle", "show", str(result.directory)])
    assert shown.exit_code == 0, shown.output
    assert f"  customisations:\n    {replaces}\n" in shown.output
    assert "accuracy: OUTSIDE tolerance at 2x8, 3x8 (worst error ratio " in shown.output
    assert "signed anyway (--allow-inaccurate)" in shown.output
