"""What a provider's requirement checks may read, and what happens when a check or a trace raises.

- A decision is held per signature, the other arguments' values and each tensor's 16-byte alignment, so a check on
  ``eps`` or on alignment runs again where they differ (before: held per tensor signature only, and a later call
  with another ``eps``, or a misaligned view, was served by a provider whose check refuses it).
- A check that raises takes its provider out for that signature, counted (before: the serving call raised).
- A provider that works on real tensors but cannot be traced leaves compiled graphs only, counted apart from
  failures (before: counted as raised and taken out of eager calls too).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
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
PLANTED = ("fixedeps", "badcheck", "numpy")


@pytest.fixture
def rms_norm() -> Iterator[kernels.SemanticOp]:
    op = kernels.registry().op("rms_norm")
    saved = kernels.registry().policy()
    torch._dynamo.reset()
    with torch._functorch.config.patch(enable_autograd_cache=False), torch._inductor.config.patch(fx_graph_cache=False):
        yield op
    torch._dynamo.reset()
    for name in PLANTED:
        if name in op.providers:
            op.unregister(name)
    kernels.registry().apply_policy(saved)


def _first(op: kernels.SemanticOp, provider: Provider) -> None:
    op.register(provider, before="reference")
    op.set_priority([provider.name])


def _fixed_eps(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return rms_norm_reference(x, weight, 1e-6)  # a kernel built for eps=1e-6


def _eps_is_1e6(args: Sequence[Any]) -> str | None:
    return None if args[2] == 1e-6 else f"built for eps=1e-06, not {args[2]}"


def _aligned(args: Sequence[Any]) -> str | None:
    return None if args[0].data_ptr() % 16 == 0 else "x not 16-byte aligned"


def test_a_check_on_a_scalar_or_on_alignment_runs_again_where_they_differ(rms_norm: kernels.SemanticOp) -> None:
    _first(
        rms_norm,
        Provider("fixedeps", "vendor", _fixed_eps, Requirements(platforms=CPU, checks=(_eps_is_1e6, _aligned))),
    )
    x, w = torch.randn(4, 64), torch.ones(64)
    kernels.rms_norm(x, w, 1e-6)
    assert rms_norm.log.stats()["calls"].get("rms_norm/fixedeps") == 1
    for path in (kernels.rms_norm, rms_norm.overload):  # the public function's hot path, and the dispatcher's
        torch.testing.assert_close(path(x, w, 0.5), rms_norm_reference(x, w, 0.5))
    decision = rms_norm.select((x, w, 0.5))
    assert decision.provider != "fixedeps"
    assert dict(decision.skipped)["fixedeps"] == "built for eps=1e-06, not 0.5"
    misaligned = torch.randn(4 * 64 + 1)[1:].view(4, 64)  # the same shape and strides, 4 bytes off
    assert kernels.signature((misaligned,)) == kernels.signature((x,))
    kernels.rms_norm(misaligned, w, 1e-6)
    assert dict(rms_norm.select((misaligned, w, 1e-6)).skipped)["fixedeps"] == "x not 16-byte aligned"
    assert rms_norm.log.stats()["calls"]["rms_norm/fixedeps"] == 1  # neither later call was served by it


def test_a_check_that_raises_takes_its_provider_out_counted_and_the_call_is_served(
    rms_norm: kernels.SemanticOp,
) -> None:
    def buggy(args: Sequence[Any]) -> str | None:
        return str(args[5])  # IndexError: rms_norm has three arguments

    _first(rms_norm, Provider("badcheck", "vendor", _fixed_eps, Requirements(platforms=CPU, checks=(buggy,))))
    x, w = torch.randn(4, 64), torch.ones(64)
    torch.testing.assert_close(kernels.rms_norm(x, w, 1e-6), rms_norm_reference(x, w, 1e-6))
    assert rms_norm.log.stats()["failures"]["rms_norm/badcheck"] == 1
    reason = rms_norm.quarantined[(kernels.signature((x, w, 1e-6)), "badcheck")]
    assert reason == "requirement check raised IndexError: tuple index out of range"
    assert dict(rms_norm.select((x, w, 1e-6)).skipped)["badcheck"] == reason
    kernels.rms_norm(x, w, 1e-6)
    assert rms_norm.log.stats()["failures"]["rms_norm/badcheck"] == 1  # taken out once, not per call


def _numpy_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    a = x.detach().float().numpy()  # fine on real tensors; a trace's fake tensors have no data
    out = a / np.sqrt((a**2).mean(-1, keepdims=True) + eps)
    return torch.from_numpy(out).to(x.dtype) * weight


def test_a_provider_that_cannot_be_traced_leaves_compiled_graphs_only(rms_norm: kernels.SemanticOp) -> None:
    _first(rms_norm, Provider("numpy", "vendor", _numpy_norm, Requirements(platforms=CPU)))
    x, w = torch.randn(4, 64), torch.ones(64)
    compiled = torch.compile(lambda x, w: kernels.rms_norm(x, w, 1e-6) * 2)
    torch.testing.assert_close(compiled(x, w), rms_norm_reference(x, w, 1e-6) * 2)
    stats = rms_norm.log.stats()
    assert "rms_norm/numpy" not in stats["failures"]  # it raised nothing for real
    assert stats["untraceable"]["rms_norm/numpy"] == 1
    assert not rms_norm.quarantined
    compiled_decision = next(d for d in rms_norm.log.snapshot() if d.compiled)
    reason = dict(compiled_decision.skipped)["numpy"]
    assert reason.startswith("not traceable by torch.compile (raised RuntimeError"), reason
    assert "eager calls keep it" in reason
    assert "Requirements(compiled='eager')" in reason
    kernels.rms_norm(x, w, 1e-6)  # eager: served by the provider, which works here
    assert rms_norm.log.stats()["calls"]["rms_norm/numpy"] == 1
    assert rms_norm.select((x, w, 1e-6)).provider == "numpy"
