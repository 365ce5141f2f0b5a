"""A cheap output fingerprint for canary comparison, computed without a device synchronization.

The output is seen as rows over its last dimension (``x.reshape(-1, x.shape[-1])``, logits: one row per
token). For every row the serving thread produces six numbers in one small float64 buffer: NaN count,
±inf count, sum and sum of squares of the finite values, abs-max of the finite values and the row's
argmax (first index of the largest value; a NaN counts as the largest, as in ``torch.argmax``). The
background thread sums the rows into the request's fingerprint.

On a CUDA device the numbers come from one fused Triton kernel (one read of the output, one launch) whose
programs each read a span of a row (:func:`split`: about :data:`TARGET_PROGRAMS` programs in all, so that
eight rows of 32k logits are 256 programs, not eight; one program per row left all but eight SMs idle).
Each program writes :data:`PARTS` numbers, the six of its span plus the span's largest value, into a
device work buffer; the row's last program folds its spans into the row's six (a count per row says
which program is last) and writes them, so the host reads six numbers per row rather than seven per span
(pinned memory the device writes is slow to read: benchmarks/results/sdk-h200/README.md). They go
straight into a pooled pinned host buffer (or, where the device cannot write host memory, into a device
buffer copied with ``non_blocking=True``). The serving thread only launches: the
first output of a given shape, stride and dtype is planned once (row view, buffer size, work buffer,
launcher), and later ones go straight to the launch, through Inductor's static CUDA launcher where it
takes the kernel (one C++ call instead of Triton's Python launch path). No CUDA event is created per request: the
background thread records one event per stream and batch of requests after it has taken them off the
queue (stream order puts it behind their launches) and polls it. Until the kernel for a dtype is
compiled and checked (in a background thread, on first sight of that dtype) and for dtypes the kernel
does not take, the same numbers come from torch ops (:func:`row_stats_torch`, the reference semantics).
On CPU the serving thread only keeps a reference to the output; the background thread reads it
(:func:`cpu_fingerprint`). Which requests are fingerprinted at all (every one with a CUDA output, one in 32
with a CPU output by default) is :mod:`inferensics.collector.host.fingerprint_sampling`'s rule. Its cost on
the serving thread and on the device is measured by benchmarks/bench_sdk_overhead.py (the figures recorded
there).
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from array import array
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

import numpy as np
import torch

from inferensics.collector.host import torch_adapter

STATS: Final = 6
"""Columns of the per-row buffer: nan, inf, finite sum, finite sum of squares, finite abs-max, argmax."""
PARTS: Final = 7
"""Numbers each program of a row of several spans writes into the device work buffer (one span): the six
of :data:`STATS` over the span, the argmax as a column index of the row, and the span's largest non-NaN
value (how spans' argmaxes compare); the row's last program folds them into the row's six."""
FOLD: Final = 64
"""Spans the folding program reads per step (a row has at most about :data:`TARGET_PROGRAMS` spans)."""
BLOCK: Final = 1024
"""Elements per Triton loop step; a span is a whole number of blocks."""
MAX_COLS: Final = 2**30
"""Rows at least this long take the torch ops (the kernel's int32 column indices; see ``_kernel_fits``)."""
TARGET_PROGRAMS: Final = 512
"""Programs :func:`split` aims at per launch: a few per SM of an H100/H200 (132), enough to keep the
device's memory busy; more than that only adds per-program reductions (on an H200, 256x32000 as 4096
programs of 2048 columns took 27 us, as 256 whole rows 18 us, as 512 programs 15 us)."""
_SMALL: Final = 64
WATCH_SPIN_S: Final = 200e-6
"""How long :meth:`PendingFingerprint.result` re-reads an unwritten watched buffer before it waits on a CUDA
event instead (a sleep between reads overshoots by the kernel's timer slack, ~50 us)."""
_PLAN_LIMIT: Final = 1024
"""Output layouts planned at most (serving shapes repeat; a flood of new ones takes the general path)."""
TRITON_DTYPES: Final = (torch.float16, torch.bfloat16, torch.float32)
"""Dtypes the fused kernel reads; others use the torch ops (float64 would lose argmax ties in float32)."""

Launcher = torch_adapter.StaticLaunch
"""``launch(x, x_ptr, out, out_ptr, (rows, cols, stride_row, stream))``: one launch over ``rows`` rows."""
StreamKey = tuple[int, int]
"""``(device index, raw stream handle)`` a fingerprint was launched on."""


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


UNWRITTEN: Final = 0x7FF4_DEAD_BEEF_F00D
"""The bit pattern a pooled buffer holds where the kernel has not written yet: a signalling NaN with a
payload, which no value the kernel stores can be (its counts, sums, abs-max and indices are finite or
infinite; a NaN a GPU makes is the canonical quiet one)."""


_UNWRITTEN_WORD: Final = np.int64(UNWRITTEN)  # a numpy scalar: compared without converting a Python int
_SHA256: Final = hashlib.sha256()
"""An empty SHA-256 state that every argmax digest starts from (copied)."""
_WORD_CODE: Final = "q"
"""The ``array`` type code of a signed 64-bit integer (native byte order, as numpy's int64)."""


class _Buffer:
    """A pinned host buffer with its numpy views (made once) and whether it goes back to the pool.

    A pooled buffer holds :data:`UNWRITTEN` in every word until the kernel writes it: the fused kernel
    writes every word of its buffer, so the background thread sees that a zero-copy fingerprint is done by
    reading the buffer (:meth:`written`), without a CUDA event or any other driver call.
    """

    __slots__ = ("array", "floats", "ints", "pooled", "ptr", "tensor", "words")

    def __init__(self, tensor: torch.Tensor, pooled: bool) -> None:
        self.tensor = tensor
        self.array: np.ndarray[Any, Any] = tensor.numpy()
        self.words: np.ndarray[Any, Any] = self.array.view(np.int64)
        # The same memory as buffer views: the background thread's read of a written buffer is two C calls
        # (tolist), no numpy op (each costs it some microseconds on a host whose caches the serving thread's
        # launches keep cold).
        raw = self.array.data.cast("B")
        self.ints = raw.cast(_WORD_CODE)
        self.floats = raw.cast("d")
        self.ptr = tensor.data_ptr()
        self.pooled = pooled
        if pooled:
            self.words.fill(_UNWRITTEN_WORD)

    def written(self) -> bool:
        """Whether no word holds :data:`UNWRITTEN` any more (every word is 8-byte aligned: written whole)."""
        return not bool((self.words == _UNWRITTEN_WORD).any())

    def snapshot(self) -> list[float] | np.ndarray[Any, Any] | None:
        """The buffer's numbers in ordinary memory when every word is written, else ``None``: a list for a
        few rows (:data:`_SMALL`, folded by :func:`fold`), a numpy copy for more (:func:`finish`).

        Reading pinned memory the device writes was the slow part of a fingerprint on the H200 (passes
        over the per-span numbers the host once folded itself); six numbers per row are a few hundred
        bytes. For a few rows the check reads the words as integers (the :data:`UNWRITTEN` pattern is a NaN,
        which compares unequal to itself) and the numbers follow from cache, two C calls and no numpy op
        (each costs some microseconds on a host whose caches the serving thread's launches keep cold).
        """
        ints = self.ints
        if ints[0] == UNWRITTEN or ints[-1] == UNWRITTEN:  # still running: two reads, no copy
            return None
        if len(ints) > _SMALL * STATS:
            copy = self.array.copy()
            return None if (copy.view(np.int64) == _UNWRITTEN_WORD).any() else copy
        if UNWRITTEN in ints.tolist():
            return None
        return cast("list[float]", self.floats.tolist())  # typeshed's memoryview holds ints


class _PinnedPool:
    """Reusable pinned float64 host buffers, so a request never pays for a pinned allocation.

    A buffer is taken on the serving thread and given back by the background thread after it has read
    it (``deque`` pop and append are atomic: no lock on that path); when none is free a new one is
    allocated (at most ``limit`` per size are kept; beyond that a buffer is used once and left to torch's
    caching host allocator, still without a synchronization).

    The kernel's buffers (six numbers per row, folded on the device: 384 B for 8 rows of logits) come
    only from the pool (:meth:`take_pooled`): the background thread sees them written by reading them.
    With ``limit`` of a size in flight, as when the background thread has fallen behind, a request
    takes the torch ops into an unpooled buffer and a completion event instead (counted as
    ``backlogged``), so the pool never grows past ``limit`` buffers of a size.
    """

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit
        self._free: dict[int, deque[_Buffer]] = {}
        self._count: dict[int, int] = {}
        self._blank: dict[int, array[int]] = {}  # UNWRITTEN words per buffer size, copied in by give()
        self._lock = threading.Lock()

    def take(self, numel: int) -> _Buffer:
        """A pinned buffer of ``numel`` float64 values (give it back after reading if ``pooled``)."""
        buf = self.take_pooled(numel)
        return buf if buf is not None else _Buffer(torch.empty(numel, dtype=torch.float64, pin_memory=True), False)

    def take_pooled(self, numel: int) -> _Buffer | None:
        """A pooled buffer of ``numel`` values, or ``None`` when ``limit`` of that size are in flight."""
        free = self._free.get(numel)
        if free:
            try:
                return free.pop()
            except IndexError:  # another thread took the last one
                pass
        with self._lock:
            if self._count.get(numel, 0) >= self.limit:
                return None
            self._count[numel] = self._count.get(numel, 0) + 1
            self._free.setdefault(numel, deque())
            self._blank.setdefault(numel, array(_WORD_CODE, [UNWRITTEN]) * numel)
        return _Buffer(torch.empty(numel, dtype=torch.float64, pin_memory=True), True)

    def give(self, buf: _Buffer) -> None:
        """Back into the pool, marked unwritten again (the next kernel's writes are then seen)."""
        numel = len(buf.ints)
        blank = self._blank.get(numel)
        if blank is None:  # a buffer this pool did not make (tests hand some in)
            blank = self._blank.setdefault(numel, array(_WORD_CODE, [UNWRITTEN]) * numel)
        buf.ints[:] = blank  # one copy, no numpy call
        self._free[numel].append(buf)


_POOL = _PinnedPool()


class PendingFingerprint:
    """Per-row numbers launched on the device; :meth:`result` reads them (on the background thread).

    A CUDA fingerprint knows the stream it was launched on. One the fused kernel writes straight into a
    pooled pinned buffer (``watched``) is done when the buffer holds no :data:`UNWRITTEN` word: reading it
    is no driver call, so the background thread never enters the CUDA driver (whose calls hold the GIL
    and may wait behind the serving thread's launches) for the common case. Any other one (a device
    buffer copied to the host, the torch ops) needs :func:`mark` to record the event that says when it is
    done (``ready`` is ``False`` until then); so does a watched one that stays unwritten too long
    (:meth:`watch_with_event`: a launch that failed would otherwise never be seen to end).
    """

    __slots__ = (
        "_argmax",
        "_buffer",
        "_done",
        "_event",
        "_head",
        "_numel",
        "_rows",
        "_snap",
        "_source",
        "_version",
        "_watched",
        "backlogged",
        "stream",
    )

    def __init__(
        self,
        rows: torch.Tensor | None,
        numel: int,
        argmax: bool,
        *,
        head: int,
        buffer: _Buffer | None = None,
        stream: StreamKey | None = None,
        watched: bool = False,
    ) -> None:
        self._rows = rows
        self._snap: list[float] | np.ndarray[Any, Any] | None = None  # the written buffer's numbers (then given back)
        self._watched = watched and buffer is not None and buffer.pooled
        self._source: torch.Tensor | None = None
        self._version = -1
        self._buffer = buffer
        self._numel = numel
        self._argmax = argmax
        self._head = head
        self._event: _Completion | None = None
        self._done: Fingerprint | None = None
        self.stream = stream
        self.backlogged = False
        """Whether a backlog sent it down the per-row path (every kernel-sized buffer was in flight)."""

    def unmarked(self) -> bool:
        """Whether this is a CUDA fingerprint that needs a completion event and has none yet."""
        return self._event is None and self.stream is not None and not self._watched

    def ready(self) -> bool:
        """Whether :meth:`result` would not wait (its buffer is written or its CUDA event has completed;
        always on CPU)."""
        if self._watched and (self._snap is not None or self._take_snapshot()):
            return True
        event = self._event
        if event is None:
            return self.stream is None
        return event.query()

    def _await_written(self) -> bool:
        """Re-read the buffer for up to :data:`WATCH_SPIN_S` (``True``: the kernel has written it).

        A request's fingerprint is the last thing it launches, so a flush at its end usually finds the kernel
        done or a few microseconds away; a longer wait goes to a CUDA event instead (its synchronize waits
        without the GIL and returns as the stream passes it).
        """
        deadline = time.perf_counter() + WATCH_SPIN_S
        while not self._take_snapshot():
            if time.perf_counter() >= deadline:
                return False
        return True

    def _take_snapshot(self) -> bool:
        """Copy a written watched buffer into ``_snap`` and give it back to the pool (``False``: unwritten)."""
        buf = self._buffer
        if buf is None:
            return True
        snap = buf.snapshot()
        if snap is None:
            return False
        self._snap = snap
        self._buffer = None
        if buf.pooled:
            _POOL.give(buf)
        return True

    def watch_with_event(self) -> None:
        """Give a watched fingerprint a completion event too (one that stayed unwritten: its kernel may
        never have run); :meth:`result` then raises rather than waits forever if the event completes
        with the buffer still unwritten."""
        if self._watched and self._event is None:
            self._watched = False
            mark([self])
            self._watched = True

    def result(self) -> Fingerprint:
        """Wait for the numbers (a CUDA event, not a device sync) and compute the fields."""
        if self._done is not None:
            return self._done
        if self._watched and not self.ready() and not self._await_written():
            self.watch_with_event()
        if self.unmarked():
            mark([self])
        # query() first: synchronize() hands the GIL to the serving thread and back, a thread switch that
        # costs the serving thread more than the wait itself when the event has long completed.
        event = self._event
        if event is not None and not event.query():
            event.wait()
        unwritten = self._buffer
        if self._watched and unwritten is not None and not self._take_snapshot():
            self._buffer = None
            _POOL.give(unwritten)
            raise RuntimeError("the fingerprint kernel completed without writing its result (launch failed?)")
        if self._source is not None:
            self._done = self._read_source()
            return self._done
        snap = self._snap
        if snap is not None:
            if isinstance(snap, list):
                self._done = fold(snap, self._numel, self._argmax, self._head)
            else:
                self._done = finish(snap.reshape(-1, STATS), self._numel, self._argmax, self._head)
            return self._done
        buf = self._buffer
        try:
            # pinned memory read once (a copy), as in snapshot()
            rows = buf.array.copy() if buf is not None else self._rows.numpy()  # type: ignore[union-attr]
            self._done = finish(rows.reshape(-1, STATS), self._numel, self._argmax, self._head)
            return self._done
        finally:
            if buf is not None:
                self._buffer = None
                if buf.pooled:
                    _POOL.give(buf)

    @classmethod
    def deferred(cls, x: torch.Tensor, head: int) -> PendingFingerprint:
        """A CPU output (any shape) read later, on the background thread (see :func:`start_fingerprint`)."""
        pending = cls(None, 0, False, head=head)
        try:
            pending._version = x._version
            pending._source = x
        except RuntimeError:  # an inference tensor has no version counter: keep a copy instead
            pending._source = x.detach().clone()
        return pending

    def _modified(self, source: torch.Tensor) -> bool:
        """Whether ``source`` was changed in place since :meth:`deferred` took it (its version counter moved)."""
        return self._version >= 0 and source._version != self._version

    def _read_source(self) -> Fingerprint:
        source, self._source = self._source, None
        assert source is not None
        if self._modified(source):
            raise OutputModifiedError("the output was modified in place after set_output(); no fingerprint")
        rows = _numpy_rows(source)
        # numpy passes only where they take it: a torch op lets go of the GIL and takes it back
        done = _cpu_numbers(rows, True, self._head) if rows is not None else None
        if done is None:
            x2, argmax = _rows_view(source.detach())
            done = cpu_fingerprint(x2, argmax, self._head)
        if self._modified(source):  # modified while it was being read
            raise OutputModifiedError("the output was modified in place after set_output(); no fingerprint")
        return done


class OutputModifiedError(RuntimeError):
    """A CPU output changed in place between ``set_output`` and its fingerprint (counted, never raised
    into the serving path)."""


class _Completion:
    """One CUDA event shared by the fingerprints of a batch, queried until it has completed, then never
    again (each query is a driver call made with the GIL held)."""

    __slots__ = ("_done", "_event")

    def __init__(self, event: Any) -> None:
        self._event = event
        self._done = False

    def query(self) -> bool:
        if not self._done:
            self._done = bool(self._event.query())
        return self._done

    def wait(self) -> None:
        self._event.synchronize()
        self._done = True


def mark(pending: Iterable[PendingFingerprint]) -> None:
    """Record one CUDA event per stream behind the given (already launched) fingerprints.

    Called by the background thread after it has taken their requests off the queue: each launch was
    made before its request was queued, so the event, recorded later on the same stream, completes after
    it. Recording is no synchronization.
    """
    marks: dict[StreamKey, _Completion] = {}
    for p in pending:
        key = p.stream
        if key is None or p._event is not None:
            continue
        completion = marks.get(key)
        if completion is None:
            event = torch.cuda.Event()  # type: ignore[no-untyped-call]
            event.record(_stream(key))
            completion = marks[key] = _Completion(event)
        p._event = completion


_STREAMS: dict[StreamKey, Any] = {}


def _stream(key: StreamKey) -> Any:
    stream = _STREAMS.get(key)
    if stream is None:
        device, handle = key
        if handle == 0:
            stream = torch.cuda.default_stream(device)
        else:
            stream = torch.cuda.ExternalStream(handle, device=torch.device("cuda", device))  # type: ignore[no-untyped-call]
        if len(_STREAMS) < _PLAN_LIMIT:
            _STREAMS[key] = stream
    return stream


def finish(rows: np.ndarray[Any, Any], numel: int, argmax: bool, head: int) -> Fingerprint:
    """Fold per-row numbers (``[rows, 6]`` float64 over ``numel`` output values) into a fingerprint."""
    if rows.shape[0] <= _SMALL:
        # A decode step has a handful of rows: plain Python beats numpy reductions on tiny arrays.
        return fold(rows.reshape(-1).tolist(), numel, argmax, head)
    total = rows.sum(axis=0)
    nan, inf, s, ss = int(total[0]), int(total[1]), float(total[2]), float(total[3])
    amax = float(rows[:, 4].max())
    ids = rows[:, 5].astype(np.int64) if argmax else None
    return _fingerprint((nan, inf, s, ss, amax), ids, numel, head)


def fold(values: list[float], numel: int, argmax: bool, head: int) -> Fingerprint:
    """:func:`finish` for numbers given as a flat list (``rows * 6``, row-major), in plain Python."""
    s, ss = math.fsum(values[2::STATS]), math.fsum(values[3::STATS])
    totals = (int(sum(values[0::STATS])), int(sum(values[1::STATS])), s, ss, max(values[4::STATS], default=0.0))
    return _fingerprint(totals, [int(i) for i in values[5::STATS]] if argmax else None, numel, head)


def _fingerprint(
    totals: tuple[int, int, float, float, float],
    ids: np.ndarray[Any, Any] | Sequence[int] | None,
    numel: int,
    head: int,
) -> Fingerprint:
    """The fields from the totals over the whole output (NaN and inf counts, finite sum, sum of squares
    and abs-max) and the rows' argmax ids (``None``: no argmax)."""
    nan, inf, s, ss, amax = totals
    digest, ids_head = "", tuple[int, ...]()
    if ids is not None:
        # int64 in native byte order, as the digest is defined
        if isinstance(ids, np.ndarray):
            ids = ids.astype(np.int64, copy=False).tolist()
        digest_of = _SHA256.copy()  # a copy of a fresh one: no algorithm lookup (half the cold cost)
        digest_of.update(array(_WORD_CODE, ids))
        digest = digest_of.hexdigest()
        ids_head = tuple(ids[:head])
    n = numel - nan - inf
    mean = s / n if n else 0.0
    var = max(ss / n - mean * mean, 0.0) if n else 0.0
    return Fingerprint(digest, ids_head, nan, inf, _finite(mean), _finite(math.sqrt(var)), _finite(amax))


def split(rows: int, cols: int) -> tuple[int, int]:
    """``(span, chunks)``: the columns each program reads (whole blocks) and the programs per row, so that
    ``rows * chunks`` is about :data:`TARGET_PROGRAMS` (or ``rows`` when rows alone are that many)."""
    blocks = max(1, -(-cols // BLOCK))
    wanted = max(1, min(blocks, -(-TARGET_PROGRAMS // max(rows, 1))))
    span = -(-blocks // wanted) * BLOCK
    return span, max(1, -(-cols // span))


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


_FAST_CPU_DTYPES: Final = (torch.float32, torch.float64)


def cpu_fingerprint(x2: torch.Tensor, argmax: bool, head: int) -> Fingerprint:
    """The fingerprint of a CPU output seen as rows (``x2``), as :func:`row_stats_torch` then
    :func:`finish` would give it, in numpy passes over the whole output that release the GIL.

    Only the argmax is per row; the counts, sums and abs-max are the whole output's. A float64 sum of
    finite float32 values cannot overflow, so a finite total means no NaN or infinity (nearly every
    output): the sum, the sum of squares, the abs-max (largest and smallest value) and the rows' argmax,
    with zero NaN and inf counts. Outputs with a non-finite value (or a float64 sum that overflowed),
    other dtypes and empty outputs take the reference ops.
    """
    numel = x2.numel()
    if x2.dtype in _FAST_CPU_DTYPES and numel:
        done = _cpu_numbers(x2.numpy(), argmax, head)
        if done is not None:
            return done
    return finish(row_stats_torch(x2).numpy(), numel, argmax, head)


def _cpu_numbers(a: np.ndarray[Any, Any], argmax: bool, head: int) -> Fingerprint | None:
    """:func:`cpu_fingerprint`'s numpy passes over rows ``a`` (float32/float64, not empty); ``None`` when the
    output has a NaN or an infinity (then the reference ops give the counts)."""
    wide = a.astype(np.float64)  # a copy: squared in place below
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: the output is non-finite, that is all
        s = float(wide.sum())
        if not math.isfinite(s):
            return None
        ss = float(np.square(wide, out=wide).sum())
    amax = float(max(a.max(), -a.min()))
    return _fingerprint((0, 0, s, ss, amax), a.argmax(axis=1) if argmax else None, a.size, head)


def _fast_rows(x: torch.Tensor) -> bool:
    """Whether the numpy passes take ``x`` (float32/float64, at least one dimension, two columns or more,
    not empty)."""
    return x.dtype in _FAST_CPU_DTYPES and x.dim() >= 1 and x.shape[-1] >= 2 and x.numel() > 0


def _numpy_rows(x: torch.Tensor) -> np.ndarray[Any, Any] | None:
    """A CPU output as a numpy ``[rows, last dim]`` view without a torch op, when the fast passes take it
    (:func:`_fast_rows`); else ``None``."""
    if not _fast_rows(x):
        return None
    a = x.numpy() if not x.requires_grad else x.detach().numpy()
    return a.reshape(-1, a.shape[-1])


BATCH_LIMIT: Final = 64
"""Deferred CPU outputs fingerprinted together at most (:func:`finish_deferred`)."""


def finish_deferred(pending: Iterable[PendingFingerprint]) -> None:
    """Fingerprint deferred CPU outputs of the same shape and dtype together (the background thread, per
    batch it takes off the queue); each one's :meth:`PendingFingerprint.result` then returns at once.

    The numbers are :func:`cpu_fingerprint`'s, per output; the passes run once over the stacked outputs.
    Each numpy pass lets go of the GIL and takes it back, and while the serving thread runs Python every
    take is a hand-over between the two threads (a wake-up each, and a wait of up to the interpreter's
    switch interval): six passes per batch rather than seven per request. Outputs the batch cannot take
    (another dtype, one column, a non-finite value, changed in place meanwhile) are left to ``result()``.
    """
    groups: dict[tuple[Any, ...], list[PendingFingerprint]] = {}
    for p in pending:
        src = p._source
        if src is None or p._done is not None or not _fast_rows(src):
            continue
        group = groups.setdefault((src.shape, src.dtype), [])
        if len(group) < BATCH_LIMIT:
            group.append(p)
    for group in groups.values():
        if len(group) > 1:
            _finish_group(group)


def _finish_group(group: list[PendingFingerprint]) -> None:
    arrays, kept = [], []
    for p in group:
        src = p._source
        assert src is not None
        if p._modified(src):
            continue  # result() says so
        rows = _numpy_rows(src)
        if rows is not None:
            arrays.append(rows)
            kept.append(p)
    if len(kept) < 2:
        return
    wide = np.array(arrays, dtype=np.float64)  # [outputs, rows, cols]: one copy, squared in place below
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: that output is non-finite, that is all
        sums = wide.sum(axis=(1, 2))
        highs, lows = wide.max(axis=(1, 2)), wide.min(axis=(1, 2))
        ids = wide.argmax(axis=2)  # the float32 values exactly: the same first maximum
        squares = np.square(wide, out=wide).sum(axis=(1, 2))
    numel = wide[0].size
    for i, p in enumerate(kept):
        src = p._source
        s = float(sums[i])
        if not math.isfinite(s) or src is None or p._modified(src):
            continue  # a NaN or infinity (the reference ops), or changed while read (result() says so)
        amax = float(max(highs[i], -lows[i]))
        p._done = _fingerprint((0, 0, s, float(squares[i]), amax), ids[i], numel, p._head)
        p._source = None


# --- fused Triton kernel (CUDA) ----------------------------------------------------------------------


def build_kernel() -> Any:
    """The fused kernel (imports Triton; decorated per call so ``TRITON_INTERPRET=1`` set by a test applies)."""
    from inferensics.collector.host.fingerprint_kernel import define_kernel

    return define_kernel()


def launch_kernel(
    kernel: Any, x2: torch.Tensor, *, out: torch.Tensor | None = None, warmup: bool = False
) -> torch.Tensor:
    """Run (or with ``warmup`` only compile) ``kernel`` over ``x2`` into ``out`` (``rows * 6`` float64, on the
    device or pinned host memory the device can write: the per-row numbers of :func:`row_stats_torch`);
    returns ``out``. The work buffer a row of several spans needs is allocated here (zeroed); the planned
    path keeps one per layout and stream instead."""
    if x2.shape[1] > 1 and x2.stride(1) != 1:
        x2 = x2.contiguous()
    span, chunks = split(x2.shape[0], x2.shape[1])
    programs = x2.shape[0] * chunks
    if out is None:
        out = torch.empty((x2.shape[0], STATS), dtype=torch.float64, device=x2.device)
    work = new_work(x2.shape[0], chunks, x2.device)
    if warmup:
        launch_kernel_compiled(kernel, x2, out, work)
    else:
        kernel[(programs,)](x2, out, work, x2.shape[1], x2.stride(0), span, block=BLOCK, fold=FOLD)
    return out


def new_work(rows: int, chunks: int, device: torch.device | int) -> torch.Tensor:
    """The kernel's device work buffer for ``rows`` rows of ``chunks`` spans: per row a count of the
    programs done (zero between launches: the last one resets it) and :data:`PARTS` numbers per span. A
    row of one span never touches it (one float64 stands in)."""
    size = rows * (chunks * PARTS + 1) if chunks > 1 else 1
    return torch.zeros(size, dtype=torch.float64, device=device)


def _probe_input(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    # Several spans per row (folded on the device; its first BLOCK columns are the one-span probe, row 1's
    # NaN and row 3's first 1e4 among them): a row's largest value in a later span (row 0), a NaN in a later span only
    # (row 2), a tie across spans (row 3: the first wins).
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 3 * BLOCK + 5, generator=g)
    x[0, 2 * BLOCK + 3] = 1e4
    x[1, 17], x[2, 5], x[2, 9], x[3, 40] = float("nan"), float("inf"), float("-inf"), 1e4
    x[2, BLOCK + 7], x[3, 2 * BLOCK + 1] = float("nan"), 1e4
    return x.to(dtype).to(device)


class _KernelCache:
    """Compiles and checks the kernel once per dtype in a background thread.

    ``get`` answers ``None`` (use the torch ops) until the kernel for that dtype is compiled and has
    matched the torch ops on a probe tensor with NaN, ±inf and several blocks per row; ``zero_copy``
    says whether it also wrote correctly straight into pinned host memory, which saves the device buffer
    and the copy on the serving thread; ``launchers`` holds, per dtype, the launch the planned path uses:
    Inductor's static CUDA launcher over the compiled kernel where it gave the same numbers, else
    Triton's own launch. The check runs on a private stream and waits on its own event, so it never
    synchronizes the serving streams.
    """

    def __init__(self) -> None:
        self.kernel: Any = None
        self.ready: set[torch.dtype] = set()
        self.zero_copy: set[torch.dtype] = set()
        self.started: set[torch.dtype] = set()
        self.launchers: dict[torch.dtype, tuple[int, Launcher, str]] = {}
        self.failed = ""
        self.static_failed = ""
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
                    one_span = x[:, :BLOCK].contiguous()  # a row in one program: no fold on the device
                    on_device_one = launch_kernel(self.kernel, one_span).to("cpu", non_blocking=True)
                    pinned = torch.full((x.shape[0] * STATS,), -1.0, dtype=torch.float64, pin_memory=True)
                    launch_kernel(self.kernel, x, out=pinned)
                    x_host = x.to("cpu", non_blocking=True)
                    done = torch.cuda.Event()  # type: ignore[no-untyped-call]
                    done.record(stream)
                done.synchronize()
                want = row_stats_torch(x_host)
                want_one = row_stats_torch(x_host[:, :BLOCK])
                if not (_same_rows(on_device, want) and _same_rows(on_device_one, want_one)):
                    self.failed = f"fused kernel disagrees with the torch ops for {dtype}"
                    return
                zero_copy = _same_rows(pinned.reshape(-1, STATS), want)
                if zero_copy:
                    self.launchers[dtype] = self._launcher(x, stream, want)
                    self.zero_copy.add(dtype)
            self.ready.add(dtype)
        except Exception as exc:  # no Triton, no compiler: the torch ops stay in use
            self.failed = f"{type(exc).__name__}: {exc}"

    def _launcher(self, x: torch.Tensor, stream: Any, want: torch.Tensor) -> tuple[int, Launcher, str]:
        """The fastest launch of the compiled kernel that writes ``want`` into pinned memory."""
        device = x.device.index if x.device.index is not None else torch.cuda.current_device()
        kernel = self.kernel

        def triton_launch(
            tensors: tuple[torch.Tensor, ...], _: tuple[int, ...], grid: torch_adapter.LaunchGrid
        ) -> None:
            programs, cols, stride, span, _stream = grid  # Triton reads the current stream itself
            kernel[(programs,)](*tensors, cols, stride, span, block=BLOCK, fold=FOLD)

        try:
            span, chunks = split(x.shape[0], x.shape[1])
            programs = x.shape[0] * chunks
            out = torch.empty((x.shape[0], STATS), dtype=torch.float64, device=x.device)
            with torch.cuda.stream(stream):
                work = new_work(x.shape[0], chunks, x.device)
            compiled = launch_kernel_compiled(kernel, x, out, work)
            static = torch_adapter.static_cuda_launcher(compiled, device)
            pinned = torch.full((x.shape[0] * STATS,), -1.0, dtype=torch.float64, pin_memory=True)
            with torch.cuda.stream(stream):
                cols, stride = x.shape[1], x.stride(0)
                grid = (programs, cols, stride, span, stream.cuda_stream)
                for _ in range(2):  # twice: the second launch finds the counts the first one reset
                    static((x, pinned, work), (x.data_ptr(), pinned.data_ptr(), work.data_ptr()), grid)
                done = torch.cuda.Event()  # type: ignore[no-untyped-call]
                done.record(stream)
            done.synchronize()
            if _same_rows(pinned.reshape(-1, STATS), want):
                return device, static, "static"
            self.static_failed = "the static launcher's numbers disagree with the torch ops"
        except Exception as exc:  # an older or newer torch/Triton: Triton's own launch stays in use
            self.static_failed = f"{type(exc).__name__}: {exc}"
        return device, triton_launch, "triton"


def launch_kernel_compiled(kernel: Any, x2: torch.Tensor, out: torch.Tensor, work: torch.Tensor) -> Any:
    """Triton's compiled kernel for ``x2``/``out``/``work`` (the one ``launch_kernel`` runs; no launch)."""
    span, chunks = split(x2.shape[0], x2.shape[1])
    grid = (x2.shape[0] * chunks,)
    return kernel.warmup(x2, out, work, x2.shape[1], x2.stride(0), span, block=BLOCK, fold=FOLD, grid=grid)


def _same_rows(got: torch.Tensor, want: torch.Tensor) -> bool:
    got = got.cpu()
    exact = torch.equal(got[:, [0, 1, 4, 5]], want[:, [0, 1, 4, 5]])
    return exact and bool(torch.allclose(got[:, 2:4], want[:, 2:4], rtol=1e-9, atol=1e-6))


KERNELS = _KernelCache()
"""The process's fused kernel, per dtype (``KERNELS.failed`` says why it is not used, if so)."""


class _Plan:
    """How to fingerprint every output of one layout (shape, stride, dtype, device): a launch only.

    A row of several spans needs a device work buffer (:func:`new_work`): one per stream, made on the
    first launch on that stream (launches on one stream run one after another, so they share it).
    """

    __slots__ = (
        "argmax",
        "chunks",
        "cols",
        "device",
        "launch",
        "numel",
        "programs",
        "rows",
        "size",
        "span",
        "stride_row",
        "work",
    )

    def __init__(self, x2: torch.Tensor, argmax: bool, device: int, launch: Launcher) -> None:
        self.rows, self.cols = int(x2.shape[0]), int(x2.shape[1])
        self.stride_row = int(x2.stride(0))
        self.numel = self.rows * self.cols
        self.span, self.chunks = split(self.rows, self.cols)
        self.programs = self.rows * self.chunks
        self.size = self.rows * STATS
        self.argmax = argmax
        self.device = device
        self.launch = launch
        self.work: dict[int, tuple[torch.Tensor, int]] = {}

    def _work(self, stream: int) -> tuple[torch.Tensor, int]:
        key = stream if self.chunks > 1 else -1  # one span per row: the buffer is never read or written
        work = self.work.get(key)
        if work is None:
            tensor = new_work(self.rows, self.chunks, self.device)
            work = self.work[key] = (tensor, tensor.data_ptr())
        return work

    def start(self, x: torch.Tensor, x_ptr: int, head: int) -> PendingFingerprint:
        buf = _POOL.take_pooled(self.size)
        if buf is None:  # a backlog: the torch ops into an unpooled buffer, with an event
            with torch.no_grad():
                return _start(x.detach(), head, per_row=True)
        stream = torch_adapter.raw_stream(self.device)
        work, work_ptr = self._work(stream)
        self.launch(
            (x, buf.tensor, work),
            (x_ptr, buf.ptr, work_ptr),
            (self.programs, self.cols, self.stride_row, self.span, stream),
        )
        return PendingFingerprint(
            None, self.numel, self.argmax, head=head, buffer=buf, stream=(self.device, stream), watched=True
        )


_PLANS: dict[tuple[Any, ...], _Plan] = {}


def _layout(x: torch.Tensor) -> tuple[Any, ...]:
    """The key of ``x``'s plan: shape, stride, dtype and device."""
    return (x.shape, x.stride(), x.dtype, x.get_device())


def start_fingerprint(output: torch.Tensor, head: int = 16) -> PendingFingerprint:
    """Launch the fingerprint of ``output`` (a logits-like tensor; last dim = classes)."""
    if not output.is_cuda:
        # On CPU the numbers cost as much as a small model's whole request: the serving thread keeps a
        # reference (no reshape, no autograd) and the background thread reads the output later. Its
        # version counter says whether it was changed in place meanwhile (then the fingerprint is dropped
        # and counted, never wrong); an inference tensor has no counter and is copied instead.
        return PendingFingerprint.deferred(output, head)
    # The serving thread's hot path: a planned layout costs a dict lookup, a buffer from the pool and
    # one launch (no reshape, no autograd, no event).
    plan = _PLANS.get(_layout(output))
    if plan is not None:
        ptr = output.data_ptr()
        if ptr % 16 == 0 and torch_adapter.current_device() == plan.device:
            return plan.start(output, ptr, head)
    with torch.no_grad():
        return _start(output.detach(), head)


def _start(x: torch.Tensor, head: int, *, per_row: bool = False) -> PendingFingerprint:
    x2, argmax = _rows_view(x)
    numel = x2.numel()
    if x2.device.type != "cuda":  # start_fingerprint sends CPU outputs straight to the deferred path
        return PendingFingerprint.deferred(x, head)
    kernel = KERNELS.get(x2) if numel and not per_row and _kernel_fits(x2) else None
    device = torch_adapter.current_device()
    zero_copy = kernel is not None and x2.dtype in KERNELS.zero_copy
    if zero_copy:
        plan = _plan(x, x2, argmax, device)
        if plan is not None:
            return plan.start(x, x.data_ptr(), head)
    buf = _POOL.take_pooled(x2.shape[0] * STATS) if kernel is not None else None
    backlogged = per_row or (kernel is not None and buf is None)
    if buf is None:  # no kernel, or a backlog holds every pooled buffer of the size: the torch ops
        kernel, zero_copy = None, False
        buf = _POOL.take(x2.shape[0] * STATS)
    if zero_copy:
        launch_kernel(kernel, x2, out=buf.tensor)  # the kernel writes the pinned buffer itself
    else:
        rows = launch_kernel(kernel, x2) if kernel is not None else row_stats_torch(x2)
        buf.tensor.copy_(rows.reshape(-1), non_blocking=True)
    index = x2.device.index if x2.device.index is not None else device
    stream = (index, torch_adapter.raw_stream(index))
    pending = PendingFingerprint(None, numel, argmax, head=head, buffer=buf, stream=stream, watched=zero_copy)
    pending.backlogged = backlogged
    return pending


def _plan(x: torch.Tensor, x2: torch.Tensor, argmax: bool, device: int) -> _Plan | None:
    """A plan for ``x``'s layout when the kernel can read it in place (rows of unit stride, a view)."""
    entry = KERNELS.launchers.get(x2.dtype)
    if entry is None or entry[0] != device or len(_PLANS) >= _PLAN_LIMIT:
        return None
    if x2.data_ptr() != x.data_ptr() or (x2.shape[1] > 1 and x2.stride(1) != 1) or x2.stride(0) >= 2**31:
        return None
    plan = _Plan(x2, argmax, device, entry[1])
    _PLANS[_layout(x)] = plan
    return plan


def _kernel_fits(x2: torch.Tensor) -> bool:
    # The kernel is compiled for 16-byte aligned rows on the current device; anything else (a sliced
    # view, another device) takes the torch ops rather than a compile on the serving thread. Its column
    # indices are int32 and the last span of a row may run up to TARGET_PROGRAMS + 1 blocks past the row's
    # end (masked): rows of MAX_COLS columns or more take the torch ops too.
    return x2.data_ptr() % 16 == 0 and x2.device.index == torch.cuda.current_device() and x2.shape[1] < MAX_COLS


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
