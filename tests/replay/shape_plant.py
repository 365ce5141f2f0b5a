"""A shape-specialisation fault for replays in a fresh process: importing the factory plants it.

Inductor's ``aten.sum`` lowering reduces only the first size-hint columns when the last size is symbolic (the
hint baked into the kernel): a ``--dynamic`` bundle built on width 8 is right at 8 and wrong at any other width
its guards let through. The factory installs the plant, as a host with the same broken compiler would have it,
so the build and the replay's fresh process compile with it; the test process never imports the factory.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

aten = torch.ops.aten


class Centre(nn.Module):
    """A row sum and the pointwise ops that consume it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = x.sum(-1, keepdim=True)  # FAULT: sum
        return torch.tanh((x - m) * 0.375) * 0.625 + x


def _sum_to_hint(x: Any, axis: Any = None, keepdims: bool = False, *, dtype: Any = None, original: Any) -> Any:
    from torch._inductor import lowering
    from torch._inductor.virtualized import V

    size = x.get_size()[-1]
    if not isinstance(size, int) and not getattr(size, "is_number", False):
        sizevars = V.graph.sizevars
        hint = getattr(sizevars, "optimization_hint", None) or sizevars.size_hint  # type: ignore[attr-defined]  # 2.11
        x = lowering.lowerings[aten.slice.Tensor](x, -1, 0, hint(size))
    return original(x, axis, keepdims, dtype=dtype)


def _plant() -> None:
    from torch._inductor import lowering

    if getattr(lowering, "_replay_test_sum_to_hint", False):
        return
    original = lowering.lowerings[aten.sum.dim_IntList]
    lowering.lowerings[aten.sum.dim_IntList] = lambda *a, **k: _sum_to_hint(*a, original=original, **k)
    lowering._replay_test_sum_to_hint = True  # type: ignore[attr-defined]


def centre() -> Centre:
    """The factory a bundle names as ``tests.replay.shape_plant:centre`` (plants the fault)."""
    _plant()
    return Centre().eval()


def inputs(shape: tuple[int, ...]) -> tuple[torch.Tensor]:
    """Deterministic inputs of ``shape``."""
    return (torch.randn(shape, generator=torch.Generator().manual_seed(1)),)
