"""A faulty compiler customisation for the pack tests, importable by a fresh process by its path."""

from __future__ import annotations

import torch


def gelu_wrong(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """A faulty decomposition of ``aten.gelu.default`` (the erf argument off by 10 %)."""
    return 0.5 * x * (1 + torch.erf(x * 0.7071067811865476 * 1.1))
