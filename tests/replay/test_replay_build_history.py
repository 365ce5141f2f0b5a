"""A ``--dynamic`` bundle's graph is compiled by its build at its qualified shapes; replay's fresh compiles run that
history before the request, so a fault specialised to the build's size hints reproduces and is named.

What it got wrong: the ladder's "fresh compile, same history" rung compiled at the request's shape alone (another
size hint), came out right, and the verdict blamed "a stale or poisoned cache entry" (``artifact_mismatch``) of an
artifact the evidence itself showed to be the verified, signed bundle hit; nothing said the request's shape was
never qualified. The build and the replay run in fresh processes (the factory plants the fault in the compiler).

The build's ``--inputs`` function lives in a folder of its own (``inputs/hint_inputs.py``), as a project's may: a
replay that cannot import it cannot replay the build history. What it got wrong then: the history was skipped
without a word, and the verdict claimed the build's compiler differed ("generates code that is right" after a
history it never ran). Its next steps were none, for every verdict but an unqualified shape.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.replay import write_pack
from inferensics.replay._internal.pack import write_safetensors
from inferensics.replay._internal.verdict_text import HISTORY_MISSING_NOTE

ROOT = Path(__file__).resolve().parents[2]
PLANT = Path(__file__).resolve().parent / "shape_plant.py"
SUM_LINE = next(i for i, t in enumerate(PLANT.read_text().splitlines(), 1) if t.rstrip().endswith("# FAULT: sum"))
BUILD = """
import sys
from pathlib import Path
from inferensics import bundle as b
out = Path(sys.argv[1])
priv, pub, _ = b.generate_key(out / "builder")
spec = b.BuildSpec(model="tests.replay.shape_plant:centre", inputs="hint_inputs:inputs",
                   shapes=b.ShapeDistribution.of([(4, 8)]), dynamic=True, advise=False, name="hint", repeats=1)
print(b.build(spec, b.load_signing_key(priv), out / "bundle").bundle_id)
"""
INPUTS = """import torch


def inputs(shape):
    return (torch.randn(tuple(shape), generator=torch.Generator().manual_seed(1)),)
"""
pytestmark = pytest.mark.slow
runner = CliRunner()


def _env(*folders: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (ROOT, *folders))), "PYTHONWARNINGS": "ignore"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pack of a request at width 13 and the bundle (built at width 8) in it; ``inputs/`` beside it holds the
    build's --inputs module."""
    d = tmp_path_factory.mktemp("hint")
    (d / "inputs").mkdir()
    (d / "inputs" / "hint_inputs.py").write_text(INPUTS)
    made = subprocess.run([sys.executable, "-c", BUILD, str(d)], capture_output=True, text=True,
                          env=_env(d / "inputs"), cwd=ROOT, timeout=600, check=False)  # fmt: skip
    assert made.returncode == 0, made.stderr[-3000:]
    bundle_id = made.stdout.strip().splitlines()[-1]
    x = torch.randn(4, 13, generator=torch.Generator().manual_seed(3))  # width 13: never qualified (8 was)
    request = {"request_id": "hint-1", "bundle_id": bundle_id, "model": "centre", "graph_keys": []}
    write_pack(d / "pack", request=request, inputs=write_safetensors({"x": x}), bundle_dir=d / "bundle")
    return d


def _replay(d: Path, out: Path, *import_paths: Path) -> str:
    """``inferensics replay --pack`` with the factory's module imported from the repository and each of
    ``import_paths``; its printed output. The verdict's JSON is ``out/verdict.json``."""
    args = [a for p in (ROOT, *import_paths) for a in ("--import-path", str(p))]
    res = runner.invoke(app, ["replay", "--pack", str(d / "pack"), "--keyring", str(d / "builder.pub"),
                              "--no-record", "--out", str(out), *args], env={"COLUMNS": "400"})  # fmt: skip
    assert res.exit_code == 0, res.output
    return res.output


