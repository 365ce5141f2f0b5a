"""A model and a faulty compiler customisation for the pack tests, importable by a fresh process."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Gate(nn.Module):
    """Linear → hardsigmoid gate."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The model."""
        h = self.lin(x)
        return F.hardsigmoid(h) * h  # FAULT: gate


def gate(seed: int = 0) -> Gate:
    """Factory named ``tests.replay.packmodels:gate``."""
    return Gate(seed)


def inputs(shape: tuple[int, ...]) -> tuple[torch.Tensor]:
    """Build-time inputs."""
    return (torch.randn(shape, generator=torch.Generator().manual_seed(1)),)


def hardsigmoid_div5(x: torch.Tensor) -> torch.Tensor:
    """A faulty decomposition of ``aten.hardsigmoid.default`` (divides by 5, not 6)."""
    return (x + 3).clamp(0, 6) / 5


def gelu_wrong(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """A faulty decomposition of ``aten.gelu.default`` (the erf argument off by 10 %)."""
    return 0.5 * x * (1 + torch.erf(x * 0.7071067811865476 * 1.1))
