"""Every verdict gets 2–4 next steps that name its own op, node, pass, shape or kernel, with settings and commands
that exist.

What it got wrong: only a verdict of a failure not reproduced, or of a shape never qualified, had next steps; "a
decomposition of aten.hardsigmoid diverges" at 3 a.m. left on-call to find the workaround, the confirming command
and what to attach to a bug report alone.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
import typer

from inferensics.cli.app import app
from inferensics.replay import CATEGORIES, Verdict, investigate
from inferensics.replay._internal import verdict_text as vt
from inferensics.replay._internal.graph_probe import SourceLine
from inferensics.replay._internal.next_steps import Replayed, next_steps
from tests.replay.faults import HERE, build_suite

REQUEST = {"host": "gpu-7", "ts": "2026-03-01T03:12:00", "model": "chat"}
REPLAYED = Replayed("req-9", REQUEST, repro=True, torch_version=torch.__version__)
SUITE = {f.name: f for f in build_suite()}


def _located(category: str, **fields: Any) -> Verdict:
    evidence = {"kernels": ["cpp_fused_mul_0"], "output_code_line": 41, **fields.pop("evidence", {})}
    return Verdict(category, source_file="model.py", source_line=12, source_text="y = x * 0.375", evidence=evidence,
                   **{"op": "aten.mul", "fx_node": "mul_1", "kernel": "cpp_fused_mul_0", **fields})  # fmt: skip


VERDICTS = {
    "source_op": Verdict(
        "source_op", op="aten.exp", fx_node="exp", source_file="model.py", source_line=7,
        source_text="e = torch.exp(x * 40.0)", culprit=vt.SOURCE_OP_CULPRIT,
        evidence={"serving_dtype": "bfloat16", "nonfinite": {"eager bfloat16": {"nan": 8, "inf": 0, "total": 8}}},
    ),
    "kernel_provider": Verdict(
        "kernel_provider", op="rms_norm", fx_node="rms_norm", source_file="model.py", source_line=9,
        evidence={"provider": {"op": "rms_norm", "provider": "fast_rms", "kind": "vendor", "bucket": "le4096",
                               "provider_function": "fast.rms", "provider_file": "fast.py", "provider_line": 3}},
    ),
    "decomposition": _located("decomposition", op="aten.silu", culprit="decomposition of aten.silu",
                              evidence={"op_overload": "aten.silu.default"}),
    "lowering": _located("lowering", op="aten.cos", culprit="lowering of aten.cos",
                         evidence={"op_overload": "aten.cos.default"}),
    "graph_pass": _located("graph_pass", op="aten.sub", culprit="post_grad_custom_post_pass=swap_sub_args"),
    "schedule": _located("schedule", culprit="fusion"),
    "shape_specialization": _located(
        "shape_specialization", op="aten.sum", culprit=vt.SIGNED_SHAPE_CULPRIT,
        evidence={"unqualified_shape": {"request": [4, 13], "qualified": [[4, 8]]}},
    ),
    "artifact_mismatch": _located(
        "artifact_mismatch", culprit=vt.STALE_ENTRY_CULPRIT,
        evidence={"differing_kernels": ["cpp_fused_mul_0"], "served_fx_cache_keys": ["fabc123def4567890aa"],
                  "differing_constants": {"served": [0.125], "fresh": [0.625]}},
    ),
    "inputs": Verdict(
        "inputs", op="aten.embedding", fx_node="embedding", source_file="model.py", source_line=5,
        source_text="h = self.embed(ids)", culprit="input ids",
        evidence={"bad_inputs": [{"tensor": "ids", "count": 1, "positions": [[1, 1]], "valid_range": [0, 31]}]},
    ),
    "none": Verdict("none", summary="within tolerance"),
}  # fmt: skip
"""One verdict of each category as the ladder words it."""

SPECIFICS = {
    "source_op": ["model.py:7", "aten.exp", "overflows in bfloat16", "inferensics replay req-9 --what-if"],
    "kernel_provider": ["fast_rms", "fast.rms at fast.py:3", "--op rms_norm", "bucket le4096"],
    "decomposition": ["node mul_1 (aten.silu) at model.py:12", "torch.ops.aten.silu.default",
                      "--decomposition aten.silu.default=", 'backend="aot_eager_decomp_partition"'],
    "lowering": ["make_fallback(torch.ops.aten.cos.default", "kernel cpp_fused_mul_0 (output code line 41)",
                 "node mul_1 (aten.cos) at model.py:12"],
    "graph_pass": ["torch._inductor.config.post_grad_custom_post_pass = None", "swap_sub_args",
                   "node mul_1 (aten.sub)"],
    "schedule": ['"max_fusion_size": 1', "kernel cpp_fused_mul_0", "node mul_1 (aten.mul) at model.py:12"],
    "shape_specialization": ["request input shape 4x13 was never qualified by this bundle (qualified: input shapes "
                             "4x8)", "--static", "guards that let 4x13 through the graph compiled at 4x8"],
    "artifact_mismatch": ["host gpu-7", "TORCHINDUCTOR_FORCE_DISABLE_CACHES=1", "fabc123def456789",
                          "constants [0.125] served, [0.625] now"],
    "inputs": ["input ids holds 1 values outside [0, 31] at [[1, 1]]", "model.py:5", "--export DIR"],
    "none": ["request req-9", "--failing --model chat"],
}  # fmt: skip
"""What each category's steps must name of its verdict."""


