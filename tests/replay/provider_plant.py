"""A kernel-registry provider as a bundle customisation: importing this module registers it (not chosen by
default); the bundle's recorded registry policy puts it first. Importable by a fresh process by its path."""

from __future__ import annotations

import torch
from torch import nn

from inferensics import kernels
from inferensics.kernels import Provider, Requirements

PROVIDER = "unbiased_rms"
WIDTH = 16


def rms_norm_unbiased(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """An RMSNorm provider that divides the sum of squares by ``n - 1``."""
    xf = x.float()
    ms = xf.pow(2).sum(-1, keepdim=True) / (x.shape[-1] - 1)
    return (xf * torch.rsqrt(ms + eps)).type_as(x) * weight


_OP = kernels.registry().op("rms_norm")
if PROVIDER not in _OP.providers:
    _OP.register(
        Provider(PROVIDER, "vendor", rms_norm_unbiased, Requirements(dtypes=frozenset({torch.float32})), "planted"),
        enabled=False,
    )


class NormedProjection(nn.Module):
    """A projection normalised through the registry's ``rms_norm``."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.lin = nn.Linear(WIDTH, WIDTH)
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(WIDTH))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        return kernels.rms_norm(h, self.weight, 1e-6) * torch.sigmoid(h)  # the registry call


def normed(seed: int = 0) -> NormedProjection:
    """The model factory a bundle records (``tests.replay.provider_plant:normed``)."""
    return NormedProjection(seed).eval()


def inputs(shape: tuple[int, ...]) -> tuple[torch.Tensor]:
    """Deterministic inputs for a ``(batch, WIDTH)`` shape."""
    return (torch.randn(shape, generator=torch.Generator().manual_seed(1)),)
