"""Two providers of ``silu_mul`` a test can tell apart by their output (planted: real kernels agree), and a
serving function that calls the op. Imported by tests and by the fresh processes they start."""

from __future__ import annotations

import torch

from inferensics import kernels

FACTORS = {"twice": 2.0, "thrice": 3.0}


def reference(x: torch.Tensor) -> torch.Tensor:
    """SiLU·mul as the op defines it."""
    h = x.shape[-1] // 2
    return torch.nn.functional.silu(x[..., :h]) * x[..., h:]


def plant(op: kernels.SemanticOp, tag: str) -> list[str]:
    """Register ``twice_<tag>`` and ``thrice_<tag>`` (the reference times 2 and 3) on ``op``; their names."""
    names = []
    for kind, factor in FACTORS.items():

        def scaled(x: torch.Tensor, f: float = factor) -> torch.Tensor:
            return reference(x) * f

        names.append(f"{kind}_{tag}")
        op.register(kernels.Provider(names[-1], "vendor", scaled, kernels.Requirements()), before="triton")
    return names


def first(op: kernels.SemanticOp, name: str) -> None:
    """Put provider ``name`` first in ``op``'s default priority list."""
    op.set_priority([name, *(p for p in op.priority_for("default") if p != name)])


def serve(x: torch.Tensor) -> torch.Tensor:
    """What a model does with the op: call it, then compute on."""
    out: torch.Tensor = kernels.silu_mul(x) + 1
    return out


def factor(out: torch.Tensor, x: torch.Tensor) -> float:
    """Which provider computed ``out`` (from :func:`serve`): 2.0 or 3.0."""
    return round(((out - 1) / reference(x)).mean().item(), 3)


if __name__ == "__main__":  # a fresh process: plant, put argv[1] first, compile, print the factor and AOT hits
    import sys

    import torch._dynamo.utils

    silu_mul = kernels.registry().op("silu_mul")
    plant(silu_mul, "fresh")
    first(silu_mul, sys.argv[1])
    x = torch.arange(1, 49, dtype=torch.float32).reshape(4, 12) / 10
    print(factor(torch.compile(serve)(x), x), torch._dynamo.utils.counters["aot_autograd"]["autograd_cache_hit"])
