"""The SiLU·mul model of :mod:`tests.bundle.kernel_models`, whose module registers a kernel provider of its own
(``mine``) at import, as a user's model package registers its vendor kernel: a bundle build must see it before it
checks kernel evidence that names it (walk 41 #7).

Imported only in child processes: the provider would stay in the test process's registry.
"""

from __future__ import annotations

from typing import Final

import torch
from torch.nn import functional

from inferensics import kernels
from inferensics.kernels import Provider, Requirements
from tests.bundle.kernel_models import inputs, silu_mlp

PROVIDER: Final = "mine"


def _mine(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    return functional.silu(x[..., :d]) * x[..., d:]


_op = kernels.registry().op("silu_mul")
if PROVIDER not in _op.providers:
    _op.register(Provider(PROVIDER, "vendor", _mine, Requirements(platforms=frozenset({"cpu"}))))

__all__ = ["PROVIDER", "inputs", "silu_mlp"]
