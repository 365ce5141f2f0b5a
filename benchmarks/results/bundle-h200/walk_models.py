"""Models for the H200 walk of bundles, kernel evidence and replay (session 31): importable as module:function."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from inferensics import kernels

HIDDEN, INTER = 1024, 2048


class RegistryMLP(nn.Module):
    """rms_norm -> linear to 2 x INTER -> silu_mul -> linear back, bf16: two registry ops, eager and compiled."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.norm = nn.Parameter(torch.ones(HIDDEN) + 0.1 * torch.randn(HIDDEN))
        self.up = nn.Linear(HIDDEN, 2 * INTER, bias=False)
        self.down = nn.Linear(INTER, HIDDEN, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = kernels.rms_norm(x, self.norm, 1e-6)
        return self.down(kernels.silu_mul(self.up(h)))


def registry_mlp() -> nn.Module:
    return RegistryMLP().to(torch.bfloat16)


def mlp_inputs(shape: tuple[int, ...]) -> tuple[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return (torch.randn(*shape, HIDDEN, generator=g).to(torch.bfloat16),)


class GeluMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(256, 512)
        self.out = nn.Linear(512, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(F.gelu(self.fc(x)))


def gelu_mlp() -> nn.Module:
    return GeluMLP()


def gelu_inputs(shape: tuple[int, ...]) -> tuple[torch.Tensor]:
    return (torch.randn(*shape, 256, generator=torch.Generator().manual_seed(2)),)


def fast_gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """A wrong 'fast GELU' decomposition (x * sigmoid(x), not 1.702 x): the build's accuracy check must refuse it."""
    return x * torch.sigmoid(x)
