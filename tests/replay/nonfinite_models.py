"""A model that gives NaN on some inputs in every path (fp64 included), importable by ``module:function`` so a
bundle can be built of it and a fresh process can replay it: the walk's 2-layer MLP whose output is scaled by the
square root of the input's row sum, NaN for a row whose sum is negative."""

from __future__ import annotations

import torch
from torch import nn

WIDTH = 8


class SqrtRowScale(nn.Module):
    """Linear → ReLU → Linear, times sqrt(row sum of the input)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(WIDTH, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The model."""
        h = torch.relu(self.fc1(x))
        scale = torch.sqrt(x.sum(dim=-1, keepdim=True))  # NaN where the row sum is negative
        out: torch.Tensor = self.fc2(h) * scale
        return out


def sqrt_row_scale() -> SqrtRowScale:
    """The factory a bundle names as ``tests.replay.nonfinite_models:sqrt_row_scale``."""
    return SqrtRowScale().eval()


def inputs(shape: tuple[int, ...]) -> tuple[torch.Tensor]:
    """Inputs that qualify: every row sum positive."""
    return (torch.rand(shape, generator=torch.Generator().manual_seed(1)) + 0.1,)


def one_negative_row(shape: tuple[int, ...] = (4, WIDTH)) -> torch.Tensor:
    """The request that NaNs: the inputs with row 0 set to -5 (its sum negative)."""
    x = inputs(shape)[0].clone()
    x[0] = -5.0
    return x
