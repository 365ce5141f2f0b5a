"""A graph compiled with dynamic shapes calls the op with a symbolic row count, so its bucket is ``…/t*``: it covers
every concrete bucket of that dtype and width, and the graph serves sizes of all of them. Refusals (and bucket lists)
set for those buckets apply to it; before, no refusal or bucket list matched ``t*`` and a provider the accuracy gate
had refused was traced into the graph and served every later size wrong. Real ``torch.compile`` (Inductor) on the
CPU."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch._dynamo
import torch._functorch.config
import torch._inductor.config

from inferensics import kernels
from inferensics.kernels import Provider, Requirements
from inferensics.kernels.ops.norm import rms_norm_reference
from inferensics.kernels.requirements import Platform

pytestmark = [
    # Raised inside Inductor's own imports (torch 2.11 and 2.13); fatal under filterwarnings=error.
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]

CPU: frozenset[Platform] = frozenset({"cpu"})


def _wrong(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * weight  # no normalisation: what the accuracy gate refuses


@pytest.fixture
def rms_norm() -> Iterator[kernels.SemanticOp]:
    op = kernels.registry().op("rms_norm")
    saved = kernels.registry().policy()
    torch._dynamo.reset()
    # Provider names repeat from one test process to the next with other code behind them: no cached graphs.
    with torch._functorch.config.patch(enable_autograd_cache=False), torch._inductor.config.patch(fx_graph_cache=False):
        yield op
    torch._dynamo.reset()
    op.unregister("wrong")
    op.refused.clear()
    op.bucket_priority.clear()
    kernels.registry().apply_policy(saved)


def test_a_symbolic_bucket_covers_the_concrete_buckets_it_matches() -> None:
    from inferensics.kernels.op import bucket_covers

    assert bucket_covers("float32/n64/t*", "float32/n64/t8")
    assert bucket_covers("float32/n*/t*", "float32/n64/t8")
    assert not bucket_covers("float32/n64/t*", "float32/n128/t8")
    assert not bucket_covers("float32/n64/t*", "bfloat16/n64/t8")
    assert not bucket_covers("float32/n64/t8", "float32/n64/t16")


def test_a_refused_provider_stays_out_of_a_graph_compiled_with_dynamic_shapes(rms_norm: kernels.SemanticOp) -> None:
    rms_norm.register(Provider("wrong", "vendor", _wrong, Requirements(platforms=CPU)), before="reference")
    rms_norm.set_priority(["wrong"])  # first by default: only the evidence below keeps it out
    for t in (4, 8, 16):
        rms_norm.refuse(f"float32/n64/t{t}", "wrong", "planted: 256 elements outside close")
    weight = torch.ones(64)
    earlier = set(rms_norm.log.snapshot())  # other tests' compiles
    compiled = torch.compile(lambda x: kernels.rms_norm(x, weight, 1e-6), dynamic=True)
    for t in (3, 8, 16):
        x = torch.randn(t, 64)
        torch.testing.assert_close(compiled(x), rms_norm_reference(x, weight, 1e-6))
    decision = next(d for d in rms_norm.log.snapshot() if d.compiled and d not in earlier)
    assert decision.bucket == "float32/n*/t*"  # dynamic=True: the width is symbolic too
    assert decision.provider != "wrong"
    reason = dict(decision.skipped)["wrong"]
    assert reason.startswith("refused in float32/n64/t"), reason
    assert "a bucket this dynamic-shape call covers: planted" in reason


def test_a_symbolic_bucket_skips_a_provider_a_covered_bucket_left_out_of_its_list(
    rms_norm: kernels.SemanticOp,
) -> None:
    rms_norm.register(Provider("wrong", "vendor", _wrong, Requirements(platforms=CPU)), before="reference")
    rms_norm.set_priority(["wrong"])
    rms_norm.set_priority(["reference"], "float32/n64/t8")  # evidence: the reference beat it there
    assert rms_norm.covered_refusal("float32/n64/t*", "wrong") == (
        "left out of bucket float32/n64/t8's priority list, a bucket this dynamic-shape call covers"
    )
    assert rms_norm.covered_refusal("float32/n64/t16", "wrong") is None  # a concrete bucket follows its own list
    assert rms_norm.covered_refusal("float32/n128/t*", "wrong") is None  # covers no bucket with evidence
