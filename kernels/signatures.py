"""A call's argument signature: how decisions, evidence and compile records name the arguments an op was called with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from inferensics.kernels import _torch_adapter


def signature(args: Sequence[Any]) -> str:
    """A call's argument signature: dtype, shape, strides (when not contiguous) and device of each tensor.

    Symbolic sizes (dynamic shapes under ``torch.compile``) are written as their symbols and never compared,
    so building a signature adds no guard and specialises no dimension; a size a guard has fixed is written as
    the number it is, as in a trace that never saw it symbolic.
    """
    parts = []
    for a in args:
        if isinstance(a, torch.Tensor):
            dt = str(a.dtype).removeprefix("torch.")
            shape = ",".join(map(str, a.shape))
            concrete = all(_torch_adapter.fixed(d) for d in (*a.shape, *a.stride()))
            layout = "" if concrete and a.is_contiguous() else "/s" + ",".join(map(str, a.stride()))
            parts.append(f"{dt}[{shape}]{layout}@{a.device.type}")
    return " ".join(parts)
