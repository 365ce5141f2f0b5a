"""Qualification names the values a compiled graph is pinned to (replay walk: a model that recompiles for every new
scalar in production).

Qualification serves one input per shape, so a graph that receives a ``.item()`` result as a Python number, and
is guarded on its value, never recompiled there: the report said nothing, and every host recompiled (a bundle
miss) for each request with another value. Now the report, ``bundle build`` and ``bundle verify`` name the guard,
the source line the value came from, the value seen and the shapes whose graphs hold it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from inferensics import bundle as b
from inferensics.bundle import torch_adapter
from inferensics.cli.app import app
from tests.bundle.break_models import item_scale
from tests.bundle.conftest import Keys, without_progress
from tests.bundle.models import inputs

pytestmark = pytest.mark.slow

MODEL = "tests.bundle.break_models:item_scale"
SHAPE = (2, 8)


def _value_line() -> int:
    with open(item_scale.__code__.co_filename) as f:
        return next(i for i, line in enumerate(f, 1) if "# VALUE" in line)


def test_the_guard_is_real_another_value_recompiles() -> None:
    """What the report warns of, shown with torch.compile alone: the same shape, another value, another compile."""
    compiled_graphs: list[Any] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        compiled_graphs.append(gm)
        return gm.forward

    torch_adapter.reset_compiler()
    model = torch.compile(item_scale().eval(), backend=backend)
    (x,) = inputs(SHAPE)
    with torch.inference_mode():
        model(x)
        seen = len(compiled_graphs)
        model(x)
        assert len(compiled_graphs) == seen  # the same input: no compile
        model(x * 2)
    torch_adapter.reset_compiler()
    assert len(compiled_graphs) > seen  # the same shape with another value compiled again


def test_build_names_the_value_a_graph_is_pinned_to(keys: Keys, tmp_path: Path) -> None:
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps(b.ShapeDistribution.of([SHAPE]).to_json()))
    out = tmp_path / "bundle"
    res = CliRunner().invoke(app, [
        "bundle", "build", "--model", MODEL, "--inputs", "tests.bundle.models:inputs", "--shapes", str(shapes),
        "--key", str(keys.private), "--out", str(out), "--no-advise", "--quiet",
    ])  # fmt: skip
    assert res.exit_code == 0, res.output

    q = json.loads((out / "report" / "qualification.json").read_text())
    (guard,) = q["value_guards"]
    seen = inputs(SHAPE)[0].abs().max().item()
    assert guard["local"] == "___stack0"  # the .item() result, on Dynamo's stack at the resume after the break
    assert [float(v) for v in guard["values"]] == [pytest.approx(seen)]
    # where the value is used, in the frame Dynamo resumed after the break at the .item() line
    assert guard["source"].startswith("return y / scale  # ")
    assert guard["source"].endswith(
        f"break_models.py:{_value_line() + 1} in torch_dynamo_resume_in_forward_at_{_value_line()}"
    )
    assert guard["shapes"] == [list(SHAPE)]

    warnings = [line for line in without_progress(res.stdout).splitlines() if line.startswith("warning: value guard")]
    assert warnings == [
        f"warning: value guard: a compiled graph is pinned to ___stack0 == {guard['values'][0]} "
        f"(from {guard['source']}) at 2x8: a request with another value recompiles on the host (a bundle miss); "
        "keep such a value in a tensor"
    ]
    assert (
        f"Value guard: a compiled graph is pinned to ___stack0 == {guard['values'][0]}"
        in (out / "report" / "qualification.md").read_text()
    )
    verified = CliRunner().invoke(app, ["bundle", "verify", str(out), "--keyring", str(keys.public)])
    assert verified.exit_code == 0, verified.output
    assert warnings[0] in verified.stdout.splitlines()


def test_a_model_without_value_guards_reports_none(built: b.BuildResult) -> None:
    q = json.loads((built.directory / "report" / "qualification.json").read_text())
    assert q["value_guards"] == []


def test_value_guards_are_read_from_dynamos_guard_tree() -> None:
    tree = (
        "TREE_GUARD_MANAGER:\n+- RootGuardManager\n"
        "| | +- TENSOR_MATCH: check_tensor(L['y'], Tensor, torch.float32, size=[2, 8], stride=[8, 1])  # return y\n"
        "| | +- EQUALS_MATCH: L['___stack1'] == 1.0  # k = int(x[0, 0].item()) + 1  # m.py:8 in f\n"
        "| | +- EQUALS_MATCH: L['self']._modules['fc'].training == False  # y = self.fc(x)  # m.py:7 in forward\n"
        "| | +- EQUALS_MATCH: L['n'] == 3\n"
    )
    assert torch_adapter.value_guards(tree) == [
        ("___stack1", "1.0", "k = int(x[0, 0].item()) + 1  # m.py:8 in f"),
        ("n", "3", ""),
    ]
