"""The compile caches key a graph on the providers traced into it: after a priority change a compile runs the
provider now first in line (not the one a cached entry holds) and records that decision; the same graph with
the same providers still hits, in this process and a fresh one; a cache-key tag the user set is kept. Real
``torch.compile`` (Inductor, AOTAutograd and FX-graph caches on disk) on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch._dynamo
import torch._dynamo.utils

from inferensics import kernels
from tests.kernels import planted_providers as planted

pytestmark = [
    # Raised inside Inductor's own imports (torch 2.11 and 2.13); fatal under filterwarnings=error.
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def providers(restored_registry: None) -> Iterator[tuple[kernels.SemanticOp, str, str]]:
    """``silu_mul`` with the two planted providers, and their names."""
    op = kernels.registry().op("silu_mul")
    twice, thrice = planted.plant(op, uuid.uuid4().hex[:12])  # new names: no entry of an earlier run matches
    try:
        yield op, twice, thrice
    finally:
        op.unregister(twice)
        op.unregister(thrice)


def _compile_and_run(x: torch.Tensor) -> float:
    torch._dynamo.reset()
    return planted.factor(torch.compile(planted.serve, backend="inductor")(x), x)


def _aot_hits() -> int:
    return int(torch._dynamo.utils.counters["aot_autograd"]["autograd_cache_hit"])


def test_a_priority_change_compiles_the_new_provider_and_the_old_one_hits_again(
    providers: tuple[kernels.SemanticOp, str, str],
) -> None:
    op, twice, thrice = providers
    x = torch.randn(5, 24)
    planted.first(op, twice)
    assert _compile_and_run(x) == 2.0
    planted.first(op, thrice)
    assert _compile_and_run(x) == 3.0  # before: 2.0, the AOTAutograd cache handed back the first graph
    assert [d.provider for d in op.log.snapshot() if d.compiled and d.signature.startswith("float32[5,24]")] == [
        thrice
    ]  # the decision recorded is the one that runs
    planted.first(op, twice)
    hits = _aot_hits()
    assert _compile_and_run(x) == 2.0
    assert _aot_hits() == hits + 1  # the same graph with the same providers: a cache hit


def test_a_users_cache_key_tag_is_kept(providers: tuple[kernels.SemanticOp, str, str]) -> None:
    op, twice, _ = providers
    planted.first(op, twice)
    x = torch.randn(3, 8)
    assert _compile_and_run(x) == 2.0
    assert torch.compiler.config.cache_key_tag == ""  # put back when the compile ended
    # The config's own patch, not monkeypatch.setattr: monkeypatch's undo deleted the setting, so every later
    # read of it in the process raised "torch.compiler.config.cache_key_tag does not exist".
    # (patch is added at run time, install_config_module; torch.compiler.config lacks _config_typing's stub)
    with torch.compiler.config.patch(cache_key_tag="user-tag"):  # type: ignore[attr-defined]
        hits = _aot_hits()
        assert _compile_and_run(x) == 2.0
        assert _aot_hits() == hits  # the user's tag still keys the graph: another entry
        assert torch.compiler.config.cache_key_tag == "user-tag"
        assert _compile_and_run(x) == 2.0
        assert _aot_hits() == hits + 1
    assert torch.compiler.config.cache_key_tag == ""


def test_a_fresh_process_hits_the_graph_another_process_saved(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache"),
        "INFERENSICS_JOURNAL_DIR": "off",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }

    def run(first: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "tests.kernels.planted_providers", first],
            check=False, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip().splitlines()[-1]

    assert run("twice_fresh") == "2.0 0"  # a cold cache
    assert run("twice_fresh") == "2.0 1"  # a fresh process, the same providers: a hit
    assert run("thrice_fresh") == "3.0 0"  # another provider first: compiled, not the cached graph


def test_a_trace_outside_a_compile_leaves_the_tag_alone(providers: tuple[kernels.SemanticOp, str, str]) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    op, twice, _ = providers
    planted.first(op, twice)
    x = torch.randn(6, 8)
    assert _compile_and_run(x) == 2.0
    with FakeTensorMode() as mode:
        op(mode.from_tensor(x))  # a decision made while tracing, but no compile: no cache is looked up
    assert torch.compiler.config.cache_key_tag == ""
    hits = _aot_hits()
    assert _compile_and_run(x) == 2.0  # after torch._dynamo.reset(), which forgets Dynamo's callbacks
    assert _aot_hits() == hits + 1
