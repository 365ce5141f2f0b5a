"""A cheap output fingerprint for canary comparison, computed without a device synchronization.

On the serving thread only small reductions are launched (NaN/inf counts, finite sum, sum of squares,
abs-max, argmax ids) and copied to pinned host memory with ``non_blocking=True`` behind a CUDA event; the
background thread waits on that event and reads the numbers. On CPU the same reductions run inline.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The fingerprint fields of a request record."""

    argmax_digest: str
    argmax_head: tuple[int, ...]
    nan: int
    inf: int
    mean: float
    std: float
    absmax: float


class PendingFingerprint:
    """Reductions launched on the device; :meth:`result` reads them (on the background thread)."""

    __slots__ = ("_argmax", "_event", "_head", "_stats")

    def __init__(self, stats: torch.Tensor, argmax: torch.Tensor | None, event: Any, head: int) -> None:
        self._stats = stats
        self._argmax = argmax
        self._event = event
        self._head = head

    def result(self) -> Fingerprint:
        """Wait for the copies (CUDA event, not a device sync) and compute the fields."""
        if self._event is not None:
            self._event.synchronize()
        nan, inf, n, s, ss, amax = (float(v) for v in self._stats.tolist())
        mean = s / n if n else 0.0
        var = max(ss / n - mean * mean, 0.0) if n else 0.0
        digest, head = "", tuple[int, ...]()
        if self._argmax is not None:
            ids = self._argmax.to(torch.int64)
            digest = hashlib.sha256(ids.numpy().tobytes()).hexdigest()
            head = tuple(int(v) for v in ids[: self._head].tolist())
        return Fingerprint(digest, head, int(nan), int(inf), _finite(mean), _finite(math.sqrt(var)), _finite(amax))


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 0.0


def start_fingerprint(output: torch.Tensor, head: int = 16) -> PendingFingerprint:
    """Launch the fingerprint reductions for ``output`` (a logits-like tensor; last dim = classes)."""
    with torch.no_grad():
        x = output.detach()
        xf = x.float()
        finite = torch.isfinite(xf)
        z = torch.where(finite, xf, torch.zeros((), dtype=xf.dtype, device=xf.device))
        stats = torch.stack(
            [
                torch.isnan(xf).sum().to(torch.float64),
                torch.isinf(xf).sum().to(torch.float64),
                finite.sum().to(torch.float64),
                z.sum(dtype=torch.float64),
                (z.double() * z.double()).sum(),
                z.abs().max().to(torch.float64) if z.numel() else torch.zeros((), dtype=torch.float64, device=z.device),
            ]
        )
        argmax = x.argmax(dim=-1).flatten() if x.dim() >= 1 and x.numel() and x.shape[-1] > 1 else None
        if x.device.type == "cuda":
            stats_host = torch.empty(stats.shape, dtype=stats.dtype, pin_memory=True)
            stats_host.copy_(stats, non_blocking=True)
            argmax_host = None
            if argmax is not None:
                argmax_host = torch.empty(argmax.shape, dtype=argmax.dtype, pin_memory=True)
                argmax_host.copy_(argmax, non_blocking=True)
            event = torch.cuda.Event()  # type: ignore[no-untyped-call]
            event.record()
            return PendingFingerprint(stats_host, argmax_host, event, head)
        return PendingFingerprint(stats, argmax, None, head)


def digest_inputs(inputs: dict[str, torch.Tensor]) -> str:
    """sha256 over the named inputs' names, dtypes, shapes and bytes (host copies; background thread)."""
    h = hashlib.sha256()
    for name in sorted(inputs):
        t = inputs[name].detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()
