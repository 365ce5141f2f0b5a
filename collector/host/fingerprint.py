"""A cheap output fingerprint for canary comparison, computed without a device synchronization.

On the serving thread only small reductions are launched (NaN/inf counts, finite sum, sum of squares,
abs-max, argmax ids) and copied to pinned host memory with ``non_blocking=True`` behind a CUDA event; the
background thread waits on that event and reads the numbers. On CPU the same reductions run inline.
"""

from __future__ import annotations

import hashlib
import math
import threading
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


class _PinnedPool:
    """Reusable pinned host buffers, so a request never pays for a pinned allocation.

    A buffer is taken on the serving thread and given back by the background thread after it has read
    it; when none is free a new one is allocated (at most ``limit`` per shape, beyond which the
    fingerprint falls back to a pageable copy).
    """

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit
        self._free: dict[tuple[int, torch.dtype], list[torch.Tensor]] = {}
        self._count: dict[tuple[int, torch.dtype], int] = {}
        self._lock = threading.Lock()

    def take(self, numel: int, dtype: torch.dtype) -> torch.Tensor | None:
        key = (numel, dtype)
        with self._lock:
            free = self._free.get(key)
            if free:
                return free.pop()
            if self._count.get(key, 0) >= self.limit:
                return None
            self._count[key] = self._count.get(key, 0) + 1
        return torch.empty(numel, dtype=dtype, pin_memory=True)

    def give(self, buf: torch.Tensor) -> None:
        with self._lock:
            self._free.setdefault((buf.numel(), buf.dtype), []).append(buf)


_POOL = _PinnedPool()


def _to_host(t: torch.Tensor) -> tuple[torch.Tensor, bool]:
    flat = t.reshape(-1)
    buf = _POOL.take(flat.numel(), flat.dtype)
    if buf is None:
        return flat.to("cpu", non_blocking=False), False
    buf.copy_(flat, non_blocking=True)
    return buf, True


class PendingFingerprint:
    """Reductions launched on the device; :meth:`result` reads them (on the background thread)."""

    __slots__ = ("_argmax", "_event", "_head", "_pooled", "_stats")

    def __init__(
        self,
        stats: torch.Tensor,
        argmax: torch.Tensor | None,
        event: Any,
        head: int,
        pooled: tuple[torch.Tensor, ...] = (),
    ) -> None:
        self._stats = stats
        self._argmax = argmax
        self._event = event
        self._head = head
        self._pooled = pooled

    def result(self) -> Fingerprint:
        """Wait for the copies (CUDA event, not a device sync) and compute the fields."""
        if self._event is not None:
            self._event.synchronize()
        try:
            return self._compute()
        finally:
            for buf in self._pooled:
                _POOL.give(buf)
            self._pooled = ()

    def _compute(self) -> Fingerprint:
        nan, inf, n, s, ss, amax = (float(v) for v in self._stats.tolist())
        mean = s / n if n else 0.0
        var = max(ss / n - mean * mean, 0.0) if n else 0.0
        digest, head = "", tuple[int, ...]()
        if self._argmax is not None:
            ids = self._argmax.to(torch.int64).clone()
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
            pooled: list[torch.Tensor] = []
            stats_host, ok = _to_host(stats)
            if ok:
                pooled.append(stats_host)
            argmax_host = None
            if argmax is not None:
                argmax_host, ok = _to_host(argmax)
                if ok:
                    pooled.append(argmax_host)
            event = torch.cuda.Event()  # type: ignore[no-untyped-call]
            event.record()
            return PendingFingerprint(stats_host, argmax_host, event, head, tuple(pooled))
        return PendingFingerprint(stats, argmax, None, head)


def digest_inputs(inputs: dict[str, torch.Tensor]) -> str:
    """sha256 over the named inputs' names, dtypes, shapes and bytes (host copies; background thread)."""
    h = hashlib.sha256()
    for name in sorted(inputs):
        t = inputs[name].detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()
