"""A cheap output fingerprint for canary comparison, computed without a device synchronization.

The output is seen as rows over its last dimension (``x.reshape(-1, x.shape[-1])``, logits: one row per
token). For every row the serving thread produces six numbers in one small float64 buffer: NaN count,
±inf count, sum and sum of squares of the finite values, abs-max of the finite values and the row's
argmax (first index of the largest value; a NaN counts as the largest, as in ``torch.argmax``). The
background thread sums the rows into the request's fingerprint.

On a CUDA device the six numbers come from one fused Triton kernel (one read of the output, one launch)
that writes them straight into a pooled pinned host buffer (or, where the device cannot write host
memory, into a device buffer copied with ``non_blocking=True``), behind one CUDA event that the background
thread polls. Measured on an H200 (8x32000 bf16 logits): about 47 us of serving-thread time per
``set_output``, against about 450 us for the previous twelve-op version. Until the kernel for a dtype
is compiled and checked (in a background thread, on first sight of that dtype) and for dtypes the
kernel does not take, the same numbers come from torch ops
(:func:`row_stats_torch`, the reference semantics), which on CPU run inline.
"""

from __future__ import annotations

import hashlib
import math
import threading
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import torch

STATS: Final = 6
"""Columns of the per-row buffer: nan, inf, finite sum, finite sum of squares, finite abs-max, argmax."""
BLOCK: Final = 1024
"""Elements per Triton loop step (one program per row)."""
_SMALL: Final = 64
TRITON_DTYPES: Final = (torch.float16, torch.bfloat16, torch.float32)
"""Dtypes the fused kernel reads; others use the torch ops (float64 would lose argmax ties in float32)."""


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
    it; when none is free a new one is allocated (at most ``limit`` per shape are kept; beyond that a
    buffer is used once and left to torch's caching host allocator, still without a synchronization).
    """

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit
        self._free: dict[tuple[int, torch.dtype], list[torch.Tensor]] = {}
        self._count: dict[tuple[int, torch.dtype], int] = {}
        self._lock = threading.Lock()

    def take(self, numel: int, dtype: torch.dtype) -> tuple[torch.Tensor, bool]:
        """A pinned buffer and whether it belongs to the pool (give it back after reading)."""
        key = (numel, dtype)
        with self._lock:
            free = self._free.get(key)
            if free:
                return free.pop(), True
            pooled = self._count.get(key, 0) < self.limit
            if pooled:
                self._count[key] = self._count.get(key, 0) + 1
        return torch.empty(numel, dtype=dtype, pin_memory=True), pooled

    def give(self, buf: torch.Tensor) -> None:
        with self._lock:
            self._free.setdefault((buf.numel(), buf.dtype), []).append(buf)


_POOL = _PinnedPool()


class PendingFingerprint:
    """Per-row numbers launched on the device; :meth:`result` reads them (on the background thread)."""

    __slots__ = ("_argmax", "_event", "_head", "_numel", "_pooled", "_rows")

    def __init__(
        self, rows: torch.Tensor, numel: int, argmax: bool, *, event: Any, head: int, pooled: bool = False
    ) -> None:
        self._rows = rows
        self._numel = numel
        self._argmax = argmax
        self._event = event
        self._head = head
        self._pooled = pooled

    def ready(self) -> bool:
        """Whether :meth:`result` would not wait (the CUDA event has completed; always on CPU)."""
        return self._event is None or bool(self._event.query())

    def result(self) -> Fingerprint:
        """Wait for the copy (CUDA event, not a device sync) and compute the fields."""
        # query() first: synchronize() hands the GIL to the serving thread and back, a thread switch that
        # costs the serving thread more than the wait itself when the event has long completed.
        if self._event is not None and not self._event.query():
            self._event.synchronize()
        try:
            return finish(self._rows.numpy().reshape(-1, STATS), self._numel, self._argmax, self._head)
        finally:
            if self._pooled:
                _POOL.give(self._rows)
                self._pooled = False


def finish(rows: np.ndarray[Any, Any], numel: int, argmax: bool, head: int) -> Fingerprint:
    """Fold per-row numbers (``[rows, 6]`` float64 over ``numel`` output values) into a fingerprint."""
    if rows.shape[0] <= _SMALL:
        # A decode step has a handful of rows: plain Python beats six numpy reductions.
        cols = list(zip(*rows.tolist(), strict=True)) or [()] * STATS
        nan, inf, s, ss = int(sum(cols[0])), int(sum(cols[1])), math.fsum(cols[2]), math.fsum(cols[3])
        amax = max(cols[4], default=0.0)
    else:
        total = rows.sum(axis=0)
        nan, inf, s, ss = int(total[0]), int(total[1]), float(total[2]), float(total[3])
        amax = float(rows[:, 4].max())
    n = numel - nan - inf
    mean = s / n if n else 0.0
    var = max(ss / n - mean * mean, 0.0) if n else 0.0
    digest, ids_head = "", tuple[int, ...]()
    if argmax:
        ids = rows[:, 5].astype(np.int64)
        digest = hashlib.sha256(ids.tobytes()).hexdigest()
        ids_head = tuple(ids[:head].tolist())
    return Fingerprint(digest, ids_head, nan, inf, _finite(mean), _finite(math.sqrt(var)), _finite(amax))


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 0.0


def _rows_view(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """``x`` as ``[rows, last dim]`` and whether an argmax over the last dim is defined (as before)."""
    argmax = x.dim() >= 1 and x.numel() > 0 and x.shape[-1] > 1
    if x.dim() == 0:
        return x.reshape(1, 1), False
    return x.reshape(-1, x.shape[-1]) if x.shape[-1] else x.reshape(-1, 1), argmax


def row_stats_torch(x2: torch.Tensor) -> torch.Tensor:
    """The reference per-row numbers with torch ops: ``[rows, 6]`` float64 on ``x2``'s device."""
    xf = x2.float()
    isnan = torch.isnan(xf)
    isinf = torch.isinf(xf)
    z = torch.where(isnan | isinf, torch.zeros((), dtype=xf.dtype, device=xf.device), xf).double()
    rows = xf.shape[0]
    arg = (
        x2.argmax(dim=1).to(torch.float64)
        if x2.shape[1] > 0 and rows > 0
        else torch.zeros(rows, dtype=torch.float64, device=x2.device)
    )
    amax = z.abs().amax(dim=1) if x2.shape[1] > 0 else torch.zeros(rows, dtype=torch.float64, device=x2.device)
    return torch.stack(
        [isnan.sum(dim=1).double(), isinf.sum(dim=1).double(), z.sum(dim=1), (z * z).sum(dim=1), amax, arg], dim=1
    )


# --- fused Triton kernel (CUDA) ----------------------------------------------------------------------


def build_kernel() -> Any:
    """The fused kernel (imports Triton; decorated per call so ``TRITON_INTERPRET=1`` set by a test applies)."""
    from inferensics.collector.host.fingerprint_kernel import define_kernel

    return define_kernel()


def launch_kernel(
    kernel: Any, x2: torch.Tensor, *, out: torch.Tensor | None = None, warmup: bool = False
) -> torch.Tensor:
    """Run (or with ``warmup`` only compile) ``kernel`` over ``x2`` into ``out`` (``rows * 6`` float64,
    on the device or pinned host memory the device can write); returns ``out``."""
    if x2.shape[1] > 1 and x2.stride(1) != 1:
        x2 = x2.contiguous()
    if out is None:
        out = torch.empty((x2.shape[0], STATS), dtype=torch.float64, device=x2.device)
    if warmup:
        kernel.warmup(x2, out, x2.shape[1], x2.stride(0), block=BLOCK, grid=(x2.shape[0],))
    else:
        kernel[(x2.shape[0],)](x2, out, x2.shape[1], x2.stride(0), block=BLOCK)
    return out


def _probe_input(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 3 * BLOCK + 5, generator=g)
    x[1, 17], x[2, 5], x[2, 9], x[3, 40] = float("nan"), float("inf"), float("-inf"), 1e4
    return x.to(dtype).to(device)


class _KernelCache:
    """Compiles and checks the kernel once per dtype in a background thread.

    ``get`` answers ``None`` (use the torch ops) until the kernel for that dtype is compiled and has
    matched the torch ops on a probe tensor with NaN, ±inf and several blocks per row; ``zero_copy``
    says whether it also wrote correctly straight into pinned host memory, which saves the device buffer
    and the copy on the serving thread. The check runs on a private stream and waits on its own event, so
    it never synchronizes the serving streams.
    """

    def __init__(self) -> None:
        self.kernel: Any = None
        self.ready: set[torch.dtype] = set()
        self.zero_copy: set[torch.dtype] = set()
        self.started: set[torch.dtype] = set()
        self.failed = ""
        self._lock = threading.Lock()

    def get(self, x2: torch.Tensor) -> Any:
        dtype = x2.dtype
        if dtype in self.ready:
            return self.kernel
        if self.failed or dtype not in TRITON_DTYPES:
            return None
        with self._lock:
            if dtype in self.started:
                return None
            self.started.add(dtype)
        thread = threading.Thread(
            target=self._compile, args=(dtype, x2.device), name="inferensics-fp-compile", daemon=True
        )
        thread.start()
        return None

    def _compile(self, dtype: torch.dtype, device: torch.device) -> None:
        try:
            with torch.cuda.device(device), torch.no_grad():
                if self.kernel is None:
                    self.kernel = build_kernel()
                stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
                with torch.cuda.stream(stream):
                    x = _probe_input(dtype, device)
                    launch_kernel(self.kernel, x, warmup=True)
                    on_device = launch_kernel(self.kernel, x).to("cpu", non_blocking=True)
                    pinned = torch.full((x.shape[0] * STATS,), -1.0, dtype=torch.float64, pin_memory=True)
                    launch_kernel(self.kernel, x, out=pinned)
                    x_host = x.to("cpu", non_blocking=True)
                    done = torch.cuda.Event()  # type: ignore[no-untyped-call]
                    done.record(stream)
                done.synchronize()
            want = row_stats_torch(x_host)
            if not _same_rows(on_device, want):
                self.failed = f"fused kernel disagrees with the torch ops for {dtype}"
                return
            if _same_rows(pinned.view(-1, STATS), want):
                self.zero_copy.add(dtype)
            self.ready.add(dtype)
        except Exception as exc:  # no Triton, no compiler: the torch ops stay in use
            self.failed = f"{type(exc).__name__}: {exc}"


def _same_rows(got: torch.Tensor, want: torch.Tensor) -> bool:
    exact = torch.equal(got[:, [0, 1, 4, 5]], want[:, [0, 1, 4, 5]])
    return exact and bool(torch.allclose(got[:, 2:4], want[:, 2:4], rtol=1e-9, atol=1e-6))


KERNELS = _KernelCache()
"""The process's fused kernel, per dtype (``KERNELS.failed`` says why it is not used, if so)."""


def start_fingerprint(output: torch.Tensor, head: int = 16) -> PendingFingerprint:
    """Launch the fingerprint of ``output`` (a logits-like tensor; last dim = classes)."""
    with torch.no_grad():
        x2, argmax = _rows_view(output.detach())
        numel = x2.numel()
        if x2.device.type != "cuda":
            # Inline on CPU: handing a copy of the output to the background thread was cheaper for the
            # serving thread (about 15 us against 110 us here) but grew RSS by about 0.7 KB per request.
            return PendingFingerprint(row_stats_torch(x2), numel, argmax, event=None, head=head)
        kernel = KERNELS.get(x2) if numel and _kernel_fits(x2) else None
        host, pooled = _POOL.take(x2.shape[0] * STATS, torch.float64)
        if kernel is not None and x2.dtype in KERNELS.zero_copy:
            launch_kernel(kernel, x2, out=host)  # the kernel writes the pinned buffer itself
        else:
            rows = launch_kernel(kernel, x2) if kernel is not None else row_stats_torch(x2)
            host.copy_(rows.reshape(-1), non_blocking=True)
        event = torch.cuda.Event()  # type: ignore[no-untyped-call]
        event.record()
        return PendingFingerprint(host, numel, argmax, event=event, head=head, pooled=pooled)


def _kernel_fits(x2: torch.Tensor) -> bool:
    # The kernel is compiled for 16-byte aligned rows on the current device; anything else (a sliced
    # view, another device) takes the torch ops rather than a compile on the serving thread.
    return x2.data_ptr() % 16 == 0 and x2.device.index == torch.cuda.current_device() and x2.shape[1] < 2**31 - BLOCK


def fingerprint_now(output: torch.Tensor, head: int = 16) -> Fingerprint:
    """The fingerprint computed at once (tests and tools; synchronizes on CUDA)."""
    return start_fingerprint(output, head).result()


def digest_inputs(inputs: dict[str, torch.Tensor]) -> str:
    """sha256 over the named inputs' names, dtypes, shapes and bytes (host copies; background thread)."""
    h = hashlib.sha256()
    for name in sorted(inputs):
        t = inputs[name].detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()