@pytest.fixture(scope="module")
def replayed(built: Path) -> tuple[dict[str, Any], str]:
    """The verdict and printed output of a replay that imports the build's --inputs (``--import-path``)."""
    out = built / "with-history"
    printed = _replay(built, out, built / "inputs")
    return json.loads((out / "verdict.json").read_text()), printed


@pytest.fixture(scope="module")
def verdict(replayed: tuple[dict[str, Any], str]) -> dict[str, Any]:
    return replayed[0]


@pytest.fixture(scope="module")
def without_inputs(built: Path) -> tuple[dict[str, Any], str]:
    """The verdict and printed output of a replay that cannot import the build's --inputs."""
    out = built / "without-history"
    printed = _replay(built, out)
    return json.loads((out / "verdict.json").read_text()), printed


def test_a_fault_specialised_to_the_build_shapes_is_a_shape_specialisation(verdict: dict[str, Any]) -> None:
    assert verdict["evidence"]["served_keys_all_hit"], verdict["evidence"]["served_matches"]
    assert verdict["category"] == "shape_specialization", verdict["summary"]
    assert verdict["op"] == "aten.sum", verdict["summary"]
    assert (verdict["source_file"], verdict["source_line"]) == (str(PLANT), SUM_LINE)
    assert "stale or poisoned" not in verdict["summary"]
    assert verdict["evidence"]["bundle_build_history"] == [[4, 8]]


def test_the_verdict_says_the_request_shape_was_never_qualified(verdict: dict[str, Any]) -> None:
    said = "request input shape 4x13 was never qualified by this bundle (qualified: input shapes 4x8)"
    assert said in verdict["summary"], verdict["summary"]
    assert verdict["evidence"]["next_steps"][0].startswith(said)
    assert verdict["evidence"]["unqualified_shape"] == {"request": [4, 13], "qualified": [[4, 8]]}


def test_a_shape_specialisation_gets_next_steps_that_name_its_shape_op_and_node(
    replayed: tuple[dict[str, Any], str],
) -> None:
    verdict, printed = replayed
    steps = verdict["evidence"]["next_steps"]
    assert 2 <= len(steps) <= 4, steps
    logs = next(s for s in steps if "TORCH_LOGS=dynamic,guards" in s)
    assert "4x13" in logs, logs
    assert "4x8" in logs, logs
    assert f"node {verdict['fx_node']} (aten.sum) at {PLANT}:{SUM_LINE}" in logs, logs
    assert any("--static" in s and "4x13" in s for s in steps), steps
    assert any(s.startswith("report it to PyTorch") and "repro.py" in s for s in steps), steps
    for step in steps:  # printed, in the order the report holds them
        assert f"  next: {step}" in printed, printed


def test_without_the_inputs_function_the_history_is_said_not_replayed_and_no_shape_fault_claimed(
    without_inputs: tuple[dict[str, Any], str],
) -> None:
    verdict, printed = without_inputs
    missing = ("the build's --inputs hint_inputs:inputs cannot be imported here (cannot import hint_inputs (No module "
               "named 'hint_inputs')): put the folder that holds hint_inputs.py on PYTHONPATH or pass --import-path "
               "DIR")  # fmt: skip
    assert f"  build history: not replayed: {missing}\n" in printed, printed
    assert verdict["evidence"]["build_history_not_replayed"] == missing
    assert verdict["category"] != "shape_specialization", verdict["summary"]
    assert HISTORY_MISSING_NOTE in verdict["summary"]
    assert "after the bundle's build history" not in verdict["summary"], verdict["summary"]
    # The rungs that need no history ran: the request, eager, the signed artifact and a fresh compile.
    assert [r["rung"] for r in verdict["evidence"]["rungs"]][:3] == [
        "eager", "served (bundle)", "inductor (fresh compile, same history)"
    ]  # fmt: skip
    first = verdict["evidence"]["next_steps"][0]
    assert first.startswith("make the build's inputs function importable and replay it again"), first
    assert "--import-path DIR" in first
    assert f"  next: {first}" in printed