def test_every_category_is_covered() -> None:
    assert set(VERDICTS) == set(SPECIFICS) == set(CATEGORIES)


@pytest.mark.parametrize("category", CATEGORIES)
def test_each_category_gets_two_to_four_steps_naming_its_verdict(category: str) -> None:
    steps = next_steps(VERDICTS[category], REPLAYED)
    assert 2 <= len(steps) <= 4, steps
    said = " ".join(steps)
    for specific in SPECIFICS[category]:
        assert specific in said, (specific, steps)


def test_a_request_of_several_tensors_names_each_shape_as_the_bundle_names_its_own() -> None:
    """A request's tensors and the bundle's qualified shapes read as a shape distribution writes them (``4x120``),
    as ``bundle verify``'s ``qualified:`` line does: it read ``request shape ([4,120], [2,4,4,128,16]) ...
    (qualified: [2,48])``, the notation of a graph's sizes, which they are not."""
    said = vt.unqualified_shape_text([[4, 120], [2, 4, 4, 128, 16]], [[2, 48], [1, 20]])
    assert said == (
        "request input shapes (4x120, 2x4x4x128x16) were never qualified by this bundle (qualified: input shapes "
        "2x48, 1x20)"
    )
    verdict = _located(
        "shape_specialization", op="aten.sum", culprit=vt.SIGNED_SHAPE_CULPRIT,
        evidence={"unqualified_shape": {"request": [[4, 120], [2, 4, 4, 128, 16]], "qualified": [[2, 48]]}},
    )  # fmt: skip
    steps = next_steps(verdict, Replayed("req-9", {**REQUEST, "shape": "4x120x1"}))
    assert steps[0].startswith(
        "request input shapes (4x120, 2x4x4x128x16) were never qualified by this bundle (qualified: input shapes "
        "2x48): add the request's shape 4x120x1 to the build's --shapes and rebuild"
    ), steps
    assert any("guards that let (4x120, 2x4x4x128x16) through the graph compiled at 2x48" in s for s in steps), steps


