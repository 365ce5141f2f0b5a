"""Tiny models the bundle tests build (importable by ``module:function``, so a fresh process can too)."""

from __future__ import annotations

import torch
from torch import nn

WIDTH = 8


class TinyMLP(nn.Module):
    """Linear → GELU → Linear over the last dimension."""

    def __init__(self, width: int = WIDTH, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.fc1 = nn.Linear(width, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The model."""
        out: torch.Tensor = self.fc2(torch.nn.functional.gelu(self.fc1(x)))
        return out


def tiny_mlp(width: int = WIDTH, seed: int = 0) -> TinyMLP:
    """The factory the tests name as ``tests.bundle.models:tiny_mlp``."""
    return TinyMLP(width, seed)


def inputs(shape: tuple[int, ...]) -> tuple[torch.Tensor]:
    """Deterministic inputs for a ``(batch, WIDTH)`` shape."""
    return (torch.randn(shape, generator=torch.Generator().manual_seed(1)),)


def fast_gelu(x: torch.Tensor) -> torch.Tensor:
    """A custom decomposition for ``aten.gelu.default`` (tanh approximation)."""
    return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def tiny_argmax() -> nn.Module:
    """The tiny MLP's argmax over its outputs: a model that serves token ids, no floating-point output."""

    class Argmax(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mlp = TinyMLP()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            logits: torch.Tensor = self.mlp(x)
            return logits.argmax(-1)

    return Argmax()


def tiny_mlp_in_place() -> nn.Module:
    """The tiny MLP behind a step that scales its input in place (correct, and each call changes the input)."""

    class InPlace(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mlp = TinyMLP()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x.mul_(0.5)
            out: torch.Tensor = self.mlp(x)
            return out

    return InPlace()
