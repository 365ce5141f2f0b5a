"""Pieces the op modules share: shape buckets, layout checks and the Inductor provider."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from inferensics.kernels import _torch_adapter
from inferensics.kernels.provider import Provider
from inferensics.kernels.requirements import Platform, Requirements

FLOATS = frozenset({torch.float16, torch.bfloat16, torch.float32})
"""Dtypes our Triton kernels accept."""
TRITON_PLATFORMS: frozenset[Platform] = frozenset({"cuda", "interpreter"})
"""Where our Triton kernels run: a CUDA device, or CPU tensors under ``TRITON_INTERPRET=1``."""


def pow2_bucket(n: Any) -> str:
    """The smallest power of two at or above ``n`` (0 for 0); ``*`` for a symbolic size (dynamic shapes under
    ``torch.compile``: comparing it would add a guard and specialise the dimension)."""
    if not isinstance(n, int):
        return "*"
    return "0" if n <= 0 else str(1 << (n - 1).bit_length())


def exact_bucket(n: Any) -> str:
    """``n`` as a bucket writes an exact size; ``*`` for a symbolic one (as :func:`pow2_bucket`)."""
    return str(n) if isinstance(n, int) else "*"


def rows_bucket(args: Sequence[Any]) -> str:
    """``dtype/n<last dim>/t<rows rounded up to a power of two>`` of the first argument."""
    x = args[0]
    n = x.shape[-1] if x.dim() else 1
    # The leading sizes, not numel // n: an empty last dimension leaves the rows there (``[4, 0]`` is t4).
    rows = math.prod(x.shape[:-1]) if isinstance(n, int) else x.numel()
    return f"{str(x.dtype).removeprefix('torch.')}/n{exact_bucket(n)}/t{pow2_bucket(rows)}"


def triton_available() -> bool:
    """Whether Triton imports here (the Triton providers are registered only then)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def inductor_provider(reference: Callable[..., Any], *, accuracy: Any = "tolerant") -> Provider:
    """The op left to the compiler: in a compiled graph the reference is traced in and Inductor generates
    its kernel; called eagerly (on CUDA) the reference is compiled on its own, one graph per shape."""
    compiled: list[Callable[..., Any]] = []

    def run(*args: Any) -> Any:
        if not compiled:
            compiled.append(_torch_adapter.compile_reference(reference))
        return compiled[0](*args)

    return Provider(
        "inductor",
        "inductor",
        run,
        Requirements(platforms=frozenset({"cuda"}), accuracy=accuracy, notes=("eager calls compile per shape",)),
        "the reference compiled by Inductor (in a compiled graph: the reference traced in)",
    )


def same_device(args: Sequence[Any]) -> str | None:
    """Reason when the tensor arguments are not all on one device."""
    devices = {a.device for a in args if isinstance(a, torch.Tensor)}
    return None if len(devices) <= 1 else f"tensors on several devices {sorted(map(str, devices))}"


def triton_fn(module: str, name: str, *, planned: bool = True) -> Callable[..., Any]:
    """A provider function that imports ``inferensics.kernels._triton.<module>`` on first call.

    Importing late keeps Triton out of processes that never run a Triton provider, and lets
    ``TRITON_INTERPRET=1`` set by a test before the first call take effect (Triton reads it when a kernel is
    defined).

    ``name`` is a ``torch.library`` op (so a compiled graph holds it as one node and Inductor launches its kernel).
    An eager call that nothing observes (:func:`_torch_adapter.direct_call`: no compile, mode, profiler or autograd)
    runs the op's Python body (the module's ``DIRECT[name]``) instead, launching its kernels as the op's own eager
    call would (:func:`_torch_adapter.run_unwrapped`): the op's dispatch, its autograd and aliasing wrappers and
    Dynamo's disable frame cost a decode-sized call more than the kernel's own launch. On a CUDA device the body is
    replayed from a launch plan per argument signature where it can be (``_triton/launches.py``: its allocations, then
    each kernel through Inductor's static launcher, without Triton's launch path or the body's own Python), unless
    ``planned`` is false: a body no plan could replay then pays for no signature.
    """
    resolved: list[tuple[Callable[..., Any], Callable[..., Any]]] = []
    direct, untracked, unwrapped = _torch_adapter.direct_call, _torch_adapter.untracked, _torch_adapter.run_unwrapped

    def resolve() -> tuple[Callable[..., Any], Callable[..., Any]]:
        if not resolved:
            loaded = importlib.import_module(f"inferensics.kernels._triton.{module}")
            launches = importlib.import_module("inferensics.kernels._triton.launches")
            body = loaded.DIRECT[name]
            resolved.append((getattr(loaded, name), launches.EagerPlans(body, name) if planned else body))
        return resolved[0]

    def run(*args: Any) -> Any:
        op, body = resolved[0] if resolved else resolve()
        return unwrapped(body, args) if direct(args) else op(*args)

    def run_plain_eager(*args: Any) -> Any:
        # The eager hot path found the call plain eager and not compiling just before: autograd is left to ask.
        op, body = resolved[0] if resolved else resolve()
        return unwrapped(body, args) if untracked(args) else op(*args)

    run.__name__ = run.__qualname__ = name
    run.plain_eager_entry = run_plain_eager  # type: ignore[attr-defined]  # provider.plain_eager_entry reads it
    # The op itself: replay names its function, the dispatch benchmark calls it as the direct path's peer.
    run.entry = lambda: resolve()[0]  # type: ignore[attr-defined]
    return run