# -- the model's own math: the guard fits the op ---------------------------------------------------------------------
GUARDS = {
    "aten.div": ["guard the denominator there, add an eps or clamp_min it", "x / d.clamp_min(1e-12)",
                 "an all-zero row's norm"],
    "aten::div_": ["guard the denominator there"],
    "aten.reciprocal": ["guard the denominator there", "torch.reciprocal(x.clamp_min(eps))"],
    "aten.rsqrt": ["guard the denominator there", "torch.rsqrt(x + eps)"],
    "aten.exp": ["subtract the row max before exp there", "torch.softmax / torch.logsumexp, which do"],
    "aten._softmax": ["aten._softmax subtracts the row max itself", "torch.finfo(dtype).min instead of -inf"],
    "aten.logsumexp": ["aten.logsumexp subtracts the row max itself"],
    "aten._scaled_dot_product_flash_attention_for_cpu": ["a row that is all -inf (fully masked)"],
    "aten.log": ["log of 0 is -inf", "torch.log(x.clamp_min(1e-12))"],
    "aten.sqrt": ["sqrt of a negative is NaN", "torch.sqrt(x.clamp_min(0))"],
    "aten.acos": ["x.clamp(-1, 1)"],
    "aten.logit": ["torch.logit(x, eps=1e-6)"],
    "aten.pow": ["a negative base to a fractional power is NaN", "clamp the base"],
    "aten.mm": ["the product overflows, in fp64 too"],
    "aten.masked_fill": ["aten.masked_fill writes a non-finite constant", "torch.finfo(dtype).min instead"],
    "aten.var": ["correction=0"],
    "mylib::rms_norm": ["keep its input in the op's domain and range"],
    "": ["keep its input in the op's domain and range"],
}  # fmt: skip
"""What a verdict of non-finite output in fp64 too says to guard, by the first op that turned non-finite."""


@pytest.mark.parametrize("op", GUARDS)
def test_a_model_that_turns_non_finite_in_fp64_too_is_told_the_guard_of_its_op(op: str) -> None:
    """It said "clamp its input, subtract the row max before exp" whatever the op: for an all-zero row divided by
    its L2 norm (aten.div) the exp advice does not apply. A wider dtype is never the fix here: fp64 is non-finite
    too."""
    verdict = Verdict("inputs", op=op, fx_node="x", source_file="model.py", source_line=16,
                      culprit=vt.NONFINITE_EVERYWHERE_CULPRIT)  # fmt: skip
    steps = next_steps(verdict, REPLAYED)
    first = steps[0]
    assert first.startswith("the model's math turns non-finite on these inputs, in fp64 too: node x"), first
    assert first.endswith(", or reject such inputs upstream"), first
    for specific in GUARDS[op]:
        assert specific in first, (specific, first)
    if op != "aten.exp":
        assert "before exp" not in first, first
    assert "float32" not in first, first
    assert "float64" not in first, first
    assert 2 <= len(steps) <= 4, steps


def test_non_finite_in_fp64_too_with_no_op_located_says_so_and_what_was_checked() -> None:
    """Nothing located (no op, node or line): it read "its first op is the first to; guard it there"."""
    checked = ["the fp64 value of each node of the request's graph", "each operator's result in an fp64 eager run"]
    verdict = Verdict("inputs", culprit=vt.NONFINITE_EVERYWHERE_CULPRIT,
                      evidence={"first_nonfinite": {"op": "", "fx_node": "", "checked": checked}})  # fmt: skip
    steps = next_steps(verdict, REPLAYED)
    assert steps[0].startswith(
        "the model's math turns non-finite on these inputs, in fp64 too, but no single op was located: neither the "
        "fp64 value of each node of the request's graph nor each operator's result in an fp64 eager run turned "
        "non-finite"
    ), steps
    assert "its first op" not in " ".join(steps), steps
    assert 2 <= len(steps) <= 4, steps


def test_the_summary_of_non_finite_with_no_op_located_says_what_was_checked() -> None:
    """It read "first non-finite value from an op" when no op was found."""
    checked = [vt.NONFINITE_CHECKED_GRAPH, vt.NONFINITE_CHECKED_EAGER]
    counts = {"fp64": {"nan": 2, "inf": 0, "total": 2}}
    summary = vt.nonfinite_everywhere_summary(counts, served_has=True, node_name="", op="", src=SourceLine(),
                                              checked=checked)  # fmt: skip
    assert summary.endswith(
        "; no single op was located: neither the fp64 value of each node of the request's graph nor each operator's "
        "result in an fp64 eager run turned non-finite"
    ), summary
    assert "from an op" not in summary, summary


