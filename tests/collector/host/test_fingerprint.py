"""The output fingerprint: the torch path and the fused Triton kernel against a plain reference, no device
synchronization on the serving thread (GPU), and request records built without validation that equal their
validated round trip."""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import subprocess
import sys
import time
import warnings
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch

from inferensics.collector.host import NullExporter, SdkConfig, instrument, request_tracker
from inferensics.collector.host import fingerprint as fp
from inferensics.collector.host.trusted_records import REQUEST_FIELDS, trusted_request
from inferensics.schema.events import RequestEvent
from inferensics.schema.store import Store
from inferensics.schema.table import Event


def _reference(x: torch.Tensor, head: int = 16) -> fp.Fingerprint:
    """The fingerprint from its definition, element by element in float64 (no torch reductions)."""
    a = x.detach().to(torch.float64).cpu().numpy()
    last = a.shape[-1] if a.ndim else 1
    rows = a.reshape(-1, last) if a.size else np.zeros((0, max(last, 1)))
    nan = inf = n = 0
    s = ss = amax = 0.0
    ids: list[int] = []
    for row in rows:
        best, best_i, first_nan = -math.inf, -1, -1
        for i, v in enumerate(row.tolist()):
            if math.isnan(v):
                nan += 1
                first_nan = i if first_nan < 0 else first_nan
                continue
            if math.isinf(v):
                inf += 1
            else:
                n += 1
                s += v
                ss += v * v
                amax = max(amax, abs(v))
            if best_i < 0 or v > best:
                best, best_i = v, i
        ids.append(first_nan if first_nan >= 0 else best_i)
    argmax = a.ndim >= 1 and a.size > 0 and last > 1
    mean = s / n if n else 0.0
    std = math.sqrt(max(ss / n - mean * mean, 0.0)) if n else 0.0
    digest = hashlib.sha256(np.asarray(ids, dtype=np.int64).tobytes()).hexdigest() if argmax else ""
    return fp.Fingerprint(digest, tuple(ids[:head]) if argmax else (), nan, inf, mean, std, amax)


def _cases() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    x = torch.randn(6, 2500, generator=g)
    x[1, 7] = x[1, 2000] = float("nan")
    x[2, 5], x[2, 9] = float("inf"), float("-inf")
    x[3] = float("-inf")
    x[4, 100] = x[4, 2000] = 50.0  # a tie: the first index wins
    x[5] = float("nan")
    wide = torch.randn(4, 3, 40, generator=g)
    # Several kernel spans per row (fingerprint.split): the largest value in a later span, a NaN only in a
    # later span, a tie across spans (the first wins), a row of -inf, a last short span.
    long = torch.randn(4, 4 * fp.BLOCK + 300, generator=g)
    long[0, 2 * fp.BLOCK + 11] = 1e4
    long[1, 4 * fp.BLOCK + 5] = float("nan")
    long[2, 3] = long[2, fp.BLOCK + 3] = long[2, 3 * fp.BLOCK + 3] = 77.0
    long[3] = float("-inf")
    return [
        x,
        long,
        wide,
        wide[:, :, 5:30],  # non-contiguous rows
        torch.randn(17, generator=g),
        torch.tensor(3.5),
        torch.zeros(0, 8),
        torch.randn(5, 1, generator=g),
        (torch.randn(3, 64, generator=g) * 1e3).to(torch.bfloat16),
        torch.randn(3, 64, generator=g).to(torch.float16),
        torch.randn(3, 64, generator=g).to(torch.float64),
    ]


