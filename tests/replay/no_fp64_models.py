"""A model whose fp64 reference cannot run: a custom op with kernels for float32 and bfloat16 only (as a vendor
kernel has), between two linear layers. Eager in float32 runs it; the float64 copy replay makes raises at the op."""

from __future__ import annotations

import torch
from torch import nn

WIDTH = 8
SERVED_DTYPES = (torch.float32, torch.bfloat16)


@torch.library.custom_op("replaytest::gelu_no_fp64", mutates_args=())
def gelu_no_fp64(x: torch.Tensor) -> torch.Tensor:
    """tanh-approximated GELU, refusing float64 as a kernel built for the serving dtypes does."""
    if x.dtype not in SERVED_DTYPES:
        raise RuntimeError(f'"gelu_no_fp64" not implemented for {x.dtype}')
    return torch.nn.functional.gelu(x, approximate="tanh")


@gelu_no_fp64.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class GeluNoFp64(nn.Module):
    """Linear → the custom GELU → Linear, times sqrt(row sum of |x| + 1)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(WIDTH, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The model."""
        h = torch.ops.replaytest.gelu_no_fp64(self.fc1(x))  # no float64 kernel
        scale = torch.sqrt(x.abs().sum(dim=-1, keepdim=True) + 1.0)
        out: torch.Tensor = self.fc2(h) * scale
        return out


def gelu_no_fp64_model() -> GeluNoFp64:
    """The model, in eval mode."""
    return GeluNoFp64().eval()


def inputs(shape: tuple[int, ...] = (4, WIDTH)) -> tuple[torch.Tensor]:
    """A request of finite, ordinary values."""
    return (torch.randn(shape, generator=torch.Generator().manual_seed(1)),)