def test_a_verdict_judged_without_fp64_says_so_first_and_names_the_op_without_float64() -> None:
    """fp64 could not run (the op has no float64 kernel): a compiler verdict found against eager says so first; a
    request not reproduced is not told the compiled path diverges."""
    no_fp64 = {"fp64_error": "RuntimeError: no Double", "serving_dtype": "float32",
               "fp64_raised_at": {"op": "mylib::gelu", "fx_node": "h"}}  # fmt: skip
    steps = next_steps(_located("lowering", culprit="lowering of aten.mul", evidence=no_fp64), REPLAYED)
    assert steps[0].startswith(
        "every rung was judged against eager float32, not fp64, which could not run; the compiled path diverges from "
        "eager float32, which the steps below follow. mylib::gelu (node h) has no float64 path (eager fp64 raised "
        "RuntimeError: no Double): give it one"
    ), steps
    assert steps[1].startswith("work around it: before compiling, make Inductor call ATen's kernel for aten.mul"), steps
    recorded = {**no_fp64, "not_reproduced": {"recorded": {"error": "", "nan": 3, "inf": 0}}}
    quiet = next_steps(Verdict("none", culprit="not reproduced: ...", evidence=recorded), REPLAYED)
    assert quiet[0].startswith("replay it a few more times"), quiet
    assert quiet[-1].startswith("mylib::gelu (node h) has no float64 path"), quiet
    assert "diverges" not in " ".join(quiet), quiet
    assert 2 <= len(quiet) <= 4, quiet


IN_DTYPE = {
    ("aten.exp", "float32"): ["aten.exp overflows in float32; subtract the row max before exp",
                              "or compute that line in float64 (`.double()` on its inputs"],
    ("aten.exp", "bfloat16"): ["subtract the row max before exp", "compute that line in float32 (`.float()`"],
    ("aten.mm", "float16"): ["scale an operand down before the product", "compute that line in float32",
                             "float16 overflows past 65504"],
    ("aten.bmm", "float32"): ["compute that line in float64 (`.double()`"],
    ("aten.pow", "float16"): ["aten.pow overflows in float16; compute that line in float32 (`.float()` on its inputs"],
    ("aten.div", "float16"): ["guard the denominator (add an eps or clamp_min it; an eps of 1e-8 is 0 in float16)"],
    ("aten.div", "bfloat16"): ["guard the denominator (add an eps or clamp_min it), or compute that line in float32"],
    ("aten.log", "float16"): ["clamp its input into the op's domain (a value that rounds to 0 or below in float16)"],
    ("aten.cos", "float32"): ["compute that line in float64", "or rewrite it to stay in range"],
}  # fmt: skip
"""What a ``source_op`` verdict (eager in the serving dtype overflows where fp64 does not) says to do."""


@pytest.mark.parametrize(("op", "dtype"), IN_DTYPE)
def test_an_op_that_overflows_in_the_serving_dtype_is_told_its_fix(op: str, dtype: str) -> None:
    """It said "compute that line in float32" for every op and dtype: for a float32 model that changes nothing, and
    an exp that overflows wants the row max subtracted."""
    verdict = Verdict("source_op", op=op, fx_node="y", source_file="model.py", source_line=7, source_text="y = f(x)",
                      culprit=vt.SOURCE_OP_CULPRIT,
                      evidence={"serving_dtype": dtype, "nonfinite": {f"eager {dtype}": {"nan": 2, "inf": 0,
                                                                                          "total": 2}}})  # fmt: skip
    first = next_steps(verdict, REPLAYED)[0]
    assert first.startswith(f"fix the model's code at model.py:7 (`y = f(x)`): {op} overflows in {dtype}; "), first
    for specific in IN_DTYPE[op, dtype]:
        assert specific in first, (specific, first)
    if dtype == "float32":
        assert "in float32 (" not in first, first
    if op != "aten.exp":
        assert "before exp" not in first, first