def _assert_same(got: fp.Fingerprint, want: fp.Fingerprint) -> None:
    assert (got.argmax_digest, got.argmax_head, got.nan, got.inf) == (
        want.argmax_digest,
        want.argmax_head,
        want.nan,
        want.inf,
    )
    assert got.absmax == want.absmax
    assert got.mean == pytest.approx(want.mean, rel=1e-9, abs=1e-9)
    assert got.std == pytest.approx(want.std, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("case", range(len(_cases())))
def test_cpu_path_matches_the_plain_reference(case: int) -> None:
    x = _cases()[case]
    _assert_same(fp.fingerprint_now(x), _reference(x))


def test_cpu_path_never_reads_an_output_modified_after_set_output() -> None:
    """On CPU the background thread reads the output itself: one changed in place meanwhile (the caller
    reuses its buffer) gives no fingerprint rather than a wrong one."""
    x = torch.randn(3, 10)
    pending = fp.start_fingerprint(x)
    x.fill_(float("nan"))
    with pytest.raises(fp.OutputModifiedError):
        pending.result()


def test_cpu_inference_tensor_is_read_from_a_copy() -> None:
    """An inference tensor tracks no in-place changes: the serving thread copies it."""
    with torch.inference_mode():
        x = torch.randn(3, 10)
        want = _reference(x)
        pending = fp.start_fingerprint(x)
        x.fill_(float("nan"))
    _assert_same(pending.result(), want)


def test_cpu_fingerprint_runs_off_the_serving_thread() -> None:
    """set_output on CPU only keeps a reference: no per-row numbers exist until the background reads."""
    x = torch.randn(4, 1000)
    pending = fp.start_fingerprint(x)
    assert pending.ready()
    assert pending._rows is None
    _assert_same(pending.result(), _reference(x))


def test_tracker_counts_an_output_modified_in_place(store: Store) -> None:
    # The change lands before the background thread reads the output: the pipeline's lock is held from the
    # request to the change, so a drain (the thread's first pass, which may come after the request on a
    # loaded machine, or flush's) reads the output only once it has changed.
    tracker = instrument(
        store=store, host="h", model="m", config=SdkConfig(flush_interval_s=60.0, fingerprint_rate=1.0)
    )
    try:
        x = torch.randn(2, 8)
        with tracker.pipeline._lock:
            with tracker.request("reused") as req:
                req.set_output(x)
            x.add_(1.0)
        tracker.flush()
        assert tracker.stats()["fingerprint_output_modified"] == 1
    finally:
        tracker.shutdown()
    (row,) = store.select_events(RequestEvent)
    assert row.request_id == "reused"
    assert row.fp_argmax_digest == ""


_INTERPRETED = """
import sys, torch
from inferensics.collector.host import fingerprint as fp
from inferensics.collector.host import request_tracker
cases = torch.load(sys.argv[1])
kernel = fp.build_kernel()
outputs = [fp.launch_kernel(kernel, x2) for x2 in cases]
# The planned path's reuse: two launches over one work buffer (the second finds the counts the first reset).
x2 = cases[int(sys.argv[3])]
span, chunks = fp.split(*x2.shape)
work = fp.new_work(x2.shape[0], chunks, x2.device)
again = []
for _ in range(2):
    out = torch.full((x2.shape[0], fp.STATS), -1.0, dtype=torch.float64)
    kernel[(x2.shape[0] * chunks,)](x2, out, work, x2.shape[1], x2.stride(0), span, block=fp.BLOCK, fold=fp.FOLD)
    again.append(out)
torch.save((outputs, again, work), sys.argv[2])
"""


def _kernel_inputs() -> list[torch.Tensor]:
    return [
        x.to(dtype).reshape(-1, x.shape[-1])
        for dtype in fp.TRITON_DTYPES
        for x in _cases()
        if x.dtype in fp.TRITON_DTYPES and x.dim() > 0 and x.numel() > 0
    ]


def _assert_kernel_rows(inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
    assert len(outputs) == len(inputs)
    for x2, got in zip(inputs, outputs, strict=True):
        assert got.shape == (x2.shape[0], fp.STATS)  # the spans of a row folded on the device
        want = fp.row_stats_torch(x2)
        # Counts, abs-max and argmax exactly; sums up to float64 summation order.
        assert torch.equal(got[:, [0, 1, 4, 5]], want[:, [0, 1, 4, 5]]), (x2.dtype, x2.shape, got, want)
        torch.testing.assert_close(got[:, 2:4], want[:, 2:4], rtol=1e-12, atol=1e-9)
        _assert_same(fp.finish(got.numpy(), x2.numel(), x2.shape[1] > 1, 16), _reference(x2))


@pytest.mark.slow
def test_triton_kernel_matches_torch_ops_under_the_interpreter(tmp_path: Path) -> None:
    """CI's check of the kernel (no GPU): Triton's interpreter runs it on the CPU. On a CUDA host the
    compiled kernel is checked instead (the next test): Triton 3.6's interpreter (the GPU hosts' version)
    cannot run a ``range`` bounded by a runtime argument, which the compiled kernel runs fine."""
    pytest.importorskip("triton", reason="Triton comes with torch on Linux x86-64")
    if torch.cuda.is_available():
        pytest.skip("CUDA host: test_triton_kernel_matches_torch_ops_compiled checks the compiled kernel")
    inputs = _kernel_inputs()
    reused = next(i for i, x2 in enumerate(inputs) if fp.split(*x2.shape)[1] > 2)
    torch.save(inputs, tmp_path / "in.pt")
    # The interpreter must be chosen before Triton is first imported, so the kernel runs in a fresh process.
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _INTERPRETED, str(tmp_path / "in.pt"), str(tmp_path / "out.pt"), str(reused)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    outputs, again, work = torch.load(tmp_path / "out.pt")
    _assert_kernel_rows(inputs, outputs)
    _assert_kernel_rows([inputs[reused]] * 2, again)
    rows = inputs[reused].shape[0]
    assert not work.reshape(rows, -1)[:, 0].any()  # every count back to zero


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_triton_kernel_matches_torch_ops_compiled() -> None:
    inputs = _kernel_inputs()
    kernel = fp.build_kernel()
    outputs = [fp.launch_kernel(kernel, x2.cuda()).cpu() for x2 in inputs]
    _assert_kernel_rows(inputs, outputs)
    # A work buffer reused launch after launch (the planned path): each launch's last program of a row
    # resets the row's count, so every launch folds its own spans.
    x2 = next(x for x in inputs if fp.split(*x.shape)[1] > 2).cuda()
    span, chunks = fp.split(*x2.shape)
    work = fp.new_work(x2.shape[0], chunks, x2.device)
    again = []
    for _ in range(3):
        out = torch.full((x2.shape[0], fp.STATS), -1.0, dtype=torch.float64, device="cuda")
        kernel[(x2.shape[0] * chunks,)](x2, out, work, x2.shape[1], x2.stride(0), span, block=fp.BLOCK, fold=fp.FOLD)
        again.append(out.cpu())
    _assert_kernel_rows([x2.cpu()] * 3, again)
    assert not work.reshape(x2.shape[0], -1)[:, 0].any()


@contextlib.contextmanager
def _sync_is_an_error() -> Iterator[None]:
    """CUDA synchronizing operations raise inside the block (torch warns that the mode is a prototype)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Synchronization debug mode is a prototype", UserWarning)
        torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


class _ListExporter(NullExporter):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[RequestEvent] = []

    def export_request(self, request: RequestEvent, children: Sequence[Event]) -> None:
        self.events.append(request)


def test_request_records_equal_their_validated_round_trip() -> None:
    exporter = _ListExporter()
    tracker = instrument(
        exporter=exporter, host="h", model="m", config=SdkConfig(trace_compiles=False, fingerprint_rate=1.0)
    )
    try:
        compiled = tracker.compile(lambda x: torch.log(x) * 3)
        for i, x in enumerate([torch.rand(4, 5) + 0.1, torch.tensor([[-1.0, 2.0, 0.0]]), torch.rand(2, 5)]):
            with tracker.request(f"r{i}", traffic_class="batch", tenant="t", shape=tuple(x.shape)) as req:
                req.set_output(compiled(x))
        with pytest.raises(RuntimeError, match="bad"), tracker.request("err"):
            raise RuntimeError("bad")
        tracker.flush()
    finally:
        tracker.shutdown()
    assert [e.request_id for e in exporter.events] == ["r0", "r1", "r2", "err"]
    for event in exporter.events:
        assert RequestEvent.model_validate(event.model_dump()) == event
    nan_row = exporter.events[1]
    assert (nan_row.fp_nan, nan_row.fp_inf, nan_row.fp_argmax_head) == (1, 1, (0,))
    assert exporter.events[0].graph_calls == (1,)


def test_records_share_no_mutable_state() -> None:
    """Records are built from shared templates (the dispatch's base, one fields-set for all): a copy with an
    update, or a record's attrs changed by an exporter, leaves every other record as it was."""
    exporter = _ListExporter()
    tracker = instrument(exporter=exporter, host="h", model="m", config=SdkConfig(trace_compiles=False))
    try:
        compiled = tracker.compile(lambda x: x * 2)
        for i in range(3):
            with tracker.request(f"r{i}", shape=(2, 3)) as req:
                assert req.raw is req  # the scope is the request's raw record
                req.set_output(compiled(torch.ones(2, 3)))
        tracker.flush()
    finally:
        tracker.shutdown()
    first, second, third = exporter.events
    changed = first.model_copy(update={"tenant": "other"})
    assert changed.model_fields_set == first.model_fields_set == set(RequestEvent.model_fields)
    assert (changed.tenant, first.tenant, second.tenant) == ("other", "", "")
    second.attrs["x"] = "y"
    assert "x" not in first.attrs
    assert "x" not in third.attrs
    assert [e.graph_calls for e in exporter.events] == [(1,)] * 3
    for event in (first, third):
        assert RequestEvent.model_validate(event.model_dump()) == event


def test_a_backlogged_fingerprint_is_counted_and_still_exported(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tracker counts fingerprints a backlog sent down the per-row path (``fingerprint_backlogged``). On
    CUDA the pool decides (the GPU test below); here the flag is set on a CPU fingerprint to check the
    counting and that the record keeps its fingerprint."""

    def backlogged(output: torch.Tensor, head: int = 16) -> fp.PendingFingerprint:
        pending = fp.start_fingerprint(output, head)
        pending.backlogged = True
        return pending

    monkeypatch.setattr(request_tracker, "start_fingerprint", backlogged)
    exporter = _ListExporter()
    tracker = instrument(
        exporter=exporter, host="h", model="m", config=SdkConfig(trace_compiles=False, fingerprint_rate=1.0)
    )
    try:
        for i in range(3):
            with tracker.request(f"r{i}") as req:
                req.set_output(torch.tensor([[0.5, 2.0, -1.0]]))
        tracker.flush()
        stats = tracker.stats()
    finally:
        tracker.shutdown()
    assert stats["fingerprint_backlogged"] == 3
    assert [e.fp_argmax_head for e in exporter.events] == [(1,)] * 3


def test_trusted_request_names_missing_and_unknown_fields() -> None:
    values: Mapping[str, object] = dict.fromkeys(REQUEST_FIELDS - {"host"}, "") | {"hostname": ""}
    with pytest.raises(ValueError, match=r"missing \['host'\], unknown \['hostname'\]"):
        trusted_request(dict(values))


def _kernel_ready(dtype: torch.dtype, sample: torch.Tensor) -> None:
    fp.fingerprint_now(sample)  # first sight of the dtype: starts the background compile
    deadline = time.monotonic() + 300
    while dtype not in fp.KERNELS.ready and not fp.KERNELS.failed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert dtype in fp.KERNELS.ready, fp.KERNELS.failed or "kernel not compiled within 300 s"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_fingerprint_adds_no_device_synchronization() -> None:
    y = torch.randn(8, 4096, device="cuda")
    y[0, 3] = float("nan")
    want = _reference(y.cpu())
    _kernel_ready(torch.float32, y)
    with _sync_is_an_error():
        fused = fp.start_fingerprint(y)
        rows = fp.row_stats_torch(y)
    _assert_same(fused.result(), want)
    _assert_same(fp.finish(rows.cpu().numpy(), y.numel(), True, 16), want)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_backlog_takes_per_row_buffers_rather_than_more_kernel_sized_pinned_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With every pooled buffer of a layout in flight (the background thread behind), a request is
    fingerprinted with the torch ops into an unpooled buffer with an event: the same fingerprint, counted as
    backlogged, and the pool keeps no more buffers than its limit."""
    monkeypatch.setattr(fp, "_POOL", fp._PinnedPool(limit=3))
    y = torch.randn(8, 32000, device="cuda")
    y[2, 5] = float("nan")
    want = _reference(y.cpu())
    _kernel_ready(torch.float32, y)
    with _sync_is_an_error():
        pending = [fp.start_fingerprint(y) for _ in range(5)]
    assert [p._watched for p in pending] == [True, True, True, False, False]
    assert [p.backlogged for p in pending] == [False, False, False, True, True]
    assert fp._POOL._count[8 * fp.STATS] == 3  # never more pooled buffers than the pool keeps
    for p in pending:
        _assert_same(p.result(), want)
    again = fp.start_fingerprint(y)  # the buffers are back in the pool: the kernel path again
    assert again._watched
    _assert_same(again.result(), want)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
# Inductor advises TF32 when it compiles a float32 matmul on a GPU that has it; advice, not a fault here.
@pytest.mark.filterwarnings("ignore:TensorFloat32 tensor cores:UserWarning")
def test_instrumented_request_adds_no_device_synchronization() -> None:
    exporter = _ListExporter()
    tracker = instrument(exporter=exporter, host="h", model="m")
    outputs: list[torch.Tensor] = []
    try:
        model = torch.nn.Linear(64, 512).cuda()
        compiled = tracker.compile(model)
        xs = [torch.randn(4, 64, device="cuda") for _ in range(20)]
        with torch.no_grad():
            compiled(xs[0])
            torch.cuda.synchronize()
            with _sync_is_an_error():
                for i, x in enumerate(xs):
                    with tracker.request(f"g{i}") as req:
                        y = compiled(x)
                        req.set_output(y)
                    outputs.append(y)
        tracker.flush()
        stats = tracker.stats()
    finally:
        tracker.shutdown()
    assert stats.get("fingerprint_errors", 0) == 0
    assert stats.get("process_errors", 0) == 0
    # Records leave in request order, each with its own output's fingerprint (some waited for their event).
    assert [e.request_id for e in exporter.events] == [f"g{i}" for i in range(20)]
    for event, y in zip(exporter.events, outputs, strict=True):
        want = _reference(y.cpu())
        assert (event.fp_argmax_digest, event.fp_argmax_head, event.fp_nan) == (
            want.argmax_digest,
            want.argmax_head,
            want.nan,
        )


class _FakeEvent:
    """Stands in for ``torch.cuda.Event``: counts records and queries; completes on its second query."""

    made: ClassVar[list[_FakeEvent]] = []

    def __init__(self) -> None:
        self.streams: list[object] = []
        self.queries = 0
        self.waited = False
        _FakeEvent.made.append(self)

    def record(self, stream: object) -> None:
        self.streams.append(stream)

    def query(self) -> bool:
        self.queries += 1
        return self.queries >= 2

    def synchronize(self) -> None:
        self.waited = True


def _pending(x: torch.Tensor, stream: tuple[int, int]) -> fp.PendingFingerprint:
    rows = fp.row_stats_torch(x).reshape(-1).contiguous()
    return fp.PendingFingerprint(None, x.numel(), True, head=16, buffer=fp._Buffer(rows, False), stream=stream)


def test_a_batch_of_fingerprints_shares_one_event_per_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    # The CUDA bookkeeping without a device: the event type and the stream lookup are stand-ins.
    _FakeEvent.made = []
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    monkeypatch.setattr(fp, "_stream", lambda key: key)
    xs = [torch.randn(3, 50, generator=torch.Generator().manual_seed(i)) for i in range(5)]
    batch = [_pending(x, (0, 7)) for x in xs[:3]] + [_pending(xs[3], (0, 9))]
    assert all(p.unmarked() and not p.ready() for p in batch)  # launched, no event yet: not ready

    fp.mark(batch)
    assert [e.streams for e in _FakeEvent.made] == [[(0, 7)], [(0, 9)]]  # one record per stream
    assert not batch[0].unmarked()
    assert not batch[0].ready()  # first query of each event: still running
    assert not batch[3].ready()
    assert all(p.ready() for p in batch)  # second query completes; later ones ask no driver
    assert [e.queries for e in _FakeEvent.made] == [2, 2]
    for p, x in zip(batch, xs[:4], strict=True):
        _assert_same(p.result(), _reference(x))
    assert [e.queries for e in _FakeEvent.made] == [2, 2]

    alone = _pending(xs[4], (0, 7))
    _assert_same(alone.result(), _reference(xs[4]))  # result() records its own event and waits on it
    assert _FakeEvent.made[-1].streams == [(0, 7)]
    assert _FakeEvent.made[-1].waited


@pytest.mark.parametrize(
    ("rows", "cols", "span", "chunks"),
    [(8, 32000, 1024, 32), (1, 128256, 1024, 126), (64, 32000, 4096, 8), (256, 32000, 16384, 2),
     (1024, 32000, 32768, 1), (3, 1, 1024, 1), (1, 1025, 1024, 2)],
)  # fmt: skip
def test_split_spreads_a_few_rows_and_keeps_many_whole(rows: int, cols: int, span: int, chunks: int) -> None:
    assert fp.split(rows, cols) == (span, chunks)
    assert span % fp.BLOCK == 0
    assert (chunks - 1) * span < cols <= chunks * span


@pytest.mark.parametrize("rows", [1, 2, 3, 100, 511, 512, 513, 4096])
def test_split_keeps_the_kernels_int32_column_indices_in_range(rows: int) -> None:
    """The kernel's largest column index is ``chunks * span - 1``: below 2**31 for every row it takes."""
    for cols in (fp.MAX_COLS - 1, fp.MAX_COLS // 2 + 1, 3 * fp.BLOCK + 1, 1):
        span, chunks = fp.split(rows, cols)
        assert chunks * span - 1 < 2**31, (rows, cols, span, chunks)


def _watched(pool: fp._PinnedPool, x: torch.Tensor) -> tuple[fp.PendingFingerprint, fp._Buffer, np.ndarray]:
    """A zero-copy fingerprint of ``x`` as the planned launch makes it, its pooled buffer (a plain tensor
    stands in for pinned memory) and the numbers the kernel would write into it (six per row)."""
    parts = fp.row_stats_torch(x).numpy().reshape(-1)
    size = parts.size
    pool._free[size] = deque([fp._Buffer(torch.empty(size, dtype=torch.float64), True)])
    pool._count[size] = 1
    buf = pool.take_pooled(size)
    assert buf is not None
    pending = fp.PendingFingerprint(None, x.numel(), True, head=16, buffer=buf, stream=(0, 7), watched=True)
    return pending, buf, parts


def test_a_zero_copy_fingerprint_is_done_when_its_buffer_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """The background thread reads the pooled buffer to see the kernel done: no event, no driver call (the
    event type is a stand-in that counts); every word must be written, and the buffer goes back to the
    pool marked unwritten again."""
    _FakeEvent.made = []
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    pool = fp._PinnedPool()
    monkeypatch.setattr(fp, "_POOL", pool)
    x = torch.randn(3, 50, generator=torch.Generator().manual_seed(4))
    pending, buf, parts = _watched(pool, x)
    assert not pending.unmarked()  # the pipeline records no event for it
    assert not pending.ready()
    buf.array[:-1] = parts[:-1]
    assert not pending.ready()  # one word still unwritten
    buf.array[-1] = parts[-1]
    assert pending.ready()
    _assert_same(pending.result(), _reference(x))
    assert _FakeEvent.made == []
    (back,) = pool._free[parts.size]
    assert back is buf
    assert not buf.written()


def test_a_written_zero_copy_buffer_is_read_once_and_given_back_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check that sees the buffer written copies it and gives it back to the pool there and then: the
    fold reads the copy (pinned memory the device writes is slow to read; it was read some ten times per
    request), so the next kernel may write the buffer while the result is still to come."""
    pool = fp._PinnedPool()
    monkeypatch.setattr(fp, "_POOL", pool)
    x = torch.randn(3, 50, generator=torch.Generator().manual_seed(6))
    pending, buf, parts = _watched(pool, x)
    middle = parts.size // 2
    buf.array[:middle] = parts[:middle]
    buf.array[middle + 1 :] = parts[middle + 1 :]
    assert not pending.ready()  # first and last word written (the cheap probe), one in between not yet
    assert pool._free[parts.size] == deque()
    buf.array[middle] = parts[middle]
    assert pending.ready()
    assert list(pool._free[parts.size]) == [buf]  # back in the pool, marked unwritten again
    assert not buf.written()
    buf.array[:] = 0.0  # the next request's kernel writes it
    _assert_same(pending.result(), _reference(x))


@pytest.mark.parametrize("rows", [1, 3, 64, 65, 300])
def test_a_written_buffer_of_few_or_many_rows_folds_as_the_reference(
    monkeypatch: pytest.MonkeyPatch, rows: int
) -> None:
    """A few rows are read as a list and folded in plain Python (fold), more as a numpy copy (finish): both give
    the reference's fields, NaN and inf counts and argmax digest included."""
    pool = fp._PinnedPool()
    monkeypatch.setattr(fp, "_POOL", pool)
    x = torch.randn(rows, 40, generator=torch.Generator().manual_seed(rows))
    x[0, 3] = float("nan")
    x[-1, 5] = float("inf")
    pending, buf, parts = _watched(pool, x)
    snap_kind = list if rows <= 64 else np.ndarray
    buf.array[:] = parts
    assert pending.ready()
    assert isinstance(pending._snap, snap_kind)
    _assert_same(pending.result(), _reference(x))
    assert not buf.written()  # given back, marked unwritten


def test_a_zero_copy_fingerprint_never_written_fails_instead_of_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel that never wrote its buffer (a failed launch): after the re-reads give up, an event says the
    stream has passed the launch, and the result is an error (counted by the pipeline), not a hang."""
    _FakeEvent.made = []
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    monkeypatch.setattr(fp, "_stream", lambda key: key)
    monkeypatch.setattr(fp, "WATCH_SPIN_S", 0.001)
    pool = fp._PinnedPool()
    monkeypatch.setattr(fp, "_POOL", pool)
    pending, buf, parts = _watched(pool, torch.randn(2, 10))
    with pytest.raises(RuntimeError, match="without writing its result"):
        pending.result()
    assert [e.streams for e in _FakeEvent.made] == [[(0, 7)]]
    assert list(pool._free[parts.size]) == [buf]


class _DevicePending(fp.PendingFingerprint):
    """A CUDA fingerprint still on the device (no device here): never ready; ``result`` notes what the
    pipeline had already built when it waited, then returns the CPU reference's numbers."""

    built_at_wait: ClassVar[list[list[str]]] = []
    built: ClassVar[list[str]] = []

    def __init__(self, x: torch.Tensor) -> None:
        super().__init__(None, x.numel(), True, head=16, stream=(0, 7), watched=True)
        self._x = x

    def ready(self) -> bool:
        return False

    def unmarked(self) -> bool:
        return False

    def result(self) -> fp.Fingerprint:
        _DevicePending.built_at_wait.append(list(_DevicePending.built))
        return fp.cpu_fingerprint(*fp._rows_view(self._x), 16)


def test_a_flush_builds_every_queued_record_before_it_waits_for_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flush that must wait for fingerprints still on the device first builds the records of every request
    queued (while the device still runs); after the wait only the fingerprints' numbers are filled in. The
    records keep their fingerprints and arrival order."""
    from inferensics.collector.host import pipeline

    _DevicePending.built_at_wait, _DevicePending.built = [], []
    values = pipeline.Pipeline._values

    def noted(self: pipeline.Pipeline, raw: object, *args: object) -> dict[str, object]:
        _DevicePending.built.append(raw.request_id)  # type: ignore[attr-defined]
        return values(self, raw, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline.Pipeline, "_values", noted)
    exporter = _ListExporter()
    tracker = instrument(exporter=exporter, host="h", model="m", config=SdkConfig(trace_compiles=False,
                         flush_interval_s=60.0))  # fmt: skip
    xs = [torch.randn(2, 9, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    try:
        for i, x in enumerate(xs):
            with tracker.request(f"r{i}") as req:
                req.raw.fingerprint = _DevicePending(x)
        tracker.flush()
    finally:
        tracker.shutdown()
    assert _DevicePending.built_at_wait == [["r0", "r1", "r2"]] * 3
    assert [e.request_id for e in exporter.events] == ["r0", "r1", "r2"]
    for event, x in zip(exporter.events, xs, strict=True):
        want = _reference(x)
        assert (event.fp_argmax_digest, event.fp_argmax_head, event.fp_nan) == (
            want.argmax_digest, want.argmax_head, want.nan)  # fmt: skip
        assert RequestEvent.model_validate(event.model_dump()) == event
