"""Hosts serve only what was qualified: a fresh process hits every graph key of the bundle; a graph outside
it is a bundle miss naming the differing factors, handled by ``on_bundle_miss`` within the compile budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from inferensics import bundle as b
from inferensics.bundle import torch_adapter
from tests.bundle.conftest import Keys
from tests.bundle.models import TinyMLP, inputs, tiny_mlp

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

FRESH_PROCESS = """
import json, sys, warnings
warnings.simplefilter("ignore", DeprecationWarning)
import torch
from inferensics import bundle as b
from tests.bundle.models import inputs, tiny_mlp
loaded = b.load(sys.argv[1], b.Keyring.load(sys.argv[2]))
session = loaded.session(on_bundle_miss="compile")
compiled = loaded.compile(tiny_mlp(), session)
with torch.inference_mode():
    for shape in [(2, 8), (3, 8), (2, 8), (5, 8)]:
        compiled(*inputs(shape))
counters = torch._dynamo.utils.counters
print(json.dumps({
    "matches": [m.__dict__ for m in session.matches],
    "fxgraph_cache_hit": counters["inductor"]["fxgraph_cache_hit"],
    "fxgraph_cache_miss": counters["inductor"]["fxgraph_cache_miss"],
}))
"""


def test_fresh_process_hits_every_graph_key(built: b.BuildResult, keys: Keys, tmp_path: Path) -> None:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "empty-cache"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, str(built.directory), str(keys.public)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    matches = out["matches"]
    qualified = {g.fx_key for g in built.manifest.graphs}
    hits = [m for m in matches if m["status"] == "hit"]
    assert {m["fx_key"] for m in hits} == qualified  # every graph key of the bundle served, from its cache
    assert out["fxgraph_cache_hit"] == len(qualified)
    misses = [m for m in matches if m["status"] == "miss"]
    assert len(misses) == 1  # the unqualified (5, 8)
    assert misses[0]["action"] == "compiled"
    assert "float32[5,8]" in misses[0]["inputs"]
    assert any(f.startswith("accepted_shapes:") and "float32[5,8]" in f for f in misses[0]["factors"])
    assert out["fxgraph_cache_miss"] == 1


@pytest.fixture
def loaded(built: b.BuildResult, keys: Keys, tmp_path: Path) -> b.LoadedBundle:
    """The bundle loaded in this process into an empty cache directory."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "cache")
    torch_adapter.reset_compiler()
    try:
        return b.load(built.directory, keys.keyring)
    finally:
        pass


@pytest.fixture(autouse=True)
def _restore_cache_dir() -> object:
    saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    yield
    if saved is None:
        os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    else:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved


def test_refuse_policy_raises_on_unqualified_shapes(loaded: b.LoadedBundle) -> None:
    session = loaded.session(on_bundle_miss="refuse")
    compiled = loaded.compile(tiny_mlp(), session)
    with torch.inference_mode(), pytest.raises(b.BundleMissRefusedError, match="float32\\[7,8\\]"):
        compiled(*inputs((7, 8)))
    assert [(m.status, m.action) for m in session.matches] == [("miss", "refused")]


def test_eager_policy_serves_eagerly_and_matches_eager(loaded: b.LoadedBundle) -> None:
    session = loaded.session(on_bundle_miss="eager")
    model = tiny_mlp()
    compiled = loaded.compile(model, session)
    with torch.inference_mode():
        out = compiled(*inputs((6, 8)))
        torch.testing.assert_close(out, model(*inputs((6, 8))))
    assert [(m.status, m.action, m.reason) for m in session.matches] == [("miss", "eager", "on_bundle_miss=eager")]
    assert session.matches[0].factors[0].startswith("accepted_shapes:")


class EditedMLP(TinyMLP):
    """The tiny MLP after an edit of its source that keeps its parameters (ReLU where the bundle has GELU)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The edited model."""
        out: torch.Tensor = self.fc2(torch.relu(self.fc1(x)))
        return out


def test_a_graph_of_edited_code_on_qualified_inputs_names_the_code(loaded: b.LoadedBundle) -> None:
    """A host (or a replay) running edited model code on a shape the bundle qualified: the miss named
    "accepted_shapes: inputs X not qualified (bundle: X)", the same inputs twice, instead of the code."""
    session = loaded.session(on_bundle_miss="eager")
    compiled = loaded.compile(EditedMLP(), session)
    with torch.inference_mode():
        compiled(*inputs((2, 8)))
    assert [(m.status, m.action) for m in session.matches] == [("miss", "eager")]
    factors = session.matches[0].factors
    assert (
        factors[0] == "code: the bundle holds another graph for these inputs (the model's code changed since the build)"
    )
    assert not any(f.startswith("accepted_shapes:") for f in factors), factors
    # Nor a setting the compile itself set: torch.compile(dynamic=False), the bundle's own argument, sets
    # automatic_dynamic_shapes while it compiles, and every miss named "automatic_dynamic_shapes: None → False".
    assert not any(f.startswith("settings.") for f in factors), factors


def test_compile_budget_holds(loaded: b.LoadedBundle) -> None:
    clock = [0.0]
    budget = b.CompileBudget(max_compiles=1, max_seconds=1e9, window_s=60.0, clock=lambda: clock[0])
    session = loaded.session(on_bundle_miss="compile", budget=budget)
    compiled = loaded.compile(tiny_mlp(), session)
    with torch.inference_mode():
        compiled(*inputs((5, 8)))  # a miss, compiled within the budget
        compiled(*inputs((6, 8)))  # a miss past the budget: served eagerly, with the reason
        compiled(*inputs((2, 8)))  # qualified: a hit, never charged
    got = [(m.status, m.action) for m in session.matches]
    assert got == [("miss", "compiled"), ("miss", "eager"), ("hit", "compiled")]
    assert "compile budget spent: 1 of 1 compiles" in session.matches[1].reason
    assert session.hits == 1
    assert session.misses == 2
    clock[0] = 61.0  # the window has passed: one more compile is allowed
    assert budget.refusal() == ""


def test_compile_seconds_budget() -> None:
    budget = b.CompileBudget(max_compiles=100, max_seconds=5.0, window_s=10.0, clock=lambda: 0.0)
    budget.charge(3.0)
    assert budget.refusal() == ""
    budget.charge(2.5)
    assert "compile-seconds" in budget.refusal()


def test_a_bundle_signed_without_any_graph_says_so_on_a_miss(loaded: b.LoadedBundle) -> None:
    """A bundle an older `bundle build` signed with no graph (an FX pass without uuid() bypassed Inductor's cache)
    misses its own model at its qualified shape: the miss said "a graph the bundle does not hold (another model or
    code path)", which sent the reader to look for another model. It says the bundle holds no graph at all."""
    import copy
    import dataclasses

    identity = copy.deepcopy(loaded.manifest.identity)
    identity.setdefault("artifacts", {})["graphs"] = []
    empty = dataclasses.replace(loaded, manifest=loaded.manifest.model_copy(update={"identity": identity}))
    assert empty.manifest.graphs == []
    session = empty.session(on_bundle_miss="eager")
    compiled = empty.compile(tiny_mlp(), session)
    with torch.inference_mode():
        compiled(*inputs((2, 8)))
    factors = session.matches[0].factors
    assert factors[0].startswith("code: the bundle holds no compiled graph at all (it was signed without one)"), factors
    assert not any("another model or code path" in f for f in factors), factors
