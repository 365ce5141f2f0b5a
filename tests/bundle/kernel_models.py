"""A tiny model that calls a kernel-registry op (importable by ``module:function``, so a fresh process can too)."""

from __future__ import annotations

import torch
from torch import nn

from inferensics import kernels

WIDTH = 8


class SiluMulMLP(nn.Module):
    """Linear to twice the width, then ``kernels.silu_mul`` (dispatched by the registry, eager and compiled)."""

    def __init__(self, width: int = WIDTH, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.fc = nn.Linear(width, 2 * width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The model."""
        return kernels.silu_mul(self.fc(x))


def silu_mlp(width: int = WIDTH, seed: int = 0) -> SiluMulMLP:
    """The factory the tests name as ``tests.bundle.kernel_models:silu_mlp``."""
    return SiluMulMLP(width, seed)


def inputs(shape: tuple[int, ...]) -> tuple[torch.Tensor]:
    """Deterministic inputs for a ``(rows, WIDTH)`` shape."""
    return (torch.randn(shape, generator=torch.Generator().manual_seed(1)),)
