"""Proving a provider on real tensors before a compile puts it into a graph.

Under ``torch.compile`` the dispatcher sees only fake tensors: a provider whose fake (meta) path works is traced
into the graph even when its real kernel raises, and then the serving call raises, outside the dispatcher's
reach. So before a compile commits to a provider for a signature it has never run for real in this process,
the op runs it once on real tensors built from the fake ones' metadata (same sizes, strides, dtype and
device; contents valid for the op: normal floats, and what the op's ``contents`` hook fills in, such as page
numbers inside the cache). A provider that raises there is quarantined like one that raises in eager. Once
per ``(signature, provider)`` per process, at compile time: the graph's calls never pass through here.

A probe that cannot be built (a data-dependent size without a value, no memory for a second copy of the
arguments) proves nothing and blames nobody: the provider is kept, as it was before probes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from inferensics.kernels import _torch_adapter

ContentsFn = Callable[[Sequence[Any]], None]
"""Fills, in place, the tensor arguments of a probe whose values a provider relies on (page numbers, lengths)
with valid ones; the rest keep the generic contents (normal floats, zero integers)."""

SEED = 0
"""Seed of the probe's values (its own generator: the process's random state is left alone)."""


class ProbeError(Exception):
    """Real arguments for a probe could not be made; the provider is neither proven nor blamed."""


def real_args(args: Sequence[Any], contents: ContentsFn | None = None) -> tuple[Any, ...]:
    """Real arguments shaped like ``args`` (fake tensors of a trace, symbolic scalars), on their devices.

    Call it outside the trace (:func:`inferensics.kernels._torch_adapter.outside_tracing`).

    Raises:
        ProbeError: A size has no value yet (data-dependent), or there is no memory for the copy.
    """
    out: list[Any] = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(_real_tensor(a))
        else:
            value = _torch_adapter.hint(a)
            if value is None:
                raise ProbeError(f"no value for {a}")
            out.append(value)
    if contents is not None:
        contents(out)
    return tuple(out)


def _real_tensor(t: torch.Tensor) -> torch.Tensor:
    size, stride = [_torch_adapter.hint(s) for s in t.shape], [_torch_adapter.hint(s) for s in t.stride()]
    offset = _torch_adapter.hint(t.storage_offset())
    if None in size or None in stride or offset is None:
        raise ProbeError("a size without a value (data-dependent)")
    # One flat buffer spanning every element the strides reach, then a view: overlapping (expanded) and
    # offset layouts come out exactly as the graph will hand them over.
    span = 1 + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) if all(size) else 0
    try:
        flat = torch.zeros(offset + span, dtype=t.dtype, device=t.device)
        if flat.is_floating_point() or flat.is_complex():
            g = torch.Generator(device=t.device).manual_seed(SEED)
            flat.normal_(generator=g)
    except torch.OutOfMemoryError as exc:
        raise ProbeError("no memory for a copy of the arguments") from exc
    return flat.as_strided(size, stride, offset)


def run(fn: Callable[..., Any], args: Sequence[Any], contents: ContentsFn | None = None) -> Exception | None:
    """Run ``fn`` once on real arguments shaped like the traced ``args``; what it raised, or ``None``.

    Raises:
        ProbeError: The arguments could not be made (nothing was run).
    """
    with _torch_adapter.outside_tracing():
        try:
            real = real_args(args, contents)
        except ProbeError:
            raise
        except Exception as exc:  # the op's contents hook, or a tensor this torch cannot make
            raise ProbeError(f"{type(exc).__name__}: {exc}") from exc
        try:
            fn(*real)
            device = next((a.device for a in real if isinstance(a, torch.Tensor)), None)
            if device is not None and device.type == "cuda":
                torch.cuda.synchronize(device)  # a kernel's fault surfaces here, not in a later serving call
        except torch.OutOfMemoryError as exc:  # the probe's own copy of the arguments may be what filled memory
            raise ProbeError("out of memory beside the probe's copy of the arguments") from exc
        except Exception as exc:
            return exc
    return None