def test_precision_lost_in_float32_is_told_to_widen_to_float64() -> None:
    verdict = Verdict("source_op", op="aten.sum", fx_node="s", source_file="model.py", source_line=3,
                      culprit=vt.SOURCE_OP_CULPRIT, evidence={"serving_dtype": "float32", "nonfinite": {}})  # fmt: skip
    first = next_steps(verdict, REPLAYED)[0]
    assert first.endswith(
        "aten.sum loses precision in float32; compute that line in float64 (`.double()` on its inputs, the result "
        "cast back) or rewrite it to lose less precision"
    ), first


# -- the other categories: each step follows from what the ladder found ----------------------------------------------
def test_without_a_repro_no_step_runs_one() -> None:
    """Without a captured graph no repro.py is written; the minifier step ran `python DIR/repro.py` all the same."""
    without = Replayed("req-9", REQUEST, repro=False)
    for verdict in (VERDICTS["schedule"], _located("lowering", culprit="no single variation fixed it")):
        steps = next_steps(verdict, without)
        assert not any("repro.py" in s or "TORCHDYNAMO_REPRO_AFTER" in s for s in steps), steps
        assert 2 <= len(steps) <= 4, steps
    with_repro = next_steps(VERDICTS["schedule"], REPLAYED)
    assert any("TORCHDYNAMO_REPRO_AFTER=aot TORCHDYNAMO_REPRO_LEVEL=4 python DIR/repro.py" in s for s in with_repro)


def test_fusion_off_says_the_rung_that_passed_did_more_than_its_options() -> None:
    """The rung that passed refused every scheduler fusion besides these options (which alone leave some on, on
    CPU): "that rung passed" claimed the options alone had been shown to fix it."""
    first = next_steps(VERDICTS["schedule"], REPLAYED)[0]
    assert "that rung passed" not in first, first
    assert first.endswith(
        "the rung that passed had these and every scheduler fusion refused, which they alone do not do everywhere: "
        "check the request with them"
    ), first


def test_no_single_variation_is_not_reported_as_a_lowering_fault() -> None:
    """No rung fixed it, so no lowering was found at fault: the report goes to Inductor, not its lowering."""
    report = next_steps(_located("lowering", culprit="no single variation fixed it"), REPLAYED)[-1]
    assert report.startswith("report it to PyTorch (Inductor) about node mul_1"), report
    found = next_steps(VERDICTS["lowering"], REPLAYED)[-1]
    assert found.startswith("report it to PyTorch (Inductor lowering)"), found


def test_a_compiler_fault_says_what_to_attach_to_a_bug_report() -> None:
    for category in ("decomposition", "lowering", "schedule"):
        report = next_steps(VERDICTS[category], REPLAYED)[-1]
        assert report.startswith("report it to PyTorch"), report
        assert "DIR/repro.py, DIR/repro_inputs.pt, DIR/verdict.json" in report
        assert "`inferensics replay req-9 --no-record --out DIR` writes them" in report
        assert f"torch {torch.__version__}" in report
    given = Replayed("req-9", REQUEST, out="/srv/replays/req-9", repro=True)
    assert "/srv/replays/req-9/repro.py" in next_steps(VERDICTS["lowering"], given)[-1]


def test_a_build_history_not_replayed_comes_first() -> None:
    missing = {"build_history_not_replayed": "the build's --inputs m:f cannot be imported here"}
    verdict = _located("lowering", culprit=vt.SIGNED_UNTOLD_CULPRIT, evidence=missing)
    steps = next_steps(verdict, REPLAYED)
    assert steps[0].startswith("make the build's inputs function importable"), steps
    assert "`inferensics replay req-9 --import-path DIR`" in steps[0]
    assert 2 <= len(steps) - 1 <= 4, steps


