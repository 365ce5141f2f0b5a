"""Declarative requirements of a provider and the call context they are checked against."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from inferensics.kernels import _torch_adapter

INTERPRETER_ENV = "INFERENSICS_KERNELS_INTERPRET"
"""Set to ``1`` (with ``TRITON_INTERPRET=1``) to let Triton providers serve CPU tensors through Triton's
interpreter: the differential suite does, so CI runs the kernels; serving processes never should."""

Platform = Literal["cuda", "cpu", "interpreter"]
AccuracyMode = Literal["exact", "tolerant", "batch_invariant"]
CompiledMode = Literal["any", "eager", "compiled"]
ShapeCheck = Callable[[Sequence[Any]], str | None]
"""Returns why the arguments are not supported, or ``None`` when they are."""

PLATFORMS: tuple[Platform, ...] = ("cuda", "cpu", "interpreter")
ACCURACY_MODES: tuple[AccuracyMode, ...] = ("exact", "tolerant", "batch_invariant")


def interpreter_enabled() -> bool:
    """Whether Triton providers may serve CPU tensors through Triton's interpreter (both switches on)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") and os.environ.get(INTERPRETER_ENV) == "1"


@dataclass(frozen=True, slots=True)
class CallContext:
    """Where a call runs: platform, compute capability and whether a compiler is tracing it."""

    platform: Platform
    capability: tuple[int, int] | None
    compiling: bool
    device: str

    @staticmethod
    def of(args: Sequence[Any]) -> CallContext:
        """The context of a call with ``args`` (the first tensor decides the device)."""
        tensor = next((a for a in args if isinstance(a, torch.Tensor)), None)
        compiling = _torch_adapter.tracing(args)
        if tensor is None or tensor.device.type != "cuda":
            interp = interpreter_enabled()
            device = tensor.device.type if tensor is not None else "cpu"
            return CallContext("interpreter" if interp and device == "cpu" else "cpu", None, compiling, device)
        index = tensor.device.index if tensor.device.index is not None else torch.cuda.current_device()
        cap = torch.cuda.get_device_capability(index) if torch.cuda.is_available() else None
        return CallContext("cuda", cap, compiling, f"cuda:{index}")

    @staticmethod
    def here() -> CallContext:
        """The context of an eager call on this host's default device (the current CUDA device when there is
        one, else the CPU, or Triton's interpreter when enabled)."""
        if torch.cuda.is_available():
            index = torch.cuda.current_device()
            return CallContext("cuda", torch.cuda.get_device_capability(index), False, f"cuda:{index}")
        return CallContext.of(())


@dataclass(frozen=True, slots=True)
class Requirements:
    """What a provider needs of the call, checked before it runs.

    Attributes:
        platforms: Platforms it runs on; ``interpreter`` is a CPU tensor with ``TRITON_INTERPRET=1`` and
            ``INFERENSICS_KERNELS_INTERPRET=1`` (Triton kernels on NumPy); ``cpu`` also accepts it.
        min_capability: Least CUDA compute capability, e.g. ``(8, 0)``.
        dtypes: Accepted dtypes of the tensor arguments (all of them); ``None`` accepts any.
        compiled: ``eager`` (never inside a compiled graph), ``compiled`` (only there) or ``any``.
        accuracy: ``exact`` (bit-identical to the reference), ``tolerant`` (within the op's dtype
            tolerance) or ``batch_invariant`` (tolerant, and a row's result does not depend on the batch).
        checks: Checks of the call's arguments (all of them, scalars included), each returning a reason or
            ``None``. A decision is held per what a check may read: each tensor's dtype, sizes, strides, device and
            pointer alignment modulo 16 bytes (:data:`~inferensics.kernels.op.ALIGNMENT`), and the other
            arguments' values (an ``eps`` or ``scale`` a kernel was built for); a check that reads anything else
            (a tensor's values) runs once per such key. Under ``torch.compile`` the tensors are fake (no data,
            perhaps symbolic sizes) and the graph holds the decision for every call it serves. A check that raises
            takes its provider out for that signature, counted as a failure, as the provider raising would.
        signature_checks: The checks read only what a signature holds (dtypes, sizes, strides, devices): an op
            whose providers all declare it holds eager decisions per signature alone, which spares its hot path
            reading pointers and the other arguments (our providers do; leave it ``False`` unless sure).
        notes: What the checks demand, in words (shown by ``inferensics kernels list``).
    """

    platforms: frozenset[Platform] = frozenset(PLATFORMS)
    min_capability: tuple[int, int] | None = None
    dtypes: frozenset[torch.dtype] | None = None
    compiled: CompiledMode = "any"
    accuracy: AccuracyMode = "tolerant"
    checks: tuple[ShapeCheck, ...] = field(default_factory=tuple)
    notes: tuple[str, ...] = field(default_factory=tuple)
    signature_checks: bool = False

    def platform_problem(self, ctx: CallContext) -> str | None:
        """Why no call in ``ctx`` can meet the platform and capability requirements, or ``None`` (what
        ``inferensics kernels list`` shows for this host, before any arguments are known)."""
        platform_ok = ctx.platform in self.platforms or (ctx.platform == "interpreter" and "cpu" in self.platforms)
        if not platform_ok:
            return f"platform {ctx.platform} not in {sorted(self.platforms)}"
        if ctx.platform == "interpreter" and "cpu" not in self.platforms and ctx.compiling:
            return "Triton's interpreter cannot run inside a compiled graph"
        too_old = ctx.capability is None or ctx.capability < (self.min_capability or (0, 0))
        if self.min_capability is not None and ctx.platform == "cuda" and too_old:
            return f"compute capability {ctx.capability} below {self.min_capability}"
        return None

    def supports(self, args: Sequence[Any], ctx: CallContext) -> tuple[bool, str]:
        """``(True, "")`` when a call with ``args`` in ``ctx`` meets every requirement, else ``(False, why)``."""
        problem = self.platform_problem(ctx)
        if problem is not None:
            return False, problem
        if self.compiled == "eager" and ctx.compiling:
            return False, "eager only, and a compiler is tracing this call"
        if self.compiled == "compiled" and not ctx.compiling:
            return False, "only inside a compiled graph"
        if self.dtypes is not None:
            for a in args:
                if isinstance(a, torch.Tensor) and a.is_floating_point() and a.dtype not in self.dtypes:
                    return False, f"dtype {str(a.dtype).removeprefix('torch.')} not supported"
        for check in self.checks:
            reason = check(args)
            if reason is not None:
                return False, reason
        return True, ""

    def describe(self) -> dict[str, Any]:
        """JSON-ready description (for ``kernels list`` and the registry state)."""
        return {
            "platforms": sorted(self.platforms),
            "min_capability": list(self.min_capability) if self.min_capability else None,
            "dtypes": sorted(str(d).removeprefix("torch.") for d in self.dtypes) if self.dtypes else None,
            "compiled": self.compiled,
            "accuracy": self.accuracy,
            "checks": list(self.notes),
        }
