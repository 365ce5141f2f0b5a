"""A model whose forward breaks the graph in the user's code (importable by ``module:function``)."""

from __future__ import annotations

import torch
from torch import nn


class ItemBranch(nn.Module):
    """Linear, then a branch on a tensor's ``.item()``: Dynamo breaks the graph there (``GB0124``)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The model."""
        y: torch.Tensor = self.fc(x)
        if y.abs().mean().item() > 100.0:  # BREAK: the line the report must name
            y = y / 2
        return torch.relu(y)


def item_branch() -> ItemBranch:
    """The factory the tests name as ``tests.bundle.break_models:item_branch``."""
    return ItemBranch()


def break_line() -> int:
    """The line of the ``.item()`` branch in this file."""
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if "# BREAK" in line)


class ItemScale(nn.Module):
    """Linear, then divided by a number read with ``.item()``: Dynamo breaks the graph there, and the graph after
    the break receives the number as a Python float, pinned to its value (another value recompiles)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The model."""
        y: torch.Tensor = self.fc(x)
        scale = x.abs().max().item()  # VALUE: the line the report must name
        return y / scale


def item_scale() -> ItemScale:
    """The factory the tests name as ``tests.bundle.break_models:item_scale``."""
    return ItemScale()