# -- the names the steps give exist ---------------------------------------------------------------------------------
def _all_steps() -> str:
    extra = [
        _located("lowering", culprit="precision casts elided by codegen (emulate_precision_casts fixes it)"),
        _located("lowering", culprit=vt.SIGNED_CODEGEN_CULPRIT),
        _located("lowering", culprit="no single variation fixed it"),
        _located("graph_pass", culprit="pattern_matcher (built-in pattern passes)"),
        _located("graph_pass", culprit=vt.AOT_EAGER_CULPRIT),
        _located("graph_pass", culprit="joint_custom_post_pass=cube_squares"),
        _located("inputs", culprit=vt.NONFINITE_EVERYWHERE_CULPRIT),
        _located("lowering", culprit=vt.SIGNED_UNTOLD_CULPRIT, evidence={"build_history_not_replayed": "m:f"}),
    ]
    return "\n".join(s for v in [*VERDICTS.values(), *extra] for s in next_steps(v, REPLAYED))


def test_every_inductor_setting_named_exists_in_the_installed_torch() -> None:
    import torch._inductor.config as inductor_config
    import torch._inductor.decomposition
    import torch._inductor.lowering

    said = _all_steps()
    settings = set(re.findall(r"torch\._inductor\.config\.(\w+)", said))
    settings |= set(re.findall(r"--option (\w+)=", said))
    settings |= set(re.findall(r'"(\w+)": (?:1|False)', said))
    assert {"emulate_precision_casts", "pattern_matcher", "max_fusion_size", "post_grad_custom_post_pass"} <= settings
    for name in settings:
        assert hasattr(inductor_config, name), name
    assert callable(torch._inductor.lowering.make_fallback)
    assert isinstance(torch._inductor.decomposition.decompositions, dict)
    for backend in re.findall(r'backend="(\w+)"', said):
        assert backend in torch._dynamo.list_backends(exclude_tags=()), backend


def test_every_log_artifact_named_exists_in_the_installed_torch() -> None:
    from torch._logging._internal import log_registry

    known = set(log_registry.artifact_names) | set(log_registry.log_alias_to_log_qnames)
    named = {a for group in re.findall(r"TORCH_LOGS=([\w,]+)", _all_steps()) for a in group.split(",")}
    assert {"output_code", "fusion", "post_grad_graphs", "dynamic", "guards"} <= named
    assert named <= known, named - known


def test_every_inferensics_command_named_takes_the_options_given() -> None:
    root = typer.main.get_command(app)
    commands = re.findall(r"`inferensics ([^`]+)`", _all_steps())
    assert len(commands) > 10, commands
    for line in commands:
        words = line.split()
        command: Any = root  # typer's own click: its groups hold their subcommands in ``commands``
        while words and words[0] in getattr(command, "commands", {}):
            command = command.commands[words.pop(0)]
        assert command is not root, line
        options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        for word in words:
            if word.startswith("--"):
                assert word in options, (line, word)


# -- on real verdicts -----------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.usefixtures("no_compile_caches")
@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("hardsigmoid decomposition /5", ["decompositions.pop(torch.ops.aten.hardsigmoid.default, None)",
                                          "decomposition of aten.hardsigmoid is wrong at node"]),
        ("cos lowered as sin", ["make_fallback(torch.ops.aten.cos.default, warn=False, override_decomp=True)",
                                "computes node c (aten.cos)"]),
        ("post-grad pass swaps sub operands", ["torch._inductor.config.post_grad_custom_pre_pass = None",
                                               "after swap_sub_args: see what it rewrote at node sub (aten.sub)"]),
    ],
)  # fmt: skip
def test_a_real_verdicts_steps_name_its_op_node_and_line(fault: str, expected: list[str]) -> None:
    planted = SUITE[fault]
    with planted.planted():
        verdict = investigate(planted.model, planted.inputs, compile_kwargs=planted.compile_kwargs)
    steps = next_steps(verdict, REPLAYED)
    assert 2 <= len(steps) <= 4, steps
    said = " ".join(steps)
    for specific in [*expected, f"{HERE}:{planted.line}"]:
        assert specific in said, (specific, steps)
    if verdict.category == "lowering":  # the generated code is where a lowering is wrong
        assert f"kernel {verdict.kernel} (output code line" in said
