"""Rounding to the output dtype, exact in Triton's interpreter too.

On a GPU, ``x.to(tl.bfloat16)`` rounds to nearest even. Triton's interpreter (``TRITON_INTERPRET=1``, the
way CI runs these kernels) converts float32 to bfloat16 by truncation, so kernels that must match PyTorch
bit for bit round by hand there: the ``EMULATE_RNE`` constexpr is true only in the interpreter, and the GPU
path keeps the hardware conversion.
"""

# Triton's convention: compile-time constants are UPPER_CASE parameters, and kernels take many arguments;
# kernel parameters stay unannotated (Triton resolves annotations itself, and only constexpr ones may be).
# mypy: disable-error-code="no-untyped-def,untyped-decorator,misc"
# ruff: noqa: N803

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

FIXED_CONFIG_ENV = "INFERENSICS_KERNELS_FIXED_CONFIG"
"""Set to ``1`` to launch every kernel with its fixed default configuration instead of autotuning (memcheck
runs, where each tuning launch costs seconds under the sanitizer)."""


def interpreting() -> bool:
    """Whether our Triton kernels run in the interpreter: Triton decided when it defined them (``TRITON_INTERPRET=1``
    when the kernel modules were imported), so this is read once, from a kernel, not from the environment per call."""
    return _INTERPRETED


def fixed_config() -> bool:
    """Whether to skip the autotuner: in the interpreter, or when :data:`FIXED_CONFIG_ENV` asks."""
    return interpreting() or os.environ.get(FIXED_CONFIG_ENV) == "1"


@functools.cache
def _capability(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


def is_sm90(device: torch.device) -> bool:
    """Whether ``device`` is a compute-capability-9.0 GPU (H100/H200), where the measured launch tables apply;
    never in the interpreter."""
    if device.type != "cuda" or interpreting():
        return False
    return _capability(device.index if device.index is not None else torch.cuda.current_device()) == (9, 0)


@triton.jit
def _bf16_rne(x):
    # Round-to-nearest-even of float32 to bfloat16 on the bit pattern; NaN stays a quiet NaN.
    bits = x.to(tl.uint32, bitcast=True)
    bias = ((bits >> 16) & 1) + 0x7FFF
    rounded = ((bits + bias) >> 16).to(tl.uint16)
    out = rounded.to(tl.bfloat16, bitcast=True)
    return tl.where(x != x, x.to(tl.bfloat16), out)  # noqa: PLR0124 (x != x: NaN)


_INTERPRETED: bool = type(_bf16_rne).__name__ == "InterpretedFunction"
"""Whether Triton made this module's kernels interpreted functions (what :func:`interpreting` answers)."""


@triton.jit
def round_to(x, dtype: tl.constexpr, EMULATE_RNE: tl.constexpr):
    """Convert float32 ``x`` to ``dtype`` rounding to nearest even."""
    if EMULATE_RNE and dtype == tl.bfloat16:
        return _bf16_rne(x)
    return x.to(dtype)


@triton.jit
def exp_f32(x, ACCURATE: tl.constexpr):
    """``exp`` of float32 ``x``: libdevice's ``expf`` on a GPU (what PyTorch's CUDA kernels call) when
    ``ACCURATE``, the fast hardware approximation otherwise; the interpreter always uses NumPy's."""
    if ACCURATE:
        return tl.extra.cuda.libdevice.exp(x)
    return tl.exp(x)
